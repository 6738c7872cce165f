// The engine on frames built here: metered lengths, default actions and their counters, pair actions,
// policy updates that keep each rule's meter by name (levels carried over, not reset), and updates
// that cannot be made (limits, memory) leaving the engine as it was; per-key rules' memory.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "dataplane/engine/engine.hpp"
#include "dataplane/engine/parse.hpp"
#include "tests/dataplane/engine/engine_test_support.hpp"
#include "tests/dataplane/engine/limited_child.hpp"

namespace tricolor::dataplane {
namespace {

using namespace engine_test;

TEST(MeteredLength, L1L2L3WithAdjustmentsAndAStrippedTag) {
  auto frame = udp4(100, 1, 53);
  PacketView view{frame.data(), 100, 100, 0, 0, 0, false};
  const Parsed parsed = parse(view);
  ASSERT_EQ(parsed.error, ParseError::none);
  EXPECT_EQ(metered_length(view, parsed, {LengthBase::l2, 0}), 100u);
  EXPECT_EQ(metered_length(view, parsed, {LengthBase::l1, 0}), 124u);
  EXPECT_EQ(metered_length(view, parsed, {LengthBase::l3, 0}), 86u);  // IP total length
  EXPECT_EQ(metered_length(view, parsed, {LengthBase::l3, -6}), 80u);
  EXPECT_EQ(metered_length(view, parsed, {LengthBase::l2, -1000}), 0u);  // floored
  view.has_stripped_vlan = true;                                         // the NIC took 4 bytes off the wire frame
  EXPECT_EQ(metered_length(view, parsed, {LengthBase::l2, 0}), 104u);
  EXPECT_EQ(metered_length(view, parsed, {LengthBase::l1, 4}), 132u);
  EXPECT_EQ(metered_length(view, parsed, {LengthBase::l3, 0}), 86u);
  auto tagged = udp4(104, 1, 53, 0, true);  // the same packet with its tag in the frame: L3 unchanged
  PacketView tagged_view{tagged.data(), 104, 104, 0, 0, 0, false};
  EXPECT_EQ(metered_length(tagged_view, parse(tagged_view), {LengthBase::l3, 0}), 86u);
}

TEST(Engine, DefaultActionCountsEachReason) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1'000'000, 100'000)});
  policy.rules.push_back(rule("one", 1, "p"));
  policy.default_action.drop = true;
  Harness h(policy);
  auto arp = std::vector<std::uint8_t>(60, 0);
  arp[12] = 0x08, arp[13] = 0x06;
  auto broken = udp4(60, 1, 53);
  broken[14] = 0x44;  // IHL 4
  h.send({udp4(100, 1, 53), udp4(100, 2, 53), arp, broken}, 10);
  EXPECT_EQ(h.verdicts[0].rule, 0u);
  EXPECT_FALSE(h.verdicts[0].drop);
  EXPECT_EQ(h.verdicts[1].reason, DefaultReason::no_match);
  EXPECT_EQ(h.verdicts[2].reason, DefaultReason::non_ip);
  EXPECT_EQ(h.verdicts[3].reason, DefaultReason::malformed);
  EXPECT_EQ(h.verdicts[3].error, ParseError::bad_ipv4_header_length);
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(h.verdicts[i].drop);
  const DefaultCounters& d = h.engine->default_counters();
  EXPECT_EQ(d.packets, 3u);
  EXPECT_EQ(d.no_match, 1u);
  EXPECT_EQ(d.non_ip, 1u);
  EXPECT_EQ(d.malformed[static_cast<std::size_t>(ParseError::bad_ipv4_header_length)], 1u);
  EXPECT_EQ(d.dropped_packets, 3u);
  EXPECT_EQ(d.bytes, 220u);
  EXPECT_EQ(h.engine->counters(0).packets[0], 1u);
  EXPECT_EQ(h.engine->counters(0).bytes[0], 100u);
}

TEST(Engine, PairActionsTakePrecedenceForColorAwareRules) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1'000'000, 100'000)});
  Rule r = rule("aware", 1, "p");
  r.input = InputColor::dscp;
  r.on_color[2] = Action{false, 8, std::nullopt};      // red: remark cs1
  r.on_pair[1][2] = Action{true, std::nullopt, std::nullopt};  // came yellow, left red: drop
  policy.rules.push_back(r);
  Harness h(policy);
  // AF12 arrives yellow: 1R2C turns a non-green input red; the yellow>red pair drops it. AF13 arrives
  // red: red>red has no pair action, so red's action remarks it.
  h.send({udp4(100, 1, 53, 12), udp4(100, 1, 53, 14), udp4(100, 1, 53, 0)}, 10);
  EXPECT_EQ(h.verdicts[0].in, Color::yellow);
  EXPECT_EQ(h.verdicts[0].out, Color::red);
  EXPECT_TRUE(h.verdicts[0].drop);
  EXPECT_EQ(h.verdicts[1].in, Color::red);
  EXPECT_FALSE(h.verdicts[1].drop);
  EXPECT_TRUE(h.verdicts[1].dscp_set);
  EXPECT_EQ(h.frames[1][15] >> 2, 8);
  EXPECT_EQ(h.verdicts[2].out, Color::green);
}

TEST(Engine, BlindRulesIgnorePairActions) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1'000'000, 1)});  // every packet red
  Rule r = rule("blind", 1, "p");
  r.on_pair[0][2] = Action{false, 46, std::nullopt};
  policy.rules.push_back(r);
  Harness h(policy);
  h.send({udp4(100, 1, 53)}, 10);
  EXPECT_EQ(h.verdicts[0].out, Color::red);
  EXPECT_TRUE(h.verdicts[0].drop);  // red's default action, not the pair's remark
}

TEST(Engine, UpdateKeepsMeterLevelsByRuleName) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});  // 1000 B/s, 1000 B burst
  policy.rules.push_back(rule("keep", 1, "p"));
  policy.rules.push_back(rule("gone", 2, "p"));
  Harness h(policy);
  h.send({udp4(600, 1, 53), udp4(600, 2, 53)}, 0);  // each bucket down to 400
  ASSERT_EQ(h.verdicts[0].out, Color::green);

  // New policy: "keep" moves to a profile of the same algorithm with a larger burst and rate; "gone"
  // is removed; "fresh" is new. The update takes effect at t = 0.1 s: the first burst under it (a packet
  // that matches no rule).
  Policy next = policy;
  next.profiles.push_back({"q", params_1r2c(2000, 5000)});
  next.rules[0].profile = "q";
  next.rules[1] = rule("fresh", 2, "p");
  ASSERT_TRUE(h.engine->update(next).ok());
  h.send({udp4(64, 99, 53)}, kHz / 10);
  // keep: 400 + 0.1 s at the old 1000 B/s = 500 at the change; then 2000 B/s. At t = 0.2 s: 700.
  h.send({udp4(700, 1, 53), udp4(701, 1, 53)}, kHz / 5);
  EXPECT_EQ(h.verdicts[0].out, Color::green) << "levels were kept, not reset to the new 5000";
  h.send({udp4(64, 1, 53)}, kHz / 5);
  EXPECT_EQ(h.verdicts[0].out, Color::red) << "the bucket is empty: it was not refilled by the change";
  // fresh (same address as "gone") starts full.
  h.send({udp4(1000, 2, 53)}, kHz / 5);
  EXPECT_EQ(h.verdicts[0].rule, 1u);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  // Counters follow the name too.
  EXPECT_EQ(h.engine->counters(0).packets[0], 2u);
  EXPECT_EQ(h.engine->counters(1).packets[0], 1u);
}

