// Live changes, exactly (doc/engine.md, "When a change takes effect"): a change takes effect at the tick of the first burst
// under the new rule set; a meter that was not checked since catches up through every change it
// missed, in order, each at its own tick. Checked against the independent reference model
// (tests/policer/reference_model.hpp) packet for packet, for per-key meters, aggregate meters and parents;
// and a rate change does not rebuild the classifier.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "dataplane/replay/splitmix64.hpp"
#include "tests/dataplane/engine/engine_test_support.hpp"
#include "tests/policer/reference_model.hpp"

namespace tricolor::dataplane {
namespace {

using namespace engine_test;
using test::RefAlgorithm;
using test::RefColor;
using test::RefParams;
using test::ReferenceMeter;

constexpr std::uint8_t kNoRuleHost = 99;  // a packet to 10.0.0.99 matches no rule: it only marks a burst

policer::Params packet_1r2c(std::uint64_t pps, std::uint64_t burst) {
  policer::Params p = params_1r2c(pps, burst);
  p.unit = policer::Unit::packets;
  return p;
}

RefParams reference(const policer::Params& p) {
  RefParams r{};
  switch (p.algorithm) {
    case policer::Algorithm::one_rate_two_color: r.algorithm = RefAlgorithm::one_rate_two_color; break;
    case policer::Algorithm::srtcm: r.algorithm = RefAlgorithm::srtcm; break;
    case policer::Algorithm::trtcm: r.algorithm = RefAlgorithm::trtcm; break;
    case policer::Algorithm::trtcm_4115: r.algorithm = RefAlgorithm::trtcm_4115; break;
    default: break;  // the limiters are not generated here
  }
  r.packet_mode = p.unit == policer::Unit::packets;
  r.cir = p.cir, r.cbs = p.cbs, r.eir = p.eir, r.ebs = p.ebs, r.pir = p.pir, r.pbs = p.pbs;
  r.hz = kHz;
  return r;
}

Color color(RefColor c) {
  return c == RefColor::green ? Color::green : c == RefColor::yellow ? Color::yellow : Color::red;
}

// `count` packets to 10.0.0.<host> at tick `now`, in bursts of at most 64; the colors, in order.
std::vector<Color> send_many(Harness& h, std::uint8_t host, std::size_t count, std::uint64_t now,
                             std::size_t size = 100) {
  std::vector<Color> colors;
  while (colors.size() < count) {
    const std::size_t n = std::min<std::size_t>(Engine::kMaxBurst, count - colors.size());
    h.send(std::vector<std::vector<std::uint8_t>>(n, udp4(size, host, 53)), now);
    for (const Verdict& v : h.verdicts) colors.push_back(v.out);
  }
  return colors;
}

std::vector<Color> model_many(ReferenceMeter& m, std::size_t count, std::uint64_t now, std::size_t size = 100) {
  std::vector<Color> colors;
  for (std::size_t i = 0; i < count; ++i) colors.push_back(color(m.check(now, size)));
  return colors;
}

std::size_t greens(const std::vector<Color>& colors) { return std::count(colors.begin(), colors.end(), Color::green); }

// The case: 1 pps with a burst of 100, a key drained at t = 0, changed to 1000 pps at 10 s and
// back to 1 pps at 10.001 s. At 10.002 s the key has 10 tokens from the first 10 s, 1 from the
// millisecond at 1000 pps, 0.001 from the last: 11 green. Brought forward with the last change only
// (the old engine), it had been refilled at 1 pps for 10.001 s... and the change before that was lost:
// 100 green.
enum class Metered { per_key, aggregate, parent };

void two_changes_between_packets(Metered metered) {
  const policer::Params slow = packet_1r2c(1, 100), fast = packet_1r2c(1000, 100);
  const policer::Params roomy = packet_1r2c(1'000'000, 1'000'000);
  Policy policy;
  policy.profiles.push_back({"p", slow});
  policy.profiles.push_back({"big", roomy});
  Rule r = metered == Metered::per_key ? rule("keys", 1, "p") : rule("one", 1, metered == Metered::parent ? "big" : "p");
  if (metered == Metered::per_key) r.per_key.kind = KeyKind::dst;
  if (metered == Metered::parent) r.parent = "p";
  policy.rules.push_back(r);
  Harness h(policy);
  ReferenceMeter model(reference(slow), 0);

  EXPECT_EQ(send_many(h, 1, 100, 0), model_many(model, 100, 0));  // drained
  Policy next = policy;
  next.profiles[0].params = fast;
  ASSERT_TRUE(h.engine->update(next).ok());
  h.send({udp4(100, kNoRuleHost, 53)}, 10 * kHz);  // the first burst under it: the change's tick
  model.change(reference(fast), 10 * kHz);
  ASSERT_TRUE(h.engine->update(policy).ok());
  h.send({udp4(100, kNoRuleHost, 53)}, 10 * kHz + kHz / 1000);
  model.change(reference(slow), 10 * kHz + kHz / 1000);

  const std::vector<Color> got = send_many(h, 1, 128, 10 * kHz + 2 * kHz / 1000);
  EXPECT_EQ(got, model_many(model, 128, 10 * kHz + 2 * kHz / 1000));
  EXPECT_EQ(greens(got), 11u);
}

TEST(LiveChange, TwoChangesBeforeAnIdleKeysNextPacketBothCount) { two_changes_between_packets(Metered::per_key); }
TEST(LiveChange, TwoChangesBeforeAnAggregateMetersNextPacketBothCount) {
  two_changes_between_packets(Metered::aggregate);
}
TEST(LiveChange, TwoChangesBeforeAParentMetersNextPacketBothCount) { two_changes_between_packets(Metered::parent); }

// A change takes effect at the first burst under the new set, not when it was published.
TEST(LiveChange, TakesEffectAtTheFirstBurstUnderTheNewSet) {
  const policer::Params slow = packet_1r2c(1, 100), fast = packet_1r2c(1000, 100);
  Policy policy;
  policy.profiles.push_back({"p", slow});
  policy.rules.push_back(rule("one", 1, "p"));
  Harness h(policy);
  send_many(h, 1, 100, 0);  // drained
  Policy next = policy;
  next.profiles[0].params = fast;
  ASSERT_TRUE(h.engine->update(next).ok());
  // Published "at" 0; the first burst under it is at 5 s: 5 tokens at the old rate, then 1000 pps.
  const std::vector<Color> got = send_many(h, 1, 20, 5 * kHz);
  EXPECT_EQ(greens(got), 5u);
  EXPECT_EQ(greens(send_many(h, 1, 20, 5 * kHz + kHz / 100)), 10u);  // 10 ms at 1000 pps
}

// Random traffic to many keys and an aggregate, with random changes of rates and sizes (the same
// algorithm: levels kept) and of algorithm (levels start full), each key checked against its own
// reference meter that sees every change at the tick of the first burst after it.
TEST(LiveChange, RandomChangesAgreeWithTheModelPacketForPacket) {
  SplitMix64 rng(20261123);
  auto random_profile = [&]() {
    policer::Params p;
    switch (rng.below(3)) {
      case 0:
        p.algorithm = policer::Algorithm::trtcm;
        p.cir = 1000 + rng.below(20000), p.pir = p.cir + rng.below(20000);
        p.cbs = 200 + rng.below(5000), p.pbs = 200 + rng.below(5000);
        break;
      case 1:
        p.algorithm = policer::Algorithm::srtcm;
        p.cir = 1000 + rng.below(20000), p.cbs = 200 + rng.below(5000), p.ebs = rng.below(5000);
        break;
      default:
        p.algorithm = policer::Algorithm::trtcm_4115;
        p.cir = 1000 + rng.below(20000), p.eir = rng.below(20000);
        p.cbs = 200 + rng.below(5000), p.ebs = 200 + rng.below(5000);
        break;
    }
    return p;
  };
  Policy policy;
  policy.profiles.push_back({"keys", random_profile()});
  policy.profiles.push_back({"all", random_profile()});
  Rule keyed = rule("keyed", 1, "keys");
  keyed.match.dst.reset();
  keyed.match.dst_ports = {{53, 53}};
  keyed.per_key.kind = KeyKind::dst;
  keyed.per_key.idle_timeout_ns = 3600 * kHz;  // no key is renewed: every change is carried
  policy.rules.push_back(keyed);
  Rule aggregate = rule("aggregate", 1, "all");
  aggregate.match.dst.reset();
  aggregate.match.dst_ports = {{80, 80}};
  policy.rules.push_back(aggregate);
  Harness h(policy);

  std::map<std::uint8_t, ReferenceMeter> keys;  // by host
  ReferenceMeter all(reference(policy.profiles[1].params), 0);
  std::vector<std::pair<RefParams, bool>> pending;  // changes published, not yet seen by a burst
  std::uint64_t now = 0;
  std::size_t changes = 0;
  for (int round = 0; round < 3000; ++round) {
    now += rng.below(kHz / 50);
    if (rng.below(10) == 0) {  // a change of one profile or the other
      const bool of_keys = rng.below(2) == 0;
      policy.profiles[of_keys ? 0 : 1].params = random_profile();
      ASSERT_TRUE(h.engine->update(policy).ok());
      pending.emplace_back(reference(policy.profiles[of_keys ? 0 : 1].params), of_keys);
      ++changes;
    }
    // A burst of up to 8 packets, all at `now`, to a few keys and the aggregate.
    std::vector<std::vector<std::uint8_t>> frames;
    std::vector<std::pair<std::uint8_t, std::size_t>> sent;  // host (0: the aggregate), size
    for (std::size_t i = 0, n = 1 + rng.below(8); i < n; ++i) {
      const std::size_t size = 64 + rng.below(1400);
      const bool to_all = rng.below(4) == 0;
      const auto host = static_cast<std::uint8_t>(1 + rng.below(20));
      frames.push_back(udp4(size, host, to_all ? 80 : 53));
      sent.emplace_back(to_all ? 0 : host, size);
    }
    // The model: the changes published since the last burst take effect at this burst's tick.
    for (const auto& [to, of_keys] : pending) {
      if (of_keys) {
        for (auto& [host, meter] : keys) meter.change(to, now);
      } else {
        all.change(to, now);
      }
    }
    pending.clear();
    h.send(frames, now);
    for (std::size_t i = 0; i < sent.size(); ++i) {
      const auto [host, size] = sent[i];
      RefColor want;
      if (host == 0) {
        want = all.check(now, size);
      } else {
        auto it = keys.find(host);
        if (it == keys.end()) it = keys.emplace(host, ReferenceMeter(reference(policy.profiles[0].params), now)).first;
        want = it->second.check(now, size);
      }
      ASSERT_EQ(h.verdicts[i].out, color(want)) << "round " << round << ", packet " << i << ", host " << int(host)
                                                << ", after " << changes << " changes";
    }
  }
  EXPECT_GT(changes, 200u);
}

// A key idle across more changes than a rule remembers (kProfileHistory) cannot be brought forward
// exactly: it starts afresh, full at the current profile. A key checked in between is exact.
TEST(LiveChange, AKeyIdleAcrossMoreChangesThanTheHistoryHoldsStartsAfresh) {
  Policy policy;
  policy.profiles.push_back({"p", packet_1r2c(1, 100)});
  Rule r = rule("keys", 1, "p");
  r.match.dst.reset();
  r.per_key.kind = KeyKind::dst;
  policy.rules.push_back(r);
  Harness h(policy);
  send_many(h, 1, 100, 0);  // key .1 drained
  send_many(h, 2, 100, 0);  // key .2 drained
  ReferenceMeter model(reference(policy.profiles[0].params), 0);
  model_many(model, 100, 0);
  std::uint64_t now = 0;
  for (std::size_t change = 0; change <= kProfileHistory; ++change) {  // one more than the history holds
    policy.profiles[0].params = packet_1r2c(2 + change, 100 + change);
    ASSERT_TRUE(h.engine->update(policy).ok());
    now += kHz;
    h.send({udp4(100, kNoRuleHost, 53)}, now);
    model.change(reference(policy.profiles[0].params), now);
    if (change == kProfileHistory / 2) {  // key .2 is checked halfway: it stays exact
      EXPECT_EQ(send_many(h, 2, 1, now), model_many(model, 1, now));
    }
  }
  now += kHz;
  const std::size_t burst = 100 + kProfileHistory;
  EXPECT_EQ(greens(send_many(h, 1, 200, now)), burst) << "key .1 missed a forgotten change: full at the new burst";
  EXPECT_EQ(send_many(h, 2, 200, now), model_many(model, 200, now)) << "key .2 saw the changes it needs";
}

// A rate change does not rebuild the classifier (with 10 Ki rules it would pay a whole rte_acl
// build); a change of a match, or of the rules' order, does.
TEST(LiveChange, ARateChangeKeepsTheClassifier) {
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1000, 1000)});
  policy.profiles.push_back({"q", params_1r2c(2000, 2000)});
  for (int host = 1; host <= 200; ++host) policy.rules.push_back(rule("r" + std::to_string(host), host, "p"));
  Harness h(policy);
  EXPECT_EQ(h.engine->classifier_builds(), 1u);
  policy.profiles[0].params = params_1r2c(5000, 5000);  // new rates
  ASSERT_TRUE(h.engine->update(policy).ok());
  policy.rules[7].profile = "q";  // another profile
  policy.rules[9].on_color[2] = Action{};  // another action
  ASSERT_TRUE(h.engine->update(policy).ok());
  EXPECT_EQ(h.engine->classifier_builds(), 1u);
  h.send({udp4(100, 8, 53), udp4(100, 150, 53)}, 0);
  EXPECT_EQ(h.verdicts[0].rule, 7u);
  EXPECT_EQ(h.verdicts[1].rule, 149u);
  policy.rules[3].match.dst_ports = {{53, 53}};  // a match changed
  ASSERT_TRUE(h.engine->update(policy).ok());
  EXPECT_EQ(h.engine->classifier_builds(), 2u);
  std::swap(policy.rules[0], policy.rules[1]);  // the order changed
  ASSERT_TRUE(h.engine->update(policy).ok());
  EXPECT_EQ(h.engine->classifier_builds(), 3u);
  h.send({udp4(100, 1, 53), udp4(100, 2, 53)}, 0);
  EXPECT_EQ(h.verdicts[0].rule, 1u);
  EXPECT_EQ(h.verdicts[1].rule, 0u);
}

}  // namespace
}  // namespace tricolor::dataplane
