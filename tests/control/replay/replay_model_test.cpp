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
#include <optional>
#include <set>
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
                                               "frame_bytes", "metered_bytes", "delay_ns"}));

  std::vector<ReferenceMeter> models;
  for (const FlowSpec& f : specs) models.emplace_back(f.params, kStart);
  std::vector<std::uint64_t> green(specs.size(), 0), last_time(specs.size(), 0);
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    const std::size_t i = sorted_flow[k];
    const FlowSpec& f = specs[i];
    const auto& row = rows[k + 1];
    ASSERT_EQ(row.size(), 10u);
    ASSERT_EQ(row[0], std::to_string(k));
    ASSERT_EQ(row[9], "-");  // no shaping rule: no delay
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

// ---- shaping (issue 27) ------------------------------------------------------------------------

// The independent model of a shaper: a packet arriving at `a` leaves at the earliest tick t, no earlier
// than a nor than the meter's latest check, at which the reference meter colors it green — found by
// bisection over the meter's own check on copies (green only gets more likely as time passes), not by
// any formula of policer/; past a + max_delay it is late: dropped, the meter untouched.
std::optional<std::uint64_t> model_release(ReferenceMeter& meter, std::uint64_t a, std::uint64_t length,
                                           std::uint64_t max_delay) {
  const auto green_at = [&](std::uint64_t t) {
    ReferenceMeter copy = meter;
    return copy.check(t, length) == RefColor::green;
  };
  if (!green_at(a + max_delay)) return std::nullopt;
  std::uint64_t lo = a, hi = a + max_delay;  // green at hi; the answer is the least green tick in [lo, hi]
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (green_at(mid)) hi = mid;
    else lo = mid + 1;
  }
  const std::uint64_t release = std::max(lo, meter.now());  // a check before the latest counts as it
  EXPECT_EQ(meter.check(release, length), RefColor::green);
  return release;
}