TEST(Engine, FailedUpdateChangesNothing) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});
  policy.rules.push_back(rule("one", 1, "p"));
  Harness h(policy);
  Policy broken = policy;
  broken.rules[0].profile = "missing";
  auto result = h.engine->update(broken);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("no such profile 'missing'"), std::string::npos);
  Policy invalid = policy;
  invalid.profiles[0].params.cbs = 0;
  result = h.engine->update(invalid);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("profile p: 1r2c: cbs must be greater than 0"), std::string::npos)
      << result.error().message;
  EXPECT_EQ(h.engine->policy(), policy);
  h.send({udp4(1000, 1, 53)}, 10);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
}

TEST(Engine, RefusesAPolicyOverItsClassifierLimitUntilTheLimitIsRaised) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});
  policy.rules.push_back(rule("one", 1, "p"));
  Harness h(policy);
  EXPECT_EQ(h.engine->limits().max_classifier_entries, kDefaultMaxClassifierEntries);
  Policy wide = policy;
  wide.rules.push_back(rule("wide", 2, "p"));
  for (std::uint16_t port = 1; port <= 100; port += 2) wide.rules[1].match.dst_ports.push_back({port, port});
  auto result = h.engine->update(wide, EngineLimits{50});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("the rules expand to 51 classifier entries, more than the limit of 50 (biggest "
                                        "rules wide 50, one 1); raise the limit"),
            std::string::npos)
      << result.error().message;
  EXPECT_EQ(h.engine->policy(), policy);
  EXPECT_EQ(h.engine->limits().max_classifier_entries, kDefaultMaxClassifierEntries) << "kept: the update failed";
  ASSERT_TRUE(h.engine->update(wide, EngineLimits{51}).ok());
  EXPECT_EQ(h.engine->classifier_entries(), 51u);
  EXPECT_EQ(h.engine->limits().max_classifier_entries, 51u);
  // The first form keeps the raised limit.
  wide.rules[1].match.dst_ports.push_back({200, 200});
  result = h.engine->update(wide);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("more than the limit of 51"), std::string::npos) << result.error().message;
}

TEST(Engine, RefusesARuleNameTwice) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});
  policy.rules.push_back(rule("one", 1, "p"));
  Harness h(policy);
  Policy twice = policy;
  twice.rules.push_back(rule("one", 2, "p"));
  auto result = h.engine->update(twice);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message, "rule one is defined twice");
  EXPECT_EQ(h.engine->policy(), policy);
}

// An update whose memory runs out (here 50 000 profiles to translate, under an address-space limit a
// few MiB above what the process has) returns an error and changes nothing. Was: std::bad_alloc
// escaped (an abort in a program).
TEST(Engine, AnUpdateThatRunsOutOfMemoryChangesNothing) {
  if (!test::kAddressSpaceLimitUsable) GTEST_SKIP() << test::kNoLimitUnderSanitizers;
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});
  policy.rules.push_back(rule("one", 1, "p"));
  Harness h(policy);
  Policy big = policy;
  for (int i = 0; i < 50000; ++i)
    big.profiles.push_back({"profile-with-a-long-name-" + std::to_string(i), params_1r2c(1000 + i, 1000)});
  const auto update = [&] {
    auto result = h.engine->update(big);
    std::string text = result.ok() ? "updated" : result.error().message;
    h.send({udp4(1000, 1, 53)}, 10);
    text += h.engine->policy() == policy && h.verdicts[0].rule == 0 && h.verdicts[0].out == Color::green ? "; unchanged"
                                                                                                        : "; changed";
    return text;
  };
  const auto refused = [](const std::string& text) {
    return text == "the policy cannot be installed: out of memory (nothing was changed); unchanged";
  };
  test::use_fresh_child_processes();
  EXPECT_EXIT(test::run_under_address_space_limit(std::size_t{4} << 20, update, refused), testing::ExitedWithCode(0), "");
}

TEST(Engine, OneBurstManyRulesArrivalOrderWithinARule) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});
  for (std::uint8_t host = 1; host <= 3; ++host) policy.rules.push_back(rule("r" + std::to_string(host), host, "p"));
  Harness h(policy);
  // Interleaved: per rule, 600 then 600 bytes; the first of each rule is green, the second red.
  h.send({udp4(600, 1, 53), udp4(600, 2, 53), udp4(600, 1, 53), udp4(600, 3, 53), udp4(600, 2, 53), udp4(600, 3, 53)}, 5);
  const Color want[] = {Color::green, Color::green, Color::red, Color::green, Color::red, Color::red};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(h.verdicts[i].out, want[i]) << i;
}

// ---- per-key rules, at the engine ----

Rule keyed_rule(std::string name, std::string profile, std::uint64_t timeout_ns = 60'000'000'000) {
  Rule r;
  r.name = std::move(name);
  r.profile = std::move(profile);
  r.per_key.kind = KeyKind::dst;
  r.per_key.idle_timeout_ns = timeout_ns;
  return r;
}

// A burst all of one per-key rule (the worker's pass with the rule's length base and color blindness
// as constants): each packet metered at its own length, for every base and with an adjustment, with
// and without a NIC-stripped tag, its input color as the rule says, and its key's meter charged by
// that length (a bucket of exactly the first two packets' lengths: green, green, then red).
TEST(EngineKeys, AOneRuleBurstIsMeteredAtItsRulesLengthAndInputColor) {
  const std::size_t sizes[] = {100, 60, 1514};
  const std::uint8_t dscps[] = {0, 12, 14};  // AF12 enters yellow, AF13 red (InputColor::dscp)
  for (const LengthBase base : {LengthBase::l1, LengthBase::l2, LengthBase::l3}) {
    for (const std::int32_t adjust : {0, -30, 4}) {
      for (const InputColor input : {InputColor::blind, InputColor::dscp}) {
        for (const bool stripped : {false, true}) {
          std::uint32_t want[3];
          for (std::size_t i = 0; i < 3; ++i) {
            const std::int64_t l2 = static_cast<std::int64_t>(sizes[i]) + (stripped ? 4 : 0);
            const std::int64_t at = base == LengthBase::l3   ? static_cast<std::int64_t>(sizes[i]) - 14
                                    : base == LengthBase::l2 ? l2
                                                             : l2 + 24;
            want[i] = static_cast<std::uint32_t>(std::max<std::int64_t>(at + adjust, 0));
          }
          Policy policy;
          policy.profiles.push_back({"p", params_1r2c(1, want[0] + want[1])});
          Rule r = keyed_rule("keys", "p");
          r.length = {base, adjust};
          r.input = input;
          policy.rules.push_back(r);
          Harness h(policy);
          std::vector<std::vector<std::uint8_t>> burst;
          for (std::size_t i = 0; i < 3; ++i) burst.push_back(udp4(sizes[i], 7, 53, input == InputColor::dscp ? dscps[i] : 0));
          h.send(burst, 1000, stripped);
          const std::string where = "base " + std::to_string(static_cast<int>(base)) + " adjust " +
                                    std::to_string(adjust) + (stripped ? " stripped" : "") +
                                    (input == InputColor::blind ? " blind" : " dscp");
          for (std::size_t i = 0; i < 3; ++i) {
            EXPECT_EQ(h.verdicts[i].metered_length, want[i]) << where << " packet " << i;
            EXPECT_TRUE(h.verdicts[i].keyed) << where;
          }
          if (input == InputColor::blind) {
            for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(h.verdicts[i].in, Color::green) << where;
            EXPECT_EQ(h.verdicts[0].out, Color::green) << where;
            EXPECT_EQ(h.verdicts[1].out, Color::green) << where;
            EXPECT_EQ(h.verdicts[2].out, want[2] == 0 ? Color::green : Color::red) << where;
          } else {
            EXPECT_EQ(h.verdicts[0].in, Color::green) << where;
            EXPECT_EQ(h.verdicts[1].in, Color::yellow) << where;
            EXPECT_EQ(h.verdicts[2].in, Color::red) << where;
            EXPECT_EQ(h.verdicts[0].out, Color::green) << where;
            for (std::size_t i = 1; i < 3; ++i) EXPECT_EQ(h.verdicts[i].out, Color::red) << where;  // 1R2C: not green in
          }
        }
      }
    }
  }
}

