#pragma once
// The policy engine's control side: it turns a policy into a rule set (rule_set.hpp), publishes it to
// the workers (worker.hpp) by RCU, and frees what an old set owned once every worker has passed a
// quiescent point. It owns, by rule name, what outlives a set: each rule's shared meters (aggregate,
// parent) and, per worker, its counters and key table. Other threads read counters and keys through
// it without blocking a worker.
//
// Three owners, three kinds of state:
//   - the rule set, immutable, built here aside and published (a policy change never edits what a
//     worker may be reading);
//   - per-worker state (counters, key tables, the sweep position), written only by its worker;
//   - shared meters (aggregates, parents), addressed from the set, in policer's shared form (one
//     critical section per meter per burst).
//
// A policy change: everything that can fail (references, the classifier and its limits, key indexes,
// memory) is made aside first; then the new set is published, and the old one retired. Meters and
// counters belong to rule names, not to a set: a rule that keeps its name keeps its meters' levels and
// its counters. A change takes effect, for each worker, at the tick of the first burst it processes
// under the new set; meters that were not checked since catch up at their next check (doc/engine.md, "When a
// change takes effect"). A change of rates only (no match changed) reuses the classifier.
//
// Threads: one control thread calls update(), reclaim() and the readers; worker w calls
// worker(w).process() and quiescent(). tricolor-replay and the tests drive one worker on the control
// thread with process() below.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/engine/classifier.hpp"
#include "dataplane/engine/key_table.hpp"
#include "dataplane/engine/keys.hpp"
#include "dataplane/engine/memory_source.hpp"
#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/policy.hpp"
#include "dataplane/engine/rcu.hpp"
#include "dataplane/engine/rule_set.hpp"
#include "dataplane/engine/worker.hpp"
#include "policer/cluster_lease.hpp"
#include "policer/expected.hpp"
#include "policer/profile.hpp"
#include "policer/shared_meter.hpp"

namespace tricolor::dataplane {

// What a policy may cost, checked at every create and update (tricolor-replay and the daemon let an
// operator raise it).
struct EngineLimits {
  std::size_t max_classifier_entries = kDefaultMaxClassifierEntries;  // see classifier.hpp
  std::size_t classifier_scan_entries = kDefaultScanEntries;          // scanned, no trie, up to this many
  bool classifier_exact_hash = true;  // more entries of one shape: a hash lookup, no trie (classifier.hpp)
  // Each worker's exact-match flow cache in front of the classifier (flow_cache.hpp): its entries, a
  // power of two, or 0 for none (the default: on this project's machines it has not paid yet, see
  // flow_cache.hpp). Fixed when the engine is created.
  std::size_t flow_cache_entries = 0;
  // The packets each worker can hold for shaping (tricolord's --shape-capacity, its timing wheel); 0:
  // no bound (tricolor-replay holds in memory). When every shaping rule has `queue N`, a policy whose
  // queues sum past it is refused: their held packets could not all be held.
  std::uint64_t shape_capacity = 0;
};

struct EngineOptions {
  EngineLimits limits;
  unsigned workers = 1;
  // Where each worker's key tables take their memory (memory_source.hpp): the daemon gives each
  // worker DPDK memory on its socket; empty, or a null entry, means the heap (tricolor-replay, tests).
  // The sources must outlive the engine.
  std::vector<MemorySource*> memory;
  // With several workers, where per-key rules' keys are metered (placement.hpp), and the address
  // fields the RX ports hash on when they steer by RSS (the daemon decides it from the ports).
  PlacementMode placement = PlacementMode::keys_by_hash;
  Steering steering;
  // Cluster meters (policer/cluster_lease.hpp): how many boxes share each budget (a box's share, its
  // local meter when the shared store cannot be reached, is the budget divided by them), and the mode
  // a new cluster meter starts in until its lease side says otherwise. Without a lease side
  // (tricolor-replay, tests) the default meters each cluster locally at its whole budget.
  unsigned cluster_boxes = 1;
  policer::ClusterMode cluster_start_mode = policer::ClusterMode::share;
  // A test switch: off, every burst is parsed, none plain (worker.cpp), so that a test compares the two.
  bool plain_bursts = true;
  // A test switch: off, process() finishes every group of a burst itself, none in the meter's loop
  // (Worker::Finished), so that a test compares the two.
  bool meter_finishes = true;
};

// A cluster meter as the lease side sees it (Engine::clusters()).
struct ClusterInfo {
  std::string name;                  // its profile's name: the same on every box
  policer::Params budget;            // the shared budget (a 1R2C profile's parameters)
  policer::ClusterLease* lease;      // lives as long as the engine
  bool in_use = false;               // a rule of the current policy names it
};

class Engine {
 public:
  static constexpr std::size_t kMaxBurst = Worker::kMaxBurst;

