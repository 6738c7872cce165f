#pragma once
// The shared form of a meter: several workers may check it at once. Each burst of packets for the
// meter is metered inside one short critical section (never one per packet), so together the workers
// admit exactly what a single meter would admit seeing their bursts in the order they committed. A
// burst timed earlier than the meter's latest check gets no credit (stale clock reads across cores are
// harmless).
#include <atomic>
#include <cassert>
#include <cstdint>
#include <span>
#include <thread>

#include "policer/aggregate_meter.hpp"

namespace tricolor::policer {

// Test-and-test-and-set lock for critical sections of a few dozen nanoseconds between pinned workers.
class SpinLock {
 public:
  void lock() noexcept {
    for (unsigned spins = 0;; ++spins) {
      if (!held_.exchange(true, std::memory_order_acquire)) return;
      while (held_.load(std::memory_order_relaxed)) {
        cpu_relax();
        // Only when the holder was preempted (more threads than cores, never on pinned lcores) does
        // the waiter give up its slice rather than burn it.
        if (++spins % 4096 == 0) std::this_thread::yield();
      }
    }
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }
  std::atomic<bool> held_{false};
};

struct NoCommitHook {
  void operator()(const State&) const noexcept {}
};

class alignas(64) SharedMeter {
 public:
  SharedMeter(const Profile& profile, std::uint64_t now) : meter_(profile, now) {}

  // Colors `lengths.size()` packets of this meter, all timed `now`, into `colors`. `on_commit` runs
  // inside the critical section after the burst (statistics, or a test recording commit order).
  template <class OnCommit = NoCommitHook>
  void check_burst_blind(std::uint64_t now, std::span<const std::uint32_t> lengths, std::span<Color> colors,
                         OnCommit&& on_commit = {}) noexcept {
    assert(colors.size() >= lengths.size());
    exclusive([&](AggregateMeter& m) {
      m.color_at(now, lengths, {}, colors);
      on_commit(m.state());
    });
  }

  template <class OnCommit = NoCommitHook>
  void check_burst_aware(std::uint64_t now, std::span<const std::uint32_t> lengths, std::span<const Color> in,
                         std::span<Color> colors, OnCommit&& on_commit = {}) noexcept {
    assert(colors.size() >= lengths.size() && in.size() >= lengths.size());
    exclusive([&](AggregateMeter& m) {
      m.color_at(now, lengths, in, colors);
      on_commit(m.state());
    });
  }

  // The same for packets with their own arrival ticks (in arrival order); `in` empty means
  // color-blind. Still one critical section for the whole burst.
  template <class OnCommit = NoCommitHook>
  void check_burst(std::span<const std::uint64_t> times, std::span<const std::uint32_t> lengths,
                   std::span<const Color> in, std::span<Color> colors, OnCommit&& on_commit = {}) noexcept {
    assert(times.size() >= lengths.size() && colors.size() >= lengths.size());
    assert(in.empty() || in.size() >= lengths.size());
    exclusive([&](AggregateMeter& m) {
      m.color_each(times, lengths, in, colors);
      on_commit(m.state());
    });
  }

  // The same burst check, after `catch_up(meter, generation)` has run in the same critical section: a
  // caller that changes profiles while workers meter (the engine's rule sets) brings the meter through
  // the changes it has not seen yet, recorded in `generation` (the meter's, 0 at creation), before the
  // burst is colored with the meter's profile.
  template <class CatchUp>
  void check_burst_after(CatchUp&& catch_up, std::span<const std::uint64_t> times, std::span<const std::uint32_t> lengths,
                         std::span<const Color> in, std::span<Color> colors) noexcept {
    assert(times.size() >= lengths.size() && colors.size() >= lengths.size());
    assert(in.empty() || in.size() >= lengths.size());
    exclusive([&](AggregateMeter& m) {
      catch_up(m, generation_);
      m.color_each(times, lengths, in, colors);
    });
  }

  // The same for a burst whose packets all arrived at `now` (the daemon reads the clock once a burst):
  // the meter is brought to `now` once, not once a packet, which shortens the critical section that
  // every worker of a shared meter queues for. The colors are those of check_burst_after() with every
  // time equal to `now` (bringing a meter to the time it is at already changes nothing).
  template <class CatchUp>
  void check_burst_at_after(CatchUp&& catch_up, std::uint64_t now, std::span<const std::uint32_t> lengths,
                            std::span<const Color> in, std::span<Color> colors) noexcept {
    assert(colors.size() >= lengths.size());
    assert(in.empty() || in.size() >= lengths.size());
    exclusive([&](AggregateMeter& m) {
      catch_up(m, generation_);
      m.color_at(now, lengths, in, colors);
    });
  }

  // Shaping's form of check_burst_after (AggregateMeter::shape_each): still one critical section.
  // `queue`: the caller's own, or null.
  template <class CatchUp>
  void shape_burst_after(CatchUp&& catch_up, std::span<const std::uint64_t> times,
                         std::span<const std::uint32_t> lengths, std::uint64_t max_delay, ShapeQueue* queue,
                         std::span<std::uint32_t> delays, std::span<Color> colors) noexcept {
    assert(times.size() >= lengths.size() && colors.size() >= lengths.size() && delays.size() >= lengths.size());
    exclusive([&](AggregateMeter& m) {
      catch_up(m, generation_);
      m.shape_each(times, lengths, max_delay, queue, delays, colors);
    });
  }

  // Before a rule set that changes this meter to `to` is published (control thread): allocates what
  // `to`'s state needs that the meter lacks, so that the workers' catch-up never allocates.
  void prepare(const Profile& to) {
    // Only this thread installs counters, so asking without the lock races with nothing.
    auto room = meter_.room_for(to);
    if (room) exclusive([&](AggregateMeter& m) { m.install(std::move(room)); });
  }

  void change_profile(const Profile& to, std::uint64_t now) {
    prepare(to);
    exclusive([&](AggregateMeter& m) {
      m.change(m.profile(), to, now);
      m.rebind(to);
    });
  }
  void reset(std::uint64_t now) noexcept {
    exclusive([&](AggregateMeter& m) { m.reset(now); });
  }
  State snapshot() const noexcept {
    lock_.lock();
    const State copy = meter_.state();
    lock_.unlock();
    return copy;
  }

 private:
  template <class Fn>
  void exclusive(Fn&& fn) noexcept {
    lock_.lock();
    fn(meter_);
    lock_.unlock();
  }

  mutable SpinLock lock_;
  AggregateMeter meter_;
  std::uint64_t generation_ = 0;  // check_burst_after's record of the profile changes applied
};
static_assert(sizeof(SharedMeter) == 64, "one shared meter, lock included, per cache line");

}  // namespace tricolor::policer