// whole_burst(), by which the daemon's forwarder sends or frees a burst without reading its verdicts:
// `forwarded` only when every verdict forwards its packet now (metered under a rule, not dropped, handed
// over or held), `dropped` only when every verdict drops it, and each for the usual such burst: one
// rule, aggregate or per key, within its rates or far above them.
TEST(Engine, AWholeBurstIsSaidForwardedOrDroppedOnlyWhenEveryVerdictSaysSo) {
  using WholeBurst = Worker::WholeBurst;
  const auto forwards_now = [](const Verdict& v) { return v.rule != kNoRule && !v.drop && !v.handoff && v.delay == 0; };
  const auto check = [&](const Worker& worker, const std::vector<Verdict>& verdicts, WholeBurst expected,
                         const char* what) {
    EXPECT_EQ(worker.whole_burst(), expected) << what;
    if (worker.whole_burst() == WholeBurst::forwarded) {
      EXPECT_TRUE(std::all_of(verdicts.begin(), verdicts.end(), forwards_now)) << what;
    }
    if (worker.whole_burst() == WholeBurst::dropped) {
      EXPECT_TRUE(std::all_of(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return v.drop; })) << what;
    }
  };
  const auto many = [](std::size_t n, std::uint8_t host) {
    std::vector<std::vector<std::uint8_t>> burst;
    for (std::size_t i = 0; i < n; ++i) burst.push_back(udp4(100, host, static_cast<std::uint16_t>(1000 + i)));
    return burst;
  };
  {
    Policy policy;
    policy.profiles.push_back({"wide", params_1r2c(1'000'000'000, 1'000'000)});
    policy.profiles.push_back({"narrow", params_1r2c(1, 150)});
    policy.rules.push_back(rule("wide", 1, "wide"));
    policy.rules.push_back(rule("narrow", 3, "narrow"));
    Rule keyed = keyed_rule("keys", "wide");
    keyed.match.dst = rule("", 4, "").match.dst;
    policy.rules.push_back(keyed);
    Harness h(policy);
    const Worker& worker = h.engine->worker(0);
    h.send(many(32, 1), 10);
    check(worker, h.verdicts, WholeBurst::forwarded, "one aggregate rule, every packet green");
    h.send(many(8, 4), 20);
    check(worker, h.verdicts, WholeBurst::forwarded, "one per-key rule, every packet green");
    auto mixed = many(7, 1);
    mixed.push_back(udp4(100, 2, 53));  // no rule: the default action (forward)
    h.send(mixed, 30);
    EXPECT_FALSE(h.verdicts.back().drop);
    check(worker, h.verdicts, WholeBurst::mixed, "a packet given the default action");
    h.send(many(3, 3), 40);  // 150 bytes of bucket: the second and third are red, dropped
    EXPECT_FALSE(h.verdicts[0].drop);
    EXPECT_TRUE(h.verdicts[2].drop);
    check(worker, h.verdicts, WholeBurst::mixed, "green, then red packets dropped");
    h.send(many(3, 3), 41);  // the bucket empty: every packet red
    check(worker, h.verdicts, WholeBurst::dropped, "every packet red, dropped");
    auto two_rules = many(4, 1);
    for (auto& f : many(4, 4)) two_rules.push_back(f);
    h.send(two_rules, 50);
    check(worker, h.verdicts, WholeBurst::mixed, "two rules");
    h.send({}, 60);
    check(worker, h.verdicts, WholeBurst::mixed, "no packet");
  }
  {
    // A full key table's fallback drops the second key's packets.
    Policy policy;
    policy.profiles.push_back({"wide", params_1r2c(1'000'000'000, 1'000'000)});
    Rule keyed = keyed_rule("keys", "wide");
    keyed.per_key.capacity = 1;
    keyed.per_key.fallback = KeyFallback::drop;
    policy.rules.push_back(keyed);
    Harness h(policy);
    h.send({udp4(100, 1, 53), udp4(100, 2, 53)}, 10);
    EXPECT_TRUE(h.verdicts[1].table_full);
    check(h.engine->worker(0), h.verdicts, WholeBurst::mixed, "a key the full table dropped");
  }
  {
    // Two workers: a burst with packets of keys the other worker owns hands them over.
    Policy policy;
    policy.profiles.push_back({"wide", params_1r2c(1'000'000'000, 1'000'000)});
    policy.rules.push_back(keyed_rule("keys", "wide"));
    EngineOptions options;
    options.workers = 2;
    auto made = Engine::create(policy, *policer::TickRate::make(kHz), options);
    ASSERT_TRUE(made.ok()) << made.error().message;
    Engine& engine = **made;
    std::vector<std::vector<std::uint8_t>> frames;
    for (unsigned host = 1; host <= 32; ++host) frames.push_back(udp4(100, static_cast<std::uint8_t>(host), 53));
    std::vector<PacketView> views;
    for (auto& f : frames) views.push_back(PacketView{f.data(), std::uint32_t(f.size()), std::uint32_t(f.size()), 10});
    std::vector<Verdict> verdicts(views.size());
    engine.worker(0).process(views, verdicts);
    ASSERT_TRUE(std::any_of(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return v.handoff; }));
    check(engine.worker(0), verdicts, WholeBurst::mixed, "packets handed over");
    engine.worker(0).quiescent();
  }
}

// A rule's first and last metered ticks (stats' first_tick and last_tick) count the packets its meters
// saw, not those a full table left unmetered (fallback drop), whether one of those is a burst's first,
// last or only packet, and whatever order the burst's times are in.
TEST(EngineKeys, MeteredTicksLeaveOutWhatAFullTableDidNotMeter) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1'000'000, 100'000)});
  Rule r = keyed_rule("keys", "p");
  r.per_key.capacity = 1;
  r.per_key.fallback = KeyFallback::drop;
  policy.rules.push_back(r);
  Harness h(policy);
  const auto burst = [&](std::vector<std::pair<std::uint8_t, std::uint64_t>> packets) {  // (host, tick)
    h.frames.clear();
    h.views.clear();
    for (const auto& [host, tick] : packets) h.frames.push_back(udp4(100, host, 53));
    for (std::size_t i = 0; i < packets.size(); ++i)
      h.views.push_back(PacketView{h.frames[i].data(), 100, 100, packets[i].second, 0, 0, false});
    h.verdicts.assign(h.views.size(), Verdict{});
    h.engine->process(h.views, h.verdicts);
  };
  burst({{2, 50}});  // host 2 takes the table's one key: host 1 is left unmetered from here on
  EXPECT_TRUE(h.engine->counters(0).metered);
  EXPECT_EQ(h.engine->counters(0).first_tick, 50u);
  burst({{1, 40}, {2, 100}, {1, 300}});  // unmetered first and last: only 100 counts
  EXPECT_FALSE(h.verdicts[0].keyed);
  EXPECT_TRUE(h.verdicts[0].table_full);
  EXPECT_TRUE(h.verdicts[0].drop);
  EXPECT_TRUE(h.verdicts[1].keyed);
  EXPECT_EQ(h.engine->counters(0).first_tick, 50u);
  EXPECT_EQ(h.engine->counters(0).last_tick, 100u);
  burst({{1, 400}});  // only unmetered packets: nothing moves
  EXPECT_EQ(h.engine->counters(0).last_tick, 100u);
  burst({{2, 500}, {2, 450}});  // all metered, out of order: the latest counts
  EXPECT_EQ(h.engine->counters(0).last_tick, 500u);
  EXPECT_EQ(h.engine->counters(0).first_tick, 50u);
}

TEST(EngineKeys, AProfileChangeReachesEachKeyAtItsNextPacketWithLevelsKept) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});  // 1000 B/s, 1000 B burst
  policy.rules.push_back(keyed_rule("hosts", "p"));
  Harness h(policy);
  h.send({udp4(600, 1, 53), udp4(600, 2, 53)}, 0);  // keys .1 and .2 down to 400 each
  // At 0.1 s (the first burst under the new policy: a packet that matches no rule) the profile doubles
  // its rate and grows its burst: at that instant each key has 500.
  Policy next = policy;
  next.profiles[0].params = params_1r2c(2000, 5000);
  ASSERT_TRUE(h.engine->update(next).ok());
  h.send({udp4(64, 99, 53)}, kHz / 10);
  // Key .1 returns at 0.2 s: 500 + 0.1 s at 2000 B/s = 700 (not 400 + 0.2 s at 2000 = 800, not full).
  h.send({udp4(700, 1, 53), udp4(64, 1, 53)}, kHz / 5);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  EXPECT_EQ(h.verdicts[1].out, Color::red);
  // Key .2 returns at 0.3 s: 500 + 0.2 s at 2000 B/s = 900.
  h.send({udp4(900, 2, 53), udp4(64, 2, 53)}, 3 * kHz / 10);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  EXPECT_EQ(h.verdicts[1].out, Color::red);
  // A key first seen after the change starts full at the new burst.
  h.send({udp4(5000, 3, 53)}, 3 * kHz / 10);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
}

// A key idle past its timeout starts afresh at its next packet, and only then: within a burst whose
// packets span more than the timeout (tricolor-replay's bursts are 32 records, whatever their times),
// a key's later packet is idle or not by its packet before, not by the burst's start.
TEST(EngineKeys, AKeysLaterPacketInABurstIsIdleByItsPacketBeforeNotByTheBurstsStart) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1, 200)});  // 200 B, and next to no refill
  policy.rules.push_back(keyed_rule("hosts", "p", kHz));  // 1 s idle timeout
  Harness h(policy);
  const auto burst = [&](std::vector<std::uint64_t> ticks) {  // 100-byte packets of key 10.0.0.1
    h.frames.assign(ticks.size(), udp4(100, 1, 53));
    h.views.clear();
    for (std::size_t i = 0; i < ticks.size(); ++i)
      h.views.push_back(PacketView{h.frames[i].data(), 100, 100, ticks[i], 0, 0, false});
    h.verdicts.assign(h.views.size(), Verdict{});
    h.engine->process(h.views, h.verdicts);
  };
  burst({0});  // 100 B left
  // 0.9 s: not idle, the last 100 B. 1.5 s: 0.6 s after it, not idle either: nothing left, red.
  burst({9 * kHz / 10, 15 * kHz / 10});
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  EXPECT_EQ(h.verdicts[1].out, Color::red);
  EXPECT_EQ(h.engine->counters(0).keys_renewed, 0u);
  // 2.6, 2.7, 2.8 s: idle at the first (1.1 s after 1.5), renewed full there (200 B); the next two
  // are not: the second takes the last 100 B, the third finds none.
  burst({26 * kHz / 10, 27 * kHz / 10, 28 * kHz / 10});
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  EXPECT_EQ(h.verdicts[1].out, Color::green);
  EXPECT_EQ(h.verdicts[2].out, Color::red);
  EXPECT_EQ(h.engine->counters(0).keys_renewed, 1u);
  // A burst whose own packets are more than the timeout apart: the key is renewed at the later one.
  burst({40 * kHz / 10, 51 * kHz / 10, 52 * kHz / 10});
  EXPECT_EQ(h.verdicts[0].out, Color::green);  // renewed (1.2 s after 2.8 s)
  EXPECT_EQ(h.verdicts[1].out, Color::green);  // renewed again (1.1 s after 4.0 s)
  EXPECT_EQ(h.verdicts[2].out, Color::green);
  EXPECT_EQ(h.engine->counters(0).keys_renewed, 3u);
  std::uint64_t live = 0;
  h.engine->for_each_key(0, [&](const Engine::LiveKey& key) {
    ++live;
    EXPECT_EQ(key.counters.packets[0], 2u);  // this life: 5.1 s and 5.2 s
  });
  EXPECT_EQ(live, 1u);
}

