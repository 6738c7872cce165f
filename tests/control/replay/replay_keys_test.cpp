// Per-key meters, hierarchy and color maps through tricolor-replay, the real binary, against the
// independent reference model: one model meter per key (created full at the key's first packet,
// replaced by a full one when the key returns after idling at least the timeout), a parent model
// checked color-aware with the child's color when the child did not mark the packet red, input colors
// from the maps as the README states them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "tests/policer/reference_model.hpp"
#include "tests/control/replay/replay_test_support.hpp"

namespace tricolor::test {
namespace {

constexpr std::uint64_t kStart = 1'700'000'000'000'000'000ull;
constexpr std::uint64_t kSecond = 1'000'000'000ull;

std::array<std::uint8_t, 16> v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  return {a, b, c, d};
}
std::array<std::uint8_t, 16> v6(std::uint16_t last_group, std::uint16_t fourth_group = 0) {
  std::array<std::uint8_t, 16> a{0xfd, 0x00, 0, 0, 0, 0, std::uint8_t(fourth_group >> 8), std::uint8_t(fourth_group)};
  a[14] = std::uint8_t(last_group >> 8), a[15] = std::uint8_t(last_group);
  return a;
}

struct Sent {
  Packet packet;
  FrameSpec spec;
};

struct Replayed {
  std::vector<std::vector<std::string>> rows;  // CSV without its header
  nlohmann::json summary;
};

Replayed replay(const ScratchDir& dir, const std::string& policy, std::vector<Sent>& sent, const std::string& extra = "") {
  std::stable_sort(sent.begin(), sent.end(), [](const Sent& a, const Sent& b) { return a.packet.time_ns < b.packet.time_ns; });
  std::vector<Packet> packets;
  for (const Sent& s : sent) packets.push_back(s.packet);
  write_pcap(dir.path / "in.pcap", packets);
  std::ofstream(dir.path / "policy") << policy;
  const CommandResult r = run(replay_binary() + " --policy " + (dir.path / "policy").string() + " --in " +
                              (dir.path / "in.pcap").string() + " --csv " + (dir.path / "out.csv").string() + " --json " +
                              (dir.path / "out.json").string() + " " + extra);
  EXPECT_EQ(r.status, 0) << r.output;
  Replayed out;
  out.rows = read_csv(dir.path / "out.csv");
  EXPECT_FALSE(out.rows.empty());
  if (!out.rows.empty()) out.rows.erase(out.rows.begin());
  EXPECT_EQ(out.rows.size(), sent.size());
  out.summary = nlohmann::json::parse(slurp(dir.path / "out.json"));
  return out;
}

Sent udp_packet(std::uint64_t t, FrameSpec spec) {
  return Sent{Packet{t, build_frame(spec)}, spec};
}

// One model meter per key, renewed after the idle timeout.
struct KeyedModel {
  RefParams params;
  std::uint64_t idle;
  struct Slot {
    std::optional<ReferenceMeter> meter;
    std::uint64_t last = 0;
  };
  std::map<std::string, Slot> keys;

