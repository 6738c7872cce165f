#pragma once
// The other classic limiters (issue 13) as meter algorithms: fixed window, sliding window (Sentinel's
// LeapArray), GCRA (ITU-T I.371), smooth and warm-up (Guava's SmoothBursty and SmoothWarmingUp). Two
// colors: green when the packet conforms, else red; color-aware, a packet that arrives non-green is red
// and counts for nothing. Same interface as the RFC meters (meter.hpp): advance() brings the state to
// `now`, decide_*() colors a packet at the state's time, carry() is a live change within the family.
//
// Units. Time is the table's tick. The windows count whole tokens (bytes, or packets): they have no
// rate, so no fraction ever arises. GCRA, smooth and warm-up count 1/hz tokens, as the buckets do; then
// a time ahead of the clock is kept as what the meter is owed in 1/hz tokens: at `rate` tokens/s one
// 1/hz token is paid off in exactly 1/rate tick, so the time is `last` + owed / rate ticks, exact, and
// a gap of dt ticks pays off exactly dt * rate of it, with no division.
//
// State. Each fits the 24 bytes of State (state.hpp) with `last` as the RFC meters use it:
//   fixed window    level[0] tokens still allowed in the open window, level[1] ticks until it closes
//   sliding window  level[0..1] four 32-bit counters (a count is at most the limit, 2^30), so at most
//                   four sub-windows; an aggregate of up to 64 is a WideWindow (below; aggregate_meter.hpp), not a State
//   gcra            level[0] the TAT's lead over `last` (owed 1/hz tokens); level[1] unused
//   smooth, warmup  level[0] stored permits (1/hz tokens), level[1] the next free time's lead (owed)
// Decisions are made with masks, as the RFC meters' (meter.hpp: a color mix costs no mispredictions):
// every quantity a decision compares is below 2^63, so detail::short_of() applies.
// Arithmetic products that can pass 2^64 (a gap of years times a rate, the warm-up curve's square) are
// 128-bit; the profile's validation bounds every other quantity below 2^63 (profile.cpp).
#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>

#include "policer/profile.hpp"
#include "policer/state.hpp"

namespace tricolor::policer {

namespace detail {
using u128 = unsigned __int128;

// Green (0) or red (2) from a mask that is all ones when the packet does not conform.
inline Color green_unless(std::uint64_t refused) noexcept { return static_cast<Color>(refused & 2); }
}  // namespace detail

// ---- fixed window ----
// A window of `window` ticks opens at the first check at or after the end of the previous one; up to
// `limit` tokens conform in it. Across a window's end a greedy source gets `limit` just before and
// `limit` again just after: 2 * limit within a few ticks (the README says why).
struct FixedWindow {
  static constexpr Algorithm algorithm = Algorithm::fixed_window;
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    const std::uint64_t dt = detail::elapsed(s, now);
    const bool closed = dt >= s.level[1];  // also a new meter's: no window open yet
    s.level[0] = closed ? p.limiter().limit : s.level[0];
    s.level[1] = closed ? p.limiter().ticks : s.level[1] - dt;
  }
  static Color decide_blind(State& s, const Profile&, std::uint64_t cost) noexcept { return take(s, cost, 0); }
  static Color decide_aware(State& s, const Profile&, std::uint64_t cost, Color in) noexcept {
    return take(s, cost, detail::not_green(in));
  }
  // The open window keeps its end and what it has counted (clamped to the new limit); a window that
  // has ended stays ended, so the next packet opens one of the new length. No window opens here.
  static void carry(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
    const std::uint64_t dt = detail::elapsed(s, now);
    const std::uint64_t used = from.limiter().limit - s.level[0];
    const bool closed = dt >= s.level[1];
    s.level[1] = closed ? 0 : s.level[1] - dt;
    s.level[0] = to.limiter().limit - (closed ? 0 : std::min(used, to.limiter().limit));
  }

 private:
  static Color take(State& s, std::uint64_t cost, std::uint64_t barred) noexcept {
    const std::uint64_t refused = detail::short_of(s.level[0], cost) | barred;  // both at most 2^30 + 1
    s.level[0] -= cost & ~refused;
    return detail::green_unless(refused);
  }
};

