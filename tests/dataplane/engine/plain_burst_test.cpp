// Plain bursts (dataplane/engine/worker.cpp): under a set of one IPv4 entry, a burst of plain IPv4
// frames the entry matches is classified, keyed and measured straight from its frames, with no Parsed;
// and a burst all of one color-blind per-key rule has its verdicts written in the meter's loop
// (Worker::Finished). An engine that does both decides every packet as one that parses every burst
// and finishes it apart (EngineOptions::plain_bursts and meter_finishes off): verdicts, remarks, rule
// and default counters and every key's meter, over random bursts mixing plain frames with every frame that is not plain (tagged, a stripped tag, IP options,
// truncated, a length past the wire, ARP, another destination or protocol) and with plain frames of
// every kind (TCP, ICMP, fragments, a capture shorter than the wire), keys expiring, a table that
// fills, shaping and a parent; and the sets whose rule reads more of a packet are never plain. A third
// engine, whose caller reads the verdicts of mixed bursts only (Worker::VerdictsRead::when_mixed, the
// daemon's forwarder), decides every burst as whole or mixed as the others do, a mixed one verdict by
// verdict as they do, and one it splits by its mask (Worker::WholeBurst::split) bit by bit as their drops.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

#include "tests/dataplane/engine/engine_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using namespace engine_test;

policer::Params trtcm(std::uint64_t cir, std::uint64_t cbs, std::uint64_t pir, std::uint64_t pbs) {
  policer::Params p;
  p.algorithm = policer::Algorithm::trtcm;
  p.cir = cir, p.cbs = cbs, p.pir = pir, p.pbs = pbs;
  return p;
}

constexpr std::uint64_t kIdleTimeout = 4'000'000;  // ns, ticks of kHz

// The one rule: `dst 10.0.0.0/29` (hosts 1..6 of udp4's), UDP unless `any_protocol`.
Policy one_rule_policy(bool any_protocol) {
  Policy p;
  p.profiles.push_back({"key", trtcm(40'000, 3'000, 80'000, 6'000)});
  p.profiles.push_back({"parent", params_1r2c(120'000, 8'000)});
  Rule r = rule("only", 0, "key");
  r.match.dst->length = 29;
  if (!any_protocol) r.match.protocol = 17;
  r.on_color[1] = Action{};                      // yellow forwarded
  r.on_color[2] = Action{true, std::nullopt, std::nullopt};  // red dropped
  p.rules.push_back(r);
  p.default_action.dscp = 10;  // remarks: the default action reads the frame's fields
  return p;
}

enum class FrameKind {
  plain_udp, plain_tcp, plain_icmp, fragment, short_capture,                  // plain
  tagged, stripped_tag, options, truncated, past_the_wire, arp, other_host,  // not plain, or not matched
};

struct Sent {
  std::vector<std::uint8_t> bytes;
  std::uint32_t captured;
  std::uint32_t wire;
  bool stripped;
};

Sent make_frame(FrameKind kind, std::mt19937_64& random) {
  const auto host = static_cast<std::uint8_t>(1 + random() % 6);
  const auto port = static_cast<std::uint16_t>(std::array<unsigned, 4>{53, 443, 1500, 9000}[random() % 4]);
  Sent s{udp4(64 + random() % 200, kind == FrameKind::other_host ? 9 : host, port, random() % 2 == 0 ? 0 : 46,
              kind == FrameKind::tagged),
         0, 0, kind == FrameKind::stripped_tag};
  std::vector<std::uint8_t>& f = s.bytes;
  f[29] = static_cast<std::uint8_t>(random() % 4);  // one of 4 sources: 192.0.2.0..3
  constexpr std::size_t kProtocol = 23, kFlags = 20, kIhl = 14, kTcpFlags = 47;
  switch (kind) {
    case FrameKind::plain_tcp:
      f[kProtocol] = 6;
      f[kTcpFlags] = std::array<std::uint8_t, 3>{0x02, 0x10, 0x11}[random() % 3];
      break;
    case FrameKind::plain_icmp: f[kProtocol] = 1; break;
    case FrameKind::fragment: f[kFlags] = random() % 2 == 0 ? 0x20 : 0x00, f[kFlags + 1] = random() % 2 == 0 ? 0 : 8; break;
    case FrameKind::options: f[kIhl] = 0x46; break;
    case FrameKind::arp: f[12] = 0x08, f[13] = 0x06; break;
    default: break;
  }
  s.wire = static_cast<std::uint32_t>(f.size());
  s.captured = s.wire;
  if (kind == FrameKind::short_capture) s.captured = 38 + static_cast<std::uint32_t>(random() % 20);  // ports within it
  if (kind == FrameKind::truncated) s.captured = 20 + static_cast<std::uint32_t>(random() % 18);
  if (kind == FrameKind::past_the_wire) s.wire = 34 + static_cast<std::uint32_t>(random() % 10);  // total length beyond it
  return s;
}

