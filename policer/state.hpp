#pragma once
// The state of one meter, and the arithmetic every algorithm shares (meter.hpp, limiters.hpp).
#include <algorithm>
#include <cstdint>

#include "policer/profile.hpp"

namespace tricolor::policer {

// 24 bytes, for every algorithm: the per-key table's entry and a Meter (two per cache line) are sized
// for it, so the limiters fit their state into the same two words (limiters.hpp says how) rather than
// grow it for the RFC meters too. `last` means the same for all: the key table expires keys by it.
struct State {
  std::uint64_t level[kBuckets];  // bucket levels in 1/hz tokens: [0] = C, [1] = E or P (limiters: their own)
  std::uint64_t last;             // tick of the latest check; never moves back
};
static_assert(sizeof(State) == 24, "the metering state of one meter is 24 bytes (at most 32 would fit the key table)");

namespace detail {

// Ticks since the last check; a check earlier than the last credits nothing and keeps `last`.
inline std::uint64_t elapsed(State& s, std::uint64_t now) noexcept {
  const std::uint64_t last = s.last;
  const std::uint64_t latest = std::max(now, last);
  s.last = latest;
  return latest - last;
}

// min(size, level + rate*dt), exactly. The gap is clamped to the fill time, so rate*dt < size + rate
// and the sum stays below 2^64 however long the meter was idle.
inline std::uint64_t refill(std::uint64_t level, const Profile& p, std::size_t b, std::uint64_t dt) noexcept {
  const std::uint64_t filled = level + p.rate(b) * std::min(dt, p.fill_ticks(b));
  return std::min(filled, p.size(b));
}

// Branch-free decisions. Every level and every cost is below 2^63 (kMaxBurst * kMaxHz and
// (kMaxBurst + 1) * kMaxHz are), so level - cost, read as a signed number, is negative exactly when the
// packet does not fit, and an arithmetic shift turns that into a mask: all ones when it does not fit.
// Pure arithmetic, so the compiler cannot turn it back into unpredictable branches; a mix of colors
// costs the same as all green.
static_assert((kMaxBurst + 1) * kMaxHz < (std::uint64_t{1} << 63));
inline std::uint64_t short_of(std::uint64_t level, std::uint64_t cost) noexcept {
  return static_cast<std::uint64_t>((static_cast<std::int64_t>(level) - static_cast<std::int64_t>(cost)) >> 63);
}
// All ones when a packet of this input color may not be green / may not be yellow either.
inline std::uint64_t not_green(Color in) noexcept {
  return ~static_cast<std::uint64_t>((static_cast<std::int64_t>(in) - 1) >> 63);
}
inline std::uint64_t red(Color in) noexcept {
  return ~static_cast<std::uint64_t>((static_cast<std::int64_t>(in) - 2) >> 63);
}
}  // namespace detail

}  // namespace tricolor::policer
