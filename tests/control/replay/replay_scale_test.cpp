// tricolor-replay loading 16 Mi live per-5-tuple meters: a capture of 2^24 distinct 5-tuples (one
// packet each, snapped to the 38 bytes the parser needs), one per-5-tuple rule with room for them all.
// Checks every key is live and none was refused; reports the table's memory per key and the replay's
// peak resident memory (the figures in the notes come from this test's output).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/control/replay/replay_test_support.hpp"

namespace tricolor::test {
namespace {

constexpr std::uint32_t kKeys = 1u << 24;
constexpr std::uint32_t kSnap = 38;  // Ethernet 14 + IPv4 20 + the two ports
constexpr std::uint32_t kWire = 60;

TEST(ReplayScale, SixteenMebiLivePerFiveTupleMeters) {
  ScratchDir dir("tricolor-replay-scale");
  const auto capture = dir.path / "keys.pcap";
  {
    std::FILE* out = std::fopen(capture.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    std::string header;
    put32le(header, 0xa1b23c4d);
    put16le(header, 2), put16le(header, 4), put32le(header, 0), put32le(header, 0), put32le(header, 65535), put32le(header, 1);
    std::fwrite(header.data(), 1, header.size(), out);
    FrameSpec spec;
    spec.size = kWire;
    spec.dst = {10, 200, 0, 1};
    std::vector<std::uint8_t> frame = build_frame(spec);
    std::vector<std::uint8_t> record(16 + kSnap);
    const std::uint64_t start_s = 1'700'000'000;
    for (std::uint32_t i = 0; i < kKeys; ++i) {
      // Source 11.x.y.z from i: every packet a new 5-tuple; 1 us apart.
      frame[26] = 11, frame[27] = std::uint8_t(i >> 16), frame[28] = std::uint8_t(i >> 8), frame[29] = std::uint8_t(i);
      const std::uint64_t ns = std::uint64_t(i) * 1000;
      std::string head;
      put32le(head, std::uint32_t(start_s + ns / 1'000'000'000)), put32le(head, std::uint32_t(ns % 1'000'000'000));
      put32le(head, kSnap), put32le(head, kWire);
      std::copy(head.begin(), head.end(), record.begin());
      std::copy(frame.begin(), frame.begin() + kSnap, record.begin() + 16);
      ASSERT_EQ(std::fwrite(record.data(), 1, record.size(), out), record.size());
    }
    ASSERT_EQ(std::fclose(out), 0);
  }
  std::ofstream(dir.path / "policy") << "profile add flow 1r2c cir 1mbit cbs 10k\n"
                                        "rule add flows dst 10.200.0.1 profile flow per 5-tuple capacity 16m timeout 1h\n";
  const CommandResult r = run(replay_binary() + " --policy " + (dir.path / "policy").string() + " --in " + capture.string() +
                              " --json " + (dir.path / "out.json").string() + " --top-keys 3");
  ASSERT_EQ(r.status, 0) << r.output;
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  const auto summary = nlohmann::json::parse(slurp(dir.path / "out.json"));
  const auto& rule = summary["rules"][0];
  const auto& keys = rule["keys"];
  EXPECT_EQ(summary["capture"]["packets"], kKeys);
  EXPECT_EQ(rule["green"]["packets"], kKeys);  // each key's first packet: a full meter
  EXPECT_EQ(keys["live"], kKeys);
  EXPECT_EQ(keys["created"], kKeys);
  EXPECT_EQ(keys["table_full_packets"], 0);
  const double bytes_per_key = keys["memory_bytes"].get<double>() / kKeys;
  EXPECT_LT(bytes_per_key, 160.0);
  std::printf("16 Mi live keys: key tables %.1f MiB (%.1f bytes per key); replay peak RSS %.1f MiB\n",
              keys["memory_bytes"].get<double>() / (1 << 20), bytes_per_key, usage.ru_maxrss / 1024.0);
  RecordProperty("bytes_per_key", std::to_string(bytes_per_key));
  RecordProperty("peak_rss_mib", std::to_string(usage.ru_maxrss / 1024));
}

}  // namespace
}  // namespace tricolor::test