TEST(EngineKeys, ANewKeyDefinitionStartsTheKeysAgain) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});
  policy.rules.push_back(keyed_rule("hosts", "p"));
  Harness h(policy);
  h.send({udp4(1000, 1, 53)}, 0);
  EXPECT_EQ(h.engine->live_keys(0), 1u);
  Policy next = policy;
  next.rules[0].per_key.kind = KeyKind::five_tuple;
  ASSERT_TRUE(h.engine->update(next).ok());
  EXPECT_EQ(h.engine->live_keys(0), 0u);
  h.send({udp4(1000, 1, 53)}, 2);
  EXPECT_EQ(h.verdicts[0].out, Color::green);  // a fresh meter
}

TEST(EngineKeys, IdleKeysAreSweptAndTheirMemoryReturned) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1'000'000, 100'000)});
  Rule r = keyed_rule("hosts", "p", kHz);  // 1 s idle timeout
  r.per_key.kind = KeyKind::src;
  r.per_key.capacity = 32768;  // an index of 64 Ki slots: the sweep (64 a burst) passes it in 1024 bursts
  policy.rules.push_back(r);
  Harness h(policy);
  // 20000 sources (10.x.y.z from 192.0.2.1 ... rewritten below), one packet each.
  auto frame = udp4(100, 1, 53);
  for (std::uint32_t i = 0; i < 20000; i += 32) {
    std::vector<std::vector<std::uint8_t>> burst;
    for (std::uint32_t k = 0; k < 32; ++k) {
      frame[26] = 11, frame[27] = std::uint8_t((i + k) >> 16), frame[28] = std::uint8_t((i + k) >> 8), frame[29] = std::uint8_t(i + k);
      burst.push_back(frame);
    }
    h.send(std::move(burst), 1000 + i);
  }
  const std::size_t live = h.engine->live_keys(0), memory = h.engine->key_memory_bytes(0);
  EXPECT_EQ(live, 20000u);
  // Two seconds later one key keeps talking; the sweep (a little every burst) reclaims the others.
  frame[26] = 11, frame[27] = 0, frame[28] = 0, frame[29] = 7;
  for (int b = 0; b < 20000; ++b) h.send({frame}, 3 * kHz + std::uint64_t(b));
  EXPECT_EQ(h.engine->live_keys(0), 1u);
  // What remains: the index (64 Ki slots of 8 bytes), one chunk of entries and two spare chunks.
  constexpr std::size_t kChunk = 4096u * 128;
  EXPECT_EQ(h.engine->key_spare_bytes(0), 2 * kChunk);
  EXPECT_LE(h.engine->key_memory_bytes(0) + 4 * kChunk, memory) << "the idle keys' entry chunks were released";
  EXPECT_LE(h.engine->key_memory_bytes(0), 65536u * 8 + kChunk + 2 * kChunk + 65536u);
}

