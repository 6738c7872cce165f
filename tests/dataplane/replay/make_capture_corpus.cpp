// Writes the seed corpus of tests/fuzz/fuzz_capture.cpp into the directory given: the test samples (pcap
// µs/ns in both byte orders, pcapng with skipped blocks, several interfaces, resolutions and sections),
// a few cut and malformed variants, and a pcap from CaptureWriter. Each file is under 2 KiB. The names
// have no extension: the repository ignores *.pcap.
//   build/tests/dataplane/replay/make-capture-corpus tests/fuzz/corpus/fuzz_capture
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/dataplane/replay/capture_samples.hpp"

namespace {

using tricolor::test::Bytes;

bool write_file(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

Bytes cut(const Bytes& bytes, std::size_t length) {
  return Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(std::min(length, bytes.size())));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tricolor::test;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::filesystem::path directory = argv[1];
  std::filesystem::create_directories(directory);
  bool ok = true;
  for (const TestCapture& capture : sample_captures()) {
    ok &= write_file(directory / capture.name, capture.bytes);
    // The same cut inside its last record or block: a reader must stop there.
    ok &= write_file(directory / (capture.name + "-cut"), cut(capture.bytes, capture.bytes.size() - 3));
  }

  // A later interface that is not Ethernet, and a simple packet limited by the snap length.
  PcapngBuilder mixed;
  mixed.section(true);
  mixed.interface(kEthernet, 16);
  mixed.simple(frame(40, 1), 40, 16);
  mixed.interface(kRawIp);
  ok &= write_file(directory / "pcapng-later-raw", mixed.bytes());

  // Open errors: a first interface that is not Ethernet, a pcap that is not Ethernet.
  PcapngBuilder raw;
  raw.section(false);
  raw.interface(kRawIp);
  ok &= write_file(directory / "pcapng-raw", raw.bytes());
  PcapBuilder raw_pcap(false, false, kRawIp);
  raw_pcap.record(1, 2, frame(20, 1), 20);
  ok &= write_file(directory / "pcap-raw", raw_pcap.finish("raw").bytes);

  // A pcap as CaptureWriter writes it.
  const std::filesystem::path written = directory / "pcap-written";
  auto writer = tricolor::dataplane::CaptureWriter::open(written.string());
  if (!writer) {
    std::fprintf(stderr, "%s\n", writer.error().message.c_str());
    return 1;
  }
  for (const CaptureRecord& record : sample_pcapng_interfaces(false).records) {
    (*writer)->write(record);
  }
  ok &= (*writer)->close().ok();

  if (!ok) {
    std::fprintf(stderr, "could not write the corpus into %s\n", directory.c_str());
    return 1;
  }
  return 0;
}
