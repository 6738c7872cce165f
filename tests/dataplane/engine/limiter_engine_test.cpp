// The limiters (issue 13) through the engine: every algorithm as an aggregate meter, per key and as a
// parent, packet for packet against the independent model (tests/policer/limiter_model.hpp); the sliding
// window as an aggregate of 64 sub-windows and per key of at most 4 (a larger K refused, naming the
// rule, nothing applied); and live changes into and out of a sliding window on a meter that outlives
// the change (its counters made on the control side, before the workers see it).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dataplane/replay/splitmix64.hpp"
#include "tests/dataplane/engine/engine_test_support.hpp"
#include "tests/policer/limiter_model.hpp"

namespace tricolor::dataplane {
namespace {

using namespace engine_test;
using test::LimAlgorithm;
using test::LimiterModel;
using test::LimParams;
using policer::Algorithm;

struct Case {
  const char* name;
  policer::Params params;
  LimParams model;
};

// Each algorithm in bytes, its parameters given to both sides. `buckets` for the sliding window.
Case limiter_case(Algorithm algorithm, std::uint32_t buckets = 4) {
  policer::Params p{.algorithm = algorithm};
  LimParams m{};
  m.hz = kHz;
  switch (algorithm) {
    case Algorithm::fixed_window:
      p.limit = m.limit = 3'000, p.window = m.window_ns = 1'000'000;
      m.algorithm = LimAlgorithm::fixed_window;
      return {"fixed-window", p, m};
    case Algorithm::sliding_window:
      p.limit = m.limit = 3'000, p.window = m.window_ns = 1'000'000, p.buckets = m.buckets = buckets;
      m.algorithm = LimAlgorithm::sliding_window;
      return {"sliding-window", p, m};
    case Algorithm::gcra:
      p.rate = m.rate = 2'000'000, p.tolerance = m.tolerance_ns = 700'000;
      m.algorithm = LimAlgorithm::gcra;
      return {"gcra", p, m};
    case Algorithm::smooth:
      p.rate = m.rate = 2'000'000, p.max_burst = m.max_burst = 1'500;
      m.algorithm = LimAlgorithm::smooth;
      return {"smooth", p, m};
    default:
      p.rate = m.rate = 2'000'000, p.period = m.period_ns = 3'000'000, p.cold_factor = m.cold_factor = 3;
      m.algorithm = LimAlgorithm::warmup;
      return {"warmup", p, m};
  }
}

std::vector<Case> all_cases(std::uint32_t window_buckets) {
  std::vector<Case> cases;
  for (Algorithm a : {Algorithm::fixed_window, Algorithm::sliding_window, Algorithm::gcra, Algorithm::smooth,
                      Algorithm::warmup})
    cases.push_back(limiter_case(a, window_buckets));
  return cases;
}

Policy one_rule(const policer::Params& params, bool per_key) {
  Policy policy;
  policy.profiles.push_back({"limit", params});
  Rule r = rule("limited", 1, "limit");
  if (per_key) r.per_key.kind = KeyKind::dst;
  policy.rules.push_back(r);
  return policy;
}

// Random bursts (1 to 64 packets, 64 to 1500 bytes, gaps of 0 to 400 us) to 10.0.0.1, each packet's
// color compared with the model's.
void against_model(Harness& h, const LimParams& params, std::uint64_t seed, std::uint64_t start = 1) {
  LimiterModel model(params, 0);
  SplitMix64 random{seed};
  std::uint64_t now = start;
  std::size_t greens = 0, reds = 0;
  for (int burst = 0; burst < 400; ++burst) {
    now += random.next() % 400'000;
    const std::size_t n = 1 + random.next() % Engine::kMaxBurst;
    std::vector<std::vector<std::uint8_t>> frames;
    for (std::size_t i = 0; i < n; ++i) frames.push_back(udp4(64 + random.next() % 1437, 1, 53));
    h.send(frames, now);
    for (std::size_t i = 0; i < n; ++i) {
      const bool green = model.check(now, h.frames[i].size());
      ASSERT_EQ(h.verdicts[i].out, green ? Color::green : Color::red) << "burst " << burst << " packet " << i;
      (green ? greens : reds) += 1;
    }
  }
  // The traffic offers about 4x what each admits: both colors are seen.
  EXPECT_GT(greens, 100u);
  EXPECT_GT(reds, 100u);
}

TEST(LimiterEngine, AggregateMetersFollowTheModel) {
  for (const Case& c : all_cases(64)) {  // the aggregate sliding window with 64 sub-windows
    SCOPED_TRACE(c.name);
    Harness h(one_rule(c.params, false));
    against_model(h, c.model, 11);
  }
}

TEST(LimiterEngine, PerKeyMetersFollowTheModel) {
  for (const Case& c : all_cases(4)) {
    SCOPED_TRACE(c.name);
    Harness h(one_rule(c.params, true));
    against_model(h, c.model, 12);
    EXPECT_EQ(h.engine->live_keys(0), 1u);
  }
}

// A parent limiter above a generous 1R2C child: the packet's color is the parent's.
TEST(LimiterEngine, ParentMetersFollowTheModel) {
  for (const Case& c : all_cases(64)) {
    SCOPED_TRACE(c.name);
    Policy policy;
    policy.profiles.push_back({"wide", params_1r2c(1'000'000'000, 1u << 30)});
    policy.profiles.push_back({"limit", c.params});
    Rule r = rule("limited", 1, "wide");
    r.parent = "limit";
    policy.rules.push_back(r);
    Harness h(policy);
    against_model(h, c.model, 13);
  }
}

TEST(LimiterEngine, PerKeySlidingWindowOfMoreThanFourSubWindowsIsRefused) {
  Harness h(one_rule(limiter_case(Algorithm::sliding_window, 4).params, true));
  const std::uint64_t generation = h.engine->generation();
  for (std::uint32_t k : {5u, 64u}) {
    const auto refused = h.engine->update(one_rule(limiter_case(Algorithm::sliding_window, k).params, true));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().subject, "limit");
    EXPECT_EQ(refused.error().message,
              "rule limited: profile limit: sliding-window: buckets " + std::to_string(k) +
                  " does not fit a per-key meter, whose state holds 4 sub-window counters; give buckets 1 to 4 or "
                  "meter the rule as one aggregate");
  }
  EXPECT_EQ(h.engine->generation(), generation);  // nothing applied
  EXPECT_EQ(h.engine->policy().profiles[0].params.buckets, 4u);
  // The same profile as an aggregate is taken.
  EXPECT_TRUE(h.engine->update(one_rule(limiter_case(Algorithm::sliding_window, 64).params, false)).ok());
}

// An aggregate meter that outlives its rule set changes from trTCM into a sliding window of 64
// sub-windows, out of it into GCRA, and back: across families each change starts the meter afresh at
// the tick of the first burst under the new set, so the model restarts there.
TEST(LimiterEngine, AggregateChangesIntoAndOutOfASlidingWindow) {
  policer::Params trtcm{.algorithm = Algorithm::trtcm, .cir = 1'000'000, .cbs = 2'000, .pir = 2'000'000, .pbs = 4'000};
  Harness h(one_rule(trtcm, false));
  h.send({udp4(1000, 1, 53)}, 5);
  std::uint64_t start = 1'000'000;
  for (Algorithm a : {Algorithm::sliding_window, Algorithm::gcra, Algorithm::sliding_window}) {
    const Case c = limiter_case(a, 64);
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(h.engine->update(one_rule(c.params, false)).ok());
    // The first burst under the new set is at `start`: the model is created there.
    LimiterModel model(c.model, start);
    SplitMix64 random{start};
    std::uint64_t now = start;
    for (int burst = 0; burst < 200; ++burst) {
      const std::size_t n = 1 + random.next() % 16;
      std::vector<std::vector<std::uint8_t>> frames;
      for (std::size_t i = 0; i < n; ++i) frames.push_back(udp4(64 + random.next() % 1437, 1, 53));
      h.send(frames, now);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(h.verdicts[i].out, model.check(now, h.frames[i].size()) ? Color::green : Color::red)
            << "burst " << burst << " packet " << i;
      now += random.next() % 300'000;
    }
    start = now + 1'000'000;
  }
}

}  // namespace
}  // namespace tricolor::dataplane