// The process's resident memory now (VmRSS), in bytes.
std::size_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      std::size_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(4096, '\n');
  }
  return 0;
}

// 1000 frames from distinct sources 11.0.x.y.
std::vector<std::vector<std::uint8_t>> thousand_sources() {
  std::vector<std::vector<std::uint8_t>> frames;
  auto frame = udp4(100, 1, 53);
  for (std::uint32_t k = 0; k < 1000; ++k) {
    frame[26] = 11, frame[27] = 0, frame[28] = std::uint8_t(k >> 8), frame[29] = std::uint8_t(k);
    frames.push_back(frame);
  }
  return frames;
}

// A per-key rule's index is allocated and resident when the rule is installed (16 bytes per key of
// capacity and its bookkeeping), and keys then cost their entries only: 1000 keys in a rule of 16 Mi
// keys' capacity take one 512 KiB chunk, not a page (or a 2 MiB huge page) of index each. Was: the
// index came with the first packet and was faulted in as keys landed in it, megabytes per key.
TEST(EngineKeys, TheKeyIndexIsResidentFromTheStartAndKeysCostTheirEntriesOnly) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1'000'000, 100'000)});
  Rule r = keyed_rule("hosts", "p");
  r.per_key.kind = KeyKind::src;
  r.per_key.capacity = 16u << 20;
  policy.rules.push_back(r);
  // Frames, views and verdicts made beforehand: nothing but the engine allocates while keys arrive.
  auto frames = thousand_sources();
  std::vector<PacketView> views;
  for (auto& f : frames) views.push_back(PacketView{f.data(), 100, 100, 1000, 0, 0x0007, false});
  std::vector<Verdict> verdicts(32);
  const std::size_t index = KeyTable<kKeySize>::index_bytes_for(16u << 20);
  ASSERT_EQ(index, (std::size_t{256} << 20) + 4096 * 548 + 2 * 64 * 8);  // 32 Mi slots of 8 bytes, bookkeeping

  const std::size_t before_create = resident_bytes();
  Harness h(policy);
  const std::size_t after_create = resident_bytes();
  // The slots at least (the bookkeeping may land on pages the process already had).
  EXPECT_GE(after_create - before_create, std::size_t{256} << 20) << "the index is resident once the rule is installed";
  EXPECT_EQ(h.engine->key_index_bytes(0), index);
  EXPECT_EQ(h.engine->key_entry_bytes(0), 0u);
  const std::size_t spares = 2 * 4096u * 128;  // two chunks kept ready for new keys
  EXPECT_EQ(h.engine->key_spare_bytes(0), spares);
  EXPECT_EQ(h.engine->key_memory_bytes(0), index + spares);

  for (std::size_t i = 0; i < views.size(); i += 32)
    h.engine->process(std::span(views).subspan(i, std::min<std::size_t>(32, views.size() - i)), verdicts);
  const std::size_t after_keys = resident_bytes();
  EXPECT_EQ(h.engine->live_keys(0), 1000u);
  EXPECT_EQ(h.engine->key_entry_bytes(0), 4096u * 128);
  EXPECT_EQ(h.engine->key_memory_bytes(0), index + 4096u * 128 + spares);
  // Under a sanitizer each key's probe may also fault in a page of the index's shadow memory (which
  // making the index resident does not touch): up to a page per key more there.
  const std::size_t allowance = (std::size_t{2} << 20) + (test::kSanitizerShadow ? 1000 * 4096 : 0);
  EXPECT_LE(after_keys - after_create, allowance) << "1000 keys: a spare chunk taken, another made ready, little else";
}