// ---- sliding window (per-key form: up to four sub-windows) ----
// Sub-window i covers ticks [i*w, (i+1)*w), w = window / K rounded up to a whole tick (profile.cpp).
// At tick t in sub-window j = floor(t / w), the window is sub-windows j-K+1 .. j (LeapArray's: those
// starting in (t - window, t]); a packet conforms when their counts plus its size are at most the limit,
// and only a conforming packet is counted. floor(t / w) is a multiplication by the profile's
// reciprocal (no division). Counter 0, the low half of level[0], is the sub-window holding `last`.
struct SlidingWindow {
  static constexpr Algorithm algorithm = Algorithm::sliding_window;
  // Precondition: fits_state(profile) (buckets <= 4); validate_per_key() refuses the others, and an
  // aggregate meter of more is a WideWindow (aggregate_meter.hpp).
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    const LimiterConstants& k = p.limiter();
    assert(k.buckets <= kMaxStateWindowBuckets);
    const std::uint64_t before = s.last;
    if (detail::elapsed(s, now) == 0) return;  // the same tick (a burst, a stale clock): nothing moves
    // Sub-windows passed since `before`: the counters move up that many places, the oldest drop off.
    const detail::u128 moved = k.divide.floor_div(s.last) - k.divide.floor_div(before);
    const unsigned shift = moved >= kMaxStateWindowBuckets ? 128 : 32 * static_cast<unsigned>(moved);
    detail::u128 counters = packed(s);
    counters = shift >= 128 ? 0 : counters << shift;
    counters &= kept(k.buckets);
    unpack(s, counters);
  }
  static Color decide_blind(State& s, const Profile& p, std::uint64_t cost) noexcept { return take(s, p, cost, 0); }
  static Color decide_aware(State& s, const Profile& p, std::uint64_t cost, Color in) noexcept {
    return take(s, p, cost, detail::not_green(in));
  }
  // Same sub-window length: the counts carry over (those beyond the new K drop off). Another length:
  // the window's whole count moves into the current sub-window, so admitted traffic still counts.
  static void carry(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
    advance(s, from, now);
    if (from.limiter().ticks == to.limiter().ticks) {
      unpack(s, packed(s) & kept(to.limiter().buckets));
    } else {
      unpack(s, sum(s));
    }
  }
  static std::uint64_t sum(const State& s) noexcept {
    return (s.level[0] & 0xffffffff) + (s.level[0] >> 32) + (s.level[1] & 0xffffffff) + (s.level[1] >> 32);
  }

 private:
  static detail::u128 packed(const State& s) noexcept { return detail::u128(s.level[1]) << 64 | s.level[0]; }
  static void unpack(State& s, detail::u128 c) noexcept {
    s.level[0] = static_cast<std::uint64_t>(c);
    s.level[1] = static_cast<std::uint64_t>(c >> 64);
  }
  static detail::u128 kept(std::uint32_t buckets) noexcept {
    return buckets >= kMaxStateWindowBuckets ? ~detail::u128(0) : (detail::u128(1) << (32 * buckets)) - 1;
  }
  static Color take(State& s, const Profile& p, std::uint64_t cost, std::uint64_t barred) noexcept {
    const std::uint64_t refused = detail::short_of(p.limiter().limit, sum(s) + cost) | barred;  // below 2^33
    s.level[0] += cost & ~refused;  // counter 0 stays at most the limit (2^30): no carry into counter 1
    return detail::green_unless(refused);
  }
};

// ---- GCRA ----
// ITU-T I.371's virtual scheduling with emission interval T = 1/rate per token and tolerance tau: a
// packet of b tokens is b cells at once, and conforms when all would, that is when
// max(TAT, t) + b*T - t <= tau + T; then TAT = max(TAT, t) + b*T. The TAT's lead over the clock is
// kept exactly in 1/hz tokens (T is exactly hz of them), never rounded to ticks.
// Equivalence: lead = size - level turns it into a token bucket of rate `rate` and size
// tau * rate + 1 tokens (a 1R2C meter): same colors on any traffic (tested).
struct Gcra {
  static constexpr Algorithm algorithm = Algorithm::gcra;
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    // The clamp to fill_ticks (the lead's limit at `rate`) keeps the product below 2^63.
    const std::uint64_t paid = p.rate(0) * std::min(detail::elapsed(s, now), p.fill_ticks(0));
    s.level[0] -= std::min(s.level[0], paid);
  }
  static Color decide_blind(State& s, const Profile& p, std::uint64_t cost) noexcept { return take(s, p, cost, 0); }
  static Color decide_aware(State& s, const Profile& p, std::uint64_t cost, Color in) noexcept {
    return take(s, p, cost, detail::not_green(in));
  }
  // The lead is kept in tokens: what the meter is owed is paid off at the new rate.
  static void carry(State& s, const Profile& from, const Profile&, std::uint64_t now) noexcept { advance(s, from, now); }

 private:
  // lead + cost <= limit, as masks: the lead, the limit and the cost are each below 2^63 (the lead may
  // exceed a limit lowered by a live change: then even a packet of cost 0 is refused).
  static Color take(State& s, const Profile& p, std::uint64_t cost, std::uint64_t barred) noexcept {
    const std::uint64_t limit = p.limiter().limit, lead = s.level[0];
    const std::uint64_t room = limit - std::min(lead, limit);
    const std::uint64_t refused = detail::short_of(limit, lead) | detail::short_of(room, cost) | barred;
    s.level[0] += cost & ~refused;
    return detail::green_unless(refused);
  }
};

