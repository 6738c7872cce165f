#pragma once
// Meter profiles: the operator's parameters, validated and translated once into fast-path units.
//
// Fast-path units: a bucket level is kept as an integer count of 1/hz token (hz = ticks per second of
// the meter table's clock). Over dt ticks a bucket of rate r tokens/s gains exactly r*dt such units, so
// refilling needs one multiplication and no division, and no fraction of a token is ever lost.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "policer/expected.hpp"

namespace tricolor::policer {

enum class Color : std::uint8_t { green = 0, yellow = 1, red = 2 };

enum class Algorithm : std::uint8_t {
  one_rate_two_color,  // single-rate two-color token bucket (1R2C)
  srtcm,               // RFC 2697 single rate three color marker
  trtcm,               // RFC 2698 two rate three color marker
  trtcm_4115,          // RFC 4115 differentiated service two rate three color marker
  // The other classic limiters (issue 13): two colors, green or red. policer/limiters.hpp.
  fixed_window,        // up to `limit` per window of `window`, opened by the first packet after the last
  sliding_window,      // Sentinel's LeapArray: `limit` over the `buckets` sub-windows of `window`
  gcra,                // ITU-T I.371 virtual scheduling: `rate`, `tolerance`
  smooth,              // Guava's SmoothBursty as a meter: `rate`, `max_burst`, prepaid
  warmup,              // Guava's SmoothWarmingUp: `rate`, `period`, `cold_factor`
};

// The algorithms that color only green or red, and keep no buckets (policer/limiters.hpp).
inline constexpr bool is_limiter(Algorithm a) noexcept { return a >= Algorithm::fixed_window; }

// What one token stands for: one byte of metered length, or one packet whatever its length.
enum class Unit : std::uint8_t { bytes, packets };

std::string_view to_string(Color color) noexcept;
std::string_view to_string(Algorithm algorithm) noexcept;
std::string_view to_string(Unit unit) noexcept;

// Supported ranges (DEVELOPERS' issue 2). They keep every fast-path quantity inside 64 bits:
// burst * hz <= 2^30 * 5e9 < 2^63, and the srTCM sum of both buckets plus one refill stays < 2^64.
inline constexpr std::uint64_t kMaxHz = 5'000'000'000;
inline constexpr std::uint64_t kMaxBurst = std::uint64_t{1} << 30;           // bytes or packets
inline constexpr std::uint64_t kMaxByteRate = 50'000'000'000;                // bytes/s = 400 Gbit/s
inline constexpr std::uint64_t kMaxPacketRate = 1'000'000'000;               // packets/s
// Durations (window, tolerance, period) are nanoseconds, at most 366 days: a "per day" limit fits, and
// duration * hz * rate stays below 2^128 (2^55 * 2^33 * 2^36).
inline constexpr std::uint64_t kMaxDurationNs = 366ULL * 86'400 * 1'000'000'000;
inline constexpr std::uint64_t kNsPerSecond = 1'000'000'000;
// Sliding window: sub-windows per window for an aggregate meter, and for a meter in the per-key
// table, whose 16 bytes of levels hold four 32-bit counters (limiters.hpp).
inline constexpr std::uint32_t kMaxWindowBuckets = 64;
inline constexpr std::uint32_t kMaxStateWindowBuckets = 4;
inline constexpr std::uint32_t kMinColdFactor = 2;    // 1 would be no warm-up at all (a flat curve)
inline constexpr std::uint32_t kMaxColdFactor = 100;

// The frequency of the tick counter that times a table of meters: the TSC's hz in the daemon, 1e9 in
// replay. It belongs to the table, and every profile is translated for it.
class TickRate {
 public:
  static Expected<TickRate> make(std::uint64_t hz);
  std::uint64_t hz() const noexcept { return hz_; }
  friend bool operator==(TickRate, TickRate) = default;

