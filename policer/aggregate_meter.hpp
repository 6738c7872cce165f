#pragma once
// The meter of a rule's aggregate or of a parent: one meter for all of a rule's traffic (checked in
// SharedMeter's critical section), so, unlike a per-key entry, it is not held to State's 24 bytes. A
// sliding window is a WideWindow (any K from 1 to 64); every other algorithm is a Meter.
//
// The window's counters live off the meter's cache line, allocated off the fast path: when the meter
// is made for a sliding window, or by prepare() on the control thread before a change to one reaches
// a worker. A worker never allocates: change() and restart() only use counters already there.
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <memory>
#include <span>

#include "policer/limiters.hpp"
#include "policer/meter.hpp"
#include "policer/shaping.hpp"

namespace tricolor::policer {

class AggregateMeter {
 public:
  AggregateMeter(const Profile& profile, std::uint64_t now) : meter_(profile, now) {
    if (windowed(profile)) {
      window_ = std::make_unique<WideWindow>(profile, now);
      in_window_ = true;
    }
  }
  AggregateMeter(const AggregateMeter& other)
      : meter_(other.meter_),
        window_(other.window_ ? std::make_unique<WideWindow>(*other.window_) : nullptr),
        in_window_(other.in_window_) {}
  AggregateMeter& operator=(const AggregateMeter& other) {
    if (this != &other) *this = AggregateMeter(other);
    return *this;
  }
  AggregateMeter(AggregateMeter&&) noexcept = default;
  AggregateMeter& operator=(AggregateMeter&&) noexcept = default;

  static bool windowed(const Profile& p) noexcept { return p.algorithm() == Algorithm::sliding_window; }

  // ---- fast path: a burst, one dispatch on the algorithm ----

  // Packets all timed `now`: one advance, then a decision each. `in` empty: color-blind.
  void color_at(std::uint64_t now, std::span<const std::uint32_t> lengths, std::span<const Color> in,
                std::span<Color> colors) noexcept {
    const Profile& p = meter_.profile();
    if (in_window_) {
      window_->advance(p, now);
      for (std::size_t i = 0; i < lengths.size(); ++i)
        colors[i] = window_->decide(p, p.cost(lengths[i]), in.empty() ? Color::green : in[i]);
      return;
    }
    with_algorithm(p.algorithm(), [&](auto algo) {
      using Algo = decltype(algo);
      State& s = meter_.state();
      Algo::advance(s, p, now);
      if (in.empty()) {
        for (std::size_t i = 0; i < lengths.size(); ++i) colors[i] = Algo::decide_blind(s, p, p.cost(lengths[i]));
      } else {
        for (std::size_t i = 0; i < lengths.size(); ++i) colors[i] = Algo::decide_aware(s, p, p.cost(lengths[i]), in[i]);
      }
    });
  }

