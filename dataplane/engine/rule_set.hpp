#pragma once
// A rule set: what a worker needs to process packets under one policy, immutable once published.
//
// The control side (engine.hpp) builds a new set aside for every policy change and publishes it; each
// worker picks the newest set up at its next burst, and an old set is freed only after every worker
// has passed a quiescent point since it was replaced (RCU). A set owns what is its own (the compiled
// rules, the profiles they run on, shared with the sets before and after while unchanged, the
// classifier, shared as long as no match changes) and points at what outlives it: each rule's shared
// meters (aggregate, parent) and each worker's counters and key table for the rule, all owned by the
// control side's registry of rules by name.
//
// Live changes (doc/engine.md, "When a change takes effect"): a change takes effect, for a worker, at the tick of the first
// burst it processes under the set that brought it. A meter that has not been checked since then
// catches up at its next check: every change it missed is applied in order, each at its own tick, from
// a copy of the profile it replaced (ProfileHistory), so that two changes between two packets of an
// idle key are both honoured.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "dataplane/engine/classifier.hpp"
#include "dataplane/engine/flow_table.hpp"
#include "dataplane/engine/key_table.hpp"
#include "dataplane/engine/keys.hpp"
#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/placement.hpp"
#include "dataplane/engine/shape_ledger.hpp"
#include "dataplane/engine/policy.hpp"
#include "policer/meter.hpp"
#include "policer/cluster_lease.hpp"
#include "policer/shared_meter.hpp"

