// libFuzzer target for the capture readers: any bytes, opened as a capture from memory and read to the
// end. Checked for every input:
// - open either fails with a message naming the input, or gives a reader of the format the magic says;
// - every record has data.size() ≤ wire_length (readers raise a wire length below the captured length
//   to it), pcap records are on interface 0, pcapng records hold at most 16 MiB;
// - the end is sticky: after next() returns false it keeps returning false and truncated() keeps its
//   value;
// - reading the same bytes twice gives the same records (no state outside the reader).
// libpcap, which reads the pcap inputs, is not instrumented; our pcapng reader and the glue are.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dataplane/replay/capture.hpp"

namespace {

using tricolor::dataplane::CaptureFormat;
using tricolor::dataplane::CaptureReader;
using tricolor::dataplane::CaptureRecord;

constexpr std::size_t kMaxRecords = 100'000;  // inputs are small; this only bounds a runaway loop
constexpr std::size_t kMaxPcapngCaptured = 16 * 1024 * 1024;
constexpr const char* kName = "fuzz-input";

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

struct Outcome {
  bool opened = false;
  std::vector<CaptureRecord> records;
  bool truncated = false;
};

Outcome read(const std::uint8_t* data, std::size_t size) {
  Outcome outcome;
  auto reader = CaptureReader::open_bytes(std::vector<std::uint8_t>(data, data + size), kName);
  if (!reader) {
    check(reader.error().subject == kName);
    check(reader.error().message.find(kName) != std::string::npos);
    return outcome;
  }
  outcome.opened = true;
  const CaptureFormat format = (*reader)->format();
  check(size >= 4);
  const bool pcapng_magic = data[0] == 0x0a && data[1] == 0x0d && data[2] == 0x0d && data[3] == 0x0a;
  check((format == CaptureFormat::pcapng) == pcapng_magic);
  CaptureRecord record;
  while ((*reader)->next(record)) {
    check(record.data.size() <= record.wire_length);
    if (format == CaptureFormat::pcap) {
      check(record.interface == 0);
    } else {
      check(record.data.size() <= kMaxPcapngCaptured);
    }
    outcome.records.push_back(record);
    check(outcome.records.size() <= kMaxRecords);
  }
  outcome.truncated = (*reader)->truncated();
  check(!(*reader)->next(record));
  check((*reader)->truncated() == outcome.truncated);
  return outcome;
}

bool same(const CaptureRecord& a, const CaptureRecord& b) {
  return a.timestamp_ns == b.timestamp_ns && a.wire_length == b.wire_length && a.interface == b.interface &&
         a.data == b.data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Outcome first = read(data, size);
  const Outcome second = read(data, size);
  check(first.opened == second.opened);
  check(first.truncated == second.truncated);
  check(first.records.size() == second.records.size());
  for (std::size_t i = 0; i < first.records.size(); ++i) {
    check(same(first.records[i], second.records[i]));
  }
  return 0;
}