  // Packets with their own ticks, in arrival order.
  void color_each(std::span<const std::uint64_t> times, std::span<const std::uint32_t> lengths,
                  std::span<const Color> in, std::span<Color> colors) noexcept {
    const Profile& p = meter_.profile();
    if (in_window_) {
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        window_->advance(p, times[i]);
        colors[i] = window_->decide(p, p.cost(lengths[i]), in.empty() ? Color::green : in[i]);
      }
      return;
    }
    with_algorithm(p.algorithm(), [&](auto algo) {
      using Algo = decltype(algo);
      State& s = meter_.state();
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        Algo::advance(s, p, times[i]);
        const std::uint64_t cost = p.cost(lengths[i]);
        colors[i] = in.empty() ? Algo::decide_blind(s, p, cost) : Algo::decide_aware(s, p, cost, in[i]);
      }
    });
  }

  // Shaping (policer/shaping.hpp): each packet, with its own tick, green with the ticks it waits in
  // `delays`, or red (later than `max_delay`: dropped, nothing taken). The rule's profile shapes
  // (can_shape, checked when the rule is compiled); any other colors as color_each() does, delays 0.
  // With a `queue` (the calling worker's, for this rule: `queue N`), a packet that would wait while it
  // is full is dropped too, taking nothing, its delay kQueueFullMark.
  void shape_each(std::span<const std::uint64_t> times, std::span<const std::uint32_t> lengths,
                  std::uint64_t max_delay, ShapeQueue* queue, std::span<std::uint32_t> delays,
                  std::span<Color> colors) noexcept {
    const Profile& p = meter_.profile();
    if (!in_window_) {
      const bool shaped = with_algorithm(p.algorithm(), [&](auto algo) {
        using Algo = decltype(algo);
        if constexpr (kShapes<Algo>) {
          State& s = meter_.state();
          // Two copies of the loop: the unbounded one carries no queue per packet.
          if (queue != nullptr) {
            for (std::size_t i = 0; i < lengths.size(); ++i) {
              ShapeDrop drop;
              const auto wait = shape<Algo>(s, p, times[i], lengths[i], max_delay, *queue, drop);
              colors[i] = wait ? Color::green : Color::red;
              delays[i] = wait ? static_cast<std::uint32_t>(*wait) : drop == ShapeDrop::queue_full ? kQueueFullMark : 0;
            }
            return true;
          }
          for (std::size_t i = 0; i < lengths.size(); ++i) {
            const auto wait = shape<Algo>(s, p, times[i], lengths[i], max_delay);
            colors[i] = wait ? Color::green : Color::red;
            delays[i] = static_cast<std::uint32_t>(wait.value_or(0));
          }
          return true;
        }
        return false;
      });
      if (shaped) return;
    }
    std::fill_n(delays.begin(), lengths.size(), 0u);
    color_each(times, lengths, {}, colors);
  }

  Color check_blind(std::uint64_t now, std::uint32_t length) noexcept {
    Color color;
    color_at(now, {&length, 1}, {}, {&color, 1});
    return color;
  }
  Color check_aware(std::uint64_t now, std::uint32_t length, Color in) noexcept {
    Color color;
    color_at(now, {&length, 1}, {&in, 1}, {&color, 1});
    return color;
  }

  // ---- live changes ----

  // Makes room for `to`'s state (a sliding window's counters) before a change to it can reach the
  // meter: on the control thread, never on a worker. Returns the counters to install under the lock,
  // or null when there is nothing to do.
  std::unique_ptr<WideWindow> room_for(const Profile& to) const {
    return windowed(to) && !window_ ? std::make_unique<WideWindow>(to, 0) : nullptr;
  }
  void install(std::unique_ptr<WideWindow> window) noexcept {
    if (!window_) window_ = std::move(window);
  }

  // A change from `from` to `to` at `tick` (the catch-up of a missed change: the meter stays bound to
  // what it was until rebind()). Within a family the state carries over as each algorithm's carry()
  // says; across families the meter starts afresh. `to` a sliding window needs its counters there.
  void change(const Profile& from, const Profile& to, std::uint64_t tick) noexcept {
    if (!windowed(from) && !windowed(to)) {
      policer::change_profile(meter_.state(), from, to, tick);
    } else if (in_window_ && windowed(to) && same_family(from, to)) {
      window_->carry(from, to, tick);
    } else {
      restart(to, tick);
    }
  }
  // Afresh under `to` (full buckets, or empty windows), at `now` or the latest check if later.
  void restart(const Profile& to, std::uint64_t now) noexcept {
    const std::uint64_t at = std::max(last(), now);
    in_window_ = windowed(to);
    if (in_window_) {
      assert(window_ && "room_for() must have run before a change to a sliding window");
      *window_ = WideWindow(to, at);
    } else {
      meter_.state() = full_state(to, at);
    }
  }
  // Points the meter at `to` once its state has been brought there (change(), restart()).
  void rebind(const Profile& to) noexcept { meter_.rebind(to); }

  // The slow path's own forms: change now (allocating if need be), reset.
  void change_profile(const Profile& to, std::uint64_t now) {
    install(room_for(to));
    change(meter_.profile(), to, now);
    rebind(to);
  }
  void reset(std::uint64_t now) noexcept { restart(meter_.profile(), now); }

  // ---- reading ----
  std::uint64_t last() const noexcept { return in_window_ ? window_->last() : meter_.state().last; }
  // The state as a State: a window's is its count (level[0]) and its latest tick.
  State state() const noexcept {
    return in_window_ ? State{{window_->sum(), 0}, window_->last()} : meter_.state();
  }
  const Profile& profile() const noexcept { return meter_.profile(); }

 private:
  Meter meter_;
  std::unique_ptr<WideWindow> window_;  // a sliding window's counters, once needed
  bool in_window_ = false;              // the state is window_'s (the profile is a sliding window)
};

}  // namespace tricolor::policer
