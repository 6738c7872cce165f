#pragma once
// The four meters. Everything here is inline, branch-light and division-free: a check is one
// refill (a multiplication per bucket, clamped) and one or two comparisons.
//
// State holds only what changes per packet (levels and last-check tick); the profile that says how it
// changes is passed in, so one profile serves any number of meters, and a table of meters of the
// same rule need not repeat a profile pointer per meter.
#include <algorithm>
#include <cstdint>

#include "policer/profile.hpp"

namespace tricolor::policer {

struct State {
  std::uint64_t level[kBuckets];  // bucket levels in 1/hz tokens: [0] = C, [1] = E or P
  std::uint64_t last;             // tick of the latest check; never moves back
};
static_assert(sizeof(State) <= 32, "the metering state of one meter is at most 32 bytes");

namespace detail {

// Ticks since the last check; a check earlier than the last credits nothing and keeps `last`.
inline std::uint64_t elapsed(State& s, std::uint64_t now) noexcept {
  const bool later = now > s.last;
  const std::uint64_t dt = later ? now - s.last : 0;
  s.last = later ? now : s.last;
  return dt;
}

// min(size, level + rate*dt), exactly. The gap is clamped to the fill time, so rate*dt < size + rate
// and the sum stays below 2^64 however long the meter was idle.
inline std::uint64_t refill(std::uint64_t level, const Profile& p, std::size_t b, std::uint64_t dt) noexcept {
  const std::uint64_t filled = level + p.rate(b) * std::min(dt, p.fill_ticks(b));
  return std::min(filled, p.size(b));
}

}  // namespace detail

// Each algorithm: advance() brings the buckets to `now`; decide_*() colors one packet of the given
// cost at the state's time. check_*() is both. A burst at one instant advances once and decides many.

struct OneRateTwoColor {
  static constexpr Algorithm algorithm = Algorithm::one_rate_two_color;
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    s.level[0] = detail::refill(s.level[0], p, 0, detail::elapsed(s, now));
  }
  static Color decide_blind(State& s, std::uint64_t cost) noexcept {
    if (s.level[0] >= cost) {
      s.level[0] -= cost;
      return Color::green;
    }
    return Color::red;
  }
  // A packet that arrives non-green cannot become green, and takes no token.
  static Color decide_aware(State& s, std::uint64_t cost, Color in) noexcept {
    return in == Color::green ? decide_blind(s, cost) : Color::red;
  }
};

// RFC 2697: one rate fills C; what C cannot hold overflows into E.
struct SrTcm {
  static constexpr Algorithm algorithm = Algorithm::srtcm;
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    const std::uint64_t dt = std::min(detail::elapsed(s, now), p.fill_ticks(0));
    const std::uint64_t c = s.level[0] + p.rate(0) * dt;  // < 3 * 2^30 * 5e9 < 2^64
    const std::uint64_t overflow = c > p.size(0) ? c - p.size(0) : 0;
    s.level[0] = c - overflow;
    s.level[1] = std::min(s.level[1] + overflow, p.size(1));
  }
  static Color decide_blind(State& s, std::uint64_t cost) noexcept {
    if (s.level[0] >= cost) {
      s.level[0] -= cost;
      return Color::green;
    }
    if (s.level[1] >= cost) {
      s.level[1] -= cost;
      return Color::yellow;
    }
    return Color::red;
  }
  static Color decide_aware(State& s, std::uint64_t cost, Color in) noexcept {
    if (in == Color::green && s.level[0] >= cost) {
      s.level[0] -= cost;
      return Color::green;
    }
    if (in != Color::red && s.level[1] >= cost) {
      s.level[1] -= cost;
      return Color::yellow;
    }
    return Color::red;
  }
};

// RFC 2698: C at CIR and P at PIR fill independently; a packet must fit P, and green also C.
struct TrTcm {
  static constexpr Algorithm algorithm = Algorithm::trtcm;
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    const std::uint64_t dt = detail::elapsed(s, now);
    s.level[0] = detail::refill(s.level[0], p, 0, dt);
    s.level[1] = detail::refill(s.level[1], p, 1, dt);
  }
  static Color decide_blind(State& s, std::uint64_t cost) noexcept {
    if (s.level[1] < cost) return Color::red;
    s.level[1] -= cost;
    if (s.level[0] < cost) return Color::yellow;
    s.level[0] -= cost;
    return Color::green;
  }
  static Color decide_aware(State& s, std::uint64_t cost, Color in) noexcept {
    if (in == Color::red || s.level[1] < cost) return Color::red;
    s.level[1] -= cost;
    if (in == Color::yellow || s.level[0] < cost) return Color::yellow;
    s.level[0] -= cost;
    return Color::green;
  }
};