  ReferenceMeter& meter(const std::string& key, std::uint64_t t) {
    Slot& slot = keys[key];
    if (!slot.meter || (t > slot.last && t - slot.last >= idle)) slot.meter.emplace(params, t);
    slot.last = std::max(slot.last, t);
    return *slot.meter;
  }
};

const RefParams kHostParams{RefAlgorithm::trtcm, false, 100'000, 8192, 0, 0, 150'000, 16384, 1'000'000'000};
const char* kHostProfile = "profile add host trtcm cir 800kbit cbs 8k pir 1200kbit pbs 16k\n";

TEST(ReplayKeys, EachKeyIsMeteredAloneAndStartsAgainFullAfterIdling) {
  ScratchDir dir("tricolor-replay-keys");
  Rng rng{11};
  std::vector<Sent> sent;
  // 60 IPv4 and 20 IPv6 sources, each sending bursts at random times over 6 s; every fourth source
  // pauses for 1.5 s in the middle (beyond the 1 s timeout) and comes back.
  for (int s = 0; s < 80; ++s) {
    const bool ipv6 = s >= 60;
    FrameSpec spec;
    spec.ipv6 = ipv6;
    spec.src = ipv6 ? v6(std::uint16_t(s)) : v4(10, 1, std::uint8_t(s / 20), std::uint8_t(s));
    spec.dst = ipv6 ? v6(0x99) : v4(10, 50, 0, 1);
    std::uint64_t t = kStart + rng.below(kSecond);
    while (t < kStart + 6 * kSecond) {
      spec.size = 64 + rng.below(1400);
      sent.push_back(udp_packet(t, spec));
      t += rng.below(kSecond / 100);  // ~200 packets/s of ~700 bytes: over the 100 kB/s CIR
      if (s % 4 == 0 && t > kStart + 2 * kSecond && t < kStart + 2 * kSecond + kSecond / 50) t += 3 * kSecond / 2;
    }
  }
  const std::string policy = std::string(kHostProfile) +
                             "rule add hosts dst 10.50.0.0/16 profile host per src timeout 1s\n"
                             "rule add hosts6 dst fd00::99 profile host per src timeout 1s\n";
  const Replayed out = replay(dir, policy, sent);
  ASSERT_EQ(out.rows.size(), sent.size());
  KeyedModel model{kHostParams, kSecond, {}};
  std::size_t renewals = 0;
  std::map<std::string, std::uint64_t> last_seen;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const Sent& s = sent[i];
    char text[64];
    if (s.spec.ipv6) std::snprintf(text, sizeof text, "fd00::%x", (s.spec.src[14] << 8) | s.spec.src[15]);
    else std::snprintf(text, sizeof text, "%d.%d.%d.%d", s.spec.src[0], s.spec.src[1], s.spec.src[2], s.spec.src[3]);
    const auto& row = out.rows[i];
    ASSERT_EQ(row[1], s.spec.ipv6 ? "hosts6" : "hosts") << i;
    ASSERT_EQ(row[2], text) << i;
    const std::uint64_t t = s.packet.time_ns;
    if (last_seen.count(text) && t - last_seen[text] >= kSecond) ++renewals;
    last_seen[text] = t;
    const RefColor want = model.meter(text, t).check(t, s.packet.frame.size());
    ASSERT_EQ(row[4], to_string(want)) << "packet " << i << " key " << text;
  }
  EXPECT_GE(renewals, 20u);  // the idle sources came back after the timeout
  // The JSON: a key comes back as renewed, or as created if the sweep reclaimed it meanwhile.
  std::uint64_t created_or_renewed = 0;
  for (int r = 0; r < 2; ++r) {
    const auto& keys = out.summary["rules"][r]["keys"];
    created_or_renewed += keys["created"].get<std::uint64_t>() + keys["renewed"].get<std::uint64_t>();
    EXPECT_EQ(keys["table_full_packets"], 0);
  }
  EXPECT_EQ(created_or_renewed, 80 + renewals);
}

TEST(ReplayKeys, PrefixKeysShareAMeterPerPrefix) {
  ScratchDir dir("tricolor-replay-prefix");
  Rng rng{12};
  std::vector<Sent> sent;
  for (int i = 0; i < 3000; ++i) {
    FrameSpec spec;
    spec.ipv6 = rng.below(3) == 0;
    spec.src = spec.ipv6 ? v6(std::uint16_t(rng.below(50)), std::uint16_t(rng.below(4)))
                         : v4(10, 7, std::uint8_t(rng.below(4)), std::uint8_t(rng.below(250)));
    spec.dst = spec.ipv6 ? v6(0x99) : v4(10, 50, 0, 1);
    spec.size = 200;
    sent.push_back(udp_packet(kStart + std::uint64_t(i) * 500'000, spec));  // 2000 packets/s
  }
  const Replayed out = replay(dir, std::string(kHostProfile) + "rule add nets profile host per src/24,64\n", sent);
  KeyedModel model{kHostParams, 60 * kSecond, {}};
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const FrameSpec& s = sent[i].spec;
    char text[64];
    const unsigned group = (s.src[6] << 8) | s.src[7];  // RFC 5952: the longest run of zero groups is "::"
    if (s.ipv6 && group == 0) std::snprintf(text, sizeof text, "fd00::/64");
    else if (s.ipv6) std::snprintf(text, sizeof text, "fd00:0:0:%x::/64", group);
    else std::snprintf(text, sizeof text, "%d.%d.%d.0/24", s.src[0], s.src[1], s.src[2]);
    ASSERT_EQ(out.rows[i][2], text) << i;
    const RefColor want = model.meter(text, sent[i].packet.time_ns).check(sent[i].packet.time_ns, 200);
    ASSERT_EQ(out.rows[i][4], to_string(want)) << i;
  }
  EXPECT_EQ(out.summary["rules"][0]["keys"]["live"], 8u);  // 4 IPv4 /24s and 4 IPv6 /64s
}

TEST(ReplayKeys, HierarchyChildFirstThenParentColorAware) {
  ScratchDir dir("tricolor-replay-hierarchy");
  Rng rng{13};
  std::vector<Sent> sent;
  // 12 hosts of one tenant, each offering ~2x its own CIR; together far over the tenant's.
  for (int h = 0; h < 12; ++h) {
    FrameSpec spec;
    spec.src = v4(10, 2, 0, std::uint8_t(h + 1));
    spec.dst = v4(10, 60, 0, 1);
    for (std::uint64_t t = kStart + rng.below(kSecond / 10); t < kStart + 4 * kSecond; t += rng.below(kSecond / 200)) {
      spec.size = 64 + rng.below(1400);
      sent.push_back(udp_packet(t, spec));
    }
  }
  const std::string policy = std::string(kHostProfile) +
                             "profile add tenant trtcm cir 2mbit cbs 32k pir 6mbit pbs 64k\n"
                             "rule add tenant-a src 10.2.0.0/16 profile host per src parent tenant\n";
  const Replayed out = replay(dir, policy, sent);
  KeyedModel children{kHostParams, 60 * kSecond, {}};
  ReferenceMeter parent(RefParams{RefAlgorithm::trtcm, false, 250'000, 32768, 0, 0, 750'000, 65536, 1'000'000'000}, kStart);
  std::map<RefColor, std::size_t> seen;
  std::size_t skipped_parent = 0;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const auto& s = sent[i];
    const std::uint64_t t = s.packet.time_ns;
    const std::string key = "10.2.0." + std::to_string(s.spec.src[3]);
    ASSERT_EQ(out.rows[i][2], key);
    const RefColor child = children.meter(key, t).check(t, s.packet.frame.size());
    RefColor want = RefColor::red;
    if (child != RefColor::red) want = parent.check_aware(t, s.packet.frame.size(), child);
    else ++skipped_parent;
    ASSERT_EQ(out.rows[i][4], to_string(want)) << "packet " << i << " child " << to_string(child);
    ++seen[want];
  }
  EXPECT_GT(skipped_parent, 100u);
  EXPECT_GT(seen[RefColor::green], 100u);
  EXPECT_GT(seen[RefColor::yellow], 100u);
  EXPECT_GT(seen[RefColor::red], 100u);
}

TEST(ReplayKeys, AFullTableSendsNewKeysToTheFallbackAndLeavesOldKeysAlone) {
  for (const std::string fallback : {"aggregate", "default", "drop"}) {
    SCOPED_TRACE(fallback);
    ScratchDir dir("tricolor-replay-full-" + fallback);
    Rng rng{14};
    std::vector<Sent> sent;
    for (int h = 0; h < 8; ++h) {
      FrameSpec spec;
      spec.src = v4(10, 3, 0, std::uint8_t(h + 1));
      spec.dst = v4(10, 70, 0, 1);
      spec.size = 500;
      // Host h starts at h * 100 ms: hosts 1..5 take the 5 slots, 6..8 find the table full.
      for (std::uint64_t t = kStart + std::uint64_t(h) * kSecond / 10; t < kStart + 3 * kSecond; t += rng.below(kSecond / 100))
        sent.push_back(udp_packet(t, spec));
    }
    const std::string policy = std::string(kHostProfile) + "rule add capped profile host per src capacity 5 fallback " +
                               fallback + "\ndefault remark cs1\n";
    const Replayed out = replay(dir, policy, sent);
    KeyedModel keyed{kHostParams, 60 * kSecond, {}};
    ReferenceMeter aggregate(kHostParams, kStart);
    std::size_t full = 0;
    for (std::size_t i = 0; i < sent.size(); ++i) {
      const auto& s = sent[i];
      const std::uint64_t t = s.packet.time_ns;
      const std::string key = "10.3.0." + std::to_string(s.spec.src[3]);
      const auto& row = out.rows[i];
      ASSERT_EQ(row[2], key);
      if (s.spec.src[3] <= 5) {
        ASSERT_EQ(row[4], to_string(keyed.meter(key, t).check(t, 500))) << i;
        continue;
      }
      ++full;
      ASSERT_NE(row[5].find(";table-full"), std::string::npos) << i << " " << row[5];
      if (fallback == "aggregate") {
        ASSERT_EQ(row[4], to_string(aggregate.check(t, 500))) << i;
      } else {
        ASSERT_EQ(row[4], "-");
        ASSERT_EQ(row[5], fallback == "drop" ? "drop;table-full" : "forward;dscp=8;table-full") << i;
      }
    }
    EXPECT_EQ(out.summary["rules"][0]["keys"]["live"], 5u);
    EXPECT_EQ(out.summary["rules"][0]["keys"]["table_full_packets"], full);
  }
}

TEST(ReplayKeys, InputColorsFromPcpAndDscpMaps) {
  ScratchDir dir("tricolor-replay-maps");
  Rng rng{15};
  std::vector<Sent> sent;
  for (int i = 0; i < 4000; ++i) {
    FrameSpec spec;
    spec.src = v4(10, 4, 0, std::uint8_t(1 + rng.below(3)));
    spec.dst = v4(10, 80, 0, std::uint8_t(1 + rng.below(2)));  // .1: both maps; .2: PCP map only
    spec.dscp = std::uint8_t(rng.below(64));
    if (rng.below(2) == 0) spec.vlan = 5, spec.pcp = std::uint8_t(rng.below(8));
    spec.size = 300;
    sent.push_back(udp_packet(kStart + std::uint64_t(i) * 250'000, spec));
  }
  const std::string policy = std::string(kHostProfile) +
                             "color-map add pcp-in pcp yellow 1-3 red 0\n"
                             "color-map add dscp-in dscp yellow af12,af22 red af13,cs1\n"
                             "rule add both dst 10.80.0.1 profile host per src input map pcp-map pcp-in dscp-map dscp-in\n"
                             "rule add pcp-only dst 10.80.0.2 profile host input map pcp-map pcp-in unmapped red\n";
  const Replayed out = replay(dir, policy, sent);
  KeyedModel keyed{kHostParams, 60 * kSecond, {}};
  ReferenceMeter aggregate(kHostParams, kStart);
  auto pcp_color = [](int pcp) { return pcp == 0 ? RefColor::red : pcp <= 3 ? RefColor::yellow : RefColor::green; };
  auto dscp_color = [](int dscp) {
    return dscp == 12 || dscp == 20 ? RefColor::yellow : dscp == 14 || dscp == 8 ? RefColor::red : RefColor::green;
  };
  std::map<RefColor, std::size_t> inputs;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const FrameSpec& s = sent[i].spec;
    const std::uint64_t t = sent[i].packet.time_ns;
    const bool both = s.dst[3] == 1;
    const bool tagged = s.vlan >= 0;
    const RefColor in = tagged ? pcp_color(s.pcp) : both ? dscp_color(s.dscp) : RefColor::red;
    ++inputs[in];
    const auto& row = out.rows[i];
    ASSERT_EQ(row[3], to_string(in)) << i;
    const RefColor want = both ? keyed.meter("10.4.0." + std::to_string(s.src[3]), t).check_aware(t, 300, in)
                               : aggregate.check_aware(t, 300, in);
    ASSERT_EQ(row[4], to_string(want)) << i;
  }
  EXPECT_GT(inputs[RefColor::green], 500u);
  EXPECT_GT(inputs[RefColor::yellow], 500u);
  EXPECT_GT(inputs[RefColor::red], 500u);
}

TEST(ReplayKeys, JsonListsTheTopKeysByRedBytesOrAll) {
  ScratchDir dir("tricolor-replay-top");
  std::vector<Sent> sent;
  // Host n sends n * 30 packets of 1000 bytes at once: the more it sends, the more is red.
  for (int n = 1; n <= 20; ++n) {
    FrameSpec spec;
    spec.src = v4(10, 5, 0, std::uint8_t(n));
    spec.size = 1000;
    for (int k = 0; k < n * 30; ++k) sent.push_back(udp_packet(kStart + std::uint64_t(k) * 1000, spec));
  }
  const std::string policy = std::string(kHostProfile) + "rule add hosts profile host per src\n";
  Replayed top = replay(dir, policy, sent, "--top-keys 3");
  const auto& list = top.summary["rules"][0]["keys"]["top_by_red_bytes"];
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["key"], "10.5.0.20");
  EXPECT_EQ(list[1]["key"], "10.5.0.19");
  EXPECT_EQ(list[2]["key"], "10.5.0.18");
  EXPECT_GT(list[0]["red"]["bytes"].get<std::uint64_t>(), list[1]["red"]["bytes"].get<std::uint64_t>());
  std::uint64_t packets = 0;
  for (const auto& c : {"green", "yellow", "red"}) packets += list[0][c]["packets"].get<std::uint64_t>();
  EXPECT_EQ(packets, 600u);
  Replayed all = replay(dir, policy, sent, "--all-keys");
  EXPECT_EQ(all.summary["rules"][0]["keys"]["all"].size(), 20u);
  EXPECT_EQ(all.summary["rules"][0]["keys"]["live"], 20u);
}

}  // namespace
}  // namespace tricolor::test
