// Malformed pcapng content after good records: reading stops there with truncated() set, and the records
// before it are returned. Also the limits: 65536 interfaces, the largest timestamps, large skipped blocks.
#include "tests/dataplane/replay/capture_samples.hpp"
#include "tests/dataplane/replay/capture_test_support.hpp"

namespace tricolor::test {
namespace {

constexpr std::uint32_t kSectionHeader = PcapngBuilder::kSectionHeader;
constexpr std::uint32_t kInterfaceDescription = PcapngBuilder::kInterfaceDescription;
constexpr std::uint32_t kEnhancedPacket = PcapngBuilder::kEnhancedPacket;
constexpr std::uint32_t kSimplePacket = PcapngBuilder::kSimplePacket;

// A section with one Ethernet interface (µs) and one good packet, in either byte order.
PcapngBuilder good_start(bool big_endian) {
  PcapngBuilder pcapng;
  pcapng.section(big_endian);
  pcapng.interface();
  pcapng.enhanced(0, 1'000'000, frame(60, 1), 60, kSecond);
  return pcapng;
}

// A block laid out by hand, so that its lengths can be wrong.
Bytes raw_block(bool big_endian, std::uint32_t type, std::uint32_t length, const Bytes& body,
                std::uint32_t trailing_length) {
  ByteWriter block(big_endian);
  block.u32(type);
  block.u32(length);
  block.raw(body);
  block.u32(trailing_length);
  return block.bytes();
}

Bytes enhanced_body(bool big_endian, std::uint32_t interface_id, std::uint64_t ticks, std::uint32_t captured,
                    std::uint32_t original, std::size_t data_bytes) {
  ByteWriter body(big_endian);
  body.u32(interface_id);
  body.u32(static_cast<std::uint32_t>(ticks >> 32));
  body.u32(static_cast<std::uint32_t>(ticks));
  body.u32(captured);
  body.u32(original);
  body.raw(frame(data_bytes, 5));
  body.pad_to_4();
  return body.bytes();
}

Bytes interface_body(bool big_endian, std::uint16_t link_type, const Bytes& options) {
  ByteWriter body(big_endian);
  body.u16(link_type);
  body.u16(0);
  body.u32(0);
  body.raw(options);
  return body.bytes();
}

Bytes concat(Bytes first, const Bytes& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

// Reads `bytes` from memory and from a file; both must give `records` good records and then stop with
// the given truncation flag.
void expect_stop(const Bytes& bytes, std::size_t records, bool truncated = true) {
  auto from_memory = CaptureReader::open_bytes(bytes, "malformed");
  ASSERT_TRUE(from_memory) << from_memory.error().message;
  const ReadResult memory_result = read_all(**from_memory);
  EXPECT_EQ(memory_result.records.size(), records);
  EXPECT_EQ(memory_result.truncated, truncated);

  ScratchDirectory scratch;
  auto from_file = CaptureReader::open(scratch.write("malformed.pcapng", bytes));
  ASSERT_TRUE(from_file) << from_file.error().message;
  const ReadResult file_result = read_all(**from_file);
  EXPECT_EQ(file_result.records.size(), records);
  EXPECT_EQ(file_result.truncated, truncated);
}

// Like expect_stop, and the reason reading stopped says `reason`.
void expect_stop_saying(const Bytes& bytes, std::size_t records, const std::string& reason) {
  expect_stop(bytes, records);
  auto reader = CaptureReader::open_bytes(bytes, "malformed");
  ASSERT_TRUE(reader);
  read_all(**reader);
  EXPECT_TRUE(contains((*reader)->stop_reason(), reason)) << (*reader)->stop_reason();
}

class Malformed : public ::testing::TestWithParam<bool> {
 protected:
  bool big_endian() const { return GetParam(); }
  Bytes start() const { return good_start(big_endian()).bytes(); }
  Bytes block(std::uint32_t type, std::uint32_t length, const Bytes& body, std::uint32_t trailing) const {
    return raw_block(big_endian(), type, length, body, trailing);
  }
  // An enhanced packet block whose leading and trailing lengths are both `length`.
  Bytes packet(std::uint32_t length, std::uint32_t interface_id, std::uint64_t ticks, std::uint32_t captured,
               std::uint32_t original, std::size_t data_bytes) const {
    return block(kEnhancedPacket, length,
                 enhanced_body(big_endian(), interface_id, ticks, captured, original, data_bytes), length);
  }
  Bytes good_packet() const { return packet(92, 0, 1, 60, 60, 60); }
  // A packet of 60 bytes on interface 0 whose options are `options`, laid out by hand.
  Bytes packet_with_options(const ByteWriter& options) const {
    const Bytes body = concat(enhanced_body(big_endian(), 0, 1, 60, 60, 60), options.bytes());
    const auto length = 12 + static_cast<std::uint32_t>(body.size());
    return block(kEnhancedPacket, length, body, length);
  }
  // An Ethernet interface whose options are `options`, laid out by hand.
  Bytes interface_with_options(const ByteWriter& options) const {
    const Bytes body = interface_body(big_endian(), 1, options.bytes());
    const auto length = 12 + static_cast<std::uint32_t>(body.size());
    return block(kInterfaceDescription, length, body, length);
  }
  ByteWriter options() const { return ByteWriter(big_endian()); }
};

TEST_P(Malformed, GoodPacketBlockAsWrittenHereIsRead) {
  // The hand-made packet below is right, so each test's failure comes from the one thing it breaks.
  expect_stop(concat(start(), good_packet()), 2, false);
}

TEST_P(Malformed, BlockLengthNotAMultipleOfFour) {
  const Bytes body_of_81_bytes = concat(enhanced_body(big_endian(), 0, 1, 60, 60, 60), {0});
  expect_stop(concat(start(), block(kEnhancedPacket, 93, body_of_81_bytes, 93)), 1);
}

TEST_P(Malformed, BlockLengthBelowTwelve) {
  expect_stop(concat(start(), block(0x1234, 8, {}, 8)), 1);
  expect_stop(concat(start(), block(kEnhancedPacket, 0, {}, 0)), 1);
}

TEST_P(Malformed, BlockLengthBelowTheBlockTypesFields) {
  expect_stop(concat(start(), block(kEnhancedPacket, 28, frame(16, 1), 28)), 1);
  expect_stop(concat(start(), block(kSimplePacket, 12, {}, 12)), 1);
  expect_stop(concat(start(), block(kInterfaceDescription, 16, frame(4, 1), 16)), 1);
}

TEST_P(Malformed, TrailingLengthDiffers) {
  expect_stop(concat(start(), block(kEnhancedPacket, 92, enhanced_body(big_endian(), 0, 1, 60, 60, 60), 96)), 1);
  expect_stop(concat(start(), block(0x1234, 16, frame(4, 1), 20)), 1);
  expect_stop(concat(start(), block(kInterfaceDescription, 20, interface_body(big_endian(), 1, {}), 24)), 1);
}

TEST_P(Malformed, CapturedLengthBeyondTheBlock) {
  expect_stop(concat(start(), packet(92, 0, 1, 61, 61, 60)), 1);
  expect_stop(concat(start(), packet(92, 0, 1, 0xffffffff, 60, 60)), 1);
}

TEST_P(Malformed, UnknownInterface) {
  expect_stop(concat(start(), packet(92, 1, 1, 60, 60, 60)), 1);
  expect_stop(concat(start(), packet(92, 0x10000, 1, 60, 60, 60)), 1);
}

TEST_P(Malformed, SimplePacketBeforeAnyInterface) {
  PcapngBuilder pcapng;
  pcapng.section(big_endian());
  ByteWriter body(big_endian());
  body.u32(4);
  body.raw(frame(4, 1));
  expect_stop(concat(pcapng.bytes(), block(kSimplePacket, 20, body.bytes(), 20)), 0);
}

TEST_P(Malformed, EnhancedPacketOfTheNewSectionNamesAnInterfaceOfTheOldOne) {
  PcapngBuilder pcapng = good_start(big_endian());
  pcapng.interface();
  pcapng.enhanced(1, 1, frame(10, 1), 10, 1'000);
  pcapng.section(!big_endian());
  pcapng.interface();
  const Bytes packet_on_1 =
      raw_block(!big_endian(), kEnhancedPacket, 44, enhanced_body(!big_endian(), 1, 1, 10, 10, 10), 44);
  expect_stop(concat(pcapng.bytes(), packet_on_1), 2);
}

TEST_P(Malformed, BadInterfaceOptions) {
  ByteWriter resolution_of_two_bytes(big_endian());
  resolution_of_two_bytes.u16(9);
  resolution_of_two_bytes.u16(2);
  resolution_of_two_bytes.u16(6);
  resolution_of_two_bytes.pad_to_4();
  const Bytes body = interface_body(big_endian(), 1, resolution_of_two_bytes.bytes());
  expect_stop(concat(start(), block(kInterfaceDescription, 12 + static_cast<std::uint32_t>(body.size()), body,
                                    12 + static_cast<std::uint32_t>(body.size()))), 1);

  ByteWriter offset_of_four_bytes(big_endian());
  offset_of_four_bytes.u16(14);
  offset_of_four_bytes.u16(4);
  offset_of_four_bytes.u32(1);
  const Bytes offset_body = interface_body(big_endian(), 1, offset_of_four_bytes.bytes());
  expect_stop(concat(start(), block(kInterfaceDescription, 12 + static_cast<std::uint32_t>(offset_body.size()),
                                    offset_body, 12 + static_cast<std::uint32_t>(offset_body.size()))), 1);

  ByteWriter option_past_the_end(big_endian());
  option_past_the_end.u16(2);  // if_name
  option_past_the_end.u16(9);  // 9 bytes (12 padded), with 4 in the block
  option_past_the_end.u32(0);
  const Bytes past_body = interface_body(big_endian(), 1, option_past_the_end.bytes());
  expect_stop(concat(start(), block(kInterfaceDescription, 12 + static_cast<std::uint32_t>(past_body.size()),
                                    past_body, 12 + static_cast<std::uint32_t>(past_body.size()))), 1);
}

TEST_P(Malformed, BadIfFcslen) {
  // if_fcslen is one byte, like if_tsresol: any other length makes the interface malformed.
  ByteWriter two_bytes = options();
  two_bytes.u16(13);
  two_bytes.u16(2);
  two_bytes.u16(4);
  two_bytes.pad_to_4();
  expect_stop_saying(concat(start(), interface_with_options(two_bytes)), 1, "if_fcslen option of 2 bytes, not 1");
  ByteWriter empty = options();
  empty.u16(13);
  empty.u16(0);
  expect_stop_saying(concat(start(), interface_with_options(empty)), 1, "if_fcslen option of 0 bytes, not 1");
}

TEST_P(Malformed, BadEnhancedPacketOptions) {
  // A packet's options are read as an interface's are: one running past the block, or an epb_flags that
  // is not 4 bytes, makes the block malformed; reading stops before that packet.
  ByteWriter flags_of_two_bytes = options();
  flags_of_two_bytes.u16(2);
  flags_of_two_bytes.u16(2);
  flags_of_two_bytes.u16(4 << 5);
  flags_of_two_bytes.pad_to_4();
  expect_stop_saying(concat(start(), packet_with_options(flags_of_two_bytes)), 1,
                     "epb_flags option of 2 bytes, not 4");

  ByteWriter flags_of_eight_bytes = options();
  flags_of_eight_bytes.u16(2);
  flags_of_eight_bytes.u16(8);
  flags_of_eight_bytes.u64(4 << 5);
  expect_stop_saying(concat(start(), packet_with_options(flags_of_eight_bytes)), 1,
                     "epb_flags option of 8 bytes, not 4");

  ByteWriter comment_past_the_end = options();
  comment_past_the_end.u16(1);
  comment_past_the_end.u16(5);  // 5 bytes (8 padded), with 4 in the block
  comment_past_the_end.u32(0);
  expect_stop_saying(concat(start(), packet_with_options(comment_past_the_end)), 1,
                     "enhanced packet option 1 runs past the end of its block");

  ByteWriter flags_past_the_end = options();
  flags_past_the_end.u16(2);
  flags_past_the_end.u16(4);  // 4 bytes, with none left in the block
  expect_stop_saying(concat(start(), packet_with_options(flags_past_the_end)), 1,
                     "enhanced packet option 2 runs past the end of its block");

  ByteWriter longest = options();
  longest.u16(1);
  longest.u16(0xffff);
  longest.u32(0x41414141);
  longest.u32(0x41414141);
  expect_stop_saying(concat(start(), packet_with_options(longest)), 1,
                     "enhanced packet option 1 runs past the end of its block");

  // A good option, then a bad one: still malformed.
  ByteWriter good_then_bad = options();
  good_then_bad.u16(2);
  good_then_bad.u16(4);
  good_then_bad.u32(4 << 5);
  good_then_bad.u16(3);
  good_then_bad.u16(40);
  expect_stop_saying(concat(start(), packet_with_options(good_then_bad)), 1,
                     "enhanced packet option 3 runs past the end of its block");
}

TEST_P(Malformed, EnhancedPacketOptionsAfterTheEndMarkerOrWithoutOneAreFine) {
  // What follows opt_endofopt is not read (even a malformed option); without the marker, the options
  // run to the end of the block.
  ByteWriter after_end = options();
  after_end.u16(0);
  after_end.u16(0);
  after_end.u16(2);
  after_end.u16(4);
  after_end.u32(4 << 5);  // an FCS length that must not be applied
  after_end.u16(1);
  after_end.u16(0xffff);  // a length that must not be looked at
  ByteWriter without_end = options();
  without_end.u16(2);
  without_end.u16(4);
  without_end.u32(4 << 5);
  const Bytes bytes = concat(concat(start(), packet_with_options(after_end)), packet_with_options(without_end));
  expect_stop(bytes, 3, false);
  auto reader = CaptureReader::open_bytes(bytes);
  ASSERT_TRUE(reader);
  const ReadResult result = read_all(**reader);
  ASSERT_EQ(result.records.size(), 3u);
  EXPECT_EQ(result.records[1].wire_length, 60u);
  EXPECT_EQ(result.records[1].data.size(), 60u);
  EXPECT_EQ(result.records[2].wire_length, 56u);
  Bytes without_fcs = frame(60, 5);
  without_fcs.resize(56);
  EXPECT_EQ(result.records[2].data, without_fcs);
}

TEST_P(Malformed, OptionsWithoutEndMarkerAreAccepted) {
  // opt_endofopt may be left out when the options fill the block.
  ByteWriter options(big_endian());
  options.u16(9);
  options.u16(1);
  options.u8(9);  // ns
  options.pad_to_4();
  const Bytes body = interface_body(big_endian(), 1, options.bytes());
  const auto length = 12 + static_cast<std::uint32_t>(body.size());
  Bytes bytes = concat(start(), block(kInterfaceDescription, length, body, length));
  bytes = concat(bytes, packet(44, 1, 1'234, 10, 10, 10));
  auto reader = CaptureReader::open_bytes(bytes);
  ASSERT_TRUE(reader);
  const ReadResult result = read_all(**reader);
  ASSERT_EQ(result.records.size(), 2u);
  EXPECT_EQ(result.records[1].timestamp_ns, 1'234u);
  EXPECT_EQ(result.records[1].interface, 1u);
  EXPECT_FALSE(result.truncated);
}

TEST_P(Malformed, LaterSectionHeaderWithBadByteOrderMagicOrVersion) {
  ByteWriter bad_magic(big_endian());
  bad_magic.u32(0x1a2b3c4e);
  bad_magic.u16(1);
  bad_magic.u16(0);
  bad_magic.u64(0);
  expect_stop(concat(start(), block(kSectionHeader, 28, bad_magic.bytes(), 28)), 1);

  PcapngBuilder version_two = good_start(big_endian());
  version_two.section(big_endian(), 2);
  expect_stop(version_two.bytes(), 1);
}

TEST_P(Malformed, LaterInterfaceThatIsNotEthernet) {
  // After the first packet, an interface that is not Ethernet ends the capture (open has returned).
  PcapngBuilder pcapng = good_start(big_endian());
  pcapng.interface(kRawIp);
  pcapng.enhanced(1, 1, frame(10, 1), 10, 1'000);
  expect_stop(pcapng.bytes(), 1);

  PcapngBuilder next_section = good_start(big_endian());
  next_section.section(big_endian());
  next_section.interface(kRawIp);
  expect_stop(next_section.bytes(), 1);
}

TEST_P(Malformed, TimestampBeforeTheEpochOrBeyond64Bits) {
  PcapngBuilder before = good_start(big_endian());
  before.interface(kEthernet, 0, {before.tsoffset(-10)});
  before.enhanced(1, 10'000'000, frame(10, 1), 10, 0);  // exactly the epoch
  expect_stop(concat(before.bytes(), packet(44, 1, 9'999'999, 10, 10, 10)), 2);

  // 2^64 - 1 ns is the last representable instant; one more is out of range.
  PcapngBuilder beyond = good_start(big_endian());
  beyond.interface(kEthernet, 0, {beyond.tsresol(9)});
  beyond.enhanced(1, ~std::uint64_t{0}, frame(10, 1), 10, ~std::uint64_t{0});
  beyond.interface(kEthernet, 0, {beyond.tsresol(9), beyond.tsoffset(1)});
  expect_stop(concat(beyond.bytes(), packet(44, 2, ~std::uint64_t{0} - kSecond + 1, 10, 10, 10)), 2);
}

TEST_P(Malformed, ExtremeResolutions) {
  // Every resolution from 10^0 to 10^-127 and 2^0 to 2^-127 is accepted; 64-bit tick counts of the
  // finest ones are all under a nanosecond.
  PcapngBuilder pcapng;
  pcapng.section(big_endian());
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(127)});
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(0x80 | 127)});
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(28)});
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(29)});
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(0x80)});  // 2^0: seconds
  const std::uint64_t most = ~std::uint64_t{0};
  pcapng.enhanced(0, most, Bytes{}, 0, 0);
  pcapng.enhanced(1, most, Bytes{}, 0, 0);
  pcapng.enhanced(2, most, Bytes{}, 0, 0);  // 1.8·10^19 ticks of 10^-28 s = 1.8·10^-9 s
  pcapng.enhanced(3, most, Bytes{}, 0, 0);
  pcapng.enhanced(4, 18'446'744'073, Bytes{}, 0, 18'446'744'073 * kSecond);  // the last whole second
  const TestCapture capture = pcapng.finish("extreme");
  auto reader = CaptureReader::open_bytes(capture.bytes);
  ASSERT_TRUE(reader);
  const ReadResult result = read_all(**reader);
  ASSERT_EQ(result.records.size(), 5u);
  EXPECT_EQ(result.records[0].timestamp_ns, 0u);
  EXPECT_EQ(result.records[1].timestamp_ns, 0u);
  EXPECT_EQ(result.records[2].timestamp_ns, 1u);
  EXPECT_EQ(result.records[3].timestamp_ns, 0u);
  EXPECT_EQ(result.records[4].timestamp_ns, 18'446'744'073 * kSecond);
  EXPECT_FALSE(result.truncated);
}

