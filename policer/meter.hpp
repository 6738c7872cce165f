#pragma once
// The four RFC meters, and the dispatch over every algorithm (the limiters are in limiters.hpp).
// Everything here is inline, division-free and branch-free: a check is one refill
// (a multiplication per bucket, clamped) and a decision made with masks, so its cost does not depend on
// the colors traffic gets (a mix of colors costs no mispredictions, and an attacker cannot slow it).
//
// State holds only what changes per packet (levels and last-check tick); the profile that says how it
// changes is passed in, so one profile serves any number of meters, and a table of meters of the
// same rule need not repeat a profile pointer per meter.
#include <algorithm>
#include <cstdint>

#include "policer/limiters.hpp"
#include "policer/profile.hpp"
#include "policer/state.hpp"

namespace tricolor::policer {

// Each algorithm: advance() brings the buckets to `now`; decide_*() colors one packet of the given
// cost at the state's time. check_*() is both. A burst at one instant advances once and decides many.
// The decisions work on masks that say which bucket cannot take the packet; the color is green = 0,
// yellow = 1, red = 2 read off those masks. decide_*() also comes with the profile, which the RFC
// meters ignore (their state says everything) and the limiters need; carry() is a live change.

namespace detail {
// The RFC meters' live change: credited at the old rate up to `now`, then clamped to the new sizes.
template <class Algo>
inline void carry_levels(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
  Algo::advance(s, from, now);
  for (std::size_t b = 0; b < kBuckets; ++b) s.level[b] = std::min(s.level[b], to.size(b));
}
}  // namespace detail

// Every algorithm's decide_*() takes the profile: the RFC meters do not need it (their state says
// everything) but the limiters do, and one signature lets the dispatch serve both.

struct OneRateTwoColor {
  static constexpr Algorithm algorithm = Algorithm::one_rate_two_color;
  static void carry(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
    detail::carry_levels<OneRateTwoColor>(s, from, to, now);
  }
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    s.level[0] = detail::refill(s.level[0], p, 0, detail::elapsed(s, now));
  }
  static Color decide_blind(State& s, const Profile&, std::uint64_t cost) noexcept { return decide(s, cost, 0); }
  // A packet that arrives non-green cannot become green, and takes no token.
  static Color decide_aware(State& s, const Profile&, std::uint64_t cost, Color in) noexcept {
    return decide(s, cost, detail::not_green(in));
  }

 private:
  static Color decide(State& s, std::uint64_t cost, std::uint64_t barred) noexcept {
    const std::uint64_t c_short = detail::short_of(s.level[0], cost) | barred;
    s.level[0] -= cost & ~c_short;
    return static_cast<Color>(c_short & 2);
  }
};

// RFC 2697: one rate fills C; what C cannot hold overflows into E.
struct SrTcm {
  static constexpr Algorithm algorithm = Algorithm::srtcm;
  static void carry(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
    detail::carry_levels<SrTcm>(s, from, to, now);
  }
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    const std::uint64_t dt = std::min(detail::elapsed(s, now), p.fill_ticks(0));
    const std::uint64_t c = s.level[0] + p.rate(0) * dt;  // < 3 * 2^30 * 5e9 < 2^64
    // C's overflow, max(c, CBS) - CBS, goes to E; computed beside C's clamp, not after it.
    s.level[1] = std::min(s.level[1] + (std::max(c, p.size(0)) - p.size(0)), p.size(1));
    s.level[0] = std::min(c, p.size(0));
  }
  // Green from C, else yellow from E, else red (also RFC 4115's rule).
  static Color decide_blind(State& s, const Profile&, std::uint64_t cost) noexcept { return decide(s, cost, 0, 0); }
  // Only a green packet may take C; a green or yellow one may take E.
  static Color decide_aware(State& s, const Profile&, std::uint64_t cost, Color in) noexcept {
    return decide(s, cost, detail::not_green(in), detail::red(in));
  }

 private:
  friend struct TrTcm4115;
  static Color decide(State& s, std::uint64_t cost, std::uint64_t c_barred, std::uint64_t e_barred) noexcept {
    const std::uint64_t c_short = detail::short_of(s.level[0], cost) | c_barred;
    const std::uint64_t e_short = detail::short_of(s.level[1], cost) | e_barred;
    s.level[1] -= cost & c_short & ~e_short;
    s.level[0] -= cost & ~c_short;
    return static_cast<Color>((c_short & 1) + (c_short & e_short & 1));
  }
};

