// The XDP program against the engine, packet for packet: the object production loads, run with
// BPF_PROG_TEST_RUN, its clock set before each packet through the test clock map, and the engine
// (Engine::process, what tricolor-replay runs) given the same frames at the same ticks (hz = 1e9).
// After every packet: the same verdict, the same output frame (remarks, checksums) and every counter
// equal (each rule's per color, drops, keys; the default action's by reason). Equal counters after
// every packet mean equal colors packet by packet.
//
// Needs root (or CAP_BPF) to load the program: skipped, saying why, without it.
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/engine/engine.hpp"
#include "dataplane/xdp/xdp_policy.hpp"
#include "dataplane/xdp/xdp_program.hpp"
#include "tests/dataplane/engine/frame_builder.hpp"
#include "tests/dataplane/xdp/xdp_test_policy.hpp"

namespace tricolor::dataplane::xdp {
namespace {

using policer::Algorithm;
using policer::Unit;
using test::Bytes;
using test::FrameBuilder;
using test_policy::metered_rule;
using test_policy::one_rule_policy;

// A deterministic generator (splitmix64): the same traffic on every run.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t state_;
};

struct Packet {
  Bytes frame;
  std::uint64_t arrival = 0;
};

// Ethernet + IPv4 + UDP from 192.0.2.<src>, to 10.0.0.<dst>:<dport>, `size` bytes on the wire.
// With `tci`, an 802.1Q tag (VLAN id and PCP) before the IPv4 header.
Bytes udp4(std::size_t size, std::uint8_t src, std::uint8_t dst, std::uint16_t dport, std::uint8_t dscp, std::uint8_t ecn = 0,
           std::optional<std::uint16_t> tci = std::nullopt) {
  test::Ipv4Spec spec;
  spec.tos = static_cast<std::uint8_t>(dscp << 2 | ecn);
  spec.src = {192, 0, 2, src};
  spec.dst = {10, 0, 0, dst};
  FrameBuilder b;
  if (tci) b.vlan(0x8100, *tci);
  b.ipv4(spec).udp(1000, dport);
  const std::size_t headers = 14 + (tci ? 4 : 0) + 20 + 8;
  b.payload(size > headers ? size - headers : 0);
  return b.build().bytes;
}

Bytes udp6(std::size_t size, std::uint8_t src, std::uint8_t dscp) {
  test::Ipv6Spec spec;
  spec.traffic_class = static_cast<std::uint8_t>(dscp << 2 | 1);
  spec.src[15] = src;
  FrameBuilder b;
  b.ipv6(spec).udp(2000, 53);
  const std::size_t headers = 14 + 40 + 8;
  b.payload(size > headers ? size - headers : 0);
  return b.build().bytes;
}

// `slow`: one packet per second, so that one tick credits one 1/hz token: a meter off by the smallest
// amount it can be off by changes a color at the boundaries (boundary_traffic).
policer::Params params(Algorithm algorithm, Unit unit, bool slow = false) {
  policer::Params p;
  p.algorithm = algorithm;
  p.unit = unit;
  const bool bytes = unit == Unit::bytes;
  const std::uint64_t rate = slow ? 1 : bytes ? 1'000'000 : 1'000;  // per second
  const std::uint64_t burst = slow ? 2 : bytes ? 4'000 : 4;
  switch (algorithm) {
    case Algorithm::one_rate_two_color: p.cir = rate, p.cbs = burst; break;
    case Algorithm::srtcm: p.cir = rate, p.cbs = burst, p.ebs = 2 * burst; break;
    case Algorithm::trtcm: p.cir = rate, p.cbs = burst, p.pir = 3 * rate / 2, p.pbs = 2 * burst; break;
    case Algorithm::trtcm_4115: p.cir = rate, p.cbs = burst, p.eir = rate / 2, p.ebs = 2 * burst; break;
    case Algorithm::fixed_window: p.limit = burst, p.window = 3'000'000; break;
    case Algorithm::gcra: p.rate = rate, p.tolerance = slow ? 2'000'000'000 : 2'000'000; break;
    default: break;
  }
  return p;
}

// Traffic at about twice the byte profiles' CIR (and the packet profiles'): every color occurs.
// Some packets share a tick, some arrive a little before the previous one (a stale clock).
std::vector<Packet> traffic(std::uint64_t seed, std::size_t count, std::uint8_t sources, std::uint64_t start = 1'000'000) {
  Random random(seed);
  std::vector<Packet> packets;
  std::uint64_t now = start;
  static constexpr std::uint8_t kDscps[] = {0, 10, 12, 14, 46};
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t roll = random.below(20);
    if (roll == 0) now -= std::min<std::uint64_t>(now, random.below(50'000));  // stale
    else if (roll > 2) now += random.below(900'000);                            // 0 .. 0.9 ms
    const std::size_t size = 64 + random.below(1450);
    const auto src = static_cast<std::uint8_t>(1 + random.below(sources));
    const std::uint8_t dscp = kDscps[random.below(5)];
    const auto ecn = static_cast<std::uint8_t>(random.below(4));
    std::optional<std::uint16_t> tci;  // a quarter tagged: VLAN 7, any PCP
    if (random.below(4) == 0) tci = static_cast<std::uint16_t>(random.below(8) << 13 | 7);
    packets.push_back({random.below(8) == 0 ? udp6(size, src, dscp) : udp4(size, src, 1, 80, dscp, ecn, tci), now});
  }
  return packets;
}

class XdpExactness : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "loading a BPF program needs root (or CAP_BPF): run as root";
    LoadOptions options;
    options.test_clock = true;
    options.max_keys = 4096;
    auto loaded = XdpProgram::load(options);
    if (!loaded) GTEST_SKIP() << "BPF unavailable here: " << loaded.error().message;
    program_ = std::move(*loaded);
  }

  void start(const Policy& policy) {
    policy_ = policy;
    auto made = Engine::create(policy, *policer::TickRate::make(kHz));
    ASSERT_TRUE(made.ok()) << made.error().message;
    engine_ = std::move(*made);
    auto image = translate(policy);
    ASSERT_TRUE(image.ok()) << image.error().message;
    auto installed = program_->install(*image);
    ASSERT_TRUE(installed.ok()) << installed.error().message;
  }

  // A live change at `tick`: the tick of the next packet, when the engine's single worker first
  // processes a burst under the new set.
  void change(const Policy& policy, std::uint64_t tick) {
    policy_ = policy;
    auto updated = engine_->update(policy);
    ASSERT_TRUE(updated.ok()) << updated.error().message;
    auto image = translate(policy, program_->installed(), tick);
    ASSERT_TRUE(image.ok()) << image.error().message;
    auto installed = program_->install(*image);
    ASSERT_TRUE(installed.ok()) << installed.error().message;
  }

  // One packet through both; then everything compared. `keys_exact`: created and renewed compared
  // apart (with idle keys the engine's own sweep may have removed a key the program renews: then only
  // their sum is the same).
  void send(const Packet& packet, std::size_t index, bool keys_exact = true) {
    Bytes engine_frame = packet.frame;
    PacketView view{engine_frame.data(), static_cast<std::uint32_t>(engine_frame.size()),
                    static_cast<std::uint32_t>(engine_frame.size()), packet.arrival, 0, 0, false};
    Verdict verdict;
    engine_->process({&view, 1}, {&verdict, 1});

    ASSERT_TRUE(program_->set_test_clock(packet.arrival).ok());
    auto run = program_->test_run(packet.frame);
    ASSERT_TRUE(run.ok()) << run.error().message;
    const std::string where = "packet " + std::to_string(index) + " at tick " + std::to_string(packet.arrival);
    ASSERT_EQ(run->verdict, verdict.drop ? XDP_DROP : XDP_PASS) << where;
    if (!verdict.drop) {
      ASSERT_EQ(run->frame, engine_frame) << where << ": the output frames differ";
    }

    for (std::size_t r = 0; r < policy_.rules.size(); ++r) {
      const RuleCounters want = engine_->counters(r);
      auto got = program_->rule_counters(program_->installed()->slot_of(r));
      ASSERT_TRUE(got.ok());
      const std::string rule = where + ", rule " + policy_.rules[r].name;
      for (std::size_t c = 0; c < 3; ++c) {
        ASSERT_EQ(got->packets[c], want.packets[c]) << rule << ", color " << c;
        ASSERT_EQ(got->bytes[c], want.bytes[c]) << rule << ", color " << c;
      }
      ASSERT_EQ(got->dropped_packets, want.dropped_packets) << rule;
      ASSERT_EQ(got->dropped_bytes, want.dropped_bytes) << rule;
      ASSERT_EQ(got->table_full, want.table_full) << rule;
      if (want.metered) {
        ASSERT_EQ(got->first_tick, want.first_tick) << rule << ": the first metered packet's tick";
        ASSERT_EQ(got->last_tick, want.last_tick) << rule << ": the last metered packet's tick";
      }
      if (keys_exact) {
        ASSERT_EQ(got->keys_created, want.keys_created) << rule;
        ASSERT_EQ(got->keys_renewed, want.keys_renewed) << rule;
      } else {
        ASSERT_EQ(got->keys_created + got->keys_renewed, want.keys_created + want.keys_renewed) << rule;
      }
    }
    const DefaultCounters want = engine_->default_counters();
    auto got = program_->default_counters();
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->packets, want.packets) << where;
    ASSERT_EQ(got->bytes, want.bytes) << where;
    ASSERT_EQ(got->non_ip, want.non_ip) << where;
    ASSERT_EQ(got->no_match, want.no_match) << where;
    ASSERT_EQ(got->dropped_packets, want.dropped_packets) << where;
    ASSERT_EQ(got->dropped_bytes, want.dropped_bytes) << where;
    for (std::size_t e = 0; e < kParseErrors; ++e)
      ASSERT_EQ(got->malformed[e], want.malformed[e]) << where << ", " << to_string(static_cast<ParseError>(e));
  }

