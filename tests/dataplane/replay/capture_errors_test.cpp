// What open refuses, and that each refusal names the file and the reason.
#include "tests/dataplane/replay/capture_samples.hpp"
#include "tests/dataplane/replay/capture_test_support.hpp"

namespace tricolor::test {
namespace {

// Opens `bytes` from a file and from memory; both must fail with a message naming the file and
// containing `reason`.
void expect_refused(const Bytes& bytes, const std::string& reason) {
  ScratchDirectory scratch;
  const std::string path = scratch.write("refused.cap", bytes);
  auto from_file = CaptureReader::open(path);
  ASSERT_FALSE(from_file);
  EXPECT_EQ(from_file.error().subject, path);
  EXPECT_TRUE(contains(from_file.error().message, path)) << from_file.error().message;
  EXPECT_TRUE(contains(from_file.error().message, reason)) << from_file.error().message;

  auto from_memory = CaptureReader::open_bytes(bytes, "bytes-under-test");
  ASSERT_FALSE(from_memory);
  EXPECT_EQ(from_memory.error().subject, "bytes-under-test");
  EXPECT_TRUE(contains(from_memory.error().message, "bytes-under-test")) << from_memory.error().message;
  EXPECT_TRUE(contains(from_memory.error().message, reason)) << from_memory.error().message;
}

TEST(CaptureOpen, MissingFile) {
  ScratchDirectory scratch;
  const std::string path = scratch.file("no-such-file.pcap");
  auto reader = CaptureReader::open(path);
  ASSERT_FALSE(reader);
  EXPECT_EQ(reader.error().subject, path);
  EXPECT_EQ(reader.error().message, "capture '" + path + "': cannot open: No such file or directory");
}

TEST(CaptureOpen, Directory) {
  ScratchDirectory scratch;
  const std::string path = scratch.directory();
  auto reader = CaptureReader::open(path);
  ASSERT_FALSE(reader);
  EXPECT_EQ(reader.error().message, "capture '" + path + "': is a directory, not a capture file");
}

TEST(CaptureOpen, EmptyFile) {
  expect_refused(Bytes{}, "is empty, not a capture");
  auto reader = CaptureReader::open_bytes({});
  ASSERT_FALSE(reader);
  EXPECT_EQ(reader.error().message, "capture '<memory>': is empty, not a capture");
}

TEST(CaptureOpen, TooShortForAMagicNumber) {
  expect_refused(Bytes{0xd4, 0xc3, 0xb2}, "is too short (3 bytes) to be a capture");
}

TEST(CaptureOpen, RandomBytes) {
  Bytes noise(4096);
  std::uint32_t state = 12345;
  for (auto& byte : noise) {
    state = state * 1'103'515'245 + 12'345;
    byte = static_cast<std::uint8_t>(state >> 16);
  }
  noise[0] = 0x7f;  // whatever the generator gives, not a magic number
  expect_refused(noise, "is not a pcap or pcapng capture (it starts with 0x7f");
  expect_refused(Bytes{'h', 'e', 'l', 'l', 'o', '\n'}, "is not a pcap or pcapng capture (it starts with 0x68656c6c)");
}

// A link type tricolor does not read (802.11, radiotap): refused, naming it and the ones it reads.
constexpr std::uint32_t kWifi = 105, kRadiotap = 127;

TEST(CaptureOpen, PcapOfALinkTypeNotRead) {
  for (const bool big_endian : {false, true}) {
    for (const bool nanosecond : {false, true}) {
      PcapBuilder pcap(nanosecond, big_endian, kWifi);
      pcap.record(1, 2, frame(20, 1), 20);
      expect_refused(pcap.finish("wifi").bytes,
                     "link type 105 (IEEE802_11) is not one tricolor reads: Ethernet (1), LINUX_SLL (113), "
                     "LINUX_SLL2 (276), RAW (101), IPV4 (228), IPV6 (229), NULL (0) or LOOP (108)");
    }
  }
  PcapBuilder radiotap(false, false, kRadiotap);
  expect_refused(radiotap.finish("radiotap").bytes, "link type 127 (IEEE802_11_RADIO) is not one tricolor reads");
}

TEST(CaptureOpen, PcapOfALinkTypeNotReadWithFcsBits) {
  // The FCS bits of the link-type word do not make a type Ethernet, and the error names the type
  // without them.
  for (const bool big_endian : {false, true}) {
    for (const std::uint32_t word : {with_fcs(kWifi, 4), with_fcs(kWifi, 30), with_fcs(kWifi, 0),
                                     kWifi | 0x20000000}) {
      SCOPED_TRACE(word);
      PcapBuilder pcap(true, big_endian, word);
      pcap.record(1, 2, frame(20, 1), 20);
      expect_refused(pcap.finish("wifi").bytes, ": link type 105 (IEEE802_11) is not one tricolor reads");
    }
    PcapBuilder radiotap(false, big_endian, with_fcs(kRadiotap, 4));
    expect_refused(radiotap.finish("radiotap").bytes, ": link type 127 (IEEE802_11_RADIO) is not one tricolor reads");
  }
}

TEST(CaptureOpen, PcapngInterfaceOfALinkTypeNotRead) {
  for (const bool big_endian : {false, true}) {
    PcapngBuilder pcapng;
    pcapng.section(big_endian);
    pcapng.interface(kWifi);
    pcapng.enhanced(0, 1, frame(20, 1), 20, 1'000);
    expect_refused(pcapng.bytes(), "interface 0: link type 105 (IEEE802_11) is not one tricolor reads");
  }
  // Any interface described before the first packet, in any section, is checked at open.
  PcapngBuilder second;
  second.section(false);
  second.other(4, frame(8, 1));
  second.interface();
  second.section(true);
  second.interface();
  second.interface(113);
  second.enhanced(0, 1, frame(20, 1), 20, 1'000);
  expect_refused(second.bytes(), "interface 1: link type 113 (LINUX_SLL), where an interface before it is link type 1 "
                                 "(EN10MB): a capture of one link type is needed");
}

TEST(CaptureOpen, PcapHeaderLibpcapRefuses) {
  PcapBuilder archaic(false, false, kEthernet, 65535, 4);
  Bytes bytes = archaic.finish("archaic").bytes;
  bytes[4] = 1;  // version 1.4
  expect_refused(bytes, "cannot read the pcap file header: archaic pcap savefile format");
  const Bytes cut(bytes.begin(), bytes.begin() + 10);
  expect_refused(cut, "cannot read the pcap file header: truncated dump file");
}

TEST(CaptureOpen, PcapngSectionHeaderThatCannotBeRead) {
  const Bytes good = sample_pcapng(false).bytes;
  Bytes bad_magic = good;
  bad_magic[8] = 0x00;
  expect_refused(bad_magic, "is not a readable pcapng capture: block at offset 0: byte-order magic 0x003c2b1a");

  PcapngBuilder version_two;
  version_two.section(true, 2);
  expect_refused(version_two.bytes(), "pcapng version 2.0 is not supported");

  Bytes short_length = good;
  short_length[4] = 24;  // below the 28 a section header needs
  expect_refused(short_length, "section header block length 24 is not a multiple of 4 of at least 28");

  const Bytes cut(good.begin(), good.begin() + 20);
  expect_refused(cut, "is not a readable pcapng capture: block at offset 0: cut short in a section header block");
}

}  // namespace
}  // namespace tricolor::test