struct Case {
  const char* name;
  KeyKind key;
  std::uint8_t ipv4_prefix;
  MeteredLength length;
  bool any_protocol;
  std::uint32_t capacity;        // of keys; small: the table fills
  KeyFallback fallback;
  bool parent;
  bool shape_red;                // red: shape max-delay 2 ms, queue 8
  bool aware;                    // color-aware (DSCP): never plain
  bool remark_yellow;            // yellow remarked: never plain
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

Policy policy_of(const Case& c) {
  Policy p = one_rule_policy(c.any_protocol);
  Rule& r = p.rules[0];
  r.per_key.kind = c.key;
  r.per_key.ipv4_prefix = c.ipv4_prefix;
  r.per_key.capacity = c.capacity;
  r.per_key.fallback = c.fallback;
  r.per_key.idle_timeout_ns = kIdleTimeout;
  r.length = c.length;
  if (c.parent) r.parent = "parent";
  if (c.shape_red) r.on_color[2] = Action{false, std::nullopt, std::nullopt, 2'000'000, 8};
  if (c.aware) r.input = InputColor::dscp;
  if (c.remark_yellow) r.on_color[1].dscp = 12;
  return p;
}

// `fast`: plain bursts, and groups finished in the meter's loop (worker.hpp, Worker::Finished), on;
// else both off, every burst parsed and finished by process() as before either.
std::unique_ptr<Engine> make(const Case& c, bool fast) {
  EngineOptions options;
  options.plain_bursts = fast;
  options.meter_finishes = fast;
  auto made = Engine::create(policy_of(c), *policer::TickRate::make(kHz), options);
  EXPECT_TRUE(made.ok()) << made.error().message;
  return made.ok() ? std::move(*made) : nullptr;
}

// Every key's meter (levels, last tick) and counters (packets, bytes by color), by key.
using KeyState = std::tuple<std::array<std::uint64_t, 2>, std::uint64_t, std::array<std::uint64_t, 3>,
                            std::array<std::uint64_t, 3>>;
std::map<MeterKey, KeyState> keys_of(const Engine& e) {
  std::map<MeterKey, KeyState> keys;
  e.for_each_key(0, [&](const Engine::LiveKey& live) {
    keys[live.key] = {{live.state.level[0], live.state.level[1]}, live.state.last, live.counters.packets,
                      live.counters.bytes};
  });
  return keys;
}

// Fills the stack below the caller with a pattern: a worker's Parsed, uninitialised where a plain
// burst builds none, would otherwise hold what the other engine's worker just parsed of the same frames
// at the same addresses, and a read of it before it is built (a full table's default action) would
// pass unseen.
[[gnu::noinline]] void scribble_stack() {
  volatile std::uint8_t below[64 * 1024];
  for (std::size_t i = 0; i < sizeof below; ++i) below[i] = 0xa5;
}

// The rule's and default counters of `fast` as `parsed`'s, and every key live in both the same. A key
// idle past its timeout may be live in one engine and swept in the other (each table's sweep meets it
// where its secret hash put it): only such keys differ.
void same_as_parsed(const Engine& parsed, const Engine& fast, const Case& c, std::uint64_t now) {
  const RuleCounters x = parsed.counters(0), y = fast.counters(0);
  EXPECT_EQ(x.packets, y.packets);
  EXPECT_EQ(x.bytes, y.bytes);
  EXPECT_EQ(x.dropped_packets, y.dropped_packets);
  EXPECT_EQ(x.dropped_bytes, y.dropped_bytes);
  EXPECT_EQ(x.keys_created + x.keys_renewed, y.keys_created + y.keys_renewed);  // as flow_cache_test says why
  EXPECT_EQ(x.table_full, y.table_full);
  EXPECT_EQ(x.shaped_packets, y.shaped_packets);
  EXPECT_EQ(x.queue_overflow_packets, y.queue_overflow_packets);
  EXPECT_EQ(x.first_tick, y.first_tick);
  EXPECT_EQ(x.last_tick, y.last_tick);
  const DefaultCounters dx = parsed.default_counters(), dy = fast.default_counters();
  EXPECT_EQ(dx.packets, dy.packets);
  EXPECT_EQ(dx.bytes, dy.bytes);
  EXPECT_EQ(dx.non_ip, dy.non_ip);
  EXPECT_EQ(dx.no_match, dy.no_match);
  EXPECT_EQ(dx.malformed, dy.malformed);
  const auto keys_a = keys_of(parsed), keys_b = keys_of(fast);
  std::size_t common = 0;
  for (const auto& [key, state] : keys_a) {
    const auto other = keys_b.find(key);
    if (other == keys_b.end()) {
      EXPECT_LT(std::get<1>(state) + kIdleTimeout, now) << "a live key only the parsing engine has";
      continue;
    }
    EXPECT_EQ(state, other->second);
    ++common;
  }
  for (const auto& [key, state] : keys_b) {
    if (!keys_a.contains(key)) {
      EXPECT_LT(std::get<1>(state) + kIdleTimeout, now) << "a live key only the plain engine has";
    }
  }
  if (c.key != KeyKind::none) {
    EXPECT_GT(common, 0u);
  }
}

class PlainBurst : public ::testing::TestWithParam<Case> {};

TEST_P(PlainBurst, DecidesAsAParsedBurstDoes) {
  const Case& c = GetParam();
  // `lazy`: as `plain`, its caller reading the verdicts of mixed bursts only (the daemon's forwarder,
  // Worker::VerdictsRead::when_mixed); its verdicts start as a pattern no verdict is.
  auto parsed = make(c, false), plain = make(c, true), lazy = make(c, true);
  ASSERT_NE(parsed, nullptr);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(lazy, nullptr);
  using WholeBurst = Worker::WholeBurst;
  constexpr std::uint8_t kUnwritten = 0xa5;
  std::size_t whole_bursts = 0, left_unwritten = 0, split_bursts = 0;
  std::mt19937_64 random(7);
  std::uint64_t now = 1'000'000;
  constexpr int kBursts = 3000;
  for (int burst = 0; burst < kBursts; ++burst) {
    // Most bursts all plain; some with one odd frame anywhere in them; some mostly odd.
    const unsigned odd_in = burst % 10 < 6 ? 0 : burst % 10 < 9 ? 40 : 3;
    const std::size_t n = 1 + random() % 32;
    std::vector<Sent> frames;
    for (std::size_t i = 0; i < n; ++i) {
      FrameKind kind = FrameKind::plain_udp;
      if (odd_in != 0 && random() % odd_in == 0) kind = static_cast<FrameKind>(1 + random() % 11);
      else if (c.any_protocol && random() % 4 == 0) kind = static_cast<FrameKind>(1 + random() % 4);
      frames.push_back(make_frame(kind, random));
    }
    std::vector<Sent> copies = frames, lazy_copies = frames;
    std::vector<PacketView> views_a, views_b, views_c;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t at = now + (random() % 4 == 0 ? i : 0);  // bursts of one tick, and not
      views_a.push_back(PacketView{frames[i].bytes.data(), frames[i].captured, frames[i].wire, at, 0, 0x0007,
                                   frames[i].stripped});
      views_b.push_back(PacketView{copies[i].bytes.data(), copies[i].captured, copies[i].wire, at, 0, 0x0007,
                                   copies[i].stripped});
      views_c.push_back(PacketView{lazy_copies[i].bytes.data(), lazy_copies[i].captured, lazy_copies[i].wire, at, 0,
                                   0x0007, lazy_copies[i].stripped});
    }
    std::vector<Verdict> a(n), b(n), v(n);
    std::memset(static_cast<void*>(v.data()), kUnwritten, n * sizeof(Verdict));
    const std::vector<Verdict> pattern = v;
    scribble_stack();
    parsed->process(views_a, a);
    scribble_stack();
    plain->process(views_b, b);
    scribble_stack();
    lazy->process(views_c, v, Worker::VerdictsRead::when_mixed);
    const WholeBurst whole = lazy->worker(0).whole_burst();
    // A burst split by its mask is a mixed one to an `every` caller.
    if (whole == WholeBurst::split) {
      ++split_bursts;
      ASSERT_EQ(parsed->worker(0).whole_burst(), WholeBurst::mixed) << "burst " << burst;
    } else {
      ASSERT_EQ(whole, parsed->worker(0).whole_burst()) << "burst " << burst;
    }
    if (whole != WholeBurst::mixed) {
      ++whole_bursts;
      left_unwritten += std::memcmp(v.data(), pattern.data(), n * sizeof(Verdict)) == 0;
    }
    for (std::size_t i = 0; i < n; ++i) {
      SCOPED_TRACE("burst " + std::to_string(burst) + " packet " + std::to_string(i));
      ASSERT_TRUE(same_verdict(a[i], b[i]));
      ASSERT_EQ(frames[i].bytes, copies[i].bytes);  // the same remarks
      ASSERT_EQ(frames[i].bytes, lazy_copies[i].bytes);
      // A whole burst's verdicts, which the caller does not read, are as whole_burst() says; a mixed
      // one's as the others'.
      if (whole == WholeBurst::forwarded) {
        ASSERT_TRUE(a[i].rule != kNoRule && !a[i].drop && !a[i].handoff && a[i].delay == 0);
      } else if (whole == WholeBurst::dropped) {
        ASSERT_TRUE(a[i].drop);
      } else if (whole == WholeBurst::split) {
        // Forwarded now or dropped, as its bit says; metered here by the rule.
        ASSERT_EQ(a[i].drop, (lazy->worker(0).dropped_mask() >> i & 1) != 0);
        ASSERT_TRUE(a[i].rule != kNoRule && !a[i].handoff && a[i].delay == 0 && !a[i].table_full);
      } else {
        ASSERT_TRUE(same_verdict(a[i], v[i]));
      }
    }
    // Now and then past the keys' idle timeout: they expire, are swept or renewed.
    now += 20'000 + random() % (burst % 200 == 199 ? 10'000'000 : 300'000);
  }
  for (const Engine* fast : {plain.get(), lazy.get()}) {
    SCOPED_TRACE(fast == lazy.get() ? "verdicts read when mixed" : "every verdict read");
    same_as_parsed(*parsed, *fast, c, now);
  }
  const RuleCounters x = parsed->counters(0);
  const DefaultCounters dx = parsed->default_counters();
  // What the case exercised: plain bursts (or none, where the rule reads more of a packet), and the
  // rest of the case's paths.
  EXPECT_EQ(parsed->worker(0).plain_bursts_taken(), 0u);
  if (c.aware || c.remark_yellow) {
    EXPECT_EQ(plain->worker(0).plain_bursts_taken(), 0u);
  } else {
    EXPECT_GT(plain->worker(0).plain_bursts_taken(), kBursts / 3);
  }
  EXPECT_GT(whole_bursts, 0u);
  // Whole plain bursts whose rule's meter alone colors them are left unwritten, and mixed ones are
  // split by a mask; any other is written.
  if (c.aware || c.remark_yellow || c.parent || c.shape_red) {
    EXPECT_EQ(left_unwritten, 0u);
    EXPECT_EQ(split_bursts, 0u);
  } else {
    EXPECT_GT(left_unwritten, 0u);
    EXPECT_GT(split_bursts, 0u);
  }
  EXPECT_GT(dx.no_match, 0u);
  EXPECT_GT(std::accumulate(dx.malformed.begin(), dx.malformed.end(), std::uint64_t{0}), 0u);
  EXPECT_GT(x.packets[1] + x.packets[2], 0u) << "the meters never said anything but green";
  if (c.key != KeyKind::none && c.capacity < 64) {
    EXPECT_GT(x.table_full, 0u);
  }
  if (c.shape_red) {
    EXPECT_GT(x.shaped_packets, 0u);
  }
}