  // Needs the EAL (the classifier, RCU). Meters are created full.
  static Expected<std::unique_ptr<Engine>> create(const Policy& policy, policer::TickRate tick_rate,
                                                  const EngineOptions& options = {});
  ~Engine();

  // Replaces the policy; on error (a bad reference, a rule name twice, the classifier's limits, a key
  // index or anything else that cannot be allocated) nothing changes. The first form keeps the
  // engine's limits; the second replaces them if it succeeds. Linear in the rules, profiles and color
  // maps (and the classifier's build, skipped when no rule's match or place changed). A change short
  // of memory first waits (100 ms at most) for the workers to let go of the rule sets replaced before,
  // frees what those held, and is tried again.
  Expected<bool> update(const Policy& policy);
  Expected<bool> update(const Policy& policy, const EngineLimits& limits);
  const EngineLimits& limits() const noexcept { return limits_; }
  policer::TickRate tick_rate() const noexcept { return tick_rate_; }
  // The fields the RX ports hash on, when they steer keys to workers (placement.hpp); republishes
  // the policy with the placement that follows. Before the workers start (a port that would not take
  // the steering plan turns it off).
  Expected<bool> set_steering(const Steering& steering);

  // Frees what retired rule sets owned once every online worker has passed a quiescent point since.
  // Never waits. Called by the control thread periodically (and by process() below).
  void reclaim() noexcept;
  // The control thread's periodic work: every key table's pool of ready chunks topped up and the
  // chunks its worker gave back taken (KeyTable::replenish), then reclaim(). Often enough that a
  // table's spare chunks (2 x 4096 keys) cannot run out between two calls, or new keys are refused
  // and counted as starved.
  void maintain() noexcept;
  std::size_t retired_sets() const noexcept;  // not freed yet

  Worker& worker(unsigned w) noexcept { return *workers_[w]; }
  const Worker& worker(unsigned w) const noexcept { return *workers_[w]; }
  unsigned workers() const noexcept { return static_cast<unsigned>(workers_.size()); }

  // One worker on the calling thread (tricolor-replay, tests): worker 0 processes the burst, passes
  // its quiescent point, and the control side reclaims. Remarks are written into the frames.
  // `read`: which verdicts the caller reads (Worker::VerdictsRead; whole_burst() of worker(0)).
  void process(std::span<PacketView> burst, std::span<Verdict> verdicts,
               Worker::VerdictsRead read = Worker::VerdictsRead::every) noexcept;

  // ---- readers (the control thread), of the current set ----
  const Policy& policy() const noexcept { return *current_->policy; }
  std::uint64_t generation() const noexcept { return current_->generation; }
  // Counters of the current policy's rules, in rule order, summed over the workers; or one worker's.
  RuleCounters counters(std::size_t rule) const noexcept;
  RuleCounters counters(std::size_t rule, unsigned worker) const noexcept;
  // Where the rule's meters run (placement.hpp), and a per-key rule's capacity on each worker.
  Placement placement(std::size_t rule) const noexcept { return current_->rules[rule].placement; }
  std::uint32_t worker_capacity(std::size_t rule) const noexcept;
  DefaultCounters default_counters() const noexcept;
  std::size_t classifier_entries() const noexcept { return current_->classifier->entries(); }
  std::uint64_t classifier_builds() const noexcept { return classifier_builds_; }

