// tricolor-replay, the real binary, against the independent reference model (tests/policer/reference_model.hpp).
//
// The test writes its own capture (a pcap written here, byte by byte) with one UDP flow per rule:
// every algorithm, byte and packet mode, color-blind and color-aware (input color from DSCP by the
// fixed map), IPv4 and IPv6, random sizes and gaps around twice the committed rate. It writes the
// policy in the command language, runs tricolor-replay, and compares the CSV with the model packet for
// packet. Greedy flows at exactly twice the CIR must get green = CBS + CIR*T within one packet.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/policer/reference_model.hpp"
#include "tests/control/replay/replay_test_support.hpp"

namespace tricolor::test {
namespace {

// Ethernet + IPv4 or IPv6 + UDP, `size` bytes in all (the L2 length), destination chosen per flow.
std::vector<std::uint8_t> udp_frame(std::size_t size, bool ipv6, std::uint8_t flow, std::uint8_t dscp) {
  std::vector<std::uint8_t> f = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2};
  const std::size_t l3 = size - 14;
  if (ipv6) {
    f.insert(f.end(), {0x86, 0xdd});
    const std::uint32_t first = (6u << 28) | (std::uint32_t(dscp) << 22);
    for (int s = 24; s >= 0; s -= 8) f.push_back(std::uint8_t(first >> s));
    const std::size_t payload = l3 - 40;
    f.insert(f.end(), {std::uint8_t(payload >> 8), std::uint8_t(payload), 17, 64});
    for (int i = 0; i < 16; ++i) f.push_back(i == 0 ? 0xfd : std::uint8_t(i));               // source fd01:0203:...
    for (int i = 0; i < 16; ++i) f.push_back(i == 0 ? 0xfd : i == 15 ? flow : std::uint8_t(0x99));  // dest per flow
  } else {
    f.insert(f.end(), {0x08, 0x00, 0x45, std::uint8_t(dscp << 2), std::uint8_t(l3 >> 8), std::uint8_t(l3), 0, 0, 0x40, 0,
                       64, 17, 0, 0, 172, 16, 0, 1, 10, 9, flow, 1});
    std::uint32_t sum = 0;
    for (std::size_t i = 14; i < 34; i += 2) sum += (f[i] << 8) | f[i + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    f[24] = std::uint8_t(~sum >> 8), f[25] = std::uint8_t(~sum);
  }
  const std::size_t udp = size - f.size();
  f.insert(f.end(), {0x9c, 0x40, 0x1f, 0x90, std::uint8_t(udp >> 8), std::uint8_t(udp), 0, 0});
  f.resize(size, 0x5a);
  return f;
}

// The fixed DSCP input map of color-aware rules, written down again here from the README.
RefColor input_color(std::uint8_t dscp) {
  switch (dscp) {
    case 12: case 20: case 28: case 36: return RefColor::yellow;
    case 14: case 22: case 30: case 38: return RefColor::red;
    default: return RefColor::green;
  }
}

struct FlowSpec {
  std::string rule;
  RefAlgorithm algorithm;
  bool packets;      // packet mode
  bool aware;        // input dscp
  bool ipv6;
  bool greedy;       // constant sizes and gaps at exactly 2 x CIR
  std::string profile_text;  // parameters in the command language
  RefParams params;          // the same, in the model's units
};

std::vector<FlowSpec> flows() {
  std::vector<FlowSpec> out;
  const char* algos[] = {"1r2c", "srtcm", "trtcm", "trtcm4115"};
  const RefAlgorithm ref[] = {RefAlgorithm::one_rate_two_color, RefAlgorithm::srtcm, RefAlgorithm::trtcm,
                              RefAlgorithm::trtcm_4115};
  std::uint8_t n = 0;
  for (int a = 0; a < 4; ++a) {
    for (bool packets : {false, true}) {
      for (bool aware : {false, true}) {
        FlowSpec f;
        f.rule = "flow-" + std::string(algos[a]) + (packets ? "-pkt" : "-byte") + (aware ? "-aware" : "-blind");
        f.algorithm = ref[a];
        f.packets = packets;
        f.aware = aware;
        f.ipv6 = (n % 3) == 2;
        f.greedy = false;
        // Non-round rates: 1'234'567 B/s = 9'876'536 bit/s; 1'234 pps.
        const std::uint64_t cir = packets ? 1234 : 1'234'567;
        const std::uint64_t cbs = packets ? 50 : 30'000, second = packets ? 80 : 45'000;
        const std::string rate = packets ? std::to_string(cir) + "pps" : std::to_string(cir * 8) + "bit";
        const std::string rate2 = packets ? std::to_string(cir * 3 / 2) + "pps" : std::to_string(cir * 3 / 2 * 8) + "bit";
        const std::string b1 = packets ? std::to_string(cbs) + "pkt" : std::to_string(cbs);
        const std::string b2 = packets ? std::to_string(second) + "pkt" : std::to_string(second);
        f.params = RefParams{ref[a], packets, cir, cbs, 0, 0, 0, 0, 1'000'000'000};
        switch (ref[a]) {
          case RefAlgorithm::one_rate_two_color: f.profile_text = algos[a] + (" cir " + rate + " cbs " + b1); break;
          case RefAlgorithm::srtcm:
            f.profile_text = algos[a] + (" cir " + rate + " cbs " + b1 + " ebs " + b2);
            f.params.ebs = second;
            break;
          case RefAlgorithm::trtcm:
            f.profile_text = algos[a] + (" cir " + rate + " cbs " + b1 + " pir " + rate2 + " pbs " + b2);
            f.params.pir = cir * 3 / 2, f.params.pbs = second;
            break;
          case RefAlgorithm::trtcm_4115:
            f.profile_text = algos[a] + (" cir " + rate + " cbs " + b1 + " eir " + rate2 + " ebs " + b2);
            f.params.eir = cir * 3 / 2, f.params.ebs = second;
            break;
        }
        out.push_back(f);
        ++n;
      }
    }
    // A greedy flow per algorithm, byte mode, blind.
    FlowSpec g = out[out.size() - 4];
    g.rule = "flow-" + std::string(algos[a]) + "-greedy";
    g.greedy = true;
    g.ipv6 = false;
    out.push_back(g);
  }
  return out;
}

class ReplayAgainstModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tricolor-replay-model-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!std::getenv("KEEP")) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(ReplayAgainstModel, CsvColorsEqualTheModelPacketForPacket) {
  const auto specs = flows();
  std::ostringstream policy;
  for (std::size_t i = 0; i < specs.size(); ++i) policy << "profile add p" << i << " " << specs[i].profile_text << "\n";
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const FlowSpec& f = specs[i];
    policy << "rule add " << f.rule << " proto udp dst "
           << (f.ipv6 ? "fd99:9999:9999:9999:9999:9999:9999:99" + [&] {
                 char h[3];
                 std::snprintf(h, sizeof h, "%02x", unsigned(i));
                 return std::string(h);
               }() + "/128"
                      : "10.9." + std::to_string(i) + ".1/32")
           << " profile p" << i << (f.aware ? " input dscp" : "") << " red forward\n";  // keep every packet
  }
  std::ofstream(dir_ / "policy") << policy.str();

