// Exactness of the limiters (issue 13): each against the independent model (tests/policer/limiter_model.hpp)
// packet for packet under random traffic, probes at every tick around the instant a packet starts to
// conform, stale clocks, idle gaps of years, huge packets, and time split into many checks.
#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <vector>

#include "policer/shared_meter.hpp"
#include "tests/policer/limiter_test_support.hpp"

namespace tricolor::test {
namespace {

struct Case {
  Algorithm algorithm;
  Unit unit;
  bool aware;
};

std::string case_name(const Case& c) {
  std::string name(policer::to_string(c.algorithm));
  std::replace(name.begin(), name.end(), '-', '_');
  return name + "_" + std::string(policer::to_string(c.unit)) + (c.aware ? "_aware" : "_blind");
}

void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Algorithm a : kLimiters)
    for (Unit u : {Unit::bytes, Unit::packets})
      for (bool aware : {false, true}) cases.push_back({a, u, aware});
  return cases;
}

class AgainstModel : public ::testing::TestWithParam<Case> {};

// The per-key form (State, through Meter): a sliding window of at most four sub-windows. Colors and
// every word of state, packet for packet.
TEST_P(AgainstModel, RandomTrafficColorsAndStateMatchPacketForPacket) {
  const Case c = GetParam();
  Rng rng{0x13a1u + static_cast<unsigned>(c.algorithm) * 31 + static_cast<unsigned>(c.unit) * 7 + c.aware};
  std::array<std::uint64_t, 3> colors{};
  for (int meter_index = 0; meter_index < 300; ++meter_index) {
    const std::uint64_t hz = random_hz(rng);
    const Params params = random_limiter_params(rng, c.algorithm, c.unit, hz, policer::kMaxStateWindowBuckets);
    const Profile profile = make_profile(params, hz);
    const std::uint64_t created = rng.chance(50) ? 0 : rng.below(std::uint64_t{1} << 40);
    policer::Meter meter(profile, created);
    LimiterModel model(to_model(params, hz), created);
    std::uint64_t t = created;
    for (int i = 0; i < 300; ++i) {
      const std::uint32_t length = random_limiter_length(rng, params);
      t = random_limiter_time(rng, params, hz, std::max(t, model.now()), length);
      const Color in = static_cast<Color>(rng.below(3));
      const Color got = c.aware ? meter.check_aware(t, length, in) : meter.check_blind(t, length);
      const bool want = model.check(t, length, !c.aware || in == Color::green);
      ASSERT_EQ(policer::to_string(got), want ? "green" : "red")
          << describe_limiter(params, hz) << " packet " << i << " length " << length << " at t=" << t;
      ASSERT_EQ(meter.state().last, model.now());
      ASSERT_TRUE(same_state(meter.state(), profile, model)) << describe_limiter(params, hz) << " packet " << i;
      ++colors[static_cast<int>(got)];
    }
  }
  // The generator must exercise both outcomes.
  EXPECT_GT(colors[0], 2000u);
  EXPECT_GT(colors[2], 2000u);
  EXPECT_EQ(colors[1], 0u);  // two colors
}

INSTANTIATE_TEST_SUITE_P(All, AgainstModel, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return case_name(info.param); });

// The aggregate form of the sliding window, any K from 1 to 64 (AggregateMeter), and the per-key form
// through the shared meter's bursts: both against the model.
TEST(SlidingWindowWide, RandomTrafficMatchesTheModelForEveryK) {
  Rng rng{0x5e1d};
  std::array<std::uint64_t, 3> colors{};
  for (int meter_index = 0; meter_index < 600; ++meter_index) {
    const Unit unit = rng.chance(50) ? Unit::bytes : Unit::packets;
    const std::uint64_t hz = random_hz(rng);
    const Params params = random_limiter_params(rng, Algorithm::sliding_window, unit, hz);
    const Profile profile = make_profile(params, hz);
    const std::uint64_t created = rng.below(std::uint64_t{1} << 40);
    policer::AggregateMeter meter(profile, created);
    LimiterModel model(to_model(params, hz), created);
    std::uint64_t t = created;
    for (int i = 0; i < 300; ++i) {
      const std::uint32_t length = random_limiter_length(rng, params);
      t = random_limiter_time(rng, params, hz, std::max(t, model.now()), length);
      const bool aware = rng.chance(20);
      const Color in = static_cast<Color>(rng.below(3));
      const Color got = aware ? meter.check_aware(t, length, in) : meter.check_blind(t, length);
      const bool want = model.check(t, length, !aware || in == Color::green);
      ASSERT_EQ(policer::to_string(got), want ? "green" : "red")
          << describe_limiter(params, hz) << " packet " << i << " length " << length << " at t=" << t;
      ASSERT_EQ(u128(meter.state().level[0]), model.window_count(model.now()));
      ++colors[static_cast<int>(got)];
    }
  }
  EXPECT_GT(colors[0], 10000u);
  EXPECT_GT(colors[2], 10000u);
}

