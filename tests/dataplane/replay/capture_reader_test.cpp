// Reading the hand-made sample captures (pcap µs/ns in both byte orders, pcapng in both byte orders with
// several interfaces, resolutions, offsets, simple packets, skipped blocks and several sections), from
// memory and from files, and cutting each of them at every byte.
#include <algorithm>

#include "tests/dataplane/replay/capture_samples.hpp"
#include "tests/dataplane/replay/capture_test_support.hpp"

namespace tricolor::test {
namespace {

CaptureFormat expected_format(const TestCapture& capture) {
  return capture.name.starts_with("pcapng") ? CaptureFormat::pcapng : CaptureFormat::pcap;
}

TEST(CaptureReader, ReadsEverySampleFromMemory) {
  for (const TestCapture& capture : sample_captures()) {
    SCOPED_TRACE(capture.name);
    auto reader = CaptureReader::open_bytes(capture.bytes, capture.name);
    ASSERT_TRUE(reader) << reader.error().message;
    EXPECT_EQ((*reader)->format(), expected_format(capture));
    const ReadResult result = read_all(**reader);
    expect_records(result.records, capture.records, capture.records.size());
    EXPECT_FALSE(result.truncated);
  }
}

TEST(CaptureReader, ReadsEverySampleFromAFile) {
  ScratchDirectory scratch;
  for (const TestCapture& capture : sample_captures()) {
    SCOPED_TRACE(capture.name);
    auto reader = CaptureReader::open(scratch.write(capture.name, capture.bytes));
    ASSERT_TRUE(reader) << reader.error().message;
    EXPECT_EQ((*reader)->format(), expected_format(capture));
    const ReadResult result = read_all(**reader);
    expect_records(result.records, capture.records, capture.records.size());
    EXPECT_FALSE(result.truncated);
  }
}

TEST(CaptureReader, SamplesHaveWhatTheTestsClaim) {
  // Guards the samples themselves: every kind of record the sweeps rely on is there.
  const auto captures = sample_captures();
  ASSERT_EQ(captures.size(), 13u);
  const TestCapture& interfaces = captures[6];
  std::vector<std::uint16_t> ids;
  for (const CaptureRecord& record : interfaces.records) {
    ids.push_back(record.interface);
  }
  EXPECT_EQ(ids, (std::vector<std::uint16_t>{0, 1, 2, 3, 4, 5, 6, 0}));
}

TEST(CaptureReader, ReusesTheCallersRecord) {
  // A record reused across calls gets each packet's own data, however long the previous one was.
  const TestCapture capture = sample_pcapng(false);
  auto reader = CaptureReader::open_bytes(capture.bytes);
  ASSERT_TRUE(reader);
  CaptureRecord record;
  record.data.assign(5000, 0xee);
  for (const CaptureRecord& expected : capture.records) {
    ASSERT_TRUE((*reader)->next(record));
    EXPECT_TRUE(same_record(record, expected));
  }
  EXPECT_FALSE((*reader)->next(record));
}

// Cuts a capture at `cut` bytes and checks what a reader makes of it: an open error inside the file
// header; otherwise the records wholly before the cut, intact, and truncated() unless the cut falls
// exactly between records (blocks, for pcapng).
void check_cut(const TestCapture& capture, std::size_t cut, Expected<std::unique_ptr<CaptureReader>> reader,
               const std::string& name) {
  SCOPED_TRACE(capture.name + " cut at " + std::to_string(cut) + " of " + std::to_string(capture.bytes.size()));
  if (cut < capture.header_length) {
    ASSERT_FALSE(reader);
    EXPECT_NE(reader.error().message.find(name), std::string::npos) << reader.error().message;
    EXPECT_EQ(reader.error().subject, name);
    return;
  }
  ASSERT_TRUE(reader) << reader.error().message;
  const ReadResult result = read_all(**reader);
  const auto clean = std::find_if(capture.clean_cuts.begin(), capture.clean_cuts.end(),
                                  [cut](const auto& entry) { return entry.first == cut; });
  std::size_t whole_records = 0;
  for (const auto& [offset, records] : capture.clean_cuts) {
    if (offset <= cut) {
      whole_records = records;
    }
  }
  expect_records(result.records, capture.records, whole_records);
  EXPECT_EQ(result.truncated, clean == capture.clean_cuts.end());
}

TEST(CaptureReader, EveryCutOfEverySampleFromMemory) {
  for (const TestCapture& capture : sample_captures()) {
    for (std::size_t cut = 0; cut <= capture.bytes.size(); ++cut) {
      const Bytes prefix(capture.bytes.begin(), capture.bytes.begin() + static_cast<std::ptrdiff_t>(cut));
      check_cut(capture, cut, CaptureReader::open_bytes(prefix, capture.name), capture.name);
    }
  }
}

TEST(CaptureReader, EveryCutOfEverySampleFromAFile) {
  ScratchDirectory scratch;
  for (const TestCapture& capture : sample_captures()) {
    for (std::size_t cut = 0; cut <= capture.bytes.size(); ++cut) {
      const std::string path = scratch.write(capture.name, capture.bytes, cut);
      check_cut(capture, cut, CaptureReader::open(path), path);
    }
  }
}

}  // namespace
}  // namespace tricolor::test