// RFC 2698: C at CIR and P at PIR fill independently; a packet must fit P, and green also C.
struct TrTcm {
  static constexpr Algorithm algorithm = Algorithm::trtcm;
  static void carry(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
    detail::carry_levels<TrTcm>(s, from, to, now);
  }
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept {
    const std::uint64_t dt = detail::elapsed(s, now);
    s.level[0] = detail::refill(s.level[0], p, 0, dt);
    s.level[1] = detail::refill(s.level[1], p, 1, dt);
  }
  static Color decide_blind(State& s, const Profile&, std::uint64_t cost) noexcept { return decide(s, cost, 0, 0); }
  // A red packet stays red; a yellow one never takes C.
  static Color decide_aware(State& s, const Profile&, std::uint64_t cost, Color in) noexcept {
    return decide(s, cost, detail::not_green(in), detail::red(in));
  }

 private:
  static Color decide(State& s, std::uint64_t cost, std::uint64_t c_barred, std::uint64_t p_barred) noexcept {
    const std::uint64_t p_short = detail::short_of(s.level[1], cost) | p_barred;
    const std::uint64_t c_short = detail::short_of(s.level[0], cost) | c_barred | p_short;
    s.level[1] -= cost & ~p_short;
    s.level[0] -= cost & ~c_short;
    return static_cast<Color>((c_short & 1) + (p_short & 1));
  }
};

// RFC 4115: C at CIR and E at EIR fill independently (no overflow from C to E); colors as RFC 2697.
struct TrTcm4115 {
  static constexpr Algorithm algorithm = Algorithm::trtcm_4115;
  static void carry(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
    detail::carry_levels<TrTcm4115>(s, from, to, now);
  }
  static void advance(State& s, const Profile& p, std::uint64_t now) noexcept { TrTcm::advance(s, p, now); }
  static Color decide_blind(State& s, const Profile&, std::uint64_t cost) noexcept { return SrTcm::decide(s, cost, 0, 0); }
  static Color decide_aware(State& s, const Profile&, std::uint64_t cost, Color in) noexcept {
    return SrTcm::decide(s, cost, detail::not_green(in), detail::red(in));
  }
};

template <class Algo>
inline Color check_blind(State& s, const Profile& p, std::uint64_t now, std::uint32_t length) noexcept {
  Algo::advance(s, p, now);
  return Algo::decide_blind(s, p, p.cost(length));
}

template <class Algo>
inline Color check_aware(State& s, const Profile& p, std::uint64_t now, std::uint32_t length, Color in) noexcept {
  Algo::advance(s, p, now);
  return Algo::decide_aware(s, p, p.cost(length), in);
}

// Calls fn(Algo{}) for the profile's algorithm: one predictable branch, so code written once as a
// template serves every algorithm (per burst, ideally, rather than per packet). A sliding window
// through State must fit it (fits_state(); an aggregate of more sub-windows is a WideWindow: aggregate_meter.hpp).
template <class Fn>
inline decltype(auto) with_algorithm(Algorithm algorithm, Fn&& fn) {
  switch (algorithm) {
    case Algorithm::srtcm: return fn(SrTcm{});
    case Algorithm::trtcm: return fn(TrTcm{});
    case Algorithm::trtcm_4115: return fn(TrTcm4115{});
    case Algorithm::fixed_window: return fn(FixedWindow{});
    case Algorithm::sliding_window: return fn(SlidingWindow{});
    case Algorithm::gcra: return fn(Gcra{});
    case Algorithm::smooth: return fn(Smooth{});
    case Algorithm::warmup: return fn(Warmup{});
    case Algorithm::one_rate_two_color: break;
  }
  return fn(OneRateTwoColor{});
}

// A meter created (or reset) now starts with full buckets (a limiter: as limiters.hpp says, from the
// profile's size() too, so this stays two loads for every algorithm).
inline State full_state(const Profile& p, std::uint64_t now) noexcept {
  return State{{p.size(0), p.size(1)}, now};
}

// Profiles of one family share bucket meanings and units, so levels carry over between them.
inline bool same_family(const Profile& a, const Profile& b) noexcept {
  return a.algorithm() == b.algorithm() && a.unit() == b.unit() && a.tick_rate() == b.tick_rate();
}

// Live change: within a family the levels are kept (credited at the old rate up to `now`, then
// clamped to the new sizes) and refill continues at the new rate from `now`; across families the
// meter starts full. `last` never moves back. A limiter keeps its state as its carry() says.
inline void change_profile(State& s, const Profile& from, const Profile& to, std::uint64_t now) noexcept {
  if (!same_family(from, to)) {
    s = full_state(to, std::max(s.last, now));
    return;
  }
  with_algorithm(from.algorithm(), [&](auto algo) { decltype(algo)::carry(s, from, to, now); });
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
  // Points the meter at `to` without touching its state: for a caller that has already brought the
  // state to `to` itself (from a copy of the old profile, which may be gone by then).
  void rebind(const Profile& to) noexcept { profile_ = &to; }

  const State& state() const noexcept { return state_; }
  State& state() noexcept { return state_; }
  const Profile& profile() const noexcept { return *profile_; }

 private:
  State state_;
  const Profile* profile_;
};
static_assert(sizeof(Meter) <= 32, "two meters per cache line");

}  // namespace tricolor::policer