TEST(SharedMeterBursts, EveryLimiterColorsABurstAsTheModelDoes) {
  Rng rng{0xb5};
  for (Algorithm a : kLimiters) {
    for (int round = 0; round < 100; ++round) {
      const std::uint64_t hz = random_hz(rng);
      const Unit unit = rng.chance(50) ? Unit::bytes : Unit::packets;
      const Params params = random_limiter_params(rng, a, unit, hz, policer::kMaxStateWindowBuckets);
      const Profile profile = make_profile(params, hz);
      policer::SharedMeter shared(profile, 0);
      LimiterModel model(to_model(params, hz), 0);
      std::uint64_t t = 0;
      for (int burst = 0; burst < 30; ++burst) {
        std::vector<std::uint64_t> times;
        std::vector<std::uint32_t> lengths;
        const std::size_t n = 1 + rng.below(32);
        for (std::size_t i = 0; i < n; ++i) {
          lengths.push_back(random_limiter_length(rng, params));
          t = random_limiter_time(rng, params, hz, t, lengths.back());
          times.push_back(t);
        }
        std::vector<Color> colors(n);
        shared.check_burst(times, lengths, {}, colors);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(colors[i] == Color::green, model.check(times[i], lengths[i])) << describe_limiter(params, hz);
      }
    }
  }
}

// ---- boundaries: every tick around the instant a packet starts to conform ----

TEST(Boundaries, FixedWindowOpensExactlyAtTheEndOfThePrevious) {
  Rng rng{0xf1};
  for (int round = 0; round < 2000; ++round) {
    const std::uint64_t hz = random_hz(rng);
    const Params p = random_limiter_params(rng, Algorithm::fixed_window, Unit::bytes, hz);
    const Profile profile = make_profile(p, hz);
    const std::uint64_t opened = rng.below(std::uint64_t{1} << 40);
    const std::uint64_t w = static_cast<std::uint64_t>((u128(p.window) * hz + kSecondNs - 1) / kSecondNs);
    policer::Meter m(profile, 0);
    const auto all = static_cast<std::uint32_t>(p.limit);
    ASSERT_EQ(m.check_blind(opened, all), Color::green) << describe_limiter(p, hz);  // opens the window, spends it
    for (std::uint64_t k = w > 3 ? w - 3 : 1; k <= w + 3; ++k) {
      policer::Meter probe = m;
      ASSERT_EQ(probe.check_blind(opened + k, 1) == Color::green, k >= w)
          << describe_limiter(p, hz) << " k=" << k << " window " << w << " ticks";
    }
  }
}

