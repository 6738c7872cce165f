#pragma once
// An independent reference model of the five limiters, written from the rules as the README states
// them (issue 13), sharing no code or representation with policer/: times are absolute (not a lead
// over the last check), in 128 bits; sub-window counts live in a map keyed by sub-window number;
// every constant is derived here from the parameters with plain division; Guava's and Sentinel's
// structure is followed where the implementation folds it (the warm-up's spend is split above and
// below the threshold as Guava's storedPermitsToWaitTime does).
#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>

namespace tricolor::test {

using u128 = unsigned __int128;

enum class LimAlgorithm { fixed_window, sliding_window, gcra, smooth, warmup };

struct LimParams {
  LimAlgorithm algorithm;
  bool packet_mode = false;
  std::uint64_t rate = 0, limit = 0, window_ns = 0, tolerance_ns = 0, max_burst = 0, period_ns = 0;
  std::uint32_t buckets = 0, cold_factor = 0;
  std::uint64_t hz = 1'000'000'000;
};

class LimiterModel {
 public:
  static constexpr std::uint64_t kBillion = 1'000'000'000;
  static constexpr std::uint64_t kLengthCap = (std::uint64_t{1} << 30) + 1;  // README: metered length cap

  LimiterModel(const LimParams& p, std::uint64_t created) : p_(p), latest_(created) {
    const u128 hz = p.hz;
    // Windows: rounded up to whole ticks (one sub-window for the sliding window).
    window_ticks_ = ceil_div(u128(p.window_ns) * hz, kBillion);
    if (p.algorithm == LimAlgorithm::sliding_window) window_ticks_ = ceil_div(u128(p.window_ns) * hz, u128(kBillion) * p.buckets);
    if (window_ticks_ == 0) window_ticks_ = 1;
    // Smooth: the most stored permits, in 1/hz tokens.
    if (p.algorithm == LimAlgorithm::smooth) max_stored_ = u128(p.max_burst) * hz;
    if (p.algorithm == LimAlgorithm::warmup) {
      // Guava: threshold = 0.5 * warmupPeriod / stableInterval; max = threshold + 2 * warmupPeriod /
      // (stableInterval + coldInterval); here in 1/hz tokens, rounded down.
      const u128 pr = u128(p.period_ns) * hz * p.rate;
      threshold_ = pr / (2 * kBillion);
      warm_ = 2 * pr / (u128(kBillion) * (p.cold_factor + 1));
      max_stored_ = threshold_ + warm_;
    }
    stored_ = max_stored_;  // smooth and warm-up start full (cold)
    // GCRA and smooth keep the TAT / next free time absolute, in 1/rate ticks: t ticks is t * rate.
    next_free_ = u128(created) * p.rate;
  }

  std::uint64_t now() const { return latest_; }
  const LimParams& params() const { return p_; }
  u128 stored() const { return stored_; }
  u128 next_free() const { return next_free_; }  // in 1/rate ticks
  // Fixed window: tokens still allowed, and ticks until the open window ends (0 if none is open).
  u128 fixed_allowed() const { return open_ ? p_.limit - used_ : p_.limit; }
  u128 fixed_ticks_left() const {
    return open_ && u128(start_) + window_ticks_ > latest_ ? u128(start_) + window_ticks_ - latest_ : 0;
  }
  u128 window_count(std::uint64_t t) const {     // sliding: what the window of tick t counts
    const u128 j = t / window_ticks_;
    u128 sum = 0;
    for (const auto& [index, count] : counts_)
      if (index <= j && index + p_.buckets > j) sum += count;
    return sum;
  }