  void send_all(const std::vector<Packet>& packets, bool keys_exact = true) {
    for (std::size_t i = 0; i < packets.size(); ++i) {
      send(packets[i], i, keys_exact);
      if (HasFatalFailure()) return;
    }
  }

  // Every color occurred (the traffic was not too light or too heavy to tell anything).
  void expect_every_color(std::size_t rule, bool three_colors) {
    const RuleCounters c = engine_->counters(rule);
    EXPECT_GT(c.packets[0], 0u);
    if (three_colors) {
      EXPECT_GT(c.packets[1], 0u);
    }
    EXPECT_GT(c.packets[2], 0u);
  }

  std::unique_ptr<XdpProgram> program_;
  std::unique_ptr<Engine> engine_;
  Policy policy_;
};

constexpr Algorithm kAlgorithms[] = {Algorithm::one_rate_two_color, Algorithm::srtcm, Algorithm::trtcm,
                                     Algorithm::trtcm_4115, Algorithm::fixed_window, Algorithm::gcra};

bool three_colors(Algorithm a) {
  return a == Algorithm::srtcm || a == Algorithm::trtcm || a == Algorithm::trtcm_4115;
}

// Each algorithm, byte and packet mode, blind and aware (RFC 2597 DSCPs), one aggregate meter.
TEST_F(XdpExactness, AggregateMetersEveryAlgorithmUnitAndInput) {
  std::uint64_t seed = 1;
  for (const Algorithm algorithm : kAlgorithms) {
    for (const Unit unit : {Unit::bytes, Unit::packets}) {
      for (const InputColor input : {InputColor::blind, InputColor::dscp}) {
        SCOPED_TRACE(std::string(policer::to_string(algorithm)) + " " + std::string(policer::to_string(unit)) +
                     (input == InputColor::blind ? " blind" : " aware"));
        start(one_rule_policy(params(algorithm, unit), input));
        if (HasFatalFailure()) return;
        send_all(traffic(seed++, 400, 1));
        if (HasFatalFailure()) return;
        expect_every_color(0, three_colors(algorithm));
        program_.reset();
        SetUp();
      }
    }
  }
}