TEST(Boundaries, SlidingWindowForgetsASubWindowExactlyAtItsKthSuccessor) {
  Rng rng{0xf2};
  for (int round = 0; round < 2000; ++round) {
    const std::uint64_t hz = random_hz(rng);
    const bool wide = rng.chance(50);
    const Params p = random_limiter_params(rng, Algorithm::sliding_window, Unit::bytes, hz,
                                           wide ? 64 : policer::kMaxStateWindowBuckets);
    const Profile profile = make_profile(p, hz);
    const std::uint64_t w = static_cast<std::uint64_t>(
        (u128(p.window) * hz + u128(kSecondNs) * p.buckets - 1) / (u128(kSecondNs) * p.buckets));
    // Fill the limit in one sub-window at a random tick in it; the first tick of sub-window j + K
    // (and not one tick before) admits again.
    const std::uint64_t j = rng.below(std::uint64_t{1} << 20);
    if (u128(j + p.buckets + 1) * w > std::numeric_limits<std::uint64_t>::max()) continue;  // beyond the tick counter
    const std::uint64_t at = j * w + rng.below(w);
    const std::uint64_t edge = (j + p.buckets) * w;
    policer::Meter state_meter(profile, 0);
    policer::AggregateMeter wide_meter(profile, 0);
    const auto all = static_cast<std::uint32_t>(p.limit);
    if (!wide) {
      ASSERT_EQ(state_meter.check_blind(at, all), Color::green);
    }
    ASSERT_EQ(wide_meter.check_blind(at, all), Color::green);
    for (std::uint64_t t = edge - std::min<std::uint64_t>(edge - at, 3); t <= edge + 3; ++t) {
      policer::Meter s = state_meter;
      policer::AggregateMeter v = wide_meter;
      if (!wide) {
        ASSERT_EQ(s.check_blind(t, 1) == Color::green, t >= edge) << describe_limiter(p, hz) << " t=" << t;
      }
      ASSERT_EQ(v.check_blind(t, 1) == Color::green, t >= edge) << describe_limiter(p, hz) << " t=" << t;
    }
  }
}

// GCRA: after a packet that leaves the TAT exactly at the limit, the next cell conforms from the first
// tick t with TAT - t <= tau (in I.371's terms), computed here from the parameters as a rational.
TEST(Boundaries, GcraConformsFromTheFirstTickTheTatAllows) {
  Rng rng{0xf3};
  int probes = 0;
  for (int round = 0; round < 2000; ++round) {
    const std::uint64_t hz = random_hz(rng);
    const Params p = random_limiter_params(rng, Algorithm::gcra, Unit::bytes, hz);
    const Profile profile = make_profile(p, hz);
    const std::uint64_t t0 = rng.below(1'000'000);
    policer::Meter m(profile, t0);
    // Everything at t0: n one-byte cells pass where n = floor(tau * rate) + 1, as one packet of n bytes
    // and not one more; the TAT is then t0 + n * T.
    const auto n = static_cast<std::uint64_t>(u128(p.tolerance) * p.rate / kSecondNs + 1);
    policer::Meter over = m;
    ASSERT_EQ(over.check_blind(t0, static_cast<std::uint32_t>(n + 1)), Color::red) << describe_limiter(p, hz);
    ASSERT_EQ(m.check_blind(t0, static_cast<std::uint32_t>(n)), Color::green) << describe_limiter(p, hz);
    ASSERT_EQ(m.check_blind(t0, 1), Color::red);
    // The next conforms at the first t with t0 + n*T - t <= tau, i.e. t >= t0 + n*hz/rate - tau*hz/1e9.
    // In units of 1/(rate * 1e9) tick: t * rate * 1e9 >= t0*rate*1e9 + n*hz*1e9 - tau*hz*rate.
    const u128 need = u128(n) * hz * kSecondNs - u128(p.tolerance) * hz * p.rate;  // > 0
    const u128 per_tick = u128(p.rate) * kSecondNs;
    const u128 k_star = (need + per_tick - 1) / per_tick;
    if (k_star > (u128(1) << 40)) continue;
    const auto k = static_cast<std::uint64_t>(k_star);
    for (std::uint64_t d = k > 2 ? k - 2 : 0; d <= k + 2; ++d) {
      policer::Meter probe = m;
      ASSERT_EQ(probe.check_blind(t0 + d, 1) == Color::green, d >= k) << describe_limiter(p, hz) << " d=" << d;
      ++probes;
    }
  }
  EXPECT_GT(probes, 5000);
}

