// Writing nanosecond pcap: read back by our reader and by libpcap itself, byte-identical when repeated,
// and write failures reported at open or at close.
#include <pcap/pcap.h>

#include <array>
#include <cstring>

#include "tests/dataplane/replay/capture_samples.hpp"
#include "tests/dataplane/replay/capture_test_support.hpp"

namespace tricolor::test {
namespace {

constexpr std::size_t kSnapLength = 262144;

CaptureRecord make_record(std::uint64_t timestamp_ns, std::uint32_t wire_length, Bytes data) {
  CaptureRecord record;
  record.timestamp_ns = timestamp_ns;
  record.wire_length = wire_length;
  record.data = std::move(data);
  return record;
}

std::vector<CaptureRecord> records_to_write() {
  return {
      make_record(1'700'000'000'123'456'789, 60, frame(60, 1)),
      make_record(1'700'000'000'123'456'790, 1500, frame(33, 2)),  // snapped
      make_record(0, 64, Bytes{}),                                 // the epoch, nothing captured
      make_record(1, 9000, frame(9000, 3)),                        // jumbo frame
      // The last instant pcap's unsigned 32-bit seconds can hold.
      make_record(0xffffffffull * kSecond + 999'999'999, 14, frame(14, 4)),
  };
}

void write_records(const std::string& path, const std::vector<CaptureRecord>& records) {
  auto writer = CaptureWriter::open(path);
  ASSERT_TRUE(writer) << writer.error().message;
  for (const CaptureRecord& record : records) {
    (*writer)->write(record);
  }
  auto closed = (*writer)->close();
  ASSERT_TRUE(closed) << closed.error().message;
  EXPECT_TRUE(*closed);
}

TEST(CaptureWriter, RoundTripThroughOurReader) {
  ScratchDirectory scratch;
  const std::string path = scratch.file("out.pcap");
  const auto records = records_to_write();
  write_records(path, records);
  auto reader = CaptureReader::open(path);
  ASSERT_TRUE(reader) << reader.error().message;
  EXPECT_EQ((*reader)->format(), CaptureFormat::pcap);
  const ReadResult result = read_all(**reader);
  expect_records(result.records, records, records.size());
  EXPECT_FALSE(result.truncated);
}

TEST(CaptureWriter, RoundTripThroughLibpcap) {
  ScratchDirectory scratch;
  const std::string path = scratch.file("out.pcap");
  const auto records = records_to_write();
  write_records(path, records);

  std::array<char, PCAP_ERRBUF_SIZE> message{};
  pcap_t* pcap = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, message.data());
  ASSERT_NE(pcap, nullptr) << message.data();
  EXPECT_EQ(pcap_datalink(pcap), DLT_EN10MB);
  EXPECT_EQ(pcap_snapshot(pcap), static_cast<int>(kSnapLength));
  EXPECT_EQ(pcap_get_tstamp_precision(pcap), PCAP_TSTAMP_PRECISION_NANO);
  for (const CaptureRecord& expected : records) {
    pcap_pkthdr* header = nullptr;
    const u_char* data = nullptr;
    ASSERT_EQ(pcap_next_ex(pcap, &header, &data), 1);
    const std::uint64_t seconds = static_cast<std::uint32_t>(header->ts.tv_sec);
    EXPECT_EQ(seconds * kSecond + static_cast<std::uint64_t>(header->ts.tv_usec), expected.timestamp_ns);
    EXPECT_EQ(header->caplen, expected.data.size());
    EXPECT_EQ(header->len, expected.wire_length);
    EXPECT_EQ(Bytes(data, data + header->caplen), expected.data);
  }
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  EXPECT_EQ(pcap_next_ex(pcap, &header, &data), PCAP_ERROR_BREAK);
  pcap_close(pcap);
}

TEST(CaptureWriter, FileHeaderIsNanosecondPcapInHostOrder) {
  ScratchDirectory scratch;
  const std::string path = scratch.file("empty.pcap");
  write_records(path, {});
  const Bytes bytes = read_file(path);
  ASSERT_EQ(bytes.size(), 24u);
  std::uint32_t magic = 0;
  std::memcpy(&magic, bytes.data(), sizeof magic);
  EXPECT_EQ(magic, 0xa1b23c4du);
  auto reader = CaptureReader::open(path);
  ASSERT_TRUE(reader);
  const ReadResult result = read_all(**reader);
  EXPECT_TRUE(result.records.empty());
  EXPECT_FALSE(result.truncated);
}

TEST(CaptureWriter, SameRecordsGiveIdenticalBytes) {
  ScratchDirectory scratch;
  const auto records = records_to_write();
  write_records(scratch.file("first.pcap"), records);
  write_records(scratch.file("second.pcap"), records);
  const Bytes first = read_file(scratch.file("first.pcap"));
  EXPECT_GT(first.size(), 24u);
  EXPECT_EQ(first, read_file(scratch.file("second.pcap")));
}

TEST(CaptureWriter, WritesWhatTheSamplesHold) {
  // Every sample, read and written again, reads back the same (the interface id aside: pcap has none).
  ScratchDirectory scratch;
  for (const TestCapture& capture : sample_captures()) {
    SCOPED_TRACE(capture.name);
    const std::string path = scratch.file(capture.name + ".pcap");
    write_records(path, capture.records);
    auto reader = CaptureReader::open(path);
    ASSERT_TRUE(reader) << reader.error().message;
    const ReadResult result = read_all(**reader);
    ASSERT_EQ(result.records.size(), capture.records.size());
    for (std::size_t i = 0; i < result.records.size(); ++i) {
      CaptureRecord expected = capture.records[i];
      expected.interface = 0;
      EXPECT_TRUE(same_record(result.records[i], expected)) << "record " << i;
    }
  }
}

TEST(CaptureWriter, NormalisesWhatPcapCannotHold) {
  // Frames beyond the snapshot length are cut to it; a wire length below the captured length is raised
  // to it; seconds from 2^32 on wrap around (pcap's 32-bit field).
  ScratchDirectory scratch;
  const std::string path = scratch.file("normalised.pcap");
  write_records(path, {
                          make_record(5, 300'000, frame(kSnapLength + 10, 1)),
                          make_record(6, 10, frame(20, 2)),
                          make_record((1ull << 32) * kSecond + 7, 20, frame(20, 3)),
                      });
  auto reader = CaptureReader::open(path);
  ASSERT_TRUE(reader);
  const ReadResult result = read_all(**reader);
  ASSERT_EQ(result.records.size(), 3u);
  EXPECT_FALSE(result.truncated);
  Bytes cut = frame(kSnapLength + 10, 1);
  cut.resize(kSnapLength);
  EXPECT_TRUE(same_record(result.records[0], make_record(5, 300'000, cut)));
  EXPECT_TRUE(same_record(result.records[1], make_record(6, 20, frame(20, 2))));
  EXPECT_TRUE(same_record(result.records[2], make_record(7, 20, frame(20, 3))));
}

TEST(CaptureWriter, CountsTimestampsPcapCannotHold) {
  // Every record is written; those from 2106-02-07 06:28:16 UTC (2^32 s) on are counted, the first one
  // remembered, and written with their seconds modulo 2^32.
  ScratchDirectory scratch;
  const std::string path = scratch.file("late.pcap");
  auto writer = CaptureWriter::open(path);
  ASSERT_TRUE(writer);
  EXPECT_EQ((*writer)->out_of_range_timestamps().count, 0u);
  EXPECT_EQ((*writer)->out_of_range_timestamps().first_ns, 0u);
  const std::uint64_t last_that_fits = 0xffffffffull * kSecond + 999'999'999;
  const std::uint64_t first_beyond = (1ull << 32) * kSecond + 7;
  const std::uint64_t latest = ~std::uint64_t{0};  // 2554: 18446744073 s, 709551615 ns
  const std::vector<CaptureRecord> records = {
      make_record(1'700'000'000 * kSecond, 60, frame(60, 1)),
      make_record(last_that_fits, 60, frame(60, 2)),
      make_record(first_beyond, 60, frame(60, 3)),
      make_record(5, 60, frame(60, 4)),
      make_record(latest, 60, frame(60, 5)),
  };
  const std::uint64_t expected_counts[] = {0, 0, 1, 1, 2};
  for (std::size_t i = 0; i < records.size(); ++i) {
    (*writer)->write(records[i]);
    const auto out_of_range = (*writer)->out_of_range_timestamps();
    EXPECT_EQ(out_of_range.count, expected_counts[i]) << "after record " << i;
    EXPECT_EQ(out_of_range.first_ns, expected_counts[i] == 0 ? 0 : first_beyond) << "after record " << i;
  }
  ASSERT_TRUE((*writer)->close());
  (*writer)->write(records[2]);  // after close: neither written nor counted
  EXPECT_EQ((*writer)->out_of_range_timestamps().count, 2u);

  // libpcap reads the whole file back, the late records 2^32 s earlier than they were.
  const std::uint64_t wrapped[] = {
      1'700'000'000 * kSecond, last_that_fits, 7, 5, (18'446'744'073ull % (1ull << 32)) * kSecond + 709'551'615,
  };
  std::array<char, PCAP_ERRBUF_SIZE> message{};
  pcap_t* pcap = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, message.data());
  ASSERT_NE(pcap, nullptr) << message.data();
  for (std::size_t i = 0; i < records.size(); ++i) {
    pcap_pkthdr* header = nullptr;
    const u_char* data = nullptr;
    ASSERT_EQ(pcap_next_ex(pcap, &header, &data), 1) << "record " << i;
    const std::uint64_t seconds = static_cast<std::uint32_t>(header->ts.tv_sec);
    EXPECT_EQ(seconds * kSecond + static_cast<std::uint64_t>(header->ts.tv_usec), wrapped[i]) << "record " << i;
    EXPECT_EQ(Bytes(data, data + header->caplen), records[i].data) << "record " << i;
  }
  pcap_pkthdr* header = nullptr;
  const u_char* data = nullptr;
  EXPECT_EQ(pcap_next_ex(pcap, &header, &data), PCAP_ERROR_BREAK);
  pcap_close(pcap);
}

TEST(CaptureWriter, PathInAMissingDirectoryFailsAtOpen) {
  ScratchDirectory scratch;
  const std::string path = scratch.file("missing/out.pcap");
  auto writer = CaptureWriter::open(path);
  ASSERT_FALSE(writer);
  EXPECT_EQ(writer.error().subject, path);
  EXPECT_EQ(writer.error().message, "cannot write capture '" + path + "': No such file or directory");
}

TEST(CaptureWriter, DirectoryFailsAtOpen) {
  ScratchDirectory scratch;
  auto writer = CaptureWriter::open(scratch.directory());
  ASSERT_FALSE(writer);
  EXPECT_TRUE(contains(writer.error().message, scratch.directory() + "': Is a directory")) << writer.error().message;
}

TEST(CaptureWriter, FullDiskFailsAtClose) {
  if (::access("/dev/full", W_OK) != 0) {
    GTEST_SKIP() << "no writable /dev/full";
  }
  for (const std::size_t frames : {std::size_t{1}, std::size_t{1000}}) {  // within stdio's buffer, beyond it
    SCOPED_TRACE(frames);
    auto writer = CaptureWriter::open("/dev/full");
    ASSERT_TRUE(writer) << writer.error().message;
    for (std::size_t i = 0; i < frames; ++i) {
      (*writer)->write(make_record(i, 60, frame(60, 1)));
    }
    auto closed = (*writer)->close();
    ASSERT_FALSE(closed);
    EXPECT_EQ(closed.error().subject, "/dev/full");
    EXPECT_EQ(closed.error().message, "cannot write capture '/dev/full': No space left on device");
  }
}

TEST(CaptureWriter, CloseTwiceAndWriteAfterClose) {
  ScratchDirectory scratch;
  const std::string path = scratch.file("twice.pcap");
  auto writer = CaptureWriter::open(path);
  ASSERT_TRUE(writer);
  (*writer)->write(make_record(1, 60, frame(60, 1)));
  ASSERT_TRUE((*writer)->close());
  (*writer)->write(make_record(2, 60, frame(60, 2)));  // ignored
  auto again = (*writer)->close();
  ASSERT_FALSE(again);
  EXPECT_TRUE(contains(again.error().message, "already closed"));
  auto reader = CaptureReader::open(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(read_all(**reader).records.size(), 1u);
}

TEST(CaptureWriter, DestructorWithoutCloseStillWritesTheFile) {
  ScratchDirectory scratch;
  const std::string path = scratch.file("unclosed.pcap");
  {
    auto writer = CaptureWriter::open(path);
    ASSERT_TRUE(writer);
    (*writer)->write(make_record(1, 60, frame(60, 1)));
  }
  auto reader = CaptureReader::open(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(read_all(**reader).records.size(), 1u);
}

}  // namespace
}  // namespace tricolor::test