  // Per-key rules: every live key's meter state and counters, as consistent copies (a reader: never
  // blocks metering), each worker's table in turn (the worker that meters the key is given). The state
  // is as of the key's latest packet (its `last` tick).
  struct LiveKey {
    const MeterKey& key;
    const policer::State& state;
    const KeyCounters& counters;
    unsigned worker;
  };
  using KeyVisitor = std::function<void(const LiveKey& live)>;
  void for_each_key(std::size_t rule, const KeyVisitor& fn) const;
  std::size_t live_keys(std::size_t rule) const noexcept;
  std::size_t live_keys(std::size_t rule, unsigned worker) const noexcept;
  // A per-key rule's key tables (all workers'): their indexes and bookkeeping (fixed from the rule's
  // installation on), their entries (following the live keys), and both. 0 for other rules.
  std::size_t key_index_bytes(std::size_t rule) const noexcept;
  std::size_t key_entry_bytes(std::size_t rule) const noexcept;
  std::size_t key_spare_bytes(std::size_t rule) const noexcept;  // chunks kept ready for new keys
  std::size_t key_memory_bytes(std::size_t rule) const noexcept;  // index, entries and spares
  // New keys refused because no chunk was ready (the control side had not kept up), since the rule's
  // tables were made; they took the rule's fallback, as when its table is full.
  std::uint64_t keys_starved(std::size_t rule) const noexcept;

  // Every cluster meter the engine has made, by name (those no rule names any more too: a later rule
  // that names one again finds its lease). Any thread (the lease side's): a copy taken under a lock
  // that only the control side takes, never a worker.
  std::vector<ClusterInfo> clusters() const;
  unsigned cluster_boxes() const noexcept { return cluster_boxes_; }

 private:
  struct Slot;
  struct Plan;
  struct Retired;

  Engine(policer::TickRate tick_rate, std::unique_ptr<Rcu> rcu, const EngineOptions& options);
  Expected<bool> prepare(const Policy& policy, const EngineLimits& limits, Plan& plan) const;
  bool reclaim_waiting() noexcept;
  Placement placement_of(const PerKey& key, unsigned workers) const noexcept;
  bool local_meters(unsigned workers) const noexcept;
  static std::uint32_t worker_capacity_of(std::uint32_t capacity, Placement placement, unsigned workers) noexcept;
  void commit(Plan& plan) noexcept;
  Expected<bool> plan_cluster(const std::string& name, const policer::Params& budget, std::uint64_t generation,
                              Plan& plan) const;
  template <class Fn>
  void each_table(std::size_t rule, Fn&& fn) const;

  policer::TickRate tick_rate_;
  PlacementMode placement_;
  Steering steering_;
  KeyOwners owners_;
  std::unique_ptr<Rcu> rcu_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<MemorySource*> memory_;  // per worker
  EngineLimits limits_;
  std::atomic<const RuleSet*> published_{nullptr};  // what workers read
  std::unique_ptr<RuleSet> current_;                // the same, owned
  std::map<std::string, std::shared_ptr<const policer::Profile>> profiles_;  // by name, as now translated
  std::map<std::string, std::unique_ptr<Slot>> slots_;                       // rules by name
  std::uint32_t next_slot_ = 0;
  std::uint64_t classifier_builds_ = 0;
  std::vector<Retired> retired_;  // oldest first
  // Cluster meters by name: their leases (never freed before the engine: the lease side and old rule
  // sets point at them), their shares, the set that brought each share, the budget.
  struct Cluster {
    std::unique_ptr<policer::ClusterLease> lease;
    std::shared_ptr<const policer::Profile> share;
    std::uint64_t share_generation = 0;
    policer::Params budget;
    bool in_use = false;
  };
  std::map<std::string, Cluster, std::less<>> clusters_;
  mutable std::mutex clusters_mutex_;  // clusters_ against the lease side's reads
  unsigned cluster_boxes_ = 1;
  policer::ClusterMode cluster_start_mode_ = policer::ClusterMode::share;
};

}  // namespace tricolor::dataplane
