#pragma once
// A cluster meter's local end (issue 26): the tokens this box may spend of a budget that several boxes
// share. The budget is a single-rate token bucket (a 1R2C profile: CIR, CBS) kept elsewhere (Redis);
// the box leases tokens from it in chunks, off the fast path, and its workers spend them packet by
// packet here, exactly: a green packet passes green only while the leased tokens cover its cost; else
// it is red. Yellow and red packets neither take nor need tokens: the cluster bounds green traffic.
//
// The bound: over any interval T, green across all boxes <= what the shared bucket gave in T (at most
// CBS + CIR*T) plus what each box held at the interval's start (at most one chunk: a box asks for
// tokens only to top its balance up to one chunk).
//
// Who writes what: the workers spend (spent_, under the lock, one critical section per burst); the
// lease side grants (granted_, one atomic add) and sets the mode; neither waits for the other. When the
// shared bucket cannot be reached the lease side switches the mode: `share` meters locally with a 1R2C
// meter at the box's share of the budget, `open` passes every green packet, `closed` passes none.
#include <atomic>
#include <cstdint>
#include <span>

#include "policer/meter.hpp"
#include "policer/shared_meter.hpp"

namespace tricolor::policer {

enum class ClusterMode : std::uint8_t {
  leased,  // green only on leased tokens
  share,   // a local meter at the box's share of the budget (fallback, and without a shared store)
  open,    // every green packet passes (fallback: fail-open)
  closed,  // no green packet passes (fallback: fail-closed)
};
std::string_view to_string(ClusterMode mode) noexcept;

// Whole tokens of a packet for a cluster meter: its metered length in byte mode, 1 in packet mode;
// a length beyond any bucket is capped as Profile::cost caps it.
inline std::uint64_t cluster_tokens(Unit unit, std::uint32_t length) noexcept {
  return unit == Unit::packets ? 1 : std::min<std::uint64_t>(length, kMaxBurst + 1);
}

class alignas(64) ClusterLease {
 public:
  // `share`: the 1R2C profile of the box's share (the budget's CIR and CBS divided by the boxes
  // expected), which the local meter runs on in `share` mode; copied: the lease outlives rule sets.
  ClusterLease(const Profile& share, std::uint64_t share_generation, ClusterMode mode)
      : share_profile_(share), share_(share_profile_, 0), share_generation_(share_generation), mode_(mode) {}
  ClusterLease(const ClusterLease&) = delete;
  ClusterLease& operator=(const ClusterLease&) = delete;

  // ---- fast path (a worker, once per burst of one rule) ----

  // The packets of `colors` that are green keep green only if the lease covers them; the others
  // turn red. `times` are the packets' ticks (the local meter of `share` mode needs them). `share` is
  // the share the rule set in use gives, with its generation: a new one is taken over here, by the
  // worker, the local meter keeping its level as a live change does (the control side never takes
  // this lock, so no worker waits for it).
  void gate(const Profile& share, std::uint64_t share_generation, std::span<const std::uint64_t> times,
            std::span<const std::uint32_t> lengths, std::span<Color> colors) noexcept {
    lock_.lock();
    if (share_generation != share_generation_) {
      const Profile from = share_profile_;
      share_profile_ = share;  // the local meter points at this copy
      change_profile(share_.state(), from, share_profile_, times.empty() ? share_.state().last : times[0]);
      share_generation_ = share_generation;
    }
    const ClusterMode mode = mode_.load(std::memory_order_relaxed);
    std::uint64_t green = 0, red = 0;
    if (mode == ClusterMode::leased) {
      const std::uint64_t granted = granted_.load(std::memory_order_acquire);
      std::uint64_t spent = spent_.load(std::memory_order_relaxed);
      const Unit unit = share_profile_.unit();
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        if (colors[i] != Color::green) continue;
        const std::uint64_t cost = cluster_tokens(unit, lengths[i]);
        if (granted - spent >= cost) {
          spent += cost;
          ++green;
        } else {
          colors[i] = Color::red;
          ++red;
        }
      }
      spent_.store(spent, std::memory_order_release);
    } else {
      for (std::size_t i = 0; i < lengths.size(); ++i) {
        if (colors[i] != Color::green) continue;
        const bool pass = mode == ClusterMode::open || (mode == ClusterMode::share && share_.check_blind(times[i], lengths[i]) == Color::green);
        if (pass) {
          ++green;
        } else {
          colors[i] = Color::red;
          ++red;
        }
      }
      fallback_packets_.store(fallback_packets_.load(std::memory_order_relaxed) + green + red, std::memory_order_relaxed);
    }
    passed_.store(passed_.load(std::memory_order_relaxed) + green, std::memory_order_relaxed);
    refused_.store(refused_.load(std::memory_order_relaxed) + red, std::memory_order_relaxed);
    lock_.unlock();
  }

  // ---- the lease side (another thread; never waits for a worker, nor a worker for it) ----

  void grant(std::uint64_t tokens) noexcept { granted_.fetch_add(tokens, std::memory_order_release); }
  void set_mode(ClusterMode mode) noexcept { mode_.store(mode, std::memory_order_relaxed); }
  ClusterMode mode() const noexcept { return mode_.load(std::memory_order_relaxed); }
  // Leased tokens not spent yet (the workers may spend some while this is read; never more).
  std::uint64_t balance() const noexcept {
    const std::uint64_t spent = spent_.load(std::memory_order_acquire);
    return granted_.load(std::memory_order_acquire) - spent;
  }
  std::uint64_t granted() const noexcept { return granted_.load(std::memory_order_acquire); }
  std::uint64_t spent() const noexcept { return spent_.load(std::memory_order_acquire); }
  std::uint64_t passed() const noexcept { return passed_.load(std::memory_order_relaxed); }    // green kept green
  std::uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }  // green made red
  std::uint64_t fallback_packets() const noexcept { return fallback_packets_.load(std::memory_order_relaxed); }
  const Profile& share_profile() const noexcept { return share_profile_; }

  // The lease side's own record, kept here so that whoever reads the engine's clusters sees it: leases
  // answered, calls that failed, switches into a fallback, the chunk it leases.
  struct LeaseRecord {
    std::atomic<std::uint64_t> leases{0}, failures{0}, fallbacks{0}, chunk{0};
  };
  LeaseRecord& record() noexcept { return record_; }
  const LeaseRecord& record() const noexcept { return record_; }

 private:
  SpinLock lock_;
  Profile share_profile_;
  Meter share_;
  std::uint64_t share_generation_;
  std::atomic<ClusterMode> mode_;
  std::atomic<std::uint64_t> granted_{0};
  std::atomic<std::uint64_t> spent_{0};
  std::atomic<std::uint64_t> passed_{0}, refused_{0}, fallback_packets_{0};
  LeaseRecord record_;
};

}  // namespace tricolor::policer