constexpr MeteredLength kL3{LengthBase::l3, 0}, kL2Less4{LengthBase::l2, -4}, kL1More8{LengthBase::l1, 8};

INSTANTIATE_TEST_SUITE_P(
    Rules, PlainBurst,
    ::testing::Values(
        Case{"five_tuple_l3_udp", KeyKind::five_tuple, 32, kL3, false, 1u << 16, KeyFallback::aggregate, false, false, false, false},
        Case{"src31_l2_full_default", KeyKind::src, 31, kL2Less4, true, 1, KeyFallback::default_action, false, false, false, false},
        Case{"five_tuple_full_aggregate_shaped", KeyKind::five_tuple, 32, kL3, true, 8, KeyFallback::aggregate, false, true, false, false},
        Case{"src_dport_l1_full_drop", KeyKind::src_dport, 32, kL1More8, true, 4, KeyFallback::drop, true, false, false, false},
        Case{"aggregate_l3", KeyKind::none, 32, kL3, true, 1u << 16, KeyFallback::aggregate, false, false, false, false},
        Case{"aggregate_l1_parent", KeyKind::none, 32, kL1More8, true, 1u << 16, KeyFallback::aggregate, true, false, false, false},
        Case{"aggregate_l2_shaped", KeyKind::none, 32, kL2Less4, false, 1u << 16, KeyFallback::aggregate, false, true, false, false},
        Case{"color_aware_never_plain", KeyKind::five_tuple, 32, kL3, true, 1u << 16, KeyFallback::aggregate, false, false, true, false},
        Case{"remark_never_plain", KeyKind::src, 32, kL3, true, 1u << 16, KeyFallback::aggregate, false, false, false, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tricolor::dataplane
