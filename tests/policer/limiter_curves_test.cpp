// What each limiter lets through over time, against the formulas that define it elsewhere: the fixed
// window's 2N across an edge; the sliding window's bound (N in any W - W/K, and that bound is tight);
// Guava's SmoothBursty and SmoothWarmingUp admission curves after idle; GCRA against the 1R2C meter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <vector>

#include "tests/policer/limiter_test_support.hpp"

namespace tricolor::test {
namespace {

// ---- fixed window: 2N across an edge ----

TEST(FixedWindow, LetsTwiceTheLimitThroughWithinTwoTicksAcrossAnEdge) {
  for (std::uint64_t n : {1u, 7u, 1000u}) {
    const std::uint64_t hz = 1'000'000;
    const Profile p = make_profile({.algorithm = Algorithm::fixed_window, .limit = n, .window = kSecondNs}, hz);
    policer::Meter m(p, 0);
    ASSERT_EQ(m.check_blind(0, 0), Color::green);  // the first check opens the window [0, 1 s), counting 0 bytes
    std::uint64_t before = 0, after = 0;
    while (m.check_blind(hz - 1, 1) == Color::green) ++before;  // the window's last tick
    while (m.check_blind(hz, 1) == Color::green) ++after;       // the next window's first
    EXPECT_EQ(before, n);
    EXPECT_EQ(after, n);  // 2N within two ticks, where a true window of 1 s would allow N
  }
}

// Greedy on/off traffic at random: N at most in each window the meter opened, 2N at most in any
// interval of W ticks (it spans at most two windows).
TEST(FixedWindow, NeverMoreThanTwiceTheLimitInAnyWindowLongInterval) {
  Rng rng{0xf1a};
  for (int round = 0; round < 200; ++round) {
    const std::uint64_t n = rng.between(1, 50), w = rng.between(1, 1000);
    const Profile p = make_profile({.algorithm = Algorithm::fixed_window, .unit = Unit::packets, .limit = n, .window = w * 1000}, 1'000'000);
    policer::Meter m(p, 0);
    std::deque<std::uint64_t> green;  // ticks of admitted packets within the last w ticks
    std::uint64_t t = 0, most = 0;
    for (int i = 0; i < 3000; ++i) {
      t += rng.chance(70) ? 0 : rng.below(w / 4 + 2);
      if (m.check_blind(t, 1) != Color::green) continue;
      green.push_back(t);
      while (green.front() + w <= t) green.pop_front();
      most = std::max<std::uint64_t>(most, green.size());
    }
    EXPECT_LE(most, 2 * n);
  }
}

// ---- sliding window: N in any interval of W - W/K + 1 ticks, and 2N in one tick more ----

TEST(SlidingWindow, AdmitsAtMostTheLimitInAnyIntervalOfWindowLessOneSubWindow) {
  Rng rng{0x51d};
  for (int round = 0; round < 300; ++round) {
    const std::uint32_t k = static_cast<std::uint32_t>(rng.between(1, 64));
    const std::uint64_t sub = rng.between(1, 50), n = rng.between(1, 50);
    const std::uint64_t window = sub * k;  // ticks (hz = 1e9: 1 tick = 1 ns)
    const Profile p = make_profile(
        {.algorithm = Algorithm::sliding_window, .unit = Unit::packets, .limit = n, .window = window, .buckets = k}, kSecondNs);
    ASSERT_EQ(p.limiter().ticks, sub);
    policer::AggregateMeter m(p, 0);
    std::deque<std::uint64_t> green;
    std::uint64_t t = 0;
    for (int i = 0; i < 3000; ++i) {
      t += rng.chance(60) ? 0 : rng.below(2 * sub + 1);
      if (m.check_blind(t, 1) != Color::green) continue;
      green.push_back(t);
      // Admitted in [t - (window - sub), t]: at most n.
      while (green.front() + (window - sub) < t) green.pop_front();
      ASSERT_LE(green.size(), n) << "K=" << k << " sub-window " << sub << " ticks, at t=" << t;
    }
  }
}

TEST(SlidingWindow, TheBoundIsTightAndShrinksTowardATrueSlidingWindowAsKGrows) {
  // The limit spent on the last tick of sub-window 0, and again on the first of sub-window K: 2N in
  // W - W/K + 2 ticks. A true sliding window of W would refuse the second N until tick W + (W/K - 1).
  for (std::uint32_t k : {1u, 2u, 4u, 16u, 64u}) {
    const std::uint64_t sub = 1000, n = 10, window = sub * k;
    const Profile p = make_profile(
        {.algorithm = Algorithm::sliding_window, .unit = Unit::packets, .limit = n, .window = window, .buckets = k}, kSecondNs);
    policer::AggregateMeter m(p, 0);
    std::uint64_t first = 0, second = 0;
    while (m.check_blind(sub - 1, 1) == Color::green) ++first;
    while (m.check_blind(window - 1, 1) == Color::green) ++second;  // still within sub-window K - 1
    EXPECT_EQ(first, n);
    EXPECT_EQ(second, 0u) << "K=" << k;  // the window still holds sub-window 0
    while (m.check_blind(window, 1) == Color::green) ++second;
    EXPECT_EQ(second, n) << "K=" << k;
    // The span of those 2N: W - W/K + 2 ticks, a fraction 1 - 1/K of the window.
    EXPECT_EQ(window - (sub - 1) + 1, window - window / k + 2);
  }
}

// ---- Guava's curves ----
//
// Guava (com.google.common.util.concurrent.SmoothRateLimiter), with stableInterval = 1/rate:
//   SmoothBursty:    maxPermits = maxBurstSeconds * permitsPerSecond;
//                    storedPermitsToWaitTime(stored, k) = 0; coolDownInterval = stableInterval
//   SmoothWarmingUp: coldInterval = stableInterval * coldFactor;
//                    thresholdPermits = 0.5 * warmupPeriod / stableInterval;
//                    maxPermits = thresholdPermits + 2.0 * warmupPeriod / (stableInterval + coldInterval);
//                    slope = (coldInterval - stableInterval) / (maxPermits - thresholdPermits);
//                    permitsToTime(p) = stableInterval + p * slope;
//                    storedPermitsToWaitTime(stored, k):
//                      above = stored - thresholdPermits; wait = 0;
//                      if (above > 0) { take = min(above, k);
//                        wait = take * (permitsToTime(above) + permitsToTime(above - take)) / 2; k -= take; }
//                      wait += stableInterval * k;
//                    coolDownInterval = warmupPeriod / maxPermits
//   reserveEarliestAvailable(required, now): resync(now) [if now > nextFree: stored = min(max, stored +
//     (now - nextFree) / coolDownInterval); nextFree = now]; spend = min(required, stored);
//     nextFree += storedPermitsToWaitTime(stored, spend) + (required - spend) * stableInterval;
//     stored -= spend
//   tryAcquire(permits, 0) succeeds when nextFree <= now.
// After a long idle stored = maxPermits; a greedy caller's n-th permit (n from 0) then comes at
// storedPermitsToWaitTime(maxPermits, n) for n <= maxPermits (no refill: it calls exactly at nextFree).

struct Guava {
  double stable, cold, threshold, max, slope;
  Guava(double rate, double period, double factor)
      : stable(1 / rate), cold(stable * factor), threshold(0.5 * period / stable),
        max(threshold + 2.0 * period / (stable + cold)), slope((cold - stable) / (max - threshold)) {}
  double permits_to_time(double p) const { return stable + p * slope; }
  double stored_permits_to_wait_time(double stored, double k) const {
    const double above = stored - threshold;
    double wait = 0;
    if (above > 0) {
      const double take = std::min(above, k);
      wait = take * (permits_to_time(above) + permits_to_time(above - take)) / 2;
      k -= take;
    }
    return wait + stable * k;
  }
};

// The ticks at which a greedy packet-mode source polling every tick gets its first `count` packets.
std::vector<std::uint64_t> greedy_admissions(const Profile& p, std::uint64_t from, std::size_t count, std::uint64_t step = 1) {
  policer::Meter m(p, 0);
  std::vector<std::uint64_t> at;
  for (std::uint64_t t = from; at.size() < count; t += step) {
    while (at.size() < count && m.check_blind(t, 64) == Color::green) at.push_back(t);
  }
  return at;
}

TEST(Warmup, AdmittedRateAfterIdleFollowsGuavasCurve) {
  // 100 packets/s, ticks of 1 us; warm-up 1 s at C = 3 (Guava's threshold 50 permits, max 100) and
  // 1.2 s at C = 5 (threshold 60, max 100): every permit's cost is then a whole number of microseconds,
  // so a source polling every tick meets Guava's times exactly. (Otherwise it arrives up to a tick
  // late, and the fraction of a permit stored meanwhile costs up to C/rate per permit: microseconds.)
  const std::uint64_t hz = 1'000'000, rate = 100;
  for (std::uint32_t factor : {3u, 5u}) {
    SCOPED_TRACE("cold-factor " + std::to_string(factor));
    const std::uint64_t period = factor == 3 ? kSecondNs : 1'200'000'000;
    const Profile p = make_profile({.algorithm = Algorithm::warmup, .unit = Unit::packets, .rate = rate, .period = period,
                                    .cold_factor = factor}, hz);
    const Guava g(rate, static_cast<double>(period) / kSecondNs, factor);
    const auto max = static_cast<std::size_t>(std::llround(g.max));
    const std::uint64_t idle = 1000 * hz;  // created at 0, first packet after 1000 s: cold
    const std::vector<std::uint64_t> at = greedy_admissions(p, idle, max + 20);
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{5}, max / 8, max / 4, max / 3, max / 2, max - 1, max, max + 10}) {
      double expected = g.stored_permits_to_wait_time(g.max, static_cast<double>(std::min(n, max)));
      if (n > max) expected += static_cast<double>(n - max) * g.stable;  // fresh permits, stable interval
      EXPECT_NEAR(static_cast<double>(at[n] - idle) / hz, expected, 1.0 / hz) << "permit " << n;
    }
    // The admitted rate: R / C at the start, R from the threshold on.
    const double first = static_cast<double>(at[1] - at[0]) / hz;
    EXPECT_NEAR(first, g.permits_to_time(g.max - g.threshold - 0.5), 1.0 / hz);
    EXPECT_NEAR(1.0 / first, static_cast<double>(rate) / factor, 0.02 * rate / factor);
    const auto past = static_cast<std::size_t>(g.max - g.threshold) + 1;
    EXPECT_NEAR(static_cast<double>(at[past + 1] - at[past]) / hz, g.stable, 1.0 / hz);
    // Guava's warm-up period is the time from cold to the threshold.
    EXPECT_EQ(at[static_cast<std::size_t>(std::llround(g.max - g.threshold))] - idle, period / 1000);
  }
}