// Greedy traffic at the exact boundaries: each packet arrives at the first tick at which the meter
// would let it through green, or one tick before. Random traffic almost never lands there, so a
// refill off by one tick, or a comparison off by one token's fraction, would pass it; this would not.
// The ticks are found on a mirror of the meter (policer::Meter, the library), by bisection: every
// algorithm here colors a packet green no later for its arriving later.
std::vector<Packet> boundary_traffic(const policer::Profile& profile, std::uint64_t seed, std::size_t count) {
  policer::Meter mirror(profile, 0);
  Random random(seed);
  std::vector<Packet> packets;
  std::uint64_t now = 1'000'000;
  for (std::size_t i = 0; i < count; ++i) {
    const auto size = static_cast<std::uint32_t>(64 + random.below(1450));
    const auto green_at = [&](std::uint64_t t) {
      policer::Meter copy = mirror;
      return copy.check_blind(t, size) == Color::green;
    };
    std::uint64_t low = now, high = now + 64 * kHz;  // green by `high`: every bucket is full by then
    while (low < high) {
      const std::uint64_t mid = low + (high - low) / 2;
      if (green_at(mid)) high = mid;
      else low = mid + 1;
    }
    const std::uint64_t arrival = std::max(now, low - random.below(2));
    mirror.check_blind(arrival, size);
    now = arrival;
    packets.push_back({udp4(size, 1, 1, 80, 0), arrival});
  }
  return packets;
}

TEST_F(XdpExactness, AggregateMetersAtTheBoundaries) {
  std::uint64_t seed = 500;
  struct Mode {
    Unit unit;
    bool slow;
  };
  for (const Algorithm algorithm : kAlgorithms) {
    for (const Mode mode : {Mode{Unit::bytes, false}, Mode{Unit::packets, false}, Mode{Unit::packets, true}}) {
      SCOPED_TRACE(std::string(policer::to_string(algorithm)) + " " + std::string(policer::to_string(mode.unit)) +
                   (mode.slow ? " at one per second" : ""));
      const policer::Params p = params(algorithm, mode.unit, mode.slow);
      start(one_rule_policy(p, InputColor::blind));
      if (HasFatalFailure()) return;
      const auto profile = policer::Profile::make(p, *policer::TickRate::make(kHz));
      ASSERT_TRUE(profile.ok());
      send_all(boundary_traffic(*profile, seed++, 300));
      if (HasFatalFailure()) return;
      const RuleCounters c = engine_->counters(0);
      EXPECT_GT(c.packets[0], 100u);
      EXPECT_GT(c.packets[1] + c.packets[2], 30u);  // the tick before: not green
      program_.reset();
      SetUp();
    }
  }
}

// Per-key meters (by source /32 and per /24 of IPv6 /120, and five-tuple), every algorithm.
TEST_F(XdpExactness, PerKeyMetersEveryAlgorithm) {
  std::uint64_t seed = 100;
  for (const Algorithm algorithm : kAlgorithms) {
    for (const KeyKind kind : {KeyKind::src, KeyKind::five_tuple}) {
      SCOPED_TRACE(std::string(policer::to_string(algorithm)) + (kind == KeyKind::src ? " by source" : " by 5-tuple"));
      PerKey per_key;
      per_key.kind = kind;
      per_key.ipv6_prefix = 120;
      per_key.capacity = 1024;
      start(one_rule_policy(params(algorithm, Unit::bytes), InputColor::dscp, per_key));
      if (HasFatalFailure()) return;
      send_all(traffic(seed++, 400, 4));
      if (HasFatalFailure()) return;
      EXPECT_GE(engine_->counters(0).keys_created, 4u);
      program_.reset();
      SetUp();
    }
  }
}

// A table of 3 keys and 8 sources: new keys take the fallback (each kind), counted as table_full;
// with a parent meter above (which unmetered packets skip).
TEST_F(XdpExactness, FullKeyTableTakesTheFallback) {
  for (const KeyFallback fallback : {KeyFallback::aggregate, KeyFallback::default_action, KeyFallback::drop}) {
    for (const bool parent : {false, true}) {
      SCOPED_TRACE("fallback " + std::to_string(static_cast<int>(fallback)) + (parent ? " with a parent" : ""));
      PerKey per_key;
      per_key.kind = KeyKind::src;
      per_key.capacity = 3;
      per_key.fallback = fallback;
      Policy policy = one_rule_policy(params(Algorithm::srtcm, Unit::bytes), InputColor::blind, per_key);
      if (parent) {
        policy.profiles.push_back({"parent", params(Algorithm::trtcm, Unit::bytes)});
        policy.rules[0].parent = "parent";
      }
      start(policy);
      if (HasFatalFailure()) return;
      send_all(traffic(77, 300, 8));
      if (HasFatalFailure()) return;
      EXPECT_GT(engine_->counters(0).table_full, 0u);
      EXPECT_EQ(program_->live_keys(0), 3u);
      program_.reset();
      SetUp();
    }
  }
}

