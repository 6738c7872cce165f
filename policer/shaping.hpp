#pragma once
// Shaping's question (issue 27): a packet that does not conform now — at which tick would it? A shaper
// holds such a packet until then and releases it green, or drops it when that tick is more than its
// maximum delay away. The answer is exact: the earliest tick at which the meter's own check colors the
// packet green (tests/policer/shaping_test.cpp checks it against the check itself, tick by tick at the
// edge), computed in O(1) from the state.
//
// Which meters have one (doc/meters.md, "Shaping"): those whose green depends on buckets that only
// fill with time — 1R2C (C), srTCM and RFC 4115 through the committed bucket C (their E makes a packet
// yellow, not green), trTCM through both C and P (its green needs both), GCRA (the lead falls back
// under the limit) and smooth (the debt is paid off: prepayment lets any packet through then). The
// windows cannot be asked the same way: the fixed window's next window may already be spoken for by
// the time it opens, and the sliding window's and warm-up's allowances are not linear in time.
//
// Releasing a packet at tick t means checking it at t: the state's `last` moves to t, so that the
// packets arriving before t get no credit for the time before it and queue behind it (release ticks
// never go back: a shaper's queue is first in, first out).
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "policer/limiters.hpp"
#include "policer/meter.hpp"

namespace tricolor::policer {

namespace detail {
// Ticks until a bucket at `level` filling at `rate` holds `cost`: 0 if it does now, none if it never
// can (its size is below the cost, or it does not fill).
inline std::optional<std::uint64_t> ticks_until(std::uint64_t level, std::uint64_t cost, std::uint64_t size,
                                                std::uint64_t rate) noexcept {
  if (level >= cost) return 0;
  if (cost > size || rate == 0) return std::nullopt;
  return (cost - level + rate - 1) / rate;  // a division, but only for a packet that waits
}
}  // namespace detail

// The algorithms conforming_at() answers for, as a type (a burst's loop dispatches on the algorithm
// once, generically) and at run time.
template <class Algo>
inline constexpr bool kShapes = std::is_same_v<Algo, OneRateTwoColor> || std::is_same_v<Algo, SrTcm> ||
                                std::is_same_v<Algo, TrTcm> || std::is_same_v<Algo, TrTcm4115> ||
                                std::is_same_v<Algo, Gcra> || std::is_same_v<Algo, Smooth>;

inline bool can_shape(Algorithm a) noexcept {
  switch (a) {
    case Algorithm::one_rate_two_color:
    case Algorithm::srtcm:
    case Algorithm::trtcm:
    case Algorithm::trtcm_4115:
    case Algorithm::gcra:
    case Algorithm::smooth: return true;
    default: return false;
  }
}

// The earliest tick, at or after both `now` and s.last, at which check_blind<Algo>(s, p, tick, length)
// returns green; none if no tick does (the packet is larger than the bucket it needs). `s` is not
// changed.
template <class Algo>
std::optional<std::uint64_t> conforming_at(State s, const Profile& p, std::uint64_t now, std::uint32_t length) noexcept {
  Algo::advance(s, p, now);  // s.last = max(now, s.last): the levels there
  const std::uint64_t cost = p.cost(length);
  std::optional<std::uint64_t> wait;
  if constexpr (std::is_same_v<Algo, OneRateTwoColor> || std::is_same_v<Algo, SrTcm> ||
                std::is_same_v<Algo, TrTcm4115>) {
    wait = detail::ticks_until(s.level[0], cost, p.size(0), p.rate(0));
  } else if constexpr (std::is_same_v<Algo, TrTcm>) {
    const auto c = detail::ticks_until(s.level[0], cost, p.size(0), p.rate(0));
    const auto peak = detail::ticks_until(s.level[1], cost, p.size(1), p.rate(1));
    if (c && peak) wait = std::max(*c, *peak);
  } else if constexpr (std::is_same_v<Algo, Gcra>) {
    // Green while lead + cost <= limit; the lead falls by `rate` a tick. One check pays at most
    // rate x fill_ticks (the limit's worth): a lead that a live change left far above a lowered limit
    // takes longer than that, and no single check from here makes the packet green.
    const std::uint64_t limit = p.limiter().limit, lead = s.level[0];
    if (cost <= limit) {
      const std::uint64_t over = lead + cost > limit ? lead + cost - limit : 0;
      wait = detail::ticks_until(0, over, over, p.rate(0));
      if (wait && *wait > p.fill_ticks(0)) wait.reset();
    }
  } else if constexpr (std::is_same_v<Algo, Smooth>) {
    // Green once nothing is owed; the debt is paid at `rate` a tick.
    wait = detail::ticks_until(0, s.level[1], s.level[1], p.rate(0));
  } else {
    static_assert(sizeof(Algo) == 0, "conforming_at: this algorithm has no conforming tick (can_shape)");
  }
  if (!wait || *wait > UINT64_MAX - s.last) return std::nullopt;  // never, or past the end of time
  return s.last + *wait;
}

// The same for a profile's algorithm, chosen at run time (can_shape(p.algorithm()) must hold).
inline std::optional<std::uint64_t> conforming_at(const State& s, const Profile& p, std::uint64_t now,
                                                  std::uint32_t length) noexcept {
  switch (p.algorithm()) {
    case Algorithm::one_rate_two_color: return conforming_at<OneRateTwoColor>(s, p, now, length);
    case Algorithm::srtcm: return conforming_at<SrTcm>(s, p, now, length);
    case Algorithm::trtcm: return conforming_at<TrTcm>(s, p, now, length);
    case Algorithm::trtcm_4115: return conforming_at<TrTcm4115>(s, p, now, length);
    case Algorithm::gcra: return conforming_at<Gcra>(s, p, now, length);
    case Algorithm::smooth: return conforming_at<Smooth>(s, p, now, length);
    default: return std::nullopt;
  }
}

// A shaper's decision on one packet arriving at `now`: the ticks it waits before it leaves (0: it
// conforms now), the meter having checked it at that tick (it takes its tokens then, and the packets
// after it queue behind it); none when that tick is more than `max_delay` ticks away: the packet is
// dropped and the state is left as it was (a late packet takes nothing). Only for kShapes<Algo>.
template <class Algo>
std::optional<std::uint64_t> shape(State& s, const Profile& p, std::uint64_t now, std::uint32_t length,
                                   std::uint64_t max_delay) noexcept {
  static_assert(kShapes<Algo>, "shape: this algorithm has no conforming tick (can_shape)");
  const auto at = conforming_at<Algo>(s, p, now, length);  // at >= now
  if (!at || *at - now > max_delay) return std::nullopt;
  [[maybe_unused]] const Color color = check_blind<Algo>(s, p, *at, length);
  assert(color == Color::green);  // conforming_at's promise
  return *at - now;
}

// A shaper's bound on what it holds (`red shape max-delay D queue N`): the release ticks of the packets
// one rule holds on one worker, at most N, as a binary min-heap over storage the caller owns (made at
// load: nothing is allocated per packet). Per-key rules interleave their keys' releases, so they come
// out of order; a heap answers "how many are still held at t" in O(log N) a packet either way. Its
// limit may be lowered below its capacity (a live change to a smaller N keeps what is held, and the
// queue is full until enough of it has left).
class ShapeQueue {
 public:
  ShapeQueue() = default;
  ShapeQueue(std::uint64_t* storage, std::uint32_t capacity) noexcept
      : heap_(storage), capacity_(capacity), limit_(capacity) {}