// Smooth: a packet after the next free time passes; one tick before it does not.
TEST(Boundaries, SmoothAdmitsFromTheNextFreeTickOn) {
  Rng rng{0xf4};
  for (int round = 0; round < 2000; ++round) {
    const std::uint64_t hz = random_hz(rng);
    Params p = random_limiter_params(rng, Algorithm::smooth, Unit::bytes, hz);
    const Profile profile = make_profile(p, hz);
    policer::Meter m(profile, 0);
    // A packet of b bytes when nothing is stored pushes the next free time b*hz/rate ticks ahead.
    const std::uint32_t all = static_cast<std::uint32_t>(std::min<std::uint64_t>(p.max_burst, 0xffffffff));
    if (all != 0) {
      ASSERT_EQ(m.check_blind(0, all), Color::green);  // spends every stored permit
    }
    const std::uint32_t b = static_cast<std::uint32_t>(rng.between(1, 100'000));
    ASSERT_EQ(m.check_blind(0, b), Color::green);
    const u128 k_star = (u128(b) * hz + p.rate - 1) / p.rate;
    if (k_star > (u128(1) << 40)) continue;
    const auto k = static_cast<std::uint64_t>(k_star);
    for (std::uint64_t d = k > 2 ? k - 2 : 0; d <= k + 2; ++d) {
      policer::Meter probe = m;
      ASSERT_EQ(probe.check_blind(d, 1) == Color::green, d >= k) << describe_limiter(p, hz) << " d=" << d;
    }
  }
}

// ---- stale clocks ----

TEST(StaleTime, AnEarlierCheckIsACheckAtTheLatestTime) {
  Rng rng{0x57a1e};
  for (Algorithm a : kLimiters) {
    for (int round = 0; round < 200; ++round) {
      const std::uint64_t hz = random_hz(rng);
      const Params p = random_limiter_params(rng, a, Unit::bytes, hz, policer::kMaxStateWindowBuckets);
      const Profile profile = make_profile(p, hz);
      policer::Meter m(profile, 0);
      const std::uint64_t t = rng.between(1, std::uint64_t{1} << 40);
      for (int i = 0; i < 5; ++i) m.check_blind(t, static_cast<std::uint32_t>(rng.between(1, 3000)));
      // The same packet checked at an earlier time and at `t` gets the same color and the same state.
      policer::Meter stale = m, current = m;
      const std::uint32_t length = random_limiter_length(rng, p);
      const std::uint64_t earlier = t - rng.between(1, t);
      ASSERT_EQ(stale.check_blind(earlier, length), current.check_blind(t, length)) << describe_limiter(p, hz);
      ASSERT_EQ(stale.state().last, t);
      ASSERT_EQ(stale.state().level[0], current.state().level[0]);
      ASSERT_EQ(stale.state().level[1], current.state().level[1]);
    }
  }
}

// ---- idle gaps of years, up to the end of the tick counter ----

TEST(LongGaps, YearsOfIdleRestoreAFreshMeterWithoutOverflow) {
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  Rng rng{0x9ea5};
  for (Algorithm a : kLimiters) {
    for (Unit unit : {Unit::bytes, Unit::packets}) {
      for (std::uint64_t hz : {std::uint64_t{1}, std::uint64_t{1'000'000'000}, kMaxHz}) {
        for (int round = 0; round < 20; ++round) {
          const Params p = random_limiter_params(rng, a, unit, hz, policer::kMaxStateWindowBuckets);
          const Profile profile = make_profile(p, hz);
          policer::Meter m(profile, 0);
          LimiterModel model(to_model(p, hz), 0);
          SCOPED_TRACE(describe_limiter(p, hz));
          for (std::uint64_t t : {std::uint64_t{0}, hz * 86'400 * 365, hz * 86'400 * 365 * 50, max - 1, max}) {
            // Greedy at each instant: everything the meter gives, packet for packet with the model.
            for (int i = 0; i < 40; ++i) {
              const std::uint32_t length = random_limiter_length(rng, p);
              ASSERT_EQ(m.check_blind(t, length) == Color::green, model.check(t, length)) << "at t=" << t << " packet " << i;
            }
          }
        }
      }
    }
  }
}

// ---- huge packets ----

TEST(HugePackets, AreMeteredAsTheCapAndNeverWrap) {
  // A window admits no packet above its limit; GCRA none above its bucket; smooth and warm-up admit
  // one after idle (prepayment) and then wait for what it cost, capped at 2^30 + 1 tokens.
  const std::uint64_t hz = kMaxHz;
  const std::uint32_t huge = std::numeric_limits<std::uint32_t>::max();
  const Profile fixed = make_profile({.algorithm = Algorithm::fixed_window, .limit = kMaxBurst, .window = kSecondNs}, hz);
  const Profile sliding = make_profile(
      {.algorithm = Algorithm::sliding_window, .limit = kMaxBurst, .window = kSecondNs, .buckets = 4}, hz);
  const Profile gcra = make_profile({.algorithm = Algorithm::gcra, .rate = 1, .tolerance = kMaxDurationNs}, hz);
  const Profile smooth = make_profile({.algorithm = Algorithm::smooth, .rate = 1, .max_burst = kMaxBurst}, hz);
  for (const Profile* p : {&fixed, &sliding, &gcra}) {
    policer::Meter m(*p, 0);
    EXPECT_EQ(m.check_blind(0, huge), Color::red) << policer::to_string(p->algorithm());
    EXPECT_EQ(m.check_blind(0, static_cast<std::uint32_t>(kMaxBurst + 1)), Color::red);
    EXPECT_EQ(m.check_blind(0, 1), Color::green);  // nothing was taken
  }
  policer::Meter m(smooth, 0);
  ASSERT_EQ(m.check_blind(0, huge), Color::green);
  // Stored 2^30 paid 2^30 of it; the one token left is owed: hz ticks at 1 token/s.
  EXPECT_EQ(m.state().level[0], 0u);
  EXPECT_EQ(m.state().level[1], hz);
  EXPECT_EQ(m.check_blind(hz - 1, 0), Color::red);
  EXPECT_EQ(m.check_blind(hz, 0), Color::green);
  // The warm-up's dearest case: a cold meter of the largest zone spending it all at once.
  for (std::uint32_t c : {2u, 3u, 100u}) {
    const std::uint64_t rate = 1000;
    const u128 most = u128(kMaxBurst) * 2 * kSecondNs * (c + 1) / (u128(rate) * (c + 5) * c);
    const Params wp{.algorithm = Algorithm::warmup, .rate = rate, .period = static_cast<std::uint64_t>(most), .cold_factor = c};
    const Profile warm = make_profile(wp, hz);
    policer::Meter w(warm, 0);
    LimiterModel model(to_model(wp, hz), 0);
    ASSERT_EQ(w.check_blind(0, huge), Color::green);
    ASSERT_TRUE(model.check(0, huge));
    EXPECT_EQ(u128(w.state().level[1]), model.next_free()) << "cold-factor " << c;
  }
}

// ---- splitting time: many checks of nothing change nothing that one check would not ----

TEST(Splitting, ZeroLengthChecksInBetweenChangeNoColor) {
  Rng rng{0x5b1};
  for (Algorithm a : {Algorithm::sliding_window, Algorithm::gcra, Algorithm::smooth, Algorithm::warmup}) {
    for (int round = 0; round < 300; ++round) {
      const std::uint64_t hz = random_hz(rng);
      const Params p = random_limiter_params(rng, a, Unit::bytes, hz, policer::kMaxStateWindowBuckets);
      const Profile profile = make_profile(p, hz);
      policer::Meter whole(profile, 0), pieces(profile, 0);
      std::uint64_t t = 0;
      for (int i = 0; i < 100; ++i) {
        const std::uint32_t length = random_limiter_length(rng, p);
        const std::uint64_t next = random_limiter_time(rng, p, hz, t, length);
        // Advances in between (no packet) must not change what the next packet gets.
        for (std::uint64_t s = t; s < next && s - t < 5; s += 1 + rng.below(next - s))
          policer::with_algorithm(a, [&](auto algo) { decltype(algo)::advance(pieces.state(), profile, s); });
        t = std::max(t, next);
        ASSERT_EQ(whole.check_blind(t, length), pieces.check_blind(t, length)) << describe_limiter(p, hz) << " packet " << i;
        ASSERT_EQ(whole.state().level[0], pieces.state().level[0]);
        ASSERT_EQ(whole.state().level[1], pieces.state().level[1]);
      }
    }
  }
}

}  // namespace
}  // namespace tricolor::test
