// Frames whose capture declares an FCS: pcap's link-type word, pcapng's if_fcslen and epb_flags. Records
// come back without it (data and wire length), whatever the byte order or resolution. The expected
// records are written out by hand here, so that they also pin what the builders' remove_fcs gives the
// every-cut sweeps of capture_reader_test.cpp.
#include "tests/dataplane/replay/capture_samples.hpp"
#include "tests/dataplane/replay/capture_test_support.hpp"

namespace tricolor::test {
namespace {

// The first `captured` bytes of frame(length, seed), `wire` bytes on the wire.
CaptureRecord expected(std::uint64_t timestamp_ns, std::size_t length, std::uint8_t seed, std::size_t captured,
                       std::uint32_t wire, std::uint16_t interface = 0) {
  CaptureRecord record;
  record.timestamp_ns = timestamp_ns;
  record.wire_length = wire;
  record.interface = interface;
  record.data = frame(length, seed);
  record.data.resize(captured);
  return record;
}

std::vector<CaptureRecord> read_bytes(const Bytes& bytes, bool& truncated) {
  auto reader = CaptureReader::open_bytes(bytes, "fcs");
  if (!reader) {
    ADD_FAILURE() << reader.error().message;
    return {};
  }
  const ReadResult result = read_all(**reader);
  truncated = result.truncated;
  return result.records;
}

TEST(CaptureFcs, PcapRecordsLoseTheFcsTheLinkTypeWordDeclares) {
  for (const bool big_endian : {false, true}) {
    for (const bool nanosecond : {false, true}) {
      const TestCapture capture = sample_pcap_fcs(nanosecond, big_endian);
      SCOPED_TRACE(capture.name);
      const std::uint64_t second = 1'700'000'000 * kSecond;
      const std::uint64_t unit = nanosecond ? 1 : 1'000;
      const std::vector<CaptureRecord> by_hand = {
          expected(second + 1 * unit, 64, 1, 60, 60),    // the FCS removed
          expected(second + 2 * unit, 33, 2, 33, 1496),  // snapped before the FCS: its bytes kept
          expected(second + 3 * unit, 62, 3, 60, 60),    // snapped inside the FCS: the FCS bytes removed
          expected(second + 4 * unit, 2, 4, 0, 0),       // shorter than the FCS: an empty frame
          expected(second + 5 * unit, 10, 5, 6, 6),      // wire length 6 < 10 captured: raised, then cut
      };
      expect_records(capture.records, by_hand, by_hand.size());
      bool truncated = true;
      expect_records(read_bytes(capture.bytes, truncated), by_hand, by_hand.size());
      EXPECT_FALSE(truncated);
    }
  }
}

TEST(CaptureFcs, PcapFcsLengthComesFromTheUpperBitsOnlyWhenPresent) {
  struct Case {
    std::uint32_t link_type_word;
    std::uint32_t fcs;
  };
  const Case cases[] = {
      {with_fcs(kEthernet, 30), 30},  // the largest: 15 words
      {with_fcs(kEthernet, 2), 2},    // one word
      {with_fcs(kEthernet, 0), 0},    // present, and none
      {kEthernet | 0x20000000, 0},    // a length without the "present" bit is unknown: kept
  };
  for (const bool big_endian : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << std::hex << "word 0x" << c.link_type_word << (big_endian ? " be" : " le"));
      PcapBuilder pcap(true, big_endian, c.link_type_word);
      pcap.record(1, 2, frame(100, 1), 100).record(3, 4, frame(31, 2), 31);
      bool truncated = true;
      const std::vector<CaptureRecord> records = read_bytes(pcap.finish("word").bytes, truncated);
      const std::vector<CaptureRecord> by_hand = {
          expected(kSecond + 2, 100, 1, 100 - c.fcs, 100 - c.fcs),
          expected(3 * kSecond + 4, 31, 2, c.fcs < 31 ? 31 - c.fcs : 0, c.fcs < 31 ? 31 - c.fcs : 0),
      };
      expect_records(records, by_hand, by_hand.size());
      EXPECT_FALSE(truncated);
    }
  }
}

TEST(CaptureFcs, PcapngIfFcslenPerInterfaceAndEpbFlagsPerPacket) {
  for (const bool big_endian : {false, true}) {
    const TestCapture capture = sample_pcapng_fcs(big_endian);
    SCOPED_TRACE(capture.name);
    const std::vector<CaptureRecord> by_hand = {
        expected(1'000, 64, 1, 60, 60, 0),      // interface 0: if_fcslen 4
        expected(2'000, 64, 2, 64, 64, 1),      // interface 1: no FCS
        expected(3, 64, 3, 62, 62, 2),          // interface 2: if_fcslen 2
        expected(4'000, 64, 4, 60, 60, 0),      // epb_flags without an FCS length: if_fcslen applies
        expected(5'000, 64, 5, 62, 62, 1),      // epb_flags: 2, on an interface without if_fcslen
        expected(6'000, 64, 6, 58, 58, 0),      // epb_flags: 6 overrides if_fcslen 4, after other options
        expected(7'000, 30, 7, 30, 1496, 0),    // snapped before the FCS
        expected(8'000, 3, 8, 0, 0, 0),         // shorter than the FCS: an empty frame
        expected(0, 40, 9, 36, 36, 0),          // simple packet: interface 0's if_fcslen
        expected(9'000, 64, 10, 64, 64, 0),     // the next section's interface 0 has none
    };
    expect_records(capture.records, by_hand, by_hand.size());
    bool truncated = true;
    expect_records(read_bytes(capture.bytes, truncated), by_hand, by_hand.size());
    EXPECT_FALSE(truncated);
  }
}

TEST(CaptureFcs, WrittenOutWithoutTheFcs) {
  // Read and written again, the frames are plain Ethernet (link type 1) without FCS.
  ScratchDirectory scratch;
  for (const TestCapture& capture : {sample_pcap_fcs(false, true), sample_pcapng_fcs(false)}) {
    SCOPED_TRACE(capture.name);
    auto reader = CaptureReader::open_bytes(capture.bytes);
    ASSERT_TRUE(reader);
    const std::string path = scratch.file(capture.name + ".pcap");
    auto writer = CaptureWriter::open(path);
    ASSERT_TRUE(writer);
    CaptureRecord record;
    while ((*reader)->next(record)) {
      (*writer)->write(record);
    }
    ASSERT_TRUE((*writer)->close());
    auto again = CaptureReader::open(path);
    ASSERT_TRUE(again);
    const ReadResult result = read_all(**again);
    ASSERT_EQ(result.records.size(), capture.records.size());
    for (std::size_t i = 0; i < result.records.size(); ++i) {
      CaptureRecord without_interface = capture.records[i];
      without_interface.interface = 0;
      EXPECT_TRUE(same_record(result.records[i], without_interface)) << "record " << i;
    }
  }
}

}  // namespace
}  // namespace tricolor::test