  // True for green. `may` false: a non-green input packet (color-aware), which is red and counts nothing.
  bool check(std::uint64_t t, std::uint64_t length, bool may = true) {
    latest_ = std::max(latest_, t);  // a stale check is a check at the latest time
    const std::uint64_t now = latest_;
    const u128 b = p_.packet_mode ? 1 : std::min(length, kLengthCap);
    switch (p_.algorithm) {
      case LimAlgorithm::fixed_window: {
        if (!open_ || u128(now) >= u128(start_) + window_ticks_) {
          open_ = true;
          start_ = now;
          used_ = 0;
        }
        if (!may || used_ + b > p_.limit) return false;
        used_ += b;
        return true;
      }
      case LimAlgorithm::sliding_window: {
        const u128 j = now / window_ticks_;
        if (!may || window_count(now) + b > p_.limit) return false;
        counts_[j] += b;
        // Forget sub-windows that can never be in a window again.
        for (auto it = counts_.begin(); it != counts_.end() && it->first + p_.buckets <= j;) it = counts_.erase(it);
        return true;
      }
      case LimAlgorithm::gcra: {
        // I.371 for a packet of b cells at once: conforming when max(TAT, t) + b*T - t <= tau + T.
        // Times scaled by rate * 1e9 for the comparison: T = hz/rate ticks, tau = tau_ns * hz / 1e9.
        const u128 t_scaled = u128(now) * p_.rate;
        const u128 from = std::max(next_free_, t_scaled);
        const u128 b_time = b * p_.hz;  // b * T, in 1/rate ticks
        const u128 lhs = (from + b_time - t_scaled) * kBillion;
        const u128 rhs = u128(p_.tolerance_ns) * p_.hz * p_.rate + u128(p_.hz) * kBillion;
        if (!may || lhs > rhs) return false;
        next_free_ = from + b_time;
        return true;
      }
      case LimAlgorithm::smooth:
      case LimAlgorithm::warmup: {
        // Guava's resync: permits accrue at the rate once the next free time has passed.
        const u128 t_scaled = u128(now) * p_.rate;
        if (t_scaled > next_free_) {
          stored_ = std::min(max_stored_, stored_ + (t_scaled - next_free_));
          next_free_ = t_scaled;
        }
        // tryAcquire(permits, 0): only when the next free time is not in the future.
        if (!may || next_free_ > t_scaled) return false;
        const u128 required = b * p_.hz;
        const u128 from_store = std::min(required, stored_);
        const u128 fresh = required - from_store;
        next_free_ += wait_for_stored(from_store) + fresh;  // fresh permits at the stable interval
        stored_ -= from_store;
        return true;
      }
    }
    throw std::logic_error("unknown limiter");
  }

 private:
  static u128 ceil_div(u128 n, u128 d) { return n / d + (n % d != 0 ? 1 : 0); }

  // Guava's storedPermitsToWaitTime, in 1/rate ticks. SmoothBursty's is 0: stored permits are free.
  // SmoothWarmingUp's splits the permits above the threshold (a trapezoid under the line from the
  // stable interval at the threshold to the cold interval at the top) from those below (the stable
  // interval each).
  u128 wait_for_stored(u128 permits) const {
    if (p_.algorithm == LimAlgorithm::smooth) return 0;  // SmoothBursty: stored permits are free
    const u128 above = stored_ > threshold_ ? stored_ - threshold_ : 0;
    const u128 above_taken = std::min(above, permits);
    // Trapezoid from `above` down to `above - above_taken`, rounded as the README says: the
    // quadratic part ceil(G) at each end, G(x) = (C-1) x^2 / (2 warm).
    const u128 trapezoid = above_taken + ceil_g(above) - ceil_g(above - above_taken);
    return trapezoid + (permits - above_taken);
  }
  u128 ceil_g(u128 x) const {
    const u128 d = 2 * warm_;
    const u128 sq = x * x;
    const u128 q = sq / d, r = sq % d;
    const u128 c = p_.cold_factor - 1;
    return q * c + ceil_div(r * c, d);
  }

  LimParams p_;
  std::uint64_t latest_;
  u128 window_ticks_ = 1;
  // fixed window
  bool open_ = false;
  std::uint64_t start_ = 0;
  u128 used_ = 0;
  // sliding window
  std::map<u128, u128> counts_;
  // gcra, smooth, warm-up
  u128 next_free_ = 0;
  u128 stored_ = 0, max_stored_ = 0, threshold_ = 0, warm_ = 0;
};

}  // namespace tricolor::test