// The same frame from another source address (a per-key rule's keys), its IPv4 checksum made again.
std::vector<std::uint8_t> from_source(std::vector<std::uint8_t> f, std::uint8_t source) {
  f[29] = source;
  f[24] = f[25] = 0;
  std::uint32_t sum = 0;
  for (std::size_t i = 14; i < 34; i += 2) sum += (f[i] << 8) | f[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  f[24] = std::uint8_t(~sum >> 8), f[25] = std::uint8_t(~sum);
  return f;
}

struct PcapRecord {
  std::uint64_t time_ns;
  std::vector<std::uint8_t> frame;
};

// A nanosecond pcap as tricolor-replay writes it.
std::vector<PcapRecord> read_ns_pcap(const fs::path& path) {
  const std::string bytes = slurp(path);
  const auto u32 = [&](std::size_t at) {
    return std::uint32_t(std::uint8_t(bytes[at])) | std::uint32_t(std::uint8_t(bytes[at + 1])) << 8 |
           std::uint32_t(std::uint8_t(bytes[at + 2])) << 16 | std::uint32_t(std::uint8_t(bytes[at + 3])) << 24;
  };
  std::vector<PcapRecord> out;
  if (bytes.size() < 24 || u32(0) != 0xa1b23c4du) {
    ADD_FAILURE() << path << " is not a little-endian nanosecond pcap";
    return out;
  }
  for (std::size_t at = 24; at + 16 <= bytes.size();) {
    const std::uint32_t captured = u32(at + 8);
    PcapRecord r{std::uint64_t(u32(at)) * 1'000'000'000u + u32(at + 4), {}};
    r.frame.assign(bytes.begin() + std::ptrdiff_t(at + 16), bytes.begin() + std::ptrdiff_t(at + 16 + captured));
    out.push_back(std::move(r));
    at += 16 + captured;
  }
  return out;
}

// Every RFC meter, byte and packet mode, and two per-key rules, shaping flows offered at twice their
// committed rate with random sizes and gaps, and rules of small queues (queue N) that overflow them:
// tricolor-replay's CSV (color, action, delay) equals the model packet for packet; its output capture holds exactly the packets released, each at its release
// time, in time order, every flow in its own order; over any interval a flow's released bytes stay
// within CBS + CIR x the interval.
TEST_F(ReplayAgainstModel, ShapedReleasesEqualTheModelPacketForPacket) {
  struct ShapeSpec {
    std::string rule, profile_text;
    RefParams params;
    std::string per;       // "", or a per-key clause: the flow's packets come from three sources
    std::uint64_t max_delay_ns;
    std::size_t queue = 0;  // queue N (0: none)
  };
  const std::uint64_t cir = 1'234'567, cbs = 30'000, pps = 1234, pkts = 50;
  const std::string rate = std::to_string(cir * 8) + "bit", rate2 = std::to_string(cir * 3 / 2 * 8) + "bit";
  std::vector<ShapeSpec> specs = {
      {"s-1r2c", "1r2c cir " + rate + " cbs 30000", {RefAlgorithm::one_rate_two_color, false, cir, cbs}, "", 3'000'000},
      {"s-srtcm", "srtcm cir " + rate + " cbs 30000 ebs 45000",
       {RefAlgorithm::srtcm, false, cir, cbs, 0, 45'000}, "", 5'000'000},
      {"s-trtcm", "trtcm cir " + rate + " cbs 30000 pir " + rate2 + " pbs 45000",
       {RefAlgorithm::trtcm, false, cir, cbs, 0, 0, cir * 3 / 2, 45'000}, "", 7'000'000},
      {"s-4115", "trtcm4115 cir " + rate + " cbs 30000 eir " + rate2 + " ebs 45000",
       {RefAlgorithm::trtcm_4115, false, cir, cbs, cir * 3 / 2, 45'000}, "", 2'500'000},
      {"s-1r2c-pkt", "1r2c cir " + std::to_string(pps) + "pps cbs 50pkt",
       {RefAlgorithm::one_rate_two_color, true, pps, pkts}, "", 4'000'000},
      {"s-trtcm-pkt", "trtcm cir " + std::to_string(pps) + "pps cbs 50pkt pir " + std::to_string(pps * 2) + "pps pbs 80pkt",
       {RefAlgorithm::trtcm, true, pps, pkts, 0, 0, pps * 2, 80}, "", 3'000'000},
      {"s-per-src", "1r2c cir " + rate + " cbs 30000", {RefAlgorithm::one_rate_two_color, false, cir, cbs}, "per src",
       3'000'000},
      {"s-per-5tuple", "srtcm cir " + rate + " cbs 30000 ebs 45000", {RefAlgorithm::srtcm, false, cir, cbs, 0, 45'000},
       "per 5-tuple", 1'000'000},
      // Small queues: the rule's held packets (per key: all its keys' together) bounded.
      {"q-1r2c", "1r2c cir " + rate + " cbs 30000", {RefAlgorithm::one_rate_two_color, false, cir, cbs}, "", 5'000'000, 3},
      {"q-trtcm-pkt", "trtcm cir " + std::to_string(pps) + "pps cbs 50pkt pir " + std::to_string(pps * 2) + "pps pbs 80pkt",
       {RefAlgorithm::trtcm, true, pps, pkts, 0, 0, pps * 2, 80}, "", 3'000'000, 2},
      {"q-per-src", "1r2c cir " + rate + " cbs 30000", {RefAlgorithm::one_rate_two_color, false, cir, cbs}, "per src",
       3'000'000, 5},
  };
  std::ostringstream policy;
  for (std::size_t i = 0; i < specs.size(); ++i) policy << "profile add p" << i << " " << specs[i].profile_text << "\n";
  for (std::size_t i = 0; i < specs.size(); ++i)
    policy << "rule add " << specs[i].rule << " proto udp dst 10.9." << i << ".1/32 profile p" << i << " "
           << specs[i].per << " red shape max-delay " << specs[i].max_delay_ns / 1000 << "us"
           << (specs[i].queue != 0 ? " queue " + std::to_string(specs[i].queue) : "") << "\n";
  std::ofstream(dir_ / "policy") << policy.str();

  Rng rng{2027};
  std::vector<Packet> packets;
  std::vector<std::size_t> flow_of;
  std::vector<std::uint8_t> key_of;
  constexpr std::uint64_t kStart = 1'700'000'000'000'000'000ull, kSeconds = 2;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ShapeSpec& f = specs[i];
    std::uint64_t t = kStart + rng.below(1000);
    while (t < kStart + kSeconds * 1'000'000'000ull) {
      const std::size_t size = 64 + rng.below(1437);
      const std::uint8_t key = f.per.empty() ? 1 : std::uint8_t(1 + rng.below(3));
      packets.push_back({t, from_source(udp_frame(size, false, std::uint8_t(i), 0), key)});
      flow_of.push_back(i);
      key_of.push_back(key);
      // Twice the committed rate (per key: each of three keys gets a third of it, so six times).
      const std::uint64_t cost = f.params.packet_mode ? 1 : size;
      const std::uint64_t mean_gap = cost * 1'000'000'000ull / ((f.per.empty() ? 2 : 6) * f.params.cir);
      t += 1 + rng.below(2 * mean_gap);
    }
  }
  std::vector<std::size_t> order(packets.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return packets[a].time_ns < packets[b].time_ns; });
  std::vector<Packet> sorted;
  std::vector<std::size_t> sorted_flow;
  std::vector<std::uint8_t> sorted_key;
  for (std::size_t k : order) sorted.push_back(packets[k]), sorted_flow.push_back(flow_of[k]), sorted_key.push_back(key_of[k]);
  write_pcap(dir_ / "in.pcap", sorted);

  const CommandResult result = run(replay_binary() + " --policy " + (dir_ / "policy").string() + " --in " +
                                   (dir_ / "in.pcap").string() + " --csv " + (dir_ / "out.csv").string() + " --json " +
                                   (dir_ / "out.json").string() + " --out " + (dir_ / "out.pcap").string());
  ASSERT_EQ(result.status, 0) << result.output;
  const auto rows = read_csv(dir_ / "out.csv");
  ASSERT_EQ(rows.size(), sorted.size() + 1);

  // The model, packet by packet: a meter per flow, or per key (created full at the key's first packet).
  std::map<std::pair<std::size_t, std::uint8_t>, ReferenceMeter> meters;
  struct Released {
    std::uint64_t release;
    std::size_t index;
  };
  std::vector<Released> released;
  std::vector<std::size_t> held(specs.size(), 0), late(specs.size(), 0), now(specs.size(), 0), overflow(specs.size(), 0);
  // The model of a queue: the release times of the rule's packets still held (a packet leaves at its
  // release: released at or before a, it is no longer held at a).
  std::vector<std::multiset<std::uint64_t>> queued(specs.size());
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    const std::size_t i = sorted_flow[k];
    const ShapeSpec& f = specs[i];
    const auto meter_key = std::make_pair(i, f.per.empty() ? std::uint8_t(0) : sorted_key[k]);
    auto found = meters.find(meter_key);
    if (found == meters.end()) found = meters.emplace(meter_key, ReferenceMeter(f.params, f.per.empty() ? kStart : sorted[k].time_ns)).first;
    const std::uint64_t a = sorted[k].time_ns;
    std::multiset<std::uint64_t>& q = queued[i];
    q.erase(q.begin(), q.upper_bound(a));
    const bool full = f.queue != 0 && q.size() >= f.queue;  // then only a packet that conforms now passes
    // (Full, behind a check later than a — a packet released later — it would wait: nothing taken.)
    std::optional<std::uint64_t> release;
    if (!full || found->second.now() <= a) release = model_release(found->second, a, sorted[k].frame.size(), full ? 0 : f.max_delay_ns);
    if (release && *release > a && f.queue != 0) q.insert(*release);
    const auto& row = rows[k + 1];
    ASSERT_EQ(row.size(), 10u);
    ASSERT_EQ(row[1], f.rule) << "packet " << k;
    if (release) {
      ASSERT_EQ(row[4], "green") << f.rule << ": packet " << k << " at " << a - kStart;
      ASSERT_EQ(row[5], "forward") << f.rule << ": packet " << k;
      ASSERT_EQ(row[9], std::to_string(*release - a)) << f.rule << ": packet " << k;
      released.push_back({*release, k});
      ++(*release == a ? now : held)[i];
    } else {
      ASSERT_EQ(row[4], "red") << f.rule << ": packet " << k << " at " << a - kStart;
      ASSERT_EQ(row[5], full ? "drop;queue-full" : "drop") << f.rule << ": packet " << k << ", " << q.size() << " held";
      ASSERT_EQ(row[9], "-");
      ++(full ? overflow : late)[i];
    }
  }
  for (std::size_t i = 0; i < specs.size(); ++i) {  // the test means something for every rule
    EXPECT_GT(now[i], 10u) << specs[i].rule;
    EXPECT_GT(held[i], 100u) << specs[i].rule;
    EXPECT_GT(specs[i].queue != 0 ? overflow[i] : late[i], 100u) << specs[i].rule;
  }
  // The summary: per rule, the packets held and late, and the longest delay.
  const std::string json = slurp(dir_ / "out.json");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::uint64_t longest = 0;
    for (const Released& r : released)
      if (sorted_flow[r.index] == i) longest = std::max(longest, r.release - sorted[r.index].time_ns);
    const std::size_t from = json.find("\"name\": \"" + specs[i].rule + "\"");
    ASSERT_NE(from, std::string::npos) << specs[i].rule;
    const std::string rule_json = json.substr(from, json.find("\"name\": ", from + 1) - from);
    EXPECT_NE(rule_json.find("\"held_packets\": " + std::to_string(held[i]) + ","), std::string::npos) << rule_json;
    EXPECT_NE(rule_json.find("\"late_packets\": " + std::to_string(late[i]) + ","), std::string::npos) << rule_json;
    EXPECT_NE(rule_json.find("\"queue_overflow_packets\": " + std::to_string(overflow[i]) + ","), std::string::npos)
        << rule_json;
    EXPECT_EQ(rule_json.find("\"queue_packets\": " + std::to_string(specs[i].queue) + ",") != std::string::npos,
              specs[i].queue != 0) << rule_json;
    EXPECT_NE(rule_json.find("\"max\": " + std::to_string(longest)), std::string::npos) << rule_json;
    EXPECT_NE(rule_json.find("\"max_delay_ns\": " + std::to_string(specs[i].max_delay_ns) + ","), std::string::npos) << rule_json;
  }

  // The output: the released packets in release order (ties in arrival order), each at its release time.
  std::stable_sort(released.begin(), released.end(), [](const Released& x, const Released& y) { return x.release < y.release; });
  const auto out = read_ns_pcap(dir_ / "out.pcap");
  ASSERT_EQ(out.size(), released.size());
  std::map<std::pair<std::size_t, std::uint8_t>, std::size_t> last_index;
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> by_flow(specs.size());  // (release, cost)
  for (std::size_t j = 0; j < out.size(); ++j) {
    const std::size_t k = released[j].index;
    ASSERT_EQ(out[j].time_ns, released[j].release) << "output record " << j;
    ASSERT_EQ(out[j].frame, sorted[k].frame) << "output record " << j;
    // Per flow (a 5-tuple: rule and source here), arrival order kept.
    const auto flow = std::make_pair(sorted_flow[k], sorted_key[k]);
    if (const auto before = last_index.find(flow); before != last_index.end()) {
      ASSERT_LT(before->second, k);
    }
    last_index[flow] = k;
    const ShapeSpec& f = specs[sorted_flow[k]];
    if (f.per.empty()) by_flow[sorted_flow[k]].push_back({released[j].release, f.params.packet_mode ? 1 : sorted[k].frame.size()});
  }
  // Never above the rate: over every interval between two releases, what left fits CBS + CIR x it.
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& r = by_flow[i];
    for (std::size_t x = 0; x < r.size(); ++x) {
      u128 sum = 0;
      for (std::size_t y = x; y < r.size(); ++y) {
        sum += r[y].second;
        const u128 bound = u128(specs[i].params.cbs) * 1'000'000'000u + u128(specs[i].params.cir) * (r[y].first - r[x].first);
        ASSERT_LE(sum * 1'000'000'000u, bound) << specs[i].rule << ": from release " << x << " to " << y;
      }
    }
  }
}

// The cut at max-delay to the nanosecond, and a shaper's queue across live changes of its rate: a
// 1000 pps meter (a token a millisecond, one in the bucket) with max-delay 2ms; bursts of packets
// arriving at one instant leave a millisecond apart until the next would wait more than 2 ms.
TEST_F(ReplayAgainstModel, ShapingCutsAtMaxDelayExactlyAndKeepsItsQueueAcrossChanges) {
  std::ofstream(dir_ / "policy") << "profile add s 1r2c cir 1000pps cbs 1pkt\n"
                                    "rule add shaped proto udp profile s red shape max-delay 2ms\n";
  constexpr std::uint64_t kStart = 1'700'000'000'000'000'000ull, kMs = 1'000'000;
  std::vector<Packet> packets;
  const auto at = [&](std::uint64_t t, int count) {
    for (int i = 0; i < count; ++i) packets.push_back({kStart + t, udp_frame(100 + std::size_t(packets.size()), false, 1, 0)});
  };
  at(0, 5);                // 0, 1 ms, 2 ms (exactly max-delay: kept), then 3 ms: late
  at(10 * kMs, 6);         // after a change to 2000 pps before the first: 0, 0.5, 1, 1.5, 2 ms, then late
  at(20 * kMs, 3);         // 0, 0.5, 1 ms; then a change back to 1000 pps with two packets held:
  at(20 * kMs + 100'000, 2);  // the queue is kept: the next leaves 1 ms after the last (21 ms), 1.9 ms late; then 2.9: late
  write_pcap(dir_ / "in.pcap", packets);
  const CommandResult result = run(replay_binary() + " --policy " + (dir_ / "policy").string() + " --in " +
                                   (dir_ / "in.pcap").string() + " --csv " + (dir_ / "out.csv").string() +
                                   " --out " + (dir_ / "out.pcap").string() +
                                   " --change-at '5:profile change s 1r2c cir 2000pps cbs 1pkt'"
                                   " --change-at '14:profile change s 1r2c cir 1000pps cbs 1pkt'");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto rows = read_csv(dir_ / "out.csv");
  ASSERT_EQ(rows.size(), packets.size() + 1);
  const std::vector<std::string> want = {"0", "1000000", "2000000", "-", "-",
                                         "0", "500000", "1000000", "1500000", "2000000", "-",
                                         "0", "500000", "1000000",
                                         "1900000", "-"};
  std::vector<std::string> got;
  for (std::size_t k = 1; k < rows.size(); ++k) got.push_back(rows[k][9]);
  EXPECT_EQ(got, want);
  for (std::size_t k = 1; k < rows.size(); ++k) EXPECT_EQ(rows[k][5], want[k - 1] == "-" ? "drop" : "forward") << k;
  // The output in release order, at the release times.
  const auto out = read_ns_pcap(dir_ / "out.pcap");
  std::vector<std::uint64_t> times;
  for (const auto& r : out) times.push_back(r.time_ns - kStart);
  EXPECT_EQ(times, (std::vector<std::uint64_t>{0, kMs, 2 * kMs, 10 * kMs, 10 * kMs + kMs / 2, 11 * kMs, 11 * kMs + kMs / 2,
                                               12 * kMs, 20 * kMs, 20 * kMs + kMs / 2, 21 * kMs, 22 * kMs}));
}

// queue N by hand, across live changes: 1000 pps, a token a millisecond, one in the bucket, queue 2.
// A release at t has left for a packet arriving at t; a change that keeps N keeps what is held; a
// larger N starts an empty queue; a smaller one keeps what is held, full until enough has left.
TEST_F(ReplayAgainstModel, ShapingQueueOverflowsAndLiveChanges) {
  const std::string rule = "proto udp profile s red shape max-delay 10ms";
  std::ofstream(dir_ / "policy") << "profile add s 1r2c cir 1000pps cbs 1pkt\nrule add shaped " << rule << " queue 2\n";
  constexpr std::uint64_t kStart = 1'700'000'000'000'000'000ull, kMs = 1'000'000;
  std::vector<Packet> packets;
  const auto at = [&](std::uint64_t t, int count) {
    for (int i = 0; i < count; ++i) packets.push_back({kStart + t, udp_frame(100 + std::size_t(packets.size()), false, 1, 0)});
  };
  at(0, 4);             // 0, then held to 1 and 2 ms (queue: 2), then full: dropped
  at(kMs / 2, 1);       // after a change of max-delay (N kept): both still held: dropped, nothing taken
  at(kMs, 1);           // the 1 ms release has left: held to 3 ms (queue: 2 and 3 ms)
  at(kMs + kMs / 2, 4); // after a change to queue 3 (an empty queue): 4, 5, 6 ms held, then full
  at(4 * kMs, 1);       // after a change to queue 1: the 4 ms release has left, 5 and 6 ms held: full
  at(6 * kMs, 1);       // both left: held to 7 ms
  at(6 * kMs + kMs / 2, 1);  // full again
  write_pcap(dir_ / "in.pcap", packets);
  const CommandResult result =
      run(replay_binary() + " --policy " + (dir_ / "policy").string() + " --in " + (dir_ / "in.pcap").string() +
          " --csv " + (dir_ / "out.csv").string() + " --json " + (dir_ / "out.json").string() +
          " --change-at '4:rule change shaped proto udp profile s red shape max-delay 9ms queue 2'"
          " --change-at '6:rule change shaped " + rule + " queue 3'" +
          " --change-at '10:rule change shaped " + rule + " queue 1'");
  ASSERT_EQ(result.status, 0) << result.output;
  const auto rows = read_csv(dir_ / "out.csv");
  ASSERT_EQ(rows.size(), packets.size() + 1);
  const std::vector<std::string> delays = {"0", "1000000", "2000000", "-", "-", "2000000",
                                           "2500000", "3500000", "4500000", "-", "-", "1000000", "-"};
  for (std::size_t k = 1; k < rows.size(); ++k) {
    EXPECT_EQ(rows[k][9], delays[k - 1]) << "packet " << k - 1;
    EXPECT_EQ(rows[k][5], delays[k - 1] == "-" ? "drop;queue-full" : "forward") << "packet " << k - 1;
  }
  const std::string json = slurp(dir_ / "out.json");
  EXPECT_NE(json.find("\"late_packets\": 0,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"queue_overflow_packets\": 5,"), std::string::npos) << json;
}

}  // namespace
}  // namespace tricolor::test
