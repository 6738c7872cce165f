#pragma once
// Helpers shared by the capture tests: reading a whole capture, comparing records, scratch files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/replay/capture.hpp"
#include "tests/dataplane/replay/capture_builders.hpp"

namespace tricolor::test {

using dataplane::CaptureFormat;
using dataplane::CaptureReader;
using dataplane::CaptureWriter;

struct ReadResult {
  std::vector<CaptureRecord> records;
  bool truncated = false;
};

inline ReadResult read_all(CaptureReader& reader) {
  ReadResult result;
  CaptureRecord record;
  while (reader.next(record)) {
    result.records.push_back(record);
  }
  result.truncated = reader.truncated();
  // The end is sticky.
  EXPECT_FALSE(reader.next(record));
  EXPECT_EQ(reader.truncated(), result.truncated);
  // A capture that stops early says why; one that ends cleanly has nothing to say.
  EXPECT_EQ(reader.stop_reason().empty(), !result.truncated) << "stop_reason: " << reader.stop_reason();
  return result;
}

inline ::testing::AssertionResult same_record(const CaptureRecord& actual, const CaptureRecord& expected) {
  if (actual.timestamp_ns != expected.timestamp_ns) {
    return ::testing::AssertionFailure() << "timestamp_ns " << actual.timestamp_ns << ", expected "
                                         << expected.timestamp_ns;
  }
  if (actual.wire_length != expected.wire_length) {
    return ::testing::AssertionFailure() << "wire_length " << actual.wire_length << ", expected "
                                         << expected.wire_length;
  }
  if (actual.interface != expected.interface) {
    return ::testing::AssertionFailure() << "interface " << actual.interface << ", expected "
                                         << expected.interface;
  }
  if (actual.data != expected.data) {
    return ::testing::AssertionFailure() << "data of " << actual.data.size() << " bytes differs from the "
                                         << expected.data.size() << " expected";
  }
  return ::testing::AssertionSuccess();
}

inline void expect_records(const std::vector<CaptureRecord>& actual, const std::vector<CaptureRecord>& expected,
                           std::size_t count) {
  ASSERT_EQ(actual.size(), count);
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_TRUE(same_record(actual[i], expected[i])) << "record " << i;
  }
}

// A directory of its own for each test, removed at the end.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    // A parameterized test's names hold '/' ("ByteOrder/Malformed", "Name/0"): flattened, so that the
    // directory removed at the end is the whole of what was made, not the last of nested ones.
    std::string name = "tricolor-capture-" + std::to_string(::getpid()) + "-" + test->test_suite_name() + "-" + test->name();
    std::replace(name.begin(), name.end(), '/', '_');
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  std::string directory() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const Bytes& bytes, std::size_t length) const {
    const std::string path = file(name);
    // A new file each time: ext4 flushes a file truncated and written again, which is slow in a loop.
    std::filesystem::remove(path);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(length));
    return path;
  }
  std::string write(const std::string& name, const Bytes& bytes) const { return write(name, bytes, bytes.size()); }

 private:
  std::filesystem::path path_;
};

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace tricolor::test