TEST(Warmup, RefillsAtTheRateAsGuavaAtTheDefaultColdFactor) {
  // C = 3: Guava's coolDownInterval = warmupPeriod / maxPermits = 1 s / 100 = the stable interval, so
  // 0.7 s idle after the next free time stores 70 permits, 20 of them above the threshold, and a
  // greedy source then pays Guava's curve from 70 down.
  const std::uint64_t hz = 1'000'000, rate = 100;
  const Profile p = make_profile({.algorithm = Algorithm::warmup, .unit = Unit::packets, .rate = rate, .period = kSecondNs,
                                  .cold_factor = 3}, hz);
  const Guava g(rate, 1.0, 3);
  ASSERT_DOUBLE_EQ(1.0 / g.max, g.stable);
  policer::Meter m(p, 0);
  std::uint64_t t = 0, got = 0, last = 0;
  for (; got < 100; ++t)  // spend every stored permit, greedily from cold
    while (got < 100 && m.check_blind(t, 64) == Color::green) ++got, last = t;
  const std::uint64_t free_at = last + 10'000;  // the last stored permit cost the stable interval
  const std::uint64_t back = free_at + 700'000;
  std::vector<std::uint64_t> at;
  for (std::uint64_t u = back; at.size() < 80; ++u)
    while (at.size() < 80 && m.check_blind(u, 64) == Color::green) at.push_back(u);
  for (std::size_t n : {0u, 1u, 10u, 19u, 20u, 21u, 40u, 70u, 79u}) {
    double expected = g.stored_permits_to_wait_time(70, static_cast<double>(std::min<std::size_t>(n, 70)));
    if (n > 70) expected += static_cast<double>(n - 70) * g.stable;
    EXPECT_NEAR(static_cast<double>(at[n] - back) / hz, expected, 1.0 / hz) << "permit " << n;
  }
}