// Two rules of 256 Mi keys' capacity (4 GiB of index each) with 6 GiB of address space to spare: the
// second index cannot be had, so the policy is refused, naming the rule and the size, before any
// packet; an engine being updated keeps its policy and meters. Was: accepted, every packet of the
// rule then reported table_full. In a child process; both indexes are allocated before either is made
// resident, so the refusal costs no 4 GiB of memory.
TEST(EngineKeys, APolicyWhoseKeyIndexesCannotBeHadIsRefused) {
  if (!test::kAddressSpaceLimitUsable) GTEST_SKIP() << test::kNoLimitUnderSanitizers;
  Policy small;
  small.profiles.push_back({"p", params_1r2c(1'000'000, 100'000)});
  small.rules.push_back(rule("one", 1, "p"));
  Policy big = small;
  for (const char* name : {"guests", "visitors"}) {
    Rule r = keyed_rule(name, "p");
    r.per_key.kind = KeyKind::src;
    r.per_key.capacity = 256u << 20;
    big.rules.push_back(r);
  }
  const std::string refusal =
      "rule visitors: cannot allocate its key index: capacity 256m keys needs 4.03 GiB (536870912 index slots of 8 "
      "bytes, and 548 bytes of bookkeeping per 4096 keys), resident from the start: out of memory";
  const auto update_then_create = [&] {
    Harness h(small);
    auto result = h.engine->update(big);
    std::string text = "update: " + (result.ok() ? std::string("accepted") : result.error().message);
    h.send({udp4(1000, 1, 53)}, 10);
    text += h.engine->policy() == small && h.verdicts[0].rule == 0 && h.verdicts[0].out == Color::green ? "; unchanged"
                                                                                                       : "; changed";
    auto made = Engine::create(big, *policer::TickRate::make(kHz));
    return text + "\ncreate: " + (made.ok() ? std::string("accepted") : made.error().message);
  };
  const auto refused = [&](const std::string& text) {
    return text == "update: " + refusal + "; unchanged\ncreate: " + refusal;
  };
  test::use_fresh_child_processes();
  EXPECT_EXIT(test::run_under_address_space_limit(std::size_t{6} << 30, update_then_create, refused),
              testing::ExitedWithCode(0), "");
}

// A change short of memory is tried again once the rule sets it replaced have given theirs back: a
// per-key rule added and deleted back to back, with no turn of the control side between (as pipelined
// requests on the control socket are run), fits as often as one at a time. Was: refused from the
// 27th cycle of 40 ("cannot allocate its key index"), the deleted rules' tables still held.
TEST(EngineKeys, AChangeShortOfMemoryWaitsForWhatReplacedSetsGiveBack) {
  // Key table memory with a ceiling, counted by block.
  class BudgetSource final : public MemorySource {
   public:
    explicit BudgetSource(std::size_t limit) : limit_(limit) {}
    void* reserve(std::size_t bytes, std::size_t align) noexcept override {
      if (used_ + bytes > limit_) return nullptr;
      void* p = heap_memory().reserve(bytes, align);
      if (p != nullptr) used_ += bytes;
      return p;
    }
    bool commit(void* p, std::size_t bytes) noexcept override { return heap_memory().commit(p, bytes); }
    void release(void* p, std::size_t bytes) noexcept override {
      used_ -= bytes;
      heap_memory().release(p, bytes);
    }
    std::size_t used() const noexcept { return used_; }

   private:
    std::size_t limit_, used_ = 0;
  };
  Policy without;
  without.profiles.push_back({"p", params_1r2c(1'000'000, 100'000)});
  without.rules.push_back(rule("one", 1, "p"));
  Policy with = without;
  Rule keyed = keyed_rule("guests", "p");
  keyed.per_key.kind = KeyKind::src;
  keyed.per_key.capacity = 64u << 10;
  with.rules.push_back(keyed);

  const auto options = [](MemorySource& source) {
    EngineOptions o;
    o.memory = {&source};
    return o;
  };
  std::size_t one_rule = 0;  // what the keyed rule's tables take
  {
    BudgetSource unlimited(SIZE_MAX);
    auto engine = Engine::create(without, *policer::TickRate::make(kHz), options(unlimited));
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->update(with).ok());
    one_rule = unlimited.used();
  }
  ASSERT_GT(one_rule, 0u);
  BudgetSource budget(one_rule + one_rule / 2);  // room for one rule's tables, not two
  auto engine = Engine::create(without, *policer::TickRate::make(kHz), options(budget));
  ASSERT_TRUE(engine.ok());
  for (int cycle = 0; cycle < 40; ++cycle) {
    auto added = (*engine)->update(with);
    ASSERT_TRUE(added.ok()) << "cycle " << cycle << ": " << added.error().message;
    ASSERT_TRUE((*engine)->update(without).ok()) << "cycle " << cycle;
  }
  (*engine)->maintain();
  EXPECT_EQ(budget.used(), 0u);
}

// A cluster meter (issue 26) last: without a lease side it meters at the box's share (the whole budget
// for one box); leased, green passes exactly on the tokens granted; it keeps its lease across policy
// changes; a budget that is not 1R2C is refused, naming the rule.
// Rule web (a 1R2C of 1 MB/s and `child_cbs`) under cluster `global` (1 MB/s, 1000 B).
Policy cluster_policy(std::uint64_t child_cbs) {
  Policy policy;
  policy.profiles.push_back({"child", params_1r2c(1'000'000, child_cbs)});
  policy.profiles.push_back({"global", params_1r2c(1'000'000, 1000)});
  Rule r = rule("web", 1, "child");
  r.cluster = "global";
  policy.rules.push_back(r);
  return policy;
}

TEST(EngineCluster, WithoutALeaseSideTheShareMetersLocally) {
  Policy policy = cluster_policy(3000);
  Harness h(policy);
  h.send({udp4(1000, 1, 53), udp4(1000, 1, 53), udp4(1000, 1, 53), udp4(1000, 1, 53)}, 0);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  EXPECT_EQ(h.verdicts[1].out, Color::red);  // the cluster's share: 1000 B
  EXPECT_EQ(h.verdicts[2].out, Color::red);
  EXPECT_EQ(h.verdicts[3].out, Color::red);  // the child's own red
  const auto clusters = h.engine->clusters();
  ASSERT_EQ(clusters.size(), 1u);
  EXPECT_EQ(clusters[0].name, "global");
  EXPECT_TRUE(clusters[0].in_use);
  EXPECT_EQ(clusters[0].lease->mode(), policer::ClusterMode::share);
  EXPECT_EQ(clusters[0].lease->passed(), 1u);
  EXPECT_EQ(clusters[0].lease->refused(), 2u);
}

TEST(EngineCluster, LeasedGreenPassesOnGrantedTokensAndTheLeaseOutlivesAChange) {
  Policy policy = cluster_policy(100'000);
  EngineOptions leased;
  leased.cluster_boxes = 3;
  leased.cluster_start_mode = policer::ClusterMode::leased;
  auto made = Engine::create(policy, *policer::TickRate::make(kHz), leased);
  ASSERT_TRUE(made.ok()) << made.error().message;
  Harness h(policy);
  h.engine = std::move(*made);
  policer::ClusterLease* lease = h.engine->clusters().at(0).lease;
  EXPECT_EQ(lease->share_profile().params().cir, 333'333u);  // the budget over 3 boxes
  h.send({udp4(1000, 1, 53)}, 0);
  EXPECT_EQ(h.verdicts[0].out, Color::red);  // nothing leased yet
  lease->grant(2500);
  h.send({udp4(1000, 1, 53), udp4(1000, 1, 53), udp4(1000, 1, 53)}, 0);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  EXPECT_EQ(h.verdicts[1].out, Color::green);
  EXPECT_EQ(h.verdicts[2].out, Color::red);
  // A rate change of the rule: the same lease, its balance kept.
  policy.profiles[0].params.cir = 2'000'000;
  ASSERT_TRUE(h.engine->update(policy).ok());
  EXPECT_EQ(h.engine->clusters().at(0).lease, lease);
  EXPECT_EQ(lease->balance(), 500u);
  // A rule without it: the lease stays, unused.
  policy.rules[0].cluster.reset();
  ASSERT_TRUE(h.engine->update(policy).ok());
  EXPECT_FALSE(h.engine->clusters().at(0).in_use);
  h.send({udp4(1000, 1, 53)}, 0);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  EXPECT_EQ(lease->balance(), 500u);
}

TEST(EngineCluster, ABudgetThatIsNotOneRateTwoColorIsRefused) {
  Policy policy = cluster_policy(3000);
  policy.profiles[1].params = policer::Params{.algorithm = policer::Algorithm::srtcm, .cir = 1000, .cbs = 1000, .ebs = 1000};
  auto made = Engine::create(policy, *policer::TickRate::make(kHz));
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.error().message, "rule web: cluster global: a cluster meter's profile is 1r2c (green within the shared rate, red above), not srtcm");
}

// Shaping needs a meter with a conforming tick (policer/shaping.hpp): a window is refused, naming why.
TEST(EngineShaping, AProfileWithoutAConformingTickIsRefused) {
  Policy policy;
  policy.profiles.push_back({"window", policer::Params{.algorithm = policer::Algorithm::fixed_window, .unit = policer::Unit::packets, .limit = 100, .window = 1'000'000'000}});
  Rule r = rule("web", 1, "window");
  r.on_color[2] = Action{true, std::nullopt, std::nullopt, 5'000'000};
  policy.rules.push_back(r);
  auto made = Engine::create(policy, *policer::TickRate::make(kHz));
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.error().message,
            "rule web: shaping: profile window is fixed-window, which has no tick at which a packet conforms; shape "
            "with 1r2c, srtcm, trtcm, trtcm4115, gcra or smooth");
  policy.profiles[0].params = params_1r2c(1'000'000, 3000);
  EXPECT_TRUE(Engine::create(policy, *policer::TickRate::make(kHz)).ok());
  policy.rules[0].on_color[1] = Action{true, std::nullopt, std::nullopt, 5'000'000};
  made = Engine::create(policy, *policer::TickRate::make(kHz));
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.error().message, "rule web: only red packets can be shaped");
}

// ---- flows per key (issue 27) ----

// Ethernet + IPv4 + TCP from 192.0.2.<source>:<sport> to 10.0.0.1:443 with `flags`, 80 bytes.
std::vector<std::uint8_t> tcp4(std::uint8_t source, std::uint16_t sport, std::uint8_t flags) {
  std::vector<std::uint8_t> f = udp4(80, 1, 443);
  f[23] = 6;       // protocol TCP
  f[29] = source;  // source address 192.0.2.<source>
  f[34] = std::uint8_t(sport >> 8), f[35] = std::uint8_t(sport);
  for (std::size_t i = 38; i < 54; ++i) f[i] = 0;
  f[46] = 0x50;  // data offset 5
  f[47] = flags;
  return f;
}

// Shaping queues (queue N) must all fit a worker's shape capacity when every shaping rule has one; a
// rule without a queue is bounded by the daemon's wheel alone, and the policy is not checked.
TEST(Engine, RefusesShapingQueuesPastTheShapeCapacity) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});
  policy.rules.push_back(rule("one", 1, "p"));
  Harness h(policy);
  Policy shaped = policy;
  shaped.rules.push_back(rule("two", 2, "p"));
  shaped.rules[0].on_color[2] = Action{true, std::nullopt, std::nullopt, 1'000'000, 600};
  shaped.rules[1].on_color[2] = Action{true, std::nullopt, std::nullopt, 1'000'000, 500};
  EngineLimits limits;
  limits.shape_capacity = 1000;
  auto result = h.engine->update(shaped, limits);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message,
            "the shaping queues cannot all be held: one 600 + two 500 = 1100 packets per worker, more than the 1000 "
            "each worker can hold (--shape-capacity); lower a queue or raise --shape-capacity");
  EXPECT_EQ(h.engine->policy(), policy);
  limits.shape_capacity = 1100;
  EXPECT_TRUE(h.engine->update(shaped, limits).ok());
  limits.shape_capacity = 1000;
  shaped.rules.push_back(rule("three", 3, "p"));
  shaped.rules[2].on_color[2] = Action{true, std::nullopt, std::nullopt, 1'000'000};
  EXPECT_TRUE(h.engine->update(shaped, limits).ok()) << "a rule without a queue: not checked";
  // queue without shaping, or out of range, is refused whatever the capacity.
  shaped.rules[2].on_color[2] = Action{true, std::nullopt, std::nullopt, std::nullopt, 4};
  result = h.engine->update(shaped);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message, "rule three: queue without shape max-delay");
  shaped.rules[2].on_color[2] = Action{true, std::nullopt, std::nullopt, 1'000'000, kMaxShapeQueue + 1};
  result = h.engine->update(shaped);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message, "rule three: shaping: queue must be 1 to 1m (1048576) packets");
}

Policy max_flows_policy(std::uint32_t max_flows) {
  Policy policy;
  policy.profiles.push_back({"big", params_1r2c(1'000'000'000, 1'000'000)});
  Rule r = rule("guests", 1, "big");
  r.per_key.kind = KeyKind::src;
  r.per_key.max_flows = max_flows;
  r.per_key.flow_capacity = 64;
  policy.rules.push_back(r);
  return policy;
}

// Two workers: every packet of a key goes to its owner (placement by key hash), whichever worker
// received it, and so do its flows: a SYN flood from one source, half received by each worker, is held
// at max-flows, all of them open on the owner; a FIN there closes one, and a new SYN may open.
TEST(EngineFlows, AKeysFlowsAreCountedOnItsOwnerWhicheverWorkerReceivedThem) {
  EngineOptions options;
  options.workers = 2;
  auto made = Engine::create(max_flows_policy(4), *policer::TickRate::make(kHz), options);
  ASSERT_TRUE(made.ok()) << made.error().message;
  Engine& engine = **made;
  std::uint64_t now = 1000;
  std::vector<Verdict> verdicts_seen;
  // One burst to worker `w`; what it hands over goes to the owner in a burst of its own.
  const auto offer = [&](unsigned w, std::vector<std::vector<std::uint8_t>> frames) {
    std::vector<PacketView> views;
    for (auto& f : frames) views.push_back(PacketView{f.data(), std::uint32_t(f.size()), std::uint32_t(f.size()), ++now});
    std::vector<Verdict> verdicts(views.size());
    const RuleSet& set = engine.worker(w).process(views, verdicts);
    std::vector<std::vector<std::uint8_t>> handed_frames;
    std::vector<Handed> handed;
    for (std::size_t i = 0; i < verdicts.size(); ++i) {
      if (!verdicts[i].handoff) {
        verdicts_seen.push_back(verdicts[i]);
        continue;
      }
      EXPECT_EQ(verdicts[i].owner, 1 - w);
      handed_frames.push_back(frames[i]);
      handed.push_back({std::uint32_t(set.generation), verdicts[i].rule});
    }
    engine.worker(w).quiescent();
    if (handed.empty()) return;
    std::vector<PacketView> hv;
    for (auto& f : handed_frames) hv.push_back(PacketView{f.data(), std::uint32_t(f.size()), std::uint32_t(f.size()), ++now});
    std::vector<Verdict> hverdicts(hv.size());
    engine.worker(1 - w).process(hv, hverdicts, handed);
    engine.worker(1 - w).quiescent();
    for (const Verdict& v : hverdicts) {
      EXPECT_FALSE(v.handoff);
      verdicts_seen.push_back(v);
    }
  };
  for (std::uint16_t p = 0; p < 20; ++p) offer(p % 2, {tcp4(7, std::uint16_t(3000 + p), 0x02)});
  std::size_t refused = 0;
  for (const Verdict& v : verdicts_seen) {
    refused += v.flow_refused;
    EXPECT_EQ(v.drop, v.flow_refused);
    EXPECT_EQ(v.out, v.flow_refused ? Color::red : Color::green);
  }
  EXPECT_EQ(refused, 16u);
  EXPECT_EQ(engine.counters(0).flows_opened, 4u);
  EXPECT_EQ(engine.counters(0).flows_refused, 16u);
  unsigned owners_seen = 0, owner = 0;
  engine.for_each_key(0, [&](const Engine::LiveKey& live) {
    ++owners_seen;
    owner = live.worker;
    EXPECT_EQ(live.counters.open_flows, 4u);
  });
  ASSERT_EQ(owners_seen, 1u) << "one key, on one worker";
  EXPECT_EQ(engine.live_keys(0, 1 - owner), 0u);

  // A FIN of an open flow, received by the other worker: closed on the owner; one SYN may open again.
  verdicts_seen.clear();
  offer(1 - owner, {tcp4(7, 3000, 0x11)});
  offer(1 - owner, {tcp4(7, 3100, 0x02), tcp4(7, 3101, 0x02)});
  ASSERT_EQ(verdicts_seen.size(), 3u);
  EXPECT_FALSE(verdicts_seen[0].flow_refused);
  EXPECT_FALSE(verdicts_seen[1].flow_refused);
  EXPECT_TRUE(verdicts_seen[2].flow_refused);
  EXPECT_EQ(engine.counters(0).flows_closed, 1u);
  engine.for_each_key(0, [&](const Engine::LiveKey& live) { EXPECT_EQ(live.counters.open_flows, 4u); });
}

// A key that expired and came back starts with no open flows, and a flow of its earlier life is not
// subtracted from the new count: its FIN closes nothing of this life.
TEST(EngineFlows, AKeyThatCameBackDoesNotCountTheFlowsOfItsEarlierLife) {
  Policy policy = max_flows_policy(2);
  policy.rules[0].per_key.idle_timeout_ns = 1'000'000'000;      // the key: 1 s
  policy.rules[0].per_key.flow_timeout_ns = 3'600'000'000'000;  // its flows: 1 h
  Harness h(policy);
  const auto refused = [&](std::uint16_t sport, std::uint8_t flags, std::uint64_t now) {
    h.send({tcp4(7, sport, flags)}, now);
    return h.verdicts[0].flow_refused;
  };
  EXPECT_FALSE(refused(4000, 0x02, 1000));
  EXPECT_FALSE(refused(4001, 0x02, 2000));
  EXPECT_TRUE(refused(4002, 0x02, 3000));
  // 2 s later the key is renewed: two new flows open, a third is refused.
  EXPECT_FALSE(refused(4100, 0x02, 2'000'003'000));
  EXPECT_FALSE(refused(4101, 0x02, 2'000'004'000));
  EXPECT_TRUE(refused(4102, 0x02, 2'000'005'000));
  // The FIN of a flow of the earlier life: metered, closes nothing of this one.
  EXPECT_FALSE(refused(4000, 0x11, 2'000'006'000));
  EXPECT_TRUE(refused(4103, 0x02, 2'000'007'000));
  EXPECT_EQ(h.engine->counters(0).flows_opened, 4u);
  EXPECT_EQ(h.engine->counters(0).flows_closed, 0u);
  h.engine->for_each_key(0, [&](const Engine::LiveKey& live) { EXPECT_EQ(live.counters.open_flows, 2u); });
}

// Idle flows are closed by the sweep (their key's count goes down) or at their own next packet.
TEST(EngineFlows, IdleFlowsCloseAndTheirKeyMayOpenAgain) {
  Policy policy = max_flows_policy(2);
  policy.rules[0].per_key.flow_timeout_ns = 1'000'000;  // 1 ms
  Harness h(policy);
  h.send({tcp4(7, 5000, 0x02), tcp4(7, 5001, 0x02), tcp4(7, 5002, 0x02)}, 1000);
  EXPECT_TRUE(h.verdicts[2].flow_refused);
  // 2 ms later: bursts of another source let the sweep (64 slots a burst) find both flows idle.
  for (int i = 0; i < 4; ++i) h.send({tcp4(8, 9, 0x10)}, 2'000'000 + i);
  EXPECT_EQ(h.engine->counters(0).flows_expired, 2u);
  h.engine->for_each_key(0, [&](const Engine::LiveKey& live) { EXPECT_EQ(live.counters.open_flows, 0u); });
  h.send({tcp4(7, 5003, 0x02), tcp4(7, 5004, 0x02), tcp4(7, 5005, 0x02)}, 3'000'000);
  EXPECT_FALSE(h.verdicts[0].flow_refused);
  EXPECT_FALSE(h.verdicts[1].flow_refused);
  EXPECT_TRUE(h.verdicts[2].flow_refused);
  // A flow idle past its timeout is closed at its own next packet too (before any sweep).
  // 5003 and 5004 idle 2 ms: each closed at its packet; the SYN opens 5003 again, the ACK opens nothing.
  h.send({tcp4(7, 5003, 0x02), tcp4(7, 5004, 0x10)}, 5'000'000);
  EXPECT_FALSE(h.verdicts[0].flow_refused);
  EXPECT_FALSE(h.verdicts[1].flow_refused);
  EXPECT_EQ(h.engine->counters(0).flows_expired, 4u);
  EXPECT_EQ(h.engine->counters(0).flows_opened, 5u);
  std::uint64_t open = 0;
  h.engine->for_each_key(0, [&](const Engine::LiveKey& live) { open += live.counters.open_flows; });
  EXPECT_EQ(open, 1u);  // source 7's 5003
}

// flow-excess green (a dry run): a refused flow's packet is green, forwarded, counted refused, and
// unmetered: the parent meter above the rule never sees it (the admitted flow's later packet still
// finds the parent's tokens, which three refused packets of 80 B would have spent).
TEST(EngineFlows, FlowExcessColorsRefusedPacketsWhichSkipTheParent) {
  Policy policy = max_flows_policy(1);
  policy.profiles.push_back({"parent", params_1r2c(1000, 200)});  // 200 B, no refill to speak of
  policy.rules[0].parent = "parent";
  policy.rules[0].per_key.flow_excess = Color::green;
  Harness h(policy);
  h.send({tcp4(7, 6000, 0x02), tcp4(7, 6001, 0x02), tcp4(7, 6002, 0x02), tcp4(7, 6003, 0x02), tcp4(7, 6000, 0x10)}, 1000);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_TRUE(h.verdicts[i].flow_refused) << i;
    EXPECT_EQ(h.verdicts[i].out, Color::green) << i;
    EXPECT_FALSE(h.verdicts[i].drop) << i;
  }
  EXPECT_FALSE(h.verdicts[4].flow_refused);
  EXPECT_EQ(h.verdicts[4].out, Color::green) << "the parent was charged for refused packets";
  EXPECT_EQ(h.engine->counters(0).flows_refused, 3u);
  EXPECT_EQ(h.engine->counters(0).flows_opened, 1u);
}

// A flow table that cannot be had refuses the policy, naming the rule, its flow-capacity and the bytes.
TEST(EngineFlows, AFlowTableThatCannotBeHadRefusesThePolicy) {
  struct UpTo1GiB : MemorySource {  // the heap, but no block of more than 1 GiB
    void* reserve(std::size_t bytes, std::size_t align) noexcept override {
      return bytes > (std::size_t{1} << 30) ? nullptr : heap_memory().reserve(bytes, align);
    }
    bool commit(void* p, std::size_t bytes) noexcept override { return heap_memory().commit(p, bytes); }
    void release(void* p, std::size_t bytes) noexcept override { heap_memory().release(p, bytes); }
  } source;
  Policy policy = max_flows_policy(4);
  policy.rules[0].per_key.capacity = 1024;
  policy.rules[0].per_key.flow_capacity = kMaxFlowCapacity;  // 2 GiB of slots
  EngineOptions options;
  options.memory = {&source};
  auto made = Engine::create(policy, *policer::TickRate::make(kHz), options);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.error().message,
            "rule guests: cannot allocate its flow table: flow-capacity 16m flows needs 2.00 GiB per worker (33554432 "
            "slots of 64 bytes and 65537 expiry buckets of 8), resident from the start: out of memory");
  policy.rules[0].per_key.flow_capacity = 1u << 16;  // 8 MiB: fits
  EXPECT_TRUE(Engine::create(policy, *policer::TickRate::make(kHz), options).ok());
}

TEST(EngineKeys, AParentAboveAnAggregateMeter) {
  Policy policy;
  policy.profiles.push_back({"child", params_1r2c(1'000'000, 3000)});
  policy.profiles.push_back({"parent", params_1r2c(1'000'000, 1000)});
  Rule r = rule("both", 1, "child");
  r.parent = "parent";
  policy.rules.push_back(r);
  Harness h(policy);
  // The child passes 3 x 1000 B; the parent only the first 1000; the child's red skips the parent.
  h.send({udp4(1000, 1, 53), udp4(1000, 1, 53), udp4(1000, 1, 53), udp4(1000, 1, 53)}, 0);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  EXPECT_EQ(h.verdicts[1].out, Color::red);  // parent red: the child's tokens are not refunded
  EXPECT_EQ(h.verdicts[2].out, Color::red);
  EXPECT_EQ(h.verdicts[3].out, Color::red);  // child red
  // 1 ms later both have 1000 B more: the child had 0 left, so the child is the limit now.
  h.send({udp4(1000, 1, 53), udp4(1000, 1, 53)}, kHz / 1000);
  EXPECT_EQ(h.verdicts[0].out, Color::green);
  EXPECT_EQ(h.verdicts[1].out, Color::red);
}

}  // namespace
}  // namespace tricolor::dataplane
