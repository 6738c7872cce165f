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
};

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
struct Params {
  Algorithm algorithm = Algorithm::one_rate_two_color;
  Unit unit = Unit::bytes;
  std::uint64_t cir = 0;
  std::uint64_t cbs = 0;
  std::uint64_t eir = 0;
  std::uint64_t ebs = 0;
  std::uint64_t pir = 0;
  std::uint64_t pbs = 0;
  friend bool operator==(const Params&, const Params&) = default;
};

// Bucket 0 is always C. Bucket 1 is E (srTCM: filled by C's overflow; RFC 4115: filled at EIR) or P
// (RFC 2698). 1R2C leaves bucket 1 empty and unused.
inline constexpr std::size_t kBuckets = 2;

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

  // ---- slow path (second cache line) ----
  const Params& params() const noexcept { return params_; }
  Algorithm algorithm() const noexcept { return params_.algorithm; }
  Unit unit() const noexcept { return params_.unit; }
  TickRate tick_rate() const noexcept { return tick_rate_; }

 private:
  Profile(const Params& params, TickRate tick_rate) : params_(params), tick_rate_(tick_rate) {}

  std::uint64_t size_[kBuckets] = {};
  std::uint64_t rate_[kBuckets] = {};
  std::uint64_t fill_ticks_[kBuckets] = {};
  std::uint64_t cost_per_byte_ = 0;
  std::uint64_t cost_per_packet_ = 0;
  Params params_;
  TickRate tick_rate_;

  friend struct ProfileLayout;
};

struct ProfileLayout {
  static_assert(offsetof(Profile, params_) == 64, "fast-path fields fill exactly the first cache line");
};
static_assert(sizeof(Profile) == 128);

// Checks the parameters alone (no tick rate needed), naming the first one at fault.
Expected<Params> validate(const Params& params);

// Bit rates are accepted only when they are a whole number of bytes per second.
Expected<std::uint64_t> byte_rate_from_bit_rate(std::uint64_t bits_per_second);

}  // namespace tricolor::policer