TEST(Smooth, AfterIdleTheBurstThenOnePermitPerIntervalAsSmoothBursty) {
  const std::uint64_t hz = 1'000'000, rate = 100, burst = 20;
  const Profile p = make_profile({.algorithm = Algorithm::smooth, .unit = Unit::packets, .rate = rate, .max_burst = burst}, hz);
  const std::uint64_t idle = 50 * hz;
  const std::vector<std::uint64_t> at = greedy_admissions(p, idle, 60);
  // SmoothBursty: storedPermits = maxPermits after idle, spent for free; the permit after them is
  // prepaid (granted now, pushing nextFree by the stable interval).
  for (std::size_t n : {std::size_t{0}, std::size_t{10}, std::size_t{20}, std::size_t{21}, std::size_t{30}, std::size_t{59}}) {
    const double expected = n <= burst ? 0.0 : static_cast<double>(n - burst) / rate;
    EXPECT_NEAR(static_cast<double>(at[n] - idle) / hz, expected, 1.0 / hz) << "permit " << n;
  }
}

TEST(Smooth, ALargePacketAfterIdlePassesAndTheNextWaitsForIt) {
  const std::uint64_t hz = 1'000'000;
  const Profile p = make_profile({.algorithm = Algorithm::smooth, .unit = Unit::bytes, .rate = 1000, .max_burst = 500}, hz);
  policer::Meter m(p, 0);
  ASSERT_EQ(m.check_blind(10 * hz, 1500), Color::green);  // 500 stored, 1000 prepaid: 1 s
  EXPECT_EQ(m.check_blind(11 * hz - 1, 1), Color::red);
  EXPECT_EQ(m.check_blind(11 * hz, 1), Color::green);
}