namespace tricolor::dataplane {

using KeyedMeters = KeyTable<kKeySize>;

// ---- counters: one writer, any number of readers ----

// A counter its owner (one worker) writes and other threads read: relaxed loads and stores, no
// read-modify-write (the owner is the only writer, so load + add + store loses nothing), so counting
// costs what a plain add does.
class OwnedCounter {
 public:
  void add(std::uint64_t n) noexcept { value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  std::uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// Counts, per rule and output color, of packets and bytes (L2 frame bytes, a stripped tag counted), as
// readers see them: summed over the workers.
struct RuleCounters {
  std::array<std::uint64_t, 3> packets{};
  std::array<std::uint64_t, 3> bytes{};
  std::uint64_t dropped_packets = 0;  // dropped by the rule's action for their color
  std::uint64_t dropped_bytes = 0;
  // Per-key rules: keys created, keys renewed after idling past the timeout, packets of new keys that
  // found the table full (they took the rule's fallback).
  std::uint64_t keys_created = 0;
  std::uint64_t keys_renewed = 0;
  std::uint64_t table_full = 0;
  // Shaping rules: packets held to leave later (counted green too); their late ones are the red drops.
  std::uint64_t shaped_packets = 0;
  // Shaping rules with `queue N`: packets dropped (red, nothing taken) because N were held.
  std::uint64_t queue_overflow_packets = 0;
  // Max-flows rules: flows opened, closed by a TCP FIN or RST, closed idle (flow-timeout), and packets
  // of new flows refused: their key had max-flows open (flows_refused, which counts those of
  // flow_table_full too) or this worker's flow table was full (flow_table_full).
  std::uint64_t flows_opened = 0;
  std::uint64_t flows_closed = 0;
  std::uint64_t flows_expired = 0;
  std::uint64_t flows_refused = 0;
  std::uint64_t flow_table_full = 0;
  // The first and last tick at which the rule metered a packet (earliest and latest over the workers,
  // each in its own clock); both 0 while `metered` is false.
  bool metered = false;
  std::uint64_t first_tick = 0;
  std::uint64_t last_tick = 0;
};

struct DefaultCounters {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
  std::uint64_t non_ip = 0;
  std::uint64_t no_match = 0;
  std::array<std::uint64_t, kParseErrors> malformed{};  // by ParseError
  std::uint64_t dropped_packets = 0;
  std::uint64_t dropped_bytes = 0;
};

// One worker's counters of one rule, on lines of their own (nothing another worker writes shares them).
struct alignas(64) WorkerRuleCounters {
  std::array<OwnedCounter, 3> packets;
  std::array<OwnedCounter, 3> bytes;
  OwnedCounter dropped_packets, dropped_bytes, keys_created, keys_renewed, table_full;
  OwnedCounter metered, first_tick, last_tick;  // metered: 1 once first_tick holds a tick
  OwnedCounter shaped_packets, queue_overflow_packets;
  OwnedCounter flows_opened, flows_closed, flows_expired, flows_refused, flow_table_full;

  // A burst metered packets of the rule from tick `first` to tick `last`.
  void note_metered(std::uint64_t first, std::uint64_t last) noexcept {
    if (metered.get() == 0) first_tick.add(first), metered.add(1);  // first_tick written before metered
    if (last > last_tick.get()) last_tick.add(last - last_tick.get());
  }

  void add_to(RuleCounters& sum) const noexcept {
    if (metered.get() != 0) {
      const std::uint64_t first = first_tick.get(), last = last_tick.get();
      sum.first_tick = sum.metered ? std::min(sum.first_tick, first) : first;
      sum.last_tick = sum.metered ? std::max(sum.last_tick, last) : last;
      sum.metered = true;
    }
    for (std::size_t c = 0; c < 3; ++c) sum.packets[c] += packets[c].get(), sum.bytes[c] += bytes[c].get();
    sum.dropped_packets += dropped_packets.get();
    sum.dropped_bytes += dropped_bytes.get();
    sum.keys_created += keys_created.get();
    sum.keys_renewed += keys_renewed.get();
    sum.table_full += table_full.get();
    sum.shaped_packets += shaped_packets.get();
    sum.queue_overflow_packets += queue_overflow_packets.get();
    sum.flows_opened += flows_opened.get();
    sum.flows_closed += flows_closed.get();
    sum.flows_expired += flows_expired.get();
    sum.flows_refused += flows_refused.get();
    sum.flow_table_full += flow_table_full.get();
  }
};
static_assert(sizeof(WorkerRuleCounters) == 192, "21 counters on three lines of their own");

struct alignas(64) WorkerDefaultCounters {
  OwnedCounter packets, bytes, non_ip, no_match, dropped_packets, dropped_bytes;
  std::array<OwnedCounter, kParseErrors> malformed;

  void add_to(DefaultCounters& sum) const noexcept {
    sum.packets += packets.get();
    sum.bytes += bytes.get();
    sum.non_ip += non_ip.get();
    sum.no_match += no_match.get();
    sum.dropped_packets += dropped_packets.get();
    sum.dropped_bytes += dropped_bytes.get();
    for (std::size_t e = 0; e < kParseErrors; ++e) sum.malformed[e] += malformed[e].get();
  }
};

// ---- live changes ----

// The recent changes of the profile a rule's meters run on (or its parent's): what a meter that
// missed some needs to catch up exactly. Immutable; a set shares it with the next sets until the
// profile changes again.
inline constexpr std::size_t kProfileHistory = 8;

struct ProfileChange {
  std::uint64_t generation = 0;  // the rule set that brought the change
  policer::Profile before;       // a copy of the profile it replaced (that object may be freed since)
};

struct ProfileHistory {
  std::array<std::optional<ProfileChange>, kProfileHistory> changes{};  // oldest first, `count` of them
  std::size_t count = 0;
  // The newest change dropped to keep kProfileHistory (0: none). A meter that has not been checked
  // since before it cannot be brought forward exactly: it starts afresh, full (README).
  std::uint64_t forgotten = 0;

  std::uint64_t newest() const noexcept { return count == 0 ? 0 : changes[count - 1]->generation; }
  const ProfileChange& operator[](std::size_t i) const noexcept { return *changes[i]; }
  // The history of the next set: this one with a change from `before` at `generation` appended.
  ProfileHistory with(std::uint64_t generation, const policer::Profile& before) const;
};

// The ticks at which one worker first processed a burst under each rule set, for the most recent
// kSeen sets it saw: the ticks of the changes those sets brought, in that worker's clock.
class SeenGenerations {
 public:
  static constexpr std::size_t kSeen = 64;

  void record(std::uint64_t generation, std::uint64_t tick) noexcept {
    seen_[next_] = {generation, tick};
    next_ = (next_ + 1) % kSeen;
    if (count_ < kSeen) ++count_;
  }
  // The tick of the first burst this worker processed under generation `g` or a later one; empty if
  // that is older than what is remembered (then it was no later than oldest_tick()).
  std::optional<std::uint64_t> tick_of(std::uint64_t g) const noexcept;
  std::uint64_t oldest_tick() const noexcept { return count_ == 0 ? 0 : at(0).tick; }

 private:
  struct Seen {
    std::uint64_t generation = 0, tick = 0;
  };
  const Seen& at(std::size_t age_from_oldest) const noexcept {
    return seen_[(next_ + kSeen - count_ + age_from_oldest) % kSeen];
  }
  std::array<Seen, kSeen> seen_{};
  std::size_t next_ = 0, count_ = 0;
};

// The tick at which this worker first saw each change of a rule's history (empty: older than it
// remembers), that of the newest forgotten change, and the oldest it remembers: the same for every key
// of a burst, so worked out once per burst, when its first key has changes to catch up on.
struct HistoryTicks {
  HistoryTicks(const ProfileHistory& history, const SeenGenerations& seen) noexcept;
  std::array<std::optional<std::uint64_t>, kProfileHistory> change{};
  std::uint64_t forgotten = 0;
  std::uint64_t oldest = 0;
};

// Brings a meter's state through the changes of `history` it missed, each at the tick the worker
// first saw it (`ticks`). For a key (one owner): the changes it missed are those after its last check.
// Returns false if it missed one that is no longer known (it should start afresh).
bool catch_up_key(policer::State& state, const ProfileHistory& history, const HistoryTicks& ticks,
                  const policer::Profile& current) noexcept;
// For a shared meter: the changes after the meter's `generation` (checked by several workers, its last
// tick does not tell which changes it saw). Rebinds it to `current` and moves `generation` on.
void catch_up_shared(policer::AggregateMeter& meter, std::uint64_t& generation, const ProfileHistory* history,
                     std::uint64_t current_generation, const policer::Profile& current, const SeenGenerations& seen,
                     std::uint64_t now) noexcept;

// ---- the set ----

// What an Action does, as bits (CompiledRule::action_does): it drops the packet; it rewrites the frame
// (a DSCP remark or a PCP set; never with a drop, which rewrites nothing).
namespace action_does {
inline constexpr std::uint8_t drop = 1, rewrite = 2;
inline constexpr std::uint8_t of(const Action& a) noexcept {
  return a.drop ? drop : a.dscp || a.pcp ? rewrite : 0;
}
}  // namespace action_does

// A rule as a worker runs it.
struct CompiledRule {
  std::uint32_t slot = 0;  // the rule's stable number in the control side's registry (its name's)
  InputColor input = InputColor::blind;
  MeteredLength length;
  std::array<std::array<Action, 3>, 3> action{};  // [input][output]
  // What each of those does, for the packet path: a byte per pair, [3 x input + output], instead of
  // reading three fields of a 40-byte Action a packet (issue 23). Made with `action` (engine.cpp).
  std::array<std::uint8_t, 9> action_does{};  // action_does::drop, action_does::rewrite
  // Shaping rules (red shape max-delay D): D in ticks, at least 1; 0: the rule polices.
  std::uint32_t shape_max_delay = 0;
  std::uint32_t shape_queue = 0;  // queue N; 0: bounded only by the daemon's wheel
  // Input colors (InputColor::mapped): the maps copied here.
  bool has_pcp_map = false, has_dscp_map = false;
  std::array<Color, 8> pcp_map{};
  std::array<Color, 64> dscp_map{};
  Color input_default = Color::green;
  PerKey per_key;
  KeyShape key_shape;  // per_key's key, worked out for the packet path
  // Per-key rules: which worker meters a key (placement.hpp); shared for the others.
  Placement placement = Placement::shared;
  // The profile the rule's meters (aggregate or per key) run on, the set generation it came with, and
  // its recent changes (null: none); the same for the parent meter.
  const policer::Profile* profile = nullptr;
  std::uint64_t profile_generation = 0;
  const ProfileHistory* history = nullptr;
  policer::SharedMeter* aggregate = nullptr;  // per-key rules: their fallback
  const policer::Profile* parent_profile = nullptr;
  std::uint64_t parent_generation = 0;
  const ProfileHistory* parent_history = nullptr;
  policer::SharedMeter* parent = nullptr;  // null without a parent
  // The cluster meter (null without one), and the share its local meter runs on in `share` mode.
  policer::ClusterLease* cluster = nullptr;
  const policer::Profile* cluster_share = nullptr;
  std::uint64_t cluster_share_generation = 0;
};

// A rule's state owned by one worker: its counters (for the rule's name, whatever the set), its key
// table and its flow table (for the rule's key and flow definitions: replaced, in a later set, when
// they change); and the
// aggregate and parent meters it checks: the rule's shared ones, or, with placement off (a test
// switch, placement.hpp), meters of this worker's own.
struct WorkerRule {
  WorkerRuleCounters* counters = nullptr;
  KeyedMeters* keys = nullptr;  // per-key rules
  FlowTable* flows = nullptr;   // max-flows rules: the open flows of the keys this worker owns
  ShapeLedger* ledger = nullptr;  // shaping rules with queue N: what the rule holds on this worker
  policer::SharedMeter* aggregate = nullptr;
  policer::SharedMeter* parent = nullptr;  // null without a parent
};

struct RuleSet {
  std::uint64_t generation = 0;
  std::shared_ptr<const Policy> policy;          // as given (names, for reports)
  std::shared_ptr<const Classifier> classifier;  // shared by sets whose rules match alike
  std::vector<CompiledRule> rules;               // by the classifier's rule number
  std::vector<WorkerRule> worker_rules;          // rules.size() x workers, rule-major
  std::vector<std::uint32_t> keyed;              // the per-key rules, swept in turn
  unsigned workers = 1;
  const KeyOwners* owners = nullptr;  // the engine's, for rules placed by key hash
  Action default_action;
  // What the rules point at and the set keeps alive.
  std::vector<std::shared_ptr<const policer::Profile>> profiles;
  std::vector<std::shared_ptr<const ProfileHistory>> histories;

  const WorkerRule& worker_rule(std::size_t rule, unsigned worker) const noexcept {
    return worker_rules[rule * workers + worker];
  }
};

}  // namespace tricolor::dataplane