  // Traffic: per flow, sizes 64..1500 (or fixed for greedy), gaps around twice the CIR over 3 s.
  Rng rng{77};
  std::vector<Packet> packets;
  std::vector<std::size_t> flow_of;
  constexpr std::uint64_t kStart = 1'700'000'000'000'000'000ull, kSeconds = 3;
  const std::uint8_t dscps[] = {0, 10, 12, 14, 46, 20, 22};
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const FlowSpec& f = specs[i];
    std::uint64_t t = kStart + rng.below(1000);
    const std::size_t greedy_size = 1000;
    while (t < kStart + kSeconds * 1'000'000'000ull) {
      const std::size_t size = f.greedy ? greedy_size : f.ipv6 ? 70 + rng.below(1431) : 64 + rng.below(1437);
      const std::uint8_t dscp = f.aware ? dscps[rng.below(7)] : 0;
      packets.push_back({t, udp_frame(size, f.ipv6, std::uint8_t(i), dscp)});
      flow_of.push_back(i);
      // Twice the committed rate (four times for color-aware flows, whose green arrivals are fewer
      // than half): cost / (k cir) seconds per packet on average.
      const std::uint64_t cost = f.packets ? 1 : size;
      const std::uint64_t mean_gap = cost * 1'000'000'000ull / ((f.aware ? 4 : 2) * f.params.cir);
      t += f.greedy ? mean_gap : 1 + rng.below(2 * mean_gap);
    }
  }
  // Interleave the flows in time order (stable for equal times: the model sees the same order).
  std::vector<std::size_t> order(packets.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return packets[a].time_ns < packets[b].time_ns; });
  std::vector<Packet> sorted;
  std::vector<std::size_t> sorted_flow;
  for (std::size_t k : order) sorted.push_back(packets[k]), sorted_flow.push_back(flow_of[k]);
  write_pcap(dir_ / "in.pcap", sorted);

  const std::string command = replay_binary() + " --policy " + (dir_ / "policy").string() + " --in " +
                              (dir_ / "in.pcap").string() + " --csv " + (dir_ / "out.csv").string() + " --json " +
                              (dir_ / "out.json").string() + " --out " + (dir_ / "out.pcap").string();
  const CommandResult first = run(command);
  ASSERT_EQ(first.status, 0) << first.output;

  const auto rows = read_csv(dir_ / "out.csv");
  ASSERT_EQ(rows.size(), sorted.size() + 1);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"index", "rule", "key", "in_color", "out_color", "action", "time_ns",
                                               "frame_bytes", "metered_bytes"}));

  std::vector<ReferenceMeter> models;
  for (const FlowSpec& f : specs) models.emplace_back(f.params, kStart);
  std::vector<std::uint64_t> green(specs.size(), 0), last_time(specs.size(), 0);
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    const std::size_t i = sorted_flow[k];
    const FlowSpec& f = specs[i];
    const auto& row = rows[k + 1];
    ASSERT_EQ(row.size(), 9u);
    ASSERT_EQ(row[0], std::to_string(k));
    ASSERT_EQ(row[1], f.rule) << "packet " << k;
    ASSERT_EQ(row[2], "-");  // aggregate meters: no key
    const std::size_t size = sorted[k].frame.size();
    const std::uint8_t dscp = f.ipv6 ? std::uint8_t(((sorted[k].frame[14] & 0x0f) << 2) | (sorted[k].frame[15] >> 6))
                                     : std::uint8_t(sorted[k].frame[15] >> 2);
    RefColor want;
    if (f.aware) {
      const RefColor in = input_color(dscp);
      ASSERT_EQ(row[3], to_string(in)) << "packet " << k;
      want = models[i].check_aware(sorted[k].time_ns, size, in);
    } else {
      ASSERT_EQ(row[3], "-");
      want = models[i].check(sorted[k].time_ns, size);
    }
    ASSERT_EQ(row[4], to_string(want)) << f.rule << ": packet " << k << " (" << size << " bytes)";
    EXPECT_EQ(row[5], "forward");
    EXPECT_EQ(row[6], std::to_string(sorted[k].time_ns - sorted[0].time_ns)) << "packet " << k;
    EXPECT_EQ(row[7], std::to_string(size)) << "packet " << k;
    EXPECT_EQ(row[8], std::to_string(size)) << "packet " << k;  // the rules meter L2 lengths (the default)
    if (want == RefColor::green) green[i] += f.packets ? 1 : size;
    last_time[i] = sorted[k].time_ns;
  }

  // Greedy flows: green = CBS + CIR * T (T up to the flow's last packet) within one packet.
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].greedy) continue;
    const std::uint64_t cir = specs[i].params.cir, cbs = specs[i].params.cbs;
    const u128 elapsed = last_time[i] - kStart;
    const u128 bound = cbs + u128(cir) * elapsed / 1'000'000'000u;
    EXPECT_LE(u128(green[i]), bound + 1000) << specs[i].rule;  // the flow starts up to 1 us after the meter
    EXPECT_GT(u128(green[i]) + 1000, bound) << specs[i].rule;
  }

  // Deterministic: the same inputs give byte-identical outputs.
  const auto csv1 = slurp(dir_ / "out.csv"), json1 = slurp(dir_ / "out.json"), pcap1 = slurp(dir_ / "out.pcap");
  const CommandResult second = run(command);
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_EQ(slurp(dir_ / "out.csv"), csv1);
  EXPECT_EQ(slurp(dir_ / "out.json"), json1);
  EXPECT_EQ(slurp(dir_ / "out.pcap"), pcap1);
}

}  // namespace
}  // namespace tricolor::test