// ---- smooth (Guava's SmoothBursty; tryAcquire without waiting) ----
// Stored permits refill at `rate` once the next free time has passed, up to max-burst. A packet
// conforms when the next free time is not in the future; it then pays from stored permits first and
// pushes the next free time forward by the rest at 1/rate per token (prepayment: a large packet after
// idle passes, the following ones wait).
namespace detail {
// The gap pays off the debt first; what is left refills the stored permits up to `most`.
inline void pay_then_store(State& s, const Profile& p, std::uint64_t most, std::uint64_t dt) noexcept {
  const u128 credit = u128(dt) * p.rate(0);  // a gap of years at any rate: below 2^100
  const std::uint64_t owed = s.level[1];
  const bool paid = credit >= owed;
  const u128 stored = u128(s.level[0]) + (paid ? credit - owed : 0);
  s.level[0] = static_cast<std::uint64_t>(std::min(stored, u128(most)));
  s.level[1] = paid ? 0 : owed - static_cast<std::uint64_t>(credit);
}
// All ones when the next free time is in the future (what is owed is below 2^63: profile.cpp).
inline std::uint64_t owing(const State& s) noexcept { return short_of(0, s.level[1]); }
}  // namespace detail

struct Smooth {
  static constexpr Algorithm algorithm = Algorithm::smooth;
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    detail::pay_then_store(s, p, p.limiter().limit, detail::elapsed(s, now));
  }
  static Color decide_blind(State& s, const Profile&, std::uint64_t cost) noexcept { return take(s, cost, 0); }
  static Color decide_aware(State& s, const Profile&, std::uint64_t cost, Color in) noexcept {
    return take(s, cost, detail::not_green(in));
  }
  // Stored permits clamp to the new most; the debt is kept in tokens, paid at the new rate.
  static void carry(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
    advance(s, from, now);
    s.level[0] = std::min(s.level[0], to.limiter().limit);
  }

 private:
  static Color take(State& s, std::uint64_t cost, std::uint64_t barred) noexcept {
    const std::uint64_t refused = detail::owing(s) | barred;
    const std::uint64_t stored = std::min(cost, s.level[0]);
    s.level[0] -= stored & ~refused;
    s.level[1] += (cost - stored) & ~refused;  // only from 0, and at most 2^30+1 tokens' worth: below 2^63
    return detail::green_unless(refused);
  }
};