// Keys idle past the timeout start afresh (renewed in place here; the engine's sweep may have removed
// and then created them: their sum is compared).
TEST_F(XdpExactness, IdleKeysStartAfresh) {
  PerKey per_key;
  per_key.kind = KeyKind::src;
  per_key.idle_timeout_ns = 2'000'000;
  per_key.capacity = 1024;
  start(one_rule_policy(params(Algorithm::trtcm, Unit::bytes), InputColor::blind, per_key));
  if (HasFatalFailure()) return;
  send_all(traffic(5, 500, 6), /*keys_exact=*/false);
  if (HasFatalFailure()) return;
  // One key at the timeout's edges: idle one tick short of it (kept), then exactly it (afresh).
  const std::uint64_t idle = per_key.idle_timeout_ns, t = 10'000'000'000;
  for (const std::uint64_t at : {t, t + idle - 1, t + 2 * idle - 1, t + 2 * idle}) {
    send({udp4(1'500, 50, 1, 80, 0), at}, 0, /*keys_exact=*/false);
    if (HasFatalFailure()) return;
  }
  const RuleCounters c = engine_->counters(0);
  EXPECT_GT(c.keys_created + c.keys_renewed, 6u);
}

// Hierarchy and several rules: first match, a parent over an aggregate child, color maps (PCP for
// tagged frames, DSCP otherwise), actions by (input, output) pair, L1 and L3 lengths with adjustments.
TEST_F(XdpExactness, RulesParentsColorMapsAndLengths) {
  Policy policy;
  policy.profiles.push_back({"child", params(Algorithm::trtcm_4115, Unit::bytes)});
  policy.profiles.push_back({"parent", params(Algorithm::srtcm, Unit::bytes)});
  policy.profiles.push_back({"pps", params(Algorithm::trtcm, Unit::packets)});
  ColorMap dscp_map{"d", ColorMapKind::dscp, {}};
  dscp_map.colors[10] = Color::yellow;
  dscp_map.colors[46] = Color::red;
  policy.color_maps.push_back(dscp_map);
  ColorMap pcp_map{"p", ColorMapKind::pcp, {}};
  pcp_map.colors[3] = Color::yellow;
  pcp_map.colors[5] = Color::red;
  policy.color_maps.push_back(pcp_map);
  Rule ipv6 = metered_rule("v6", "pps", InputColor::blind);
  Prefix v6;
  v6.ipv6 = true;
  v6.address = {0x20, 0x01, 0x0d, 0xb8};
  v6.length = 32;
  ipv6.match.dst.reset();
  ipv6.match.src = v6;
  ipv6.on_color[0].dscp = 40;
  ipv6.length = {LengthBase::l3, -8};
  policy.rules.push_back(ipv6);
  Rule child = metered_rule("child", "child", InputColor::mapped);
  child.parent = "parent";
  child.dscp_map = "d";
  child.pcp_map = "p";  // tagged frames: by PCP; the others by DSCP
  child.length = {LengthBase::l1, 0};
  child.match.src_ports = {{900, 1100}};
  child.match.dst_ports = {{53, 53}, {80, 80}};
  child.on_pair[1][1] = Action{false, 22, std::nullopt};
  child.on_pair[0][2] = Action{false, 14, std::nullopt};  // a green packet made red is remarked, not dropped
  policy.rules.push_back(child);
  Rule rest = metered_rule("rest", "pps", InputColor::blind);
  rest.match.dscp = {0, 14};
  policy.rules.push_back(rest);
  policy.default_action.dscp = 8;
  start(policy);
  if (HasFatalFailure()) return;
  send_all(traffic(9, 800, 3));
  if (HasFatalFailure()) return;
  expect_every_color(1, true);
  EXPECT_GT(engine_->counters(0).packets[0], 0u);
}

Prefix v6prefix() {
  Prefix p;
  p.ipv6 = true;
  p.address = {0x20, 0x01, 0x0d, 0xb8};
  p.length = 32;
  return p;
}

// Parse cases and the default action's reasons: non-IP, each malformed kind XDP can be given (a test
// run needs 14 bytes: no truncated Ethernet), tags, IPv4 options, IPv6 extension headers, fragments.
TEST_F(XdpExactness, ParseCasesAndDefaultReasons) {
  Policy policy;
  policy.profiles.push_back({"meter", params(Algorithm::srtcm, Unit::packets)});
  Rule udp = metered_rule("udp", "meter", InputColor::blind);
  udp.match.protocol = 17;
  udp.match.dst_ports = {{53, 53}};
  policy.rules.push_back(udp);
  Rule any = metered_rule("any", "meter", InputColor::blind);
  any.match.dst.reset();
  any.match.vlan = 7;
  policy.rules.push_back(any);
  Rule tcp80 = metered_rule("tcp80", "meter", InputColor::blind);  // fragments have no ports: never here
  tcp80.match.dst.reset();
  tcp80.match.protocol = 6;
  tcp80.match.dst_ports = {{80, 80}};
  tcp80.match.src = v6prefix();
  policy.rules.push_back(tcp80);
  Rule v6 = metered_rule("v6frag", "meter", InputColor::blind);
  v6.match.dst.reset();
  v6.match.protocol = 6;
  policy.rules.push_back(v6);
  policy.default_action.dscp = 8;
  start(policy);
  if (HasFatalFailure()) return;

  std::vector<Bytes> frames;
  test::Ipv4Spec v4;
  v4.dst = {10, 0, 0, 9};
  test::Ipv6Spec v6spec;
  frames.push_back(FrameBuilder().ether_payload(0x0806, 46).build().bytes);  // ARP: non-IP
  frames.push_back(FrameBuilder().ipv4(v4).udp(5, 53).payload(20).build().bytes);
  frames.push_back(FrameBuilder().vlan(0x8100, 7).ipv4(v4).udp(5, 53).payload(20).build().bytes);
  frames.push_back(FrameBuilder().vlan(0x88a8, 7).vlan(0x8100, 9).ipv4(v4).tcp(5, 80).payload(20).build().bytes);
  frames.push_back(FrameBuilder().vlan(0x88a8, 7).vlan(0x8100, 9).vlan(0x8100, 9).ipv4(v4).udp(5, 53).build().bytes);
  test::Ipv4Spec options = v4;
  options.option_words = 3;
  frames.push_back(FrameBuilder().ipv4(options).udp(5, 53).payload(30).build().bytes);
  test::Ipv4Spec fragment = v4;
  fragment.flags_fragment = 0x2000;
  frames.push_back(FrameBuilder().ipv4(fragment).udp(5, 53).payload(30).build().bytes);  // first fragment: no ports
  fragment.flags_fragment = 0x0010;
  frames.push_back(FrameBuilder().ipv4(fragment).payload(30).build().bytes);
  frames.push_back(FrameBuilder().ipv6(v6spec).ipv6_options(0).ipv6_options(43, 16).ipv6_ah().ipv6_options(60).tcp(5, 80).payload(10).build().bytes);
  frames.push_back(FrameBuilder().ipv6(v6spec).ipv6_fragment(0, true).tcp(5, 80).payload(10).build().bytes);
  frames.push_back(FrameBuilder().ipv6(v6spec).ipv6_fragment(10, false).payload(10).build().bytes);
  frames.push_back(FrameBuilder().ipv6(v6spec).ipv6_fragment(0, false).udp(5, 53).payload(10).build().bytes);  // atomic
  {
    FrameBuilder b;
    b.ipv6(v6spec);
    for (int i = 0; i < 9; ++i) b.ipv6_options(60);
    frames.push_back(b.tcp(1, 2).build().bytes);  // chain too long
  }
  frames.push_back(FrameBuilder().ipv6(v6spec).ip_payload(50, 40).build().bytes);  // ESP ends the chain
  frames.push_back(FrameBuilder().ipv4(v4).ip_payload(1, 30).build().bytes);        // ICMP: no ports
  // Malformed, one of each kind a frame of 14 bytes or more can be.
  const Bytes good4 = FrameBuilder().ipv4(v4).udp(5, 53).payload(20).build().bytes;
  const Bytes good6 = FrameBuilder().ipv6(v6spec).ipv6_options(0).udp(5, 53).payload(20).build().bytes;
  frames.push_back(Bytes(good4.begin(), good4.begin() + 30));                     // truncated IPv4
  frames.push_back(Bytes(good4.begin(), good4.begin() + 40));                     // truncated L4 (wire = captured)
  Bytes bad = good4;
  bad[14] = 0x65;
  frames.push_back(bad);  // version 6 in an IPv4 EtherType
  bad = good4;
  bad[14] = 0x44;
  frames.push_back(bad);  // IHL 4
  bad = good4;
  bad[16] = 0x7f;
  frames.push_back(bad);  // total length beyond the frame
  frames.push_back(Bytes(good6.begin(), good6.begin() + 50));  // truncated IPv6
  bad = good6;
  bad[14] = 0x45;
  frames.push_back(bad);  // version 4 in an IPv6 EtherType
  bad = good6;
  bad[18] = 0x7f;
  frames.push_back(bad);  // payload length beyond the frame
  frames.push_back(Bytes(good6.begin(), good6.begin() + 58));  // extension header cut short
  Bytes tagged = FrameBuilder().vlan(0x8100, 7).ipv4(v4).udp(5, 53).build().bytes;
  frames.push_back(Bytes(tagged.begin(), tagged.begin() + 16));  // truncated VLAN tag
  // Ethernet padding after a short datagram holds no ports: a UDP header in the pad is not read.
  Bytes padded = FrameBuilder().ipv4(v4).ip_payload(17, 2).build().bytes;
  padded.resize(60, 0);
  frames.push_back(padded);

  std::uint64_t now = 1'000;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    send({frames[i], now += 1'000'000}, i);
    if (HasFatalFailure()) return;
  }
  const DefaultCounters d = engine_->default_counters();
  EXPECT_EQ(d.non_ip, 1u);
  EXPECT_GT(d.no_match, 0u);
  std::size_t kinds = 0;
  for (std::size_t e = 1; e < kParseErrors; ++e) kinds += d.malformed[e] != 0;
  EXPECT_GE(kinds, 10u);  // every kind but truncated Ethernet and, at most, one other
}

// A live rate change: the translated profile replaced while the levels are kept (credited at the old
// rate up to the change's tick, clamped to the new sizes), for aggregate, per-key and parent meters;
// then a change of algorithm, which starts the meters afresh.
TEST_F(XdpExactness, LiveRateChangeKeepsLevels) {
  PerKey per_key;
  per_key.kind = KeyKind::src;
  per_key.capacity = 1024;
  Policy policy;
  policy.profiles.push_back({"agg", params(Algorithm::trtcm, Unit::bytes)});
  policy.profiles.push_back({"key", params(Algorithm::srtcm, Unit::bytes)});
  policy.profiles.push_back({"parent", params(Algorithm::trtcm_4115, Unit::bytes)});
  Rule keyed = metered_rule("keyed", "key", InputColor::blind);
  keyed.per_key = per_key;
  keyed.parent = "parent";
  Prefix src;
  src.address = {192, 0, 2, 0};
  src.length = 30;  // sources 1..3
  keyed.match.src = src;
  policy.rules.push_back(keyed);
  policy.rules.push_back(metered_rule("agg", "agg", InputColor::blind));
  policy.default_action.dscp = 8;
  start(policy);
  if (HasFatalFailure()) return;

  const std::vector<Packet> packets = traffic(31, 900, 6);
  for (std::size_t i = 0; i < packets.size(); ++i) {
    if (i == 300) {  // slower and smaller everywhere
      Policy slower = policy;
      slower.profiles[0].params.cir /= 2;
      slower.profiles[0].params.cbs /= 4;
      slower.profiles[1].params.cir = 300'000;
      slower.profiles[1].params.ebs = 1'000;
      slower.profiles[2].params.eir = 2'000'000;
      change(slower, packets[i].arrival);
      policy = slower;
    }
    if (i == 600) {  // another algorithm for the keys: afresh
      Policy other = policy;
      other.profiles[1].params = params(Algorithm::gcra, Unit::bytes);
      change(other, packets[i].arrival);
    }
    if (HasFatalFailure()) return;
    send(packets[i], i);
    if (HasFatalFailure()) return;
  }
  expect_every_color(0, true);
  EXPECT_GT(engine_->counters(1).packets[1], 0u);
}

// A rule's meters, keys and counters follow its name, not its position: a change that deletes the
// first rule and inserts another before the rest keeps every other rule's levels, keys and counters,
// as the engine does; a later change gives the deleted rule's slot to a new rule, with its keys gone
// and its counters and meter started afresh.
TEST_F(XdpExactness, RulesKeepTheirMetersByNameAcrossDeletesAndInserts) {
  PerKey per_src;
  per_src.kind = KeyKind::src;
  per_src.capacity = 1024;
  const auto from = [](std::uint8_t last, std::uint8_t length) {
    Prefix p;
    p.address = {192, 0, 2, last};
    p.length = length;
    return p;
  };
  Policy policy;
  policy.profiles.push_back({"agg", params(Algorithm::trtcm, Unit::bytes)});
  policy.profiles.push_back({"key", params(Algorithm::srtcm, Unit::bytes)});
  Rule first = metered_rule("first", "key", InputColor::blind);  // source 1, per key
  first.match.src = from(1, 32);
  first.per_key = per_src;
  Rule keyed = metered_rule("keyed", "key", InputColor::blind);  // sources 1..3 (2 and 3 while first is there)
  keyed.match.src = from(0, 30);
  keyed.per_key = per_src;
  policy.rules = {first, keyed, metered_rule("agg", "agg", InputColor::blind)};
  policy.default_action.dscp = 8;
  start(policy);
  if (HasFatalFailure()) return;
  const auto slot = [&](const std::string& name) {
    const RuleSetImage& image = *program_->installed();
    for (std::size_t i = 0; i < image.names.size(); ++i)
      if (image.names[i] == name) return image.slot_of(i);
    ADD_FAILURE() << "no rule " << name;
    return std::uint32_t{0};
  };
  const std::uint32_t first_slot = slot("first"), keyed_slot = slot("keyed"), agg_slot = slot("agg");

  const std::vector<Packet> packets = traffic(47, 900, 6);
  for (std::size_t i = 0; i < packets.size(); ++i) {
    if (i == 300) {  // `first` deleted, `inserted` (source 2, aggregate) put before the rest
      Rule inserted = metered_rule("inserted", "agg", InputColor::blind);
      inserted.match.src = from(2, 32);
      policy.rules = {inserted, keyed, metered_rule("agg", "agg", InputColor::blind)};
      change(policy, packets[i].arrival);
      if (HasFatalFailure()) return;
      EXPECT_EQ(slot("keyed"), keyed_slot);
      EXPECT_EQ(slot("agg"), agg_slot);
      EXPECT_NE(slot("inserted"), first_slot) << "a deleted rule's slot is not reused in the same change";
    }
    if (i == 600) {  // `again` (source 3, aggregate) first: it takes the slot `first` left
      Rule again = metered_rule("again", "agg", InputColor::blind);
      again.match.src = from(3, 32);
      policy.rules.insert(policy.rules.begin(), again);
      change(policy, packets[i].arrival);
      if (HasFatalFailure()) return;
      EXPECT_EQ(slot("again"), first_slot);
      auto stale = program_->keys_of(first_slot);
      ASSERT_TRUE(stale.ok());
      EXPECT_TRUE(stale->empty()) << "the deleted rule's keys are gone";
      EXPECT_EQ(program_->live_keys(first_slot), 0u);
    }
    send(packets[i], i);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(engine_->counters(0).packets[0], 0u);  // `again` metered afresh, equal to the engine
  EXPECT_GT(engine_->counters(2).packets[0], 0u);  // `keyed` metered throughout
}

// Two changes between two packets of the same meters: each meter is credited at the first rate up to
// the first change, at the second between the changes, at the third after (one step of history is
// what the program keeps; the aggregate and parent meters catch up by version, the keys by tick).
// Every meter is drained first, so the credit decides the colors.
TEST_F(XdpExactness, ChangesBetweenTwoPacketsOfAMeter) {
  PerKey per_key;
  per_key.kind = KeyKind::src;
  per_key.capacity = 16;
  Policy policy;
  policy.profiles.push_back({"meter", params(Algorithm::trtcm, Unit::bytes)});
  policy.profiles.push_back({"parent", params(Algorithm::trtcm_4115, Unit::bytes)});
  Rule keyed = metered_rule("keyed", "meter", InputColor::blind);
  Prefix src;
  src.address = {192, 0, 2, 0};
  src.length = 30;  // sources 1..3
  keyed.match.src = src;
  keyed.per_key = per_key;
  policy.rules.push_back(keyed);
  Rule aggregate = metered_rule("aggregate", "meter", InputColor::blind);
  aggregate.parent = "parent";
  policy.rules.push_back(aggregate);
  start(policy);
  if (HasFatalFailure()) return;

  const Bytes arp = FrameBuilder().ether_payload(0x0806, 46).build().bytes;
  std::size_t index = 0;
  const auto burst = [&](std::uint64_t at, std::size_t each, std::size_t size) {
    for (std::size_t k = 0; k < each; ++k) {
      for (const std::uint8_t source : {1, 2, 5}) {  // two keys, and the aggregate
        send({udp4(size, source, 1, 80, 0), at}, index++);
        if (HasFatalFailure()) return;
      }
    }
  };
  // A change takes effect at the tick of the next packet the engine's worker sees: an ARP frame here.
  const auto change_at = [&](std::uint64_t at, std::uint64_t cir, std::uint64_t eir) {
    Policy next = policy;
    next.profiles[0].params.cir = cir;
    next.profiles[0].params.pir = 2 * cir;
    next.profiles[1].params.eir = eir;
    change(next, at);
    if (HasFatalFailure()) return;
    policy = next;
    send({arp, at}, index++);
  };
  // Drained: C 1200, P 1000 bytes left. Then credited 1000 and 2000 (1 ms at the first rates), 100
  // and 200 (1 ms at the second), 1500 and 3000 (0.5 ms at the third): C 3800, P 6200, where starting
  // afresh (C 4000) or at the newest rate alone would give other colors to four 1000-byte packets.
  burst(1'000'000, 6, 1'400);
  change_at(2'000'000, 100'000, 200'000);      // ten times slower, 1 ms after the drain
  change_at(3'000'000, 3'000'000, 3'000'000);  // then faster again
  burst(3'500'000, 4, 1'000);
  if (HasFatalFailure()) return;
  // Nine more changes than the history holds: the meters missed a forgotten one and start afresh.
  for (std::uint64_t k = 1; k <= 9; ++k) change_at(3'500'000 + k * 10'000, 1'000'000 + k, 1'000'000 + k);
  burst(4'000'000, 5, 1'000);
  if (HasFatalFailure()) return;
  EXPECT_GT(engine_->counters(0).packets[0], 0u);
  EXPECT_GT(engine_->counters(0).packets[2], 0u);
}

// GCRA's lead is paid at the old rate up to the change, at the new one after: 1 MB/s, tolerance 2 ms
// (2001 bytes of lead allowed), drained to a lead of 2000 bytes at 1 ms; at 1.5 ms 100 kB/s, tolerance
// 20 ms (the same 2001); at 2.5 ms the lead is 2000 - 500 - 100 = 1400, and 500 bytes pass (paid at
// the new rate all along, the lead would be 1850, and they would not).
TEST_F(XdpExactness, GcraLeadAcrossAChange) {
  policer::Params p = params(Algorithm::gcra, Unit::bytes);
  Policy policy = one_rule_policy(p, InputColor::blind);
  start(policy);
  if (HasFatalFailure()) return;
  std::size_t index = 0;
  for (int k = 0; k < 3; ++k) send({udp4(1'000, 1, 1, 80, 0), 1'000'000}, index++);
  if (HasFatalFailure()) return;
  p.rate = 100'000;
  p.tolerance = 20'000'000;
  policy.profiles[0].params = p;
  change(policy, 1'500'000);
  if (HasFatalFailure()) return;
  send({FrameBuilder().ether_payload(0x0806, 46).build().bytes, 1'500'000}, index++);  // the change's tick
  const std::size_t size = 500;  // on the wire, and metered (L2)
  send({udp4(size, 1, 1, 80, 0), 2'500'000}, index++);
  if (HasFatalFailure()) return;
  EXPECT_EQ(engine_->counters(0).packets[0], 3u);  // two of the drain, and this one
}

// Live changes within each algorithm's family (rates, sizes, a window's limit and length, GCRA's
// tolerance) and across families, for an aggregate and a per-key rule, under random traffic.
TEST_F(XdpExactness, LiveChangesOfEveryAlgorithm) {
  std::uint64_t seed = 900;
  for (const Algorithm algorithm : kAlgorithms) {
    SCOPED_TRACE(std::string(policer::to_string(algorithm)));
    PerKey per_key;
    per_key.kind = KeyKind::src;
    per_key.capacity = 64;
    Policy policy;
    policer::Params heavy = params(algorithm, Unit::bytes);  // a quarter of the rate: meters are never idle
    heavy.cir /= 4, heavy.pir /= 4, heavy.eir /= 4, heavy.rate /= 4, heavy.limit /= 4;
    policy.profiles.push_back({"meter", heavy});
    Rule keyed = metered_rule("keyed", "meter", InputColor::dscp);
    Prefix src;
    src.address = {192, 0, 2, 0};
    src.length = 30;  // sources 1..3
    keyed.match.src = src;
    keyed.per_key = per_key;
    policy.rules.push_back(keyed);
    policy.rules.push_back(metered_rule("aggregate", "meter", InputColor::dscp));
    start(policy);
    if (HasFatalFailure()) return;
    const std::vector<Packet> packets = traffic(seed++, 450, 5);
    for (std::size_t i = 0; i < packets.size(); ++i) {
      if (i == 150 || i == 300 || i == 400) {
        Policy next = policy;
        policer::Params& p = next.profiles[0].params;
        if (i == 150) {  // within the family: smaller and slower, or larger and faster
          p.cir /= 2, p.cbs /= 2, p.pir /= 2, p.eir *= 2, p.ebs /= 2, p.pbs /= 2;
          p.rate /= 2, p.tolerance *= 3, p.limit /= 2, p.window *= 2;
        } else if (i == 300) {  // another family: the same algorithm in packets; afresh
          p = params(algorithm, Unit::packets);
        } else {  // another family: another algorithm; afresh
          p = params(algorithm == Algorithm::srtcm ? Algorithm::trtcm : Algorithm::srtcm, Unit::packets);
        }
        change(next, packets[i].arrival);
        if (HasFatalFailure()) return;
        policy = next;
      }
      send(packets[i], i);
      if (HasFatalFailure()) return;
    }
    program_.reset();
    SetUp();
  }
}

// What the program cannot run is refused before anything is loaded, naming the rule and why.
TEST(XdpTranslation, RefusesWhatTheProgramCannotRun) {
  const auto refused = [](const Policy& policy) {
    auto image = translate(policy);
    EXPECT_FALSE(image.ok());
    return image.ok() ? std::string() : image.error().message;
  };
  Policy base = one_rule_policy(params(Algorithm::srtcm, Unit::bytes), InputColor::blind);
  EXPECT_TRUE(translate(base).ok());

  Policy pcp = base;
  pcp.rules[0].on_color[1].pcp = 3;
  EXPECT_NE(refused(pcp).find("rule metered"), std::string::npos);
  EXPECT_NE(refused(pcp).find("PCP"), std::string::npos);

  Policy sliding = base;
  sliding.profiles[0].params = policer::Params{};
  sliding.profiles[0].params.algorithm = Algorithm::sliding_window;
  sliding.profiles[0].params.limit = 10;
  sliding.profiles[0].params.window = 1'000'000;
  sliding.profiles[0].params.buckets = 2;
  EXPECT_NE(refused(sliding).find("sliding"), std::string::npos);

  Policy cluster = base;
  cluster.rules[0].cluster = cluster.profiles[0].name;
  EXPECT_NE(refused(cluster).find("a cluster meter"), std::string::npos);

  Policy flows = base;  // flows per key (issue 27): no flow tables in the program
  flows.rules[0].per_key.kind = KeyKind::src;
  flows.rules[0].per_key.max_flows = 100;
  EXPECT_EQ(refused(flows), "rule metered: the XDP dataplane cannot run it: max-flows 100 (concurrent flows per key), "
                            "whose flow tables the XDP program does not keep");

  Policy ports = base;
  ports.rules[0].match.ports = {1};
  EXPECT_NE(refused(ports).find("ingress ports"), std::string::npos);

  Policy many = base;
  for (std::size_t i = 1; i <= kMaxRules; ++i) {
    Rule r = base.rules[0];
    r.name = "r" + std::to_string(i);
    many.rules.push_back(r);
  }
  EXPECT_NE(refused(many).find("at most 64 rules"), std::string::npos);
  EXPECT_NE(refused(many).find("r64"), std::string::npos);
  many.rules.pop_back();
  EXPECT_TRUE(translate(many).ok());
}

// Slots follow names: kept rules keep theirs wherever they move, new ones take the lowest free; a
// slot freed by a change is not free in that change; 64 slots in all.
TEST(XdpTranslation, SlotsFollowRuleNames) {
  const Policy base = one_rule_policy(params(Algorithm::srtcm, Unit::bytes), InputColor::blind);
  const auto named = [&](std::initializer_list<const char*> names) {
    Policy p = base;
    p.rules.clear();
    for (const char* name : names) {
      Rule r = base.rules[0];
      r.name = name;
      p.rules.push_back(r);
    }
    return p;
  };
  const auto slots = [](const RuleSetImage& image) {
    std::vector<std::uint32_t> s;
    for (std::size_t i = 0; i < image.rules.size(); ++i) s.push_back(image.slot_of(i));
    return s;
  };
  auto one = translate(named({"a", "b", "c"}));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(slots(*one), (std::vector<std::uint32_t>{0, 1, 2}));
  auto two = translate(named({"c", "d", "a"}), &*one);  // b deleted, d new, c and a moved
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(slots(*two), (std::vector<std::uint32_t>{2, 3, 0}));
  auto three = translate(named({"e", "c", "d", "a"}), &*two);  // b's slot free again
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(slots(*three), (std::vector<std::uint32_t>{1, 2, 3, 0}));

  Policy full = base;
  full.rules.clear();
  for (std::size_t i = 0; i < kMaxRules; ++i) {
    Rule r = base.rules[0];
    r.name = "r" + std::to_string(i);
    full.rules.push_back(r);
  }
  auto all = translate(full);
  ASSERT_TRUE(all.ok());
  Policy renamed = full;
  renamed.rules[5].name = "renamed";  // a new rule while the 64 slots are all in use
  auto refused = translate(renamed, &*all);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("rule renamed"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("no free rule slot"), std::string::npos) << refused.error().message;
  Policy fewer = full;
  fewer.rules.erase(fewer.rules.begin() + 5);
  auto next = translate(fewer, &*all);
  ASSERT_TRUE(next.ok());
  auto back = translate(renamed, &*next);  // r5's slot, freed by the change before, now taken
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->slot_of(5), 5u);
}

// The translated profile is the engine's, field for field.
TEST(XdpTranslation, ProfileIsTheEnginesProfile) {
  for (const Algorithm algorithm : kAlgorithms) {
    for (const Unit unit : {Unit::bytes, Unit::packets}) {
      const auto profile = policer::Profile::make(params(algorithm, unit), *policer::TickRate::make(kHz));
      ASSERT_TRUE(profile.ok());
      const txdp_profile x = to_xdp(*profile);
      for (std::uint32_t length : {0u, 1u, 64u, 1500u, 1u << 30, (1u << 30) + 5, UINT32_MAX}) {
        const std::uint64_t capped = std::min<std::uint64_t>(length, (std::uint64_t{1} << 30) + 1);
        EXPECT_EQ(capped * x.cost_per_byte + x.cost_per_packet, profile->cost(length));
      }
      for (std::size_t b = 0; b < 2; ++b) {
        EXPECT_EQ(x.size[b], profile->size(b));
        EXPECT_EQ(x.rate[b], profile->rate(b));
        EXPECT_EQ(x.fill_ticks[b], profile->fill_ticks(b));
      }
      EXPECT_EQ(x.limit, profile->limiter().limit);
      EXPECT_EQ(x.window_ticks, profile->limiter().ticks);
    }
  }
}

}  // namespace
}  // namespace tricolor::dataplane::xdp