// RFC 4115: C at CIR and E at EIR fill independently (no overflow from C to E); colors as RFC 2697.
struct TrTcm4115 {
  static constexpr Algorithm algorithm = Algorithm::trtcm_4115;
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    const std::uint64_t dt = detail::elapsed(s, now);
    s.level[0] = detail::refill(s.level[0], p, 0, dt);
    s.level[1] = detail::refill(s.level[1], p, 1, dt);
  }
  static Color decide_blind(State& s, std::uint64_t cost) noexcept { return SrTcm::decide_blind(s, cost); }
  static Color decide_aware(State& s, std::uint64_t cost, Color in) noexcept {
    return SrTcm::decide_aware(s, cost, in);
  }
};

template <class Algo>
inline Color check_blind(State& s, const Profile& p, std::uint64_t now, std::uint32_t length) noexcept {
  Algo::advance(s, p, now);
  return Algo::decide_blind(s, p.cost(length));
}

template <class Algo>
inline Color check_aware(State& s, const Profile& p, std::uint64_t now, std::uint32_t length, Color in) noexcept {
  Algo::advance(s, p, now);
  return Algo::decide_aware(s, p.cost(length), in);
}

// Calls fn(Algo{}) for the profile's algorithm: one predictable branch, so code written once as a
// template serves every algorithm (per burst, ideally, rather than per packet).
template <class Fn>
inline decltype(auto) with_algorithm(Algorithm algorithm, Fn&& fn) {
  switch (algorithm) {
    case Algorithm::srtcm: return fn(SrTcm{});
    case Algorithm::trtcm: return fn(TrTcm{});
    case Algorithm::trtcm_4115: return fn(TrTcm4115{});
    case Algorithm::one_rate_two_color: break;
  }
  return fn(OneRateTwoColor{});
}

// A meter created (or reset) now starts with full buckets.
inline State full_state(const Profile& p, std::uint64_t now) noexcept {
  return State{{p.size(0), p.size(1)}, now};
}

// Profiles of one family share bucket meanings and units, so levels carry over between them.
inline bool same_family(const Profile& a, const Profile& b) noexcept {
  return a.algorithm() == b.algorithm() && a.unit() == b.unit() && a.tick_rate() == b.tick_rate();
}

// Live change: within a family the levels are kept (credited at the old rate up to `now`, then
// clamped to the new sizes) and refill continues at the new rate from `now`; across families the
// meter starts full. `last` never moves back.
inline void change_profile(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
  if (!same_family(from, to)) {
    s = full_state(to, std::max(s.last, now));
    return;
  }
  with_algorithm(from.algorithm(), [&](auto algo) { decltype(algo)::advance(s, from, now); });
  for (std::size_t b = 0; b < kBuckets; ++b) s.level[b] = std::min(s.level[b], to.size(b));
}

inline void reset(State& s, const Profile& p, std::uint64_t now) noexcept {
  s = full_state(p, std::max(s.last, now));
}

// A meter that carries its profile: convenient wherever the profile is not implied by a table.
class Meter {
 public:
  Meter(const Profile& profile, std::uint64_t now) noexcept
      : state_(full_state(profile, now)), profile_(&profile) {}

  Color check_blind(std::uint64_t now, std::uint32_t length) noexcept {
    return with_algorithm(profile_->algorithm(), [&](auto algo) {
      return policer::check_blind<decltype(algo)>(state_, *profile_, now, length);
    });
  }
  Color check_aware(std::uint64_t now, std::uint32_t length, Color in) noexcept {
    return with_algorithm(profile_->algorithm(), [&](auto algo) {
      return policer::check_aware<decltype(algo)>(state_, *profile_, now, length, in);
    });
  }
  // The profile must outlive the meter (profiles are owned by the policy, meters refer to them).
  void change_profile(const Profile& to, std::uint64_t now) noexcept {
    policer::change_profile(state_, *profile_, to, now);
    profile_ = &to;
  }
  void reset(std::uint64_t now) noexcept { policer::reset(state_, *profile_, now); }

  const State& state() const noexcept { return state_; }
  State& state() noexcept { return state_; }
  const Profile& profile() const noexcept { return *profile_; }

 private:
  State state_;
  const Profile* profile_;
};
static_assert(sizeof(Meter) <= 32, "two meters per cache line");

}  // namespace tricolor::policer