  // Forgets the packets that have left by `now`: a packet leaves at its release tick (release <= now),
  // as tricolord's wheel drains and tricolor-replay writes it, before a packet arriving then.
  void leave_by(std::uint64_t now) noexcept {
    while (size_ != 0 && heap_[0] <= now) pop();
  }
  bool full() const noexcept { return size_ >= limit_; }
  std::uint32_t held() const noexcept { return size_; }
  std::uint32_t limit() const noexcept { return limit_; }
  std::uint32_t capacity() const noexcept { return capacity_; }
  void set_limit(std::uint32_t limit) noexcept { limit_ = std::min(limit, capacity_); }
  void hold(std::uint64_t release) noexcept {
    assert(size_ < limit_ && limit_ <= capacity_);
    std::uint32_t i = size_++;
    while (i != 0) {
      const std::uint32_t up = (i - 1) / 2;  // a shift: unsigned
      if (heap_[up] <= release) break;
      heap_[i] = heap_[up];
      i = up;
    }
    heap_[i] = release;
  }

 private:
  void pop() noexcept {
    const std::uint64_t last = heap_[--size_];
    std::uint32_t i = 0;
    for (;;) {
      std::uint32_t child = 2 * i + 1;
      if (child >= size_) break;
      if (child + 1 < size_ && heap_[child + 1] < heap_[child]) ++child;
      if (heap_[child] >= last) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = last;
  }

  std::uint64_t* heap_ = nullptr;
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = 0;
  std::uint32_t limit_ = 0;
};

// Why a shaper dropped a packet, if it did.
enum class ShapeDrop : std::uint8_t { none, late, queue_full };
// A burst's delay slot of a packet dropped because its queue was full (a dropped packet has no delay;
// a held one's fits 32 bits of ticks below this): how the loops tell it to the caller, no extra array.
inline constexpr std::uint32_t kQueueFullMark = UINT32_MAX;

// shape() under a queue bound: the packets released by `now` leave the queue first; with N held, the
// packet is decided with no delay allowed (one that conforms now still leaves, one that would wait is
// dropped, taking nothing, as a late one), and `drop` says queue_full; a packet held is queued.
template <class Algo>
std::optional<std::uint64_t> shape(State& s, const Profile& p, std::uint64_t now, std::uint32_t length,
                                   std::uint64_t max_delay, ShapeQueue& queue, ShapeDrop& drop) noexcept {
  queue.leave_by(now);
  const bool full = queue.full();
  const auto wait = shape<Algo>(s, p, now, length, full ? 0 : max_delay);
  drop = wait ? ShapeDrop::none : full ? ShapeDrop::queue_full : ShapeDrop::late;
  if (wait && *wait != 0) queue.hold(now + *wait);
  return wait;
}

}  // namespace tricolor::policer
