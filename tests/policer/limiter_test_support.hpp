#pragma once
// Glue between policer/'s limiters and their independent model (tests/policer/limiter_model.hpp), and the
// random parameters, lengths and times the limiter tests share: conversions and generators only.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>

#include "policer/aggregate_meter.hpp"
#include "policer/meter.hpp"
#include "tests/policer/limiter_model.hpp"
#include "tests/policer/meter_test_support.hpp"

namespace tricolor::test {

using policer::kMaxBurst;
using policer::kMaxByteRate;
using policer::kMaxDurationNs;
using policer::kMaxHz;
using policer::kMaxPacketRate;

inline constexpr std::array kLimiters{Algorithm::fixed_window, Algorithm::sliding_window, Algorithm::gcra, Algorithm::smooth,
                               Algorithm::warmup};
inline constexpr std::uint64_t kSecondNs = 1'000'000'000;

inline LimAlgorithm to_model(Algorithm a) {
  switch (a) {
    case Algorithm::fixed_window: return LimAlgorithm::fixed_window;
    case Algorithm::sliding_window: return LimAlgorithm::sliding_window;
    case Algorithm::gcra: return LimAlgorithm::gcra;
    case Algorithm::smooth: return LimAlgorithm::smooth;
    default: return LimAlgorithm::warmup;
  }
}

inline LimParams to_model(const Params& p, std::uint64_t hz) {
  return LimParams{to_model(p.algorithm), p.unit == Unit::packets, p.rate, p.limit, p.window, p.tolerance,
                   p.max_burst, p.period, p.buckets, p.cold_factor, hz};
}

inline std::string describe_limiter(const Params& p, std::uint64_t hz) {
  return std::string(policer::to_string(p.algorithm)) + " " + std::string(policer::to_string(p.unit)) +
         " rate=" + std::to_string(p.rate) + " limit=" + std::to_string(p.limit) + " window=" + std::to_string(p.window) +
         "ns buckets=" + std::to_string(p.buckets) + " tolerance=" + std::to_string(p.tolerance) +
         "ns max-burst=" + std::to_string(p.max_burst) + " period=" + std::to_string(p.period) +
         "ns cold-factor=" + std::to_string(p.cold_factor) + " hz=" + std::to_string(hz);
}

// The meter's state says what the model's does, exactly (each algorithm's words as limiters.hpp
// defines them, derived here from the model's absolute quantities).
inline ::testing::AssertionResult same_state(const State& s, const Profile& profile, const LimiterModel& m) {
  const std::uint64_t last = m.now();
  const u128 rate = m.params().rate;
  u128 want0 = 0, want1 = 0;
  switch (m.params().algorithm) {
    case LimAlgorithm::fixed_window: want0 = m.fixed_allowed(), want1 = m.fixed_ticks_left(); break;
    case LimAlgorithm::sliding_window: {
      if (profile.limiter().buckets > policer::kMaxStateWindowBuckets) return ::testing::AssertionSuccess();
      const std::uint64_t sum = policer::SlidingWindow::sum(s);
      if (u128(sum) == m.window_count(last)) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << "window counts " << sum << " but the model " << u128_string(m.window_count(last));
    }
    case LimAlgorithm::gcra:
      want0 = m.next_free() > u128(last) * rate ? m.next_free() - u128(last) * rate : 0;
      break;
    case LimAlgorithm::smooth:
    case LimAlgorithm::warmup:
      want0 = m.stored();
      want1 = m.next_free() - u128(last) * rate;
      break;
  }
  if (u128(s.level[0]) == want0 && u128(s.level[1]) == want1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "state (" << s.level[0] << ", " << s.level[1] << ") but the model has ("
                                       << u128_string(want0) << ", " << u128_string(want1) << ")";
}

inline std::uint64_t random_duration(Rng& r) {
  switch (r.below(6)) {
    case 0: return r.between(1, 1000);                       // nanoseconds: below a tick at most rates
    case 1: return r.between(1000, 10'000'000);              // up to 10 ms
    case 2: return r.between(10'000'000, 10 * kSecondNs);    // up to 10 s
    case 3: return kMaxDurationNs - r.below(3);              // the largest
    default: return r.between(1, 2 * kSecondNs);
  }
}

inline std::uint64_t random_limit(Rng& r, Unit unit) {
  if (unit == Unit::packets && r.chance(80)) return r.between(1, 40);
  switch (r.below(4)) {
    case 0: return r.between(1, 16);
    case 1: return r.between(16, 100'000);
    case 2: return r.chance(50) ? kMaxBurst : r.between(100'000, kMaxBurst);
    default: return r.between(1, 3000);
  }
}

// Valid parameters of algorithm `a` for a profile at `hz` (the warm-up's zone must be at least one
// 1/hz token there); `max_buckets` bounds the sliding window's K.
inline Params random_limiter_params(Rng& r, Algorithm a, Unit unit, std::uint64_t hz, std::uint32_t max_buckets = 64) {
  using u128 = unsigned __int128;
  for (;;) {
    Params p{.algorithm = a, .unit = unit};
    switch (a) {
      case Algorithm::fixed_window:
      case Algorithm::sliding_window:
        p.limit = random_limit(r, unit);
        p.window = random_duration(r);
        if (a == Algorithm::sliding_window)
          p.buckets = static_cast<std::uint32_t>(r.chance(30) ? max_buckets : r.between(1, max_buckets));
        break;
      case Algorithm::gcra: {
        p.rate = random_rate(r, unit);
        // The equivalent bucket, tolerance * rate + 1 tokens, is at most 2^30.
        const std::uint64_t burst = random_limit(r, unit);
        const u128 most = u128(burst - 1) * kSecondNs / p.rate;
        p.tolerance = static_cast<std::uint64_t>(std::min<u128>(r.chance(10) ? 0 : most - r.below(static_cast<std::uint64_t>(std::min<u128>(most, 1u << 20)) + 1), kMaxDurationNs));
        break;
      }
      case Algorithm::smooth:
        p.rate = random_rate(r, unit);
        p.max_burst = r.chance(10) ? 0 : random_limit(r, unit);
        break;
      case Algorithm::warmup: {
        p.rate = random_rate(r, unit);
        static constexpr std::uint32_t kFactors[] = {2, 3, 3, 3, 4, 7, 10, 100};
        p.cold_factor = kFactors[r.below(8)];
        const u128 c = p.cold_factor;
        // period * rate * (C + 5) * C <= 2^30 * 2e9 * (C + 1)
        const u128 most = u128(kMaxBurst) * 2 * kSecondNs * (c + 1) / (u128(p.rate) * (c + 5) * c);
        const std::uint64_t top = static_cast<std::uint64_t>(std::min<u128>(most, kMaxDurationNs));
        if (top == 0) continue;
        p.period = r.chance(20) ? top : r.chance(50) ? r.between(1, std::min<std::uint64_t>(top, 10 * kSecondNs)) : r.between(1, top);
        break;
      }
      default: break;
    }
    auto tick_rate = TickRate::make(hz);
    if (Profile::make(p, *tick_rate).ok()) return p;
  }
}

// Lengths around the limit or max-burst, so that both colors occur, with a few extremes.
inline std::uint32_t random_limiter_length(Rng& r, const Params& p) {
  const std::uint64_t scale = std::max({p.limit, p.max_burst, std::uint64_t{1},
                                        static_cast<std::uint64_t>(std::min<unsigned __int128>(
                                            (unsigned __int128)p.tolerance * p.rate / kSecondNs, kMaxBurst))});
  switch (r.below(8)) {
    case 0: return 0;
    case 1: return static_cast<std::uint32_t>(r.between(kMaxBurst - 2, std::numeric_limits<std::uint32_t>::max()));
    case 2: case 3: return static_cast<std::uint32_t>(r.between(1, std::min<std::uint64_t>(scale * 2, 0xffffffff)));
    case 4: return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, scale / (1 + r.below(64))));
    default: return static_cast<std::uint32_t>(r.between(40, 1500));
  }
}

// Gaps on the algorithm's own scale (a window, a sub-window, a token's time), bursts at one instant,
// years, and sometimes a stale clock.
inline std::uint64_t random_limiter_time(Rng& r, const Params& p, std::uint64_t hz, std::uint64_t last, std::uint32_t length) {
  using u128 = unsigned __int128;
  const u128 window = std::max<u128>(1, u128(std::max(p.window, p.period)) * hz / kSecondNs);
  const u128 sub = std::max<u128>(1, window / std::max<std::uint32_t>(p.buckets, 1));
  const std::uint64_t rate = std::max<std::uint64_t>(p.rate, 1);
  const std::uint64_t tokens = p.unit == Unit::packets ? 1 : std::max<std::uint64_t>(length, 1);
  const u128 token_time = u128(tokens) * hz / rate;
  const std::uint64_t room = std::numeric_limits<std::uint64_t>::max() - last;
  auto cap = [](u128 v) { return static_cast<std::uint64_t>(std::min<u128>(v, u128(1) << 62)); };
  std::uint64_t dt = 0;
  switch (r.below(12)) {
    case 0: case 10: case 11: dt = 0; break;
    case 1: return last - std::min(last, r.between(1, hz));  // stale
    case 2: dt = r.between(0, cap(sub * 2)); break;
    case 3: dt = r.between(0, cap(window * 2)); break;
    case 4: dt = r.chance(5) ? r.between(hz * 86'400ULL * 365, hz * 86'400ULL * 365 * 30) : r.between(0, cap(window / 3 + 1)); break;
    case 5: dt = cap(window) - r.below(2) + r.below(2); break;  // at a window's edge
    case 6: dt = cap(sub) - r.below(2) + r.below(2); break;
    default: dt = cap(token_time) * r.below(3); break;
  }
  return last + std::min(dt, room / 4);
}

}  // namespace tricolor::test