 private:
  explicit TickRate(std::uint64_t hz) : hz_(hz) {}
  std::uint64_t hz_;
};

// The operator's parameters. Rates are tokens per second (bytes/s or packets/s), bursts are tokens.
// Only the parameters of the chosen algorithm may be non-zero:
//   1R2C: cir, cbs    srTCM: cir, cbs, ebs    trTCM: cir, cbs, pir, pbs    RFC 4115: cir, cbs, eir, ebs
//   fixed-window: limit, window    sliding-window: limit, window, buckets    gcra: rate, tolerance
//   smooth: rate, max_burst        warmup: rate, period, cold_factor
// Durations are nanoseconds.
struct Params {
  Algorithm algorithm = Algorithm::one_rate_two_color;
  Unit unit = Unit::bytes;
  std::uint64_t cir = 0;
  std::uint64_t cbs = 0;
  std::uint64_t eir = 0;
  std::uint64_t ebs = 0;
  std::uint64_t pir = 0;
  std::uint64_t pbs = 0;
  std::uint64_t rate = 0;         // gcra, smooth, warmup: tokens/s
  std::uint64_t limit = 0;        // windows: tokens per window
  std::uint64_t window = 0;       // windows: ns
  std::uint64_t tolerance = 0;    // gcra: ns
  std::uint64_t max_burst = 0;    // smooth: tokens
  std::uint64_t period = 0;       // warmup: ns
  std::uint32_t buckets = 0;      // sliding window: sub-windows per window
  std::uint32_t cold_factor = 0;  // warmup: the cold rate is rate / cold_factor (the language's default is 3)
  friend bool operator==(const Params&, const Params&) = default;
};

// Bucket 0 is always C. Bucket 1 is E (srTCM: filled by C's overflow; RFC 4115: filled at EIR) or P
// (RFC 2698). 1R2C leaves bucket 1 empty and unused. The limiters use the same two words of state for
// their own purposes (limiters.hpp); size() is then what a new meter's words start at.
inline constexpr std::size_t kBuckets = 2;

// Exact floor(n / d) for a divisor fixed at profile time, without a division on the fast path:
// m = floor((2^128 - 1) / d), and the high 128 bits of n * m are floor(n / d) less at most 2 (for
// n < 2^127), put right by two compare-and-adds.
struct Reciprocal {
  std::uint64_t d = 1;
  std::uint64_t m_hi = 0, m_lo = 0;
  static Reciprocal of(std::uint64_t divisor) noexcept;
  unsigned __int128 floor_div(unsigned __int128 n) const noexcept {
    using u128 = unsigned __int128;
    const std::uint64_t a1 = static_cast<std::uint64_t>(n >> 64), a0 = static_cast<std::uint64_t>(n);
    const u128 lo_lo = u128(a0) * m_lo, hi_lo = u128(a1) * m_lo, lo_hi = u128(a0) * m_hi;
    const u128 mid = (lo_lo >> 64) + static_cast<std::uint64_t>(hi_lo) + static_cast<std::uint64_t>(lo_hi);
    u128 q = u128(a1) * m_hi + (hi_lo >> 64) + (lo_hi >> 64) + (mid >> 64);
    q += (q + 1) * d <= n;
    q += (q + 1) * d <= n;
    return q;
  }
};

// The limiters' fast-path constants (second cache line), in the units limiters.hpp says.
struct LimiterConstants {
  std::uint64_t limit = 0;      // windows: tokens; gcra: (tolerance + 1/rate) * rate in 1/hz tokens;
                                // smooth, warmup: the most stored permits, 1/hz tokens
  std::uint64_t ticks = 0;      // fixed window: the window; sliding window: one sub-window (ticks)
  Reciprocal divide;            // sliding window: by the sub-window; warmup: by twice the warm zone
  std::uint64_t threshold = 0;  // warmup: stored permits below which a permit costs 1/rate (1/hz tokens)
  std::uint32_t buckets = 0;    // sliding window: K
  std::uint32_t cold_minus_one = 0;  // warmup: C - 1
};

class alignas(64) Profile {
 public:
  static Expected<Profile> make(const Params& params, TickRate tick_rate);

  // ---- fast path (first cache line) ----
  // Capacity of bucket b in 1/hz tokens.
  std::uint64_t size(std::size_t b) const noexcept { return size_[b]; }
  // Refill of bucket b in 1/hz tokens per tick (numerically the rate in tokens per second).
  std::uint64_t rate(std::size_t b) const noexcept { return rate_[b]; }
  // Ticks after which bucket b is full whatever its level (srTCM: both buckets, via bucket 0).
  // Longer gaps are clamped to this, which keeps every refill product inside 64 bits.
  std::uint64_t fill_ticks(std::size_t b) const noexcept { return fill_ticks_[b]; }
  // Cost of a packet of metered length `length` in 1/hz tokens: length*hz in byte mode, hz in
  // packet mode. A length above the largest burst is capped to kMaxBurst + 1: it can pass no bucket
  // either way, and the cap keeps the product inside 64 bits.
  std::uint64_t cost(std::uint32_t length) const noexcept {
    return std::min<std::uint64_t>(length, kMaxBurst + 1) * cost_per_byte_ + cost_per_packet_;
  }
  // (The windows count whole tokens: their cost is the length, or 1, without the factor hz.)

  // ---- the limiters' fast path (second cache line) ----
  const LimiterConstants& limiter() const noexcept { return limiter_; }

  // ---- slow path (third and fourth cache lines) ----
  const Params& params() const noexcept { return params_; }
  Algorithm algorithm() const noexcept { return params_.algorithm; }
  Unit unit() const noexcept { return params_.unit; }
  TickRate tick_rate() const noexcept { return tick_rate_; }

 private:
  Profile(const Params& params, TickRate tick_rate) : params_(params), tick_rate_(tick_rate) {}
  Expected<bool> make_limiter();

  std::uint64_t size_[kBuckets] = {};
  std::uint64_t rate_[kBuckets] = {};
  std::uint64_t fill_ticks_[kBuckets] = {};
  std::uint64_t cost_per_byte_ = 0;
  std::uint64_t cost_per_packet_ = 0;
  alignas(64) LimiterConstants limiter_;
  alignas(64) Params params_;
  TickRate tick_rate_;

  friend struct ProfileLayout;
};

struct ProfileLayout {
  static_assert(offsetof(Profile, limiter_) == 64, "the RFC meters' fast-path fields fill exactly the first cache line");
  static_assert(offsetof(Profile, params_) == 128, "the limiters' constants fill exactly the second");
};
static_assert(sizeof(LimiterConstants) <= 64);
static_assert(sizeof(Profile) == 256);

// Checks the parameters alone (no tick rate needed), naming the first one at fault.
Expected<Params> validate(const Params& params);

// A per-key meter's state is the key table's 24 bytes: refuses a sliding window of more sub-windows
// than its four counters (kMaxStateWindowBuckets). Every other valid profile fits.
Expected<Params> validate_per_key(const Params& params);
inline bool fits_state(const Params& p) noexcept {
  return p.algorithm != Algorithm::sliding_window || p.buckets <= kMaxStateWindowBuckets;
}

// Bit rates are accepted only when they are a whole number of bytes per second.
Expected<std::uint64_t> byte_rate_from_bit_rate(std::uint64_t bits_per_second);

}  // namespace tricolor::policer