TEST_P(Malformed, HugeBlockLengthsInAShortFile) {
  // Lengths far beyond the file: skipped blocks by seeking, held blocks refused above 16 MiB.
  expect_stop(concat(start(), block(0x1234, 0x7ffffff0, frame(40, 1), 0x7ffffff0)), 1);
  expect_stop(concat(start(), block(0x1234, 0xfffffffc, frame(40, 1), 0xfffffffc)), 1);
  expect_stop(concat(start(), packet(0x7ffffff0, 0, 1, 0x7fffffd0, 60, 60)), 1);
  expect_stop(concat(start(), packet(0x01000000, 0, 1, 60, 60, 60)), 1);
  const Bytes interface_fields = interface_body(big_endian(), 1, {});
  expect_stop(concat(start(), block(kInterfaceDescription, 0x7ffffff0, interface_fields, 0x7ffffff0)), 1);
}

TEST_P(Malformed, LargeSkippedBlockThenPackets) {
  // A 200 KiB block of another type (skipped by seeking) between packets, read whole and cut inside.
  PcapngBuilder pcapng = good_start(big_endian());
  pcapng.other(0x40000bad, frame(200 * 1024, 3));
  pcapng.enhanced(0, 2'000'000, frame(61, 2), 61, 2 * kSecond);
  const TestCapture capture = pcapng.finish("large");
  expect_stop(capture.bytes, 2, false);
  for (const std::size_t cut : {std::size_t{200}, std::size_t{100'000}, capture.bytes.size() - 100}) {
    SCOPED_TRACE(cut);
    const Bytes prefix(capture.bytes.begin(), capture.bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    expect_stop(prefix, 1);
  }
}

TEST_P(Malformed, SixtyFiveThousandFiveHundredThirtySixInterfaces) {
  // Ids 0 … 65535 fit CaptureRecord::interface; a 65537th interface is malformed.
  PcapngBuilder pcapng;
  pcapng.section(big_endian());
  for (int i = 0; i < 65536; ++i) {
    pcapng.interface();
  }
  pcapng.enhanced(65535, 3, frame(10, 1), 10, 3'000);
  pcapng.enhanced(0, 4, frame(10, 2), 10, 4'000);
  const Bytes good = pcapng.bytes();
  {
    auto reader = CaptureReader::open_bytes(good);
    ASSERT_TRUE(reader);
    const ReadResult result = read_all(**reader);
    ASSERT_EQ(result.records.size(), 2u);
    EXPECT_EQ(result.records[0].interface, 65535u);
    EXPECT_EQ(result.records[0].timestamp_ns, 3'000u);
    EXPECT_EQ(result.records[1].interface, 0u);
    EXPECT_FALSE(result.truncated);
  }
  expect_stop(concat(good, packet(44, 65536, 1, 10, 10, 10)), 2);
  pcapng.interface();
  pcapng.enhanced(0, 5, frame(10, 3), 10, 5'000);
  expect_stop(pcapng.bytes(), 2);
}

INSTANTIATE_TEST_SUITE_P(ByteOrder, Malformed, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "BigEndian" : "LittleEndian"; });

TEST(MalformedPcap, RecordLibpcapRefusesEndsTheCaptureAsTruncated) {
  // libpcap refuses a captured length above 262144 bytes for Ethernet.
  PcapBuilder pcap(false, false, kEthernet, 262144);
  pcap.record(1, 2, frame(60, 1), 60);
  TestCapture capture = pcap.finish("big");
  ByteWriter record(false);
  record.u32(1);
  record.u32(3);
  record.u32(262145);
  record.u32(262145);
  capture.bytes.insert(capture.bytes.end(), record.bytes().begin(), record.bytes().end());
  capture.bytes.resize(capture.bytes.size() + 262145, 0xab);
  auto reader = CaptureReader::open_bytes(capture.bytes);
  ASSERT_TRUE(reader);
  const ReadResult result = read_all(**reader);
  expect_records(result.records, capture.records, 1);
  EXPECT_TRUE(result.truncated);
}

TEST(MalformedPcap, SwappedLengthsOfOldVersionsAreLibpcapsBusiness) {
  // Version 2.2 files have caplen and len the other way round; libpcap swaps them back.
  ByteWriter file(false);
  file.u32(kPcapMicroMagic);
  file.u16(2);
  file.u16(2);
  file.u32(0);
  file.u32(0);
  file.u32(65535);
  file.u32(kEthernet);
  file.u32(5);
  file.u32(6);
  file.u32(1500);  // len first
  file.u32(20);    // then caplen
  file.raw(frame(20, 1));
  auto reader = CaptureReader::open_bytes(file.bytes());
  ASSERT_TRUE(reader);
  const ReadResult result = read_all(**reader);
  ASSERT_EQ(result.records.size(), 1u);
  EXPECT_EQ(result.records[0].timestamp_ns, 5 * kSecond + 6'000);
  EXPECT_EQ(result.records[0].wire_length, 1500u);
  EXPECT_EQ(result.records[0].data, frame(20, 1));
  EXPECT_FALSE(result.truncated);
}

}  // namespace
}  // namespace tricolor::test