// ---- warm-up (Guava's SmoothWarmingUp) ----
// As smooth, but a stored permit above the threshold costs more than 1/rate: at x permits above it,
// 1/rate * (1 + (C-1) * x / warm), where warm = max - threshold, so C/rate at the top (the cold rate,
// rate / C) and 1/rate at the threshold; spending stored permits costs the area under that line. In
// 1/hz tokens of time, with G(x) = (C-1) * x^2 / (2 * warm), spending from s down to s' costs
// (s - s') + G(s - threshold) - G(s' - threshold). G is not whole: each G is rounded up to a whole 1/hz
// token (1/rate tick) on its own, so the rounding telescopes: spending in pieces costs what spending
// at once costs, and no error builds up. Stored permits refill at `rate`, as Sentinel's
// WarmUpController (Guava's at the default C = 3, where its cool-down interval is 1/rate).
struct Warmup {
  static constexpr Algorithm algorithm = Algorithm::warmup;
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    detail::pay_then_store(s, p, p.limiter().limit, detail::elapsed(s, now));
  }
  static Color decide_blind(State& s, const Profile& p, std::uint64_t cost) noexcept { return take(s, p, cost, 0); }
  static Color decide_aware(State& s, const Profile& p, std::uint64_t cost, Color in) noexcept {
    return take(s, p, cost, detail::not_green(in));
  }
  static void carry(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
    advance(s, from, now);
    s.level[0] = std::min(s.level[0], to.limiter().limit);
  }
  // ceil(G(stored - threshold)), or 0 at or below the threshold. x < 2^62 (validation), so x^2 < 2^124;
  // the quotient and remainder by 2 * warm come from the profile's reciprocal, then (C-1) times them.
  static std::uint64_t area(const LimiterConstants& k, std::uint64_t stored) noexcept {
    const std::uint64_t x = stored > k.threshold ? stored - k.threshold : 0;
    const detail::u128 square = detail::u128(x) * x;
    const detail::u128 q = k.divide.floor_div(square);
    const detail::u128 r = square - q * k.divide.d;
    const detail::u128 rest = r * k.cold_minus_one;  // < 2^64 * 99
    const detail::u128 q2 = k.divide.floor_div(rest);
    return static_cast<std::uint64_t>(q * k.cold_minus_one + q2 + (rest != q2 * k.divide.d ? 1 : 0));
  }

 private:
  static Color take(State& s, const Profile& p, std::uint64_t cost, std::uint64_t barred) noexcept {
    const std::uint64_t refused = detail::owing(s) | barred;
    const std::uint64_t spend = std::min(cost, s.level[0]) & ~refused;
    // Only a packet that spends stored permits above the threshold pays the curve: the one branch on
    // the outcome here, since the area (four reciprocal divisions) costs more than a misprediction;
    // a warm meter (at the stable rate) and a refused packet skip it.
    std::uint64_t extra = 0;
    if (spend != 0 && s.level[0] > p.limiter().threshold)
      extra = area(p.limiter(), s.level[0]) - area(p.limiter(), s.level[0] - spend);
    s.level[0] -= spend;
    s.level[1] += (cost + extra) & ~refused;  // only from 0, and below 2^63 (profile.cpp)
    return detail::green_unless(refused);
  }
};

// ---- sliding window, aggregate form: up to 64 sub-windows ----
// Too large for State: 64 counters in a ring indexed by sub-window mod 64, with their sum kept so a
// check adds one number. Moving to a later sub-window zeroes the ones that leave (at most K, once per
// sub-window, not per packet). Same rule as SlidingWindow, any K from 1 to 64.
class WideWindow {
 public:
  WideWindow(const Profile& p, std::uint64_t now) noexcept : last_(now), newest_(index(p, now)) {}

  void advance(const Profile& p, std::uint64_t now) noexcept {
    last_ = std::max(now, last_);
    const std::uint64_t j = index(p, last_);
    const std::uint64_t leaving = std::min<std::uint64_t>(j - newest_, p.limiter().buckets);
    for (std::uint64_t i = 0; i < leaving; ++i) {
      std::uint32_t& c = counts_[(newest_ - p.limiter().buckets + 1 + i) % kMaxWindowBuckets];
      sum_ -= c;
      c = 0;
    }
    newest_ = j;
  }
  Color decide(const Profile& p, std::uint64_t cost, Color in = Color::green) noexcept {
    const std::uint64_t refused = detail::short_of(p.limiter().limit, sum_ + cost) | detail::not_green(in);
    const std::uint64_t add = cost & ~refused;
    counts_[newest_ % kMaxWindowBuckets] += static_cast<std::uint32_t>(add);
    sum_ += add;
    return detail::green_unless(refused);
  }
  // As SlidingWindow::carry.
  void carry(const Profile& from, const Profile& to, std::uint64_t now) noexcept {
    advance(from, now);
    if (from.limiter().ticks == to.limiter().ticks) {
      for (std::uint64_t age = to.limiter().buckets; age < from.limiter().buckets; ++age) {
        std::uint32_t& c = counts_[(newest_ - age) % kMaxWindowBuckets];
        sum_ -= c;
        c = 0;
      }
    } else {
      counts_.fill(0);
      newest_ = index(to, last_);
      counts_[newest_ % kMaxWindowBuckets] = static_cast<std::uint32_t>(sum_);
    }
  }
  std::uint64_t sum() const noexcept { return sum_; }
  std::uint64_t last() const noexcept { return last_; }

 private:
  static std::uint64_t index(const Profile& p, std::uint64_t t) noexcept {
    return static_cast<std::uint64_t>(p.limiter().divide.floor_div(t));
  }
  std::uint64_t last_;
  std::uint64_t newest_;  // sub-window holding last_
  std::uint64_t sum_ = 0;
  std::array<std::uint32_t, kMaxWindowBuckets> counts_{};
};
static_assert(sizeof(WideWindow) == 24 + 4 * kMaxWindowBuckets, "three words and 64 counts: 280 bytes, no padding");

}  // namespace tricolor::policer