// ---- GCRA against the 1R2C meter ----
// GCRA(T = 1/R, tau) is the token bucket of rate R and size tau * R + 1 tokens: its lead
// TAT - t (at least 0) is (size - level) / R. With tau chosen so that tau * R is a whole number of
// tokens c - 1, the 1R2C meter of CIR R and CBS c colors any traffic the same, packet for packet.

TEST(Gcra, ColorsAsTheOneRateTwoColorMeterOfRateAndToleranceTimesRatePlusOne) {
  Rng rng{0x6c4a};
  int packets = 0, greens = 0;
  for (int round = 0; round < 1000; ++round) {
    const Unit unit = rng.chance(50) ? Unit::bytes : Unit::packets;
    const std::uint64_t hz = random_hz(rng);
    const std::uint64_t c = rng.chance(20) ? 1 : random_limit(rng, unit);  // the bucket, tokens
    // R = (1e9 / d) * m with d | 1e9 and m | (c - 1): then tau = (c - 1) / R s is a whole number of ns.
    std::uint64_t d = 1;
    for (std::uint64_t f = rng.below(10); f > 0; --f) d *= 2;
    for (std::uint64_t f = rng.below(10); f > 0; --f) d *= 5;
    std::uint64_t m = 1;
    for (std::uint64_t f = rng.between(1, 1000); c > 1 && f >= 1; --f) {
      if ((c - 1) % f == 0) {
        m = f;
        break;
      }
    }
    const std::uint64_t max_rate = unit == Unit::bytes ? kMaxByteRate : kMaxPacketRate;
    const std::uint64_t rate = std::min(kSecondNs / d * m, max_rate);
    if (c > 1 && ((c - 1) * kSecondNs) % rate != 0) continue;
    const std::uint64_t tolerance = (c - 1) * kSecondNs / rate;
    if (tolerance > kMaxDurationNs) continue;
    const Params gp{.algorithm = Algorithm::gcra, .unit = unit, .rate = rate, .tolerance = tolerance};
    const Params bp{.algorithm = Algorithm::one_rate_two_color, .unit = unit, .cir = rate, .cbs = c};
    const Profile gcra = make_profile(gp, hz), bucket = make_profile(bp, hz);
    ASSERT_EQ(gcra.limiter().limit, c * hz);
    const std::uint64_t created = rng.below(1'000'000);
    policer::Meter g(gcra, created), b(bucket, created);
    std::uint64_t t = created;
    for (int i = 0; i < 300; ++i) {
      const std::uint32_t length = random_limiter_length(rng, gp);
      t = random_limiter_time(rng, gp, hz, t, length);
      const Color gc = g.check_blind(t, length);
      ASSERT_EQ(gc, b.check_blind(t, length)) << describe_limiter(gp, hz) << " cbs " << c << " packet " << i;
      ASSERT_EQ(g.state().level[0], bucket.size(0) - b.state().level[0]);  // lead = size - level
      ++packets;
      greens += gc == Color::green;
    }
  }
  EXPECT_GT(packets, 100'000);
  EXPECT_GT(greens, 20'000);
  EXPECT_GT(packets - greens, 20'000);
}

}  // namespace
}  // namespace tricolor::test
