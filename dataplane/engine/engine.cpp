#include "dataplane/engine/engine.hpp"

#include "policer/shaping.hpp"

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "dataplane/engine/memory_text.hpp"
#include "policer/quote.hpp"

namespace tricolor::dataplane {

// A rule name's state across rule sets: its shared meters, and each worker's counters and key table.
// Freed (after a grace period) when the rule is deleted.
struct Engine::Slot {
  std::uint32_t id = 0;
  std::unique_ptr<policer::SharedMeter> aggregate;          // the aggregate meter (per-key rules: the fallback)
  std::shared_ptr<const policer::Profile> profile;          // what the rule's meters run on now
  std::shared_ptr<const ProfileHistory> history;            // its recent changes
  std::unique_ptr<policer::SharedMeter> parent;             // hierarchy
  std::shared_ptr<const policer::Profile> parent_profile;
  std::shared_ptr<const ProfileHistory> parent_history;
  std::vector<std::unique_ptr<WorkerRuleCounters>> counters;  // per worker
  PerKey per_key;                                           // the key tables' configuration
  std::vector<std::unique_ptr<KeyedMeters>> keys;           // per worker (per-key rules)
  std::vector<std::unique_ptr<FlowTable>> flows;            // per worker (max-flows rules), with `keys`
  // Shaping with queue N: per worker, what the rule holds there; kept while N fits them (below).
  std::vector<std::unique_ptr<ShapeLedger>> ledgers;
  // Placement off (a test switch): each worker's own aggregate and parent meters.
  std::vector<std::unique_ptr<policer::SharedMeter>> local_aggregates, local_parents;
};

// What a replaced rule set owned, freed once every worker has passed a quiescent point after `token`.
struct Engine::Retired {
  std::uint64_t token = 0;
  std::unique_ptr<RuleSet> set;
  std::vector<std::unique_ptr<Slot>> slots;                   // deleted rules
  std::vector<std::unique_ptr<policer::SharedMeter>> meters;  // parent meters given up
  std::vector<std::unique_ptr<KeyedMeters>> tables;           // key tables replaced or given up
  std::vector<std::unique_ptr<FlowTable>> flow_tables;        // flow tables, the same
  std::vector<std::unique_ptr<ShapeLedger>> ledgers;          // shaping queues, the same
};

// Everything a policy change needs, made aside by prepare() (which may fail, or run out of memory,
// without touching the engine); commit() then only moves pointers and cannot fail.
struct Engine::Plan {
  struct RulePlan {
    Slot* slot = nullptr;                  // the rule's slot: an existing one, or `created`
    std::unique_ptr<Slot> created;         // a new rule's
    std::shared_ptr<const policer::Profile> profile, parent_profile;
    std::shared_ptr<const ProfileHistory> history, parent_history;
    std::unique_ptr<policer::SharedMeter> new_parent;  // a parent meter the rule did not have
    std::vector<std::unique_ptr<policer::SharedMeter>> new_local_parents;  // the same, per worker (placement off)
    bool drop_parent = false;                          // the rule has no parent any more
    std::vector<std::unique_ptr<KeyedMeters>> new_keys;  // per worker: the rule's tables made afresh
    std::vector<std::unique_ptr<FlowTable>> new_flows;   // per worker, with new_keys (max-flows rules)
    bool drop_keys = false;                              // the rule has no key tables any more
    std::vector<std::unique_ptr<ShapeLedger>> new_ledgers;  // per worker: queue N new or changed
    bool drop_ledgers = false;                               // the rule has no queue any more
  };
  EngineLimits limits;
  bool built_classifier = false;
  bool short_of_memory = false;  // prepare() failed for memory (retired sets may give some back)
  std::unique_ptr<RuleSet> set;
  std::vector<RulePlan> rules;  // in policy order
  std::map<std::string, std::shared_ptr<const policer::Profile>> profiles;  // the next profiles_
  std::map<std::string, std::unique_ptr<Slot>> slots;                       // the next slots_: names only until commit
  // Cluster meters the policy names: a new one's lease, made here; the share each runs on.
  struct ClusterPlan {
    std::unique_ptr<policer::ClusterLease> created;
    policer::ClusterLease* lease = nullptr;
    std::shared_ptr<const policer::Profile> share;
    std::uint64_t share_generation = 0;
    policer::Params budget;
  };
  std::map<std::string, ClusterPlan, std::less<>> clusters;
  Retired retired;                                                          // room reserved for what is replaced
};

namespace {

std::uint64_t ticks(std::uint64_t ns, policer::TickRate rate) {
  return static_cast<std::uint64_t>(static_cast<unsigned __int128>(ns) * rate.hz() / 1'000'000'000u);  // cold path
}

// A shaping rule (Action::shape_max_delay_ns on red) holds a packet until its meter colors it green:
// a meter that has such a tick (policer/shaping.hpp), color-blind, alone (a parent or a cluster
// would color it again after its release), with a delay that fits a Verdict's 32 bits of ticks.
Expected<bool> check_shaping(const Rule& rule, const policer::Params& params, policer::TickRate rate) {
  for (std::size_t color = 0; color < 2; ++color) {
    if (rule.on_color[color].shape_max_delay_ns || rule.on_color[color].shape_queue)
      return Error{rule.name, "rule " + rule.name + ": only red packets can be shaped"};
  }
  for (const auto& row : rule.on_pair)
    for (const auto& action : row)
      if (action && (action->shape_max_delay_ns || action->shape_queue))
        return Error{rule.name, "rule " + rule.name + ": a color pair cannot shape: a shaping rule is color-blind"};
  const Action& red = rule.on_color[static_cast<std::size_t>(Color::red)];
  const auto& delay = red.shape_max_delay_ns;
  if (!delay) {
    if (red.shape_queue) return Error{rule.name, "rule " + rule.name + ": queue without shape max-delay"};
    return true;
  }
  const auto fail = [&](const std::string& why) { return Error{rule.name, "rule " + rule.name + ": shaping: " + why}; };
  if (!policer::can_shape(params.algorithm))
    return fail("profile " + rule.profile + " is " + std::string(policer::to_string(params.algorithm)) +
                ", which has no tick at which a packet conforms; shape with 1r2c, srtcm, trtcm, trtcm4115, gcra or smooth");
  if (rule.input != InputColor::blind) return fail("a shaping rule is color-blind (input blind)");
  if (rule.parent) return fail("a shaping rule cannot have a parent meter");
  if (rule.cluster) return fail("a shaping rule cannot have a cluster meter");
  if (*delay == 0 || *delay > kMaxShapeDelayNs) return fail("max-delay must be from 1ns to 1s");
  if (ticks(*delay, rate) > UINT32_MAX) return fail("max-delay is more than 2^32 ticks of this clock");
  if (red.shape_queue && (*red.shape_queue == 0 || *red.shape_queue > kMaxShapeQueue))
    return fail("queue must be 1 to 1m (1048576) packets");
  return true;
}

// Every shaping rule bounded by `queue N`: the worker's wheel must hold all of their queues at once.
// A rule without a queue is bounded by the wheel alone (what it cannot hold is dropped after its
// tokens were taken, counted shape_overflow), so a policy that has one is not checked.
Expected<bool> check_shape_capacity(const Policy& policy, std::uint64_t capacity) {
  if (capacity == 0) return true;
  std::uint64_t sum = 0;
  std::string rules;
  for (const Rule& rule : policy.rules) {
    const Action& red = rule.on_color[static_cast<std::size_t>(Color::red)];
    if (!red.shape_max_delay_ns) continue;
    if (!red.shape_queue) return true;
    sum += *red.shape_queue;
    rules += (rules.empty() ? "" : " + ") + rule.name + " " + std::to_string(*red.shape_queue);
  }
  if (sum <= capacity) return true;
  return Error{"queue", "the shaping queues cannot all be held: " + rules + " = " + std::to_string(sum) +
                            " packets per worker, more than the " + std::to_string(capacity) +
                            " each worker can hold (--shape-capacity); lower a queue or raise --shape-capacity"};
}

Error ledger_unavailable(const Rule& rule, std::uint32_t queue) {
  return Error{rule.name, "rule " + rule.name + ": cannot allocate its shaping queue: queue " + std::to_string(queue) +
                              " needs " + bytes_text(ShapeLedger::bytes_for(queue)) +
                              " per worker (8 bytes a held packet), resident from the start: out of memory"};
}

// Key tables and flow tables go together: a key counts the flows of its rule's flow table (its entry's
// open_flows), so a new flow table (max-flows on or off, another flow-timeout or flow-capacity)
// comes with new key tables, and new key tables with a new flow table. max-flows N alone may change.
bool same_tables(const PerKey& a, const PerKey& b) {
  const bool flows = a.max_flows != 0;
  return a.kind == b.kind && a.ipv4_prefix == b.ipv4_prefix && a.ipv6_prefix == b.ipv6_prefix &&
         a.capacity == b.capacity && a.idle_timeout_ns == b.idle_timeout_ns && flows == (b.max_flows != 0) &&
         (!flows || (a.flow_timeout_ns == b.flow_timeout_ns && a.flow_capacity == b.flow_capacity));
}

// Flows per key need keys of several flows (not per 5-tuple: each key is one flow) and a red packet
// that is dropped or forwarded now (a refused flow's packet never conforms later: no shaping).
Expected<bool> check_max_flows(const Rule& rule) {
  const PerKey& per = rule.per_key;
  if (per.max_flows == 0) return true;
  const auto fail = [&](const std::string& why) { return Error{rule.name, "rule " + rule.name + ": max-flows: " + why}; };
  if (per.kind == KeyKind::none) return fail("needs per-key meters ('per KEY')");
  if (per.kind == KeyKind::five_tuple) return fail("with per 5-tuple each key is one flow");
  if (per.max_flows > kMaxFlowsPerKey) return fail("at most 16777216 flows per key");
  if (per.flow_capacity == 0 || per.flow_capacity > kMaxFlowCapacity) return fail("flow-capacity must be 1 to 16777216");
  if (rule.on_color[static_cast<std::size_t>(Color::red)].shape_max_delay_ns) return fail("cannot shape");
  return true;
}

Error flow_table_unavailable(const Rule& rule) {
  const std::uint32_t capacity = rule.per_key.flow_capacity;
  return Error{rule.name, "rule " + rule.name + ": cannot allocate its flow table: flow-capacity " + capacity_text(capacity) +
                              " flows needs " + bytes_text(FlowTable::bytes_for(capacity)) + " per worker (" +
                              std::to_string(FlowTable::slots_for(capacity)) + " slots of 64 bytes and " +
                              std::to_string(FlowTable::buckets_for(capacity) + 1) +
                              " expiry buckets of 8), resident from the start: out of memory"};
}

// The classifier depends on the rules' matches and their order only.
bool same_matches(const Policy& a, const std::vector<Rule>& b) {
  if (a.rules.size() != b.size()) return false;
  for (std::size_t i = 0; i < b.size(); ++i)
    if (a.rules[i].match != b[i].match) return false;
  return true;
}

Error key_index_unavailable(const Rule& rule) {
  const std::uint32_t capacity = rule.per_key.capacity;
  return Error{rule.name, "rule " + rule.name + ": cannot allocate its key index: capacity " + capacity_text(capacity) +
                              " keys needs " + bytes_text(KeyedMeters::index_bytes_for(capacity)) + " (" +
                              std::to_string(KeyedMeters::index_slots_for(capacity)) + " index slots of 8 bytes, and " +
                              std::to_string(KeyedMeters::kBookkeepingBytesPerChunk) +
                              " bytes of bookkeeping per 4096 keys), resident from the start: out of memory"};
}

// A profile change brought by set `generation`: the history the next sets carry.
std::shared_ptr<const ProfileHistory> changed(const std::shared_ptr<const ProfileHistory>& history,
                                              std::uint64_t generation, const policer::Profile& before) {
  return std::make_shared<const ProfileHistory>((history ? *history : ProfileHistory{}).with(generation, before));
}

}  // namespace

// Per-key rules with several workers: each key on one worker (by the ports' RSS hash if it is a
// function of the key, else by handoff), or, as a test switch, wherever it arrives.
Placement Engine::placement_of(const PerKey& key, unsigned workers) const noexcept {
  if (key.kind == KeyKind::none) return local_meters(workers) ? Placement::local : Placement::shared;
  if (workers == 1 || placement_ == PlacementMode::none) return Placement::local;
  if (placement_ == PlacementMode::assume_steered) return Placement::steered;
  return steerable(key, steering_) ? Placement::steered : Placement::by_key_hash;
}

// Placement off with several workers: aggregates and parents are per worker too, each worker metering
// what it receives (the flaw the shared form prevents; a test switch).
bool Engine::local_meters(unsigned workers) const noexcept { return workers > 1 && placement_ == PlacementMode::none; }

// A rule's capacity is split across the workers that own its keys (rounded up); each worker's table
// that fills is reported on its own.
std::uint32_t Engine::worker_capacity_of(std::uint32_t capacity, Placement placement, unsigned workers) noexcept {
  if (placement != Placement::by_key_hash && placement != Placement::steered) return capacity;
  return static_cast<std::uint32_t>((std::uint64_t{capacity} + workers - 1) / workers);
}

Expected<std::unique_ptr<Engine>> Engine::create(const Policy& policy, policer::TickRate tick_rate,
                                                 const EngineOptions& options) {
  if (options.workers == 0) return Error{"workers", "an engine needs at least one worker"};
  auto rcu = Rcu::make(options.workers);
  if (!rcu) return rcu.error();
  std::unique_ptr<Engine> engine(new Engine(tick_rate, std::move(*rcu), options));
  if (options.limits.flow_cache_entries != 0) {
    for (unsigned w = 0; w < options.workers; ++w) {
      auto cache = FlowCache::make(options.limits.flow_cache_entries, *engine->memory_[w]);
      if (cache == nullptr)
        return Error{"flow cache", "a flow cache of " + std::to_string(options.limits.flow_cache_entries) +
                                       " entries cannot be had: a power of two from 2 to " +
                                       std::to_string(kMaxFlowCacheEntries) + " is needed, and its memory (64 B an entry)"};
      engine->workers_[w]->set_flow_cache(std::move(cache));
    }
  }
  for (auto& worker : engine->workers_) {
    worker->set_plain_bursts(options.plain_bursts);
    worker->set_meter_finishes(options.meter_finishes);
  }
  if (auto ok = engine->update(policy, options.limits); !ok) return ok.error();
  return engine;
}

Engine::Engine(policer::TickRate tick_rate, std::unique_ptr<Rcu> rcu, const EngineOptions& options)
    : tick_rate_(tick_rate),
      placement_(options.placement),
      steering_(options.steering),
      owners_(options.workers),
      rcu_(std::move(rcu)),
      cluster_boxes_(std::max(1u, options.cluster_boxes)),
      cluster_start_mode_(options.cluster_start_mode) {
  workers_.reserve(options.workers);
  memory_.reserve(options.workers);
  for (unsigned w = 0; w < options.workers; ++w) {
    workers_.push_back(std::make_unique<Worker>(published_, *rcu_, w));
    MemorySource* source = w < options.memory.size() ? options.memory[w] : nullptr;
    memory_.push_back(source != nullptr ? source : &heap_memory());
  }
}

// No worker may be processing any more.
Engine::~Engine() = default;

Expected<bool> Engine::update(const Policy& policy) { return update(policy, limits_); }

Expected<bool> Engine::set_steering(const Steering& steering) {
  const Steering before = steering_;
  steering_ = steering;
  auto published = update(Policy(policy()));
  if (!published) steering_ = before;
  return published;
}

Expected<bool> Engine::update(const Policy& policy, const EngineLimits& limits) {
  // A change refused for memory is tried once more after what replaced rule sets hold is freed (see
  // reclaim_waiting): changes sent back to back then fit as they do one at a time.
  for (bool retried = false;; retried = true) {
    // The plan dies after the commit with whatever the commit did not take; if preparing it failed,
    // with everything it had made (a classifier, key tables).
    Plan plan;
    try {
      if (auto ok = prepare(policy, limits, plan); !ok) {
        if (plan.short_of_memory && !retried && reclaim_waiting()) continue;
        return ok.error();
      }
      retired_.reserve(retired_.size() + 1);  // commit() retires the current set
    } catch (const std::bad_alloc&) {
      if (!retried && reclaim_waiting()) continue;
      return Error{"memory", "the policy cannot be installed: out of memory (nothing was changed)"};
    }
    commit(plan);
    return true;
  }
}

// Waits, a little, for the workers to pass a quiescent point (each does at every poll, so this takes
// microseconds; an offline worker is not waited for), then frees what retired sets owned. True if
// something was freed. The control thread waits on the workers here, never the other way round.
bool Engine::reclaim_waiting() noexcept {
  constexpr auto kMostWait = std::chrono::milliseconds(100);
  const std::size_t before = retired_.size();
  const auto deadline = std::chrono::steady_clock::now() + kMostWait;
  for (reclaim(); !retired_.empty() && std::chrono::steady_clock::now() < deadline; reclaim())
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  return retired_.size() < before;
}

Expected<bool> Engine::prepare(const Policy& policy, const EngineLimits& limits, Plan& plan) const {
  const unsigned workers = static_cast<unsigned>(workers_.size());
  const std::uint64_t generation = current_ ? current_->generation + 1 : 1;

  // Names, indexed once (the first of a name wins, as Policy::find_* would have it).
  std::unordered_map<std::string_view, const ProfileDef*> profile_defs;
  std::unordered_map<std::string_view, const ColorMap*> color_maps;
  profile_defs.reserve(policy.profiles.size());
  color_maps.reserve(policy.color_maps.size());
  for (const ProfileDef& def : policy.profiles) profile_defs.emplace(def.name, &def);
  for (const ColorMap& map : policy.color_maps) color_maps.emplace(map.name, &map);

  // Profiles: a name whose parameters are unchanged keeps its object (so its rules see no change);
  // new or changed ones are translated.
  for (const ProfileDef& def : policy.profiles) {
    if (profile_defs.at(def.name) != &def) continue;  // a later definition of a name: unused
    auto current = profiles_.find(def.name);
    if (current != profiles_.end() && current->second->params() == def.params) {
      plan.profiles.emplace(def.name, current->second);
      continue;
    }
    auto profile = policer::Profile::make(def.params, tick_rate_);
    if (!profile) return Error{profile.error().subject, "profile " + def.name + ": " + profile.error().message};
    plan.profiles.emplace(def.name, std::make_shared<const policer::Profile>(*profile));
  }

  // References, and each rule's name once.
  std::unordered_set<std::string_view> rule_names;
  rule_names.reserve(policy.rules.size());
  for (const Rule& rule : policy.rules) {
    if (!rule_names.insert(rule.name).second) return Error{rule.name, "rule " + rule.name + " is defined twice"};
    for (const auto* name : {&rule.profile, rule.parent ? &*rule.parent : nullptr, rule.cluster ? &*rule.cluster : nullptr}) {
      if (name != nullptr && !profile_defs.contains(*name))
        return Error{*name, "rule " + rule.name + ": no such profile " + quote(*name)};
    }
    for (const auto& map : {rule.pcp_map, rule.dscp_map}) {
      if (map && !color_maps.contains(*map))
        return Error{*map, "rule " + rule.name + ": no such color map " + quote(*map)};
    }
    if (auto shaped = check_shaping(rule, profile_defs.at(rule.profile)->params, tick_rate_); !shaped) return shaped.error();
    if (auto flows = check_max_flows(rule); !flows) return flows.error();
  }
  if (auto held = check_shape_capacity(policy, limits.shape_capacity); !held) return held.error();

  auto set = std::make_unique<RuleSet>();
  set->generation = generation;
  set->workers = workers;
  set->owners = &owners_;
  set->default_action = policy.default_action;
  set->policy = std::make_shared<const Policy>(policy);
  // The classifier: the current one while no rule's match or place changed (a change of rates does
  // not pay an rte_acl build), else built aside.
  if (current_ && same_matches(*current_->policy, policy.rules) &&
      current_->classifier->entries() <= limits.max_classifier_entries) {
    set->classifier = current_->classifier;
  } else {
    auto classifier =
        Classifier::build(policy.rules, ClassifierLimits{limits.max_classifier_entries, limits.classifier_scan_entries,
                                                      limits.classifier_exact_hash});
    if (!classifier) return classifier.error();
    set->classifier = std::move(*classifier);
    plan.built_classifier = true;
  }

  // Per rule: its slot (kept by name, or new), its profiles and their histories, a parent meter if it
  // gains one, key tables if it is new or its key definition, capacity or timeout changed (indexes
  // allocated now, made resident below).
  const std::size_t n = policy.rules.size();
  plan.rules.resize(n);
  set->rules.resize(n);
  set->worker_rules.resize(n * workers);
  set->profiles.reserve(2 * n);
  plan.retired.slots.reserve(slots_.size());
  plan.retired.meters.reserve(n * (local_meters(workers) ? workers + 1 : 1));
  plan.retired.tables.reserve(n * workers);
  plan.retired.flow_tables.reserve(n * workers);
  plan.retired.ledgers.reserve(n * workers);
  for (std::size_t i = 0; i < n; ++i) {
    const Rule& rule = policy.rules[i];
    Plan::RulePlan& rp = plan.rules[i];
    rp.profile = plan.profiles.at(rule.profile);
    if (rule.parent) rp.parent_profile = plan.profiles.at(*rule.parent);
    plan.slots.emplace(rule.name, nullptr);

    const auto old = slots_.find(rule.name);
    if (old != slots_.end()) {
      rp.slot = old->second.get();
      rp.history = rp.slot->history;
      if (rp.slot->profile != rp.profile) rp.history = changed(rp.history, generation, *rp.slot->profile);
    } else {
      rp.created = std::make_unique<Slot>();
      rp.created->id = next_slot_ + static_cast<std::uint32_t>(i);
      rp.created->aggregate = std::make_unique<policer::SharedMeter>(*rp.profile, 0);  // full, at any tick
      if (local_meters(workers))
        for (unsigned w = 0; w < workers; ++w)
          rp.created->local_aggregates.push_back(std::make_unique<policer::SharedMeter>(*rp.profile, 0));
      rp.created->counters.reserve(workers);
      for (unsigned w = 0; w < workers; ++w) rp.created->counters.push_back(std::make_unique<WorkerRuleCounters>());
      rp.slot = rp.created.get();
    }
    const Slot& slot = *rp.slot;

    // A per-key meter is an entry of the key table (24 bytes of state): a sliding window of more
    // sub-windows than fit there is refused, naming the rule and the profile.
    if (rule.per_key.kind != KeyKind::none) {
      if (auto fits = policer::validate_per_key(rp.profile->params()); !fits)
        return Error{rule.profile, "rule " + rule.name + ": profile " + rule.profile + ": " + fits.error().message};
    }
    // Meters that outlive this set and may change algorithm with it: room for the new profile's state
    // (a sliding window's counters) is made here, so the workers' catch-up never allocates.
    slot.aggregate->prepare(*rp.profile);
    for (const auto& meter : slot.local_aggregates) meter->prepare(*rp.profile);
    if (rule.parent && slot.parent) {
      slot.parent->prepare(*rp.parent_profile);
      for (const auto& meter : slot.local_parents) meter->prepare(*rp.parent_profile);
    }

    // Hierarchy: the parent meter keeps its levels across changes like any meter.
    if (rule.parent) {
      if (slot.parent && !rp.created) {
        rp.parent_history = slot.parent_history;
        if (slot.parent_profile != rp.parent_profile)
          rp.parent_history = changed(rp.parent_history, generation, *slot.parent_profile);
      } else {
        rp.new_parent = std::make_unique<policer::SharedMeter>(*rp.parent_profile, 0);
        if (local_meters(workers))
          for (unsigned w = 0; w < workers; ++w)
            rp.new_local_parents.push_back(std::make_unique<policer::SharedMeter>(*rp.parent_profile, 0));
      }
    } else {
      rp.drop_parent = slot.parent != nullptr;
    }

    // A cluster meter: one lease per name, kept across sets; its share translated when the budget or
    // the boxes change (the local meter then keeps its level: ClusterLease::gate).
    if (rule.cluster) {
      auto made = plan_cluster(*rule.cluster, plan.profiles.at(*rule.cluster)->params(), generation, plan);
      if (!made) return Error{*rule.cluster, "rule " + rule.name + ": cluster " + *rule.cluster + ": " + made.error().message};
    }

    // Key tables: kept while the key definition, capacity and timeout stay; otherwise made afresh.
    const bool keyed = rule.per_key.kind != KeyKind::none;
    const Placement placement = placement_of(rule.per_key, workers);
    const bool keys_kept = !slot.keys.empty() && same_tables(slot.per_key, rule.per_key);
    if (keyed && !keys_kept) {
      rp.new_keys.reserve(workers);
      for (unsigned w = 0; w < workers; ++w) {
        auto table = KeyedMeters::allocate(worker_capacity_of(rule.per_key.capacity, placement, workers),
                                           ticks(rule.per_key.idle_timeout_ns, tick_rate_), *memory_[w]);
        if (!table) {
          plan.short_of_memory = true;
          return key_index_unavailable(rule);
        }
        rp.new_keys.push_back(std::move(table));
        if (rule.per_key.max_flows == 0) continue;
        auto flows = FlowTable::make(rule.per_key.flow_capacity, ticks(rule.per_key.flow_timeout_ns, tick_rate_), *memory_[w]);
        if (!flows) {
          plan.short_of_memory = true;
          return flow_table_unavailable(rule);
        }
        rp.new_flows.push_back(std::move(flows));
      }
    }
    rp.drop_keys = !keyed && !slot.keys.empty();

    // Shaping queues (queue N): kept while N fits them, whatever happens to the meters, since the
    // packets they count are still held (a rule's meter started afresh still has its held packets
    // ahead of it in the wheel); a smaller N only lowers their limit (the worker sets it per burst),
    // so the rule stays full until enough has left. A larger N needs new ones, which start empty
    // (the worker alone may touch the old ones, and may already have let go of them): what the old
    // bound admitted leaves within max-delay, and until then the rule may hold up to old N + new N
    // on a worker (doc/engine.md "Shaping").
    const std::uint32_t queue = rule.on_color[static_cast<std::size_t>(Color::red)].shape_queue.value_or(0);
    const bool ledgers_kept = queue != 0 && !slot.ledgers.empty() && queue <= slot.ledgers[0]->capacity();
    if (queue != 0 && !ledgers_kept) {
      rp.new_ledgers.reserve(workers);
      for (unsigned w = 0; w < workers; ++w) {
        auto ledger = ShapeLedger::make(queue, *memory_[w]);
        if (!ledger) {
          plan.short_of_memory = true;
          return ledger_unavailable(rule, queue);
        }
        rp.new_ledgers.push_back(std::move(ledger));
      }
    }
    rp.drop_ledgers = queue == 0 && !slot.ledgers.empty();

    // The rule as workers run it.
    CompiledRule& c = set->rules[i];
    c.slot = slot.id;
    c.input = rule.input;
    if (const auto& delay = rule.on_color[static_cast<std::size_t>(Color::red)].shape_max_delay_ns)
      c.shape_max_delay = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, ticks(*delay, tick_rate_)));
    c.shape_queue = queue;
    c.length = rule.length;
    for (std::size_t in = 0; in < 3; ++in)
      for (std::size_t out = 0; out < 3; ++out) {
        c.action[in][out] = (rule.input != InputColor::blind && rule.on_pair[in][out]) ? *rule.on_pair[in][out]
                                                                                       : rule.on_color[out];
        c.action_does[3 * in + out] = action_does::of(c.action[in][out]);
      }
    if (rule.input == InputColor::mapped) {
      if (rule.pcp_map) {
        c.has_pcp_map = true;
        std::copy_n(color_maps.at(*rule.pcp_map)->colors.begin(), c.pcp_map.size(), c.pcp_map.begin());
      }
      if (rule.dscp_map) {
        c.has_dscp_map = true;
        c.dscp_map = color_maps.at(*rule.dscp_map)->colors;
      }
      c.input_default = rule.input_default;
    }
    c.per_key = rule.per_key;
    c.key_shape = KeyShape(rule.per_key);
    c.placement = placement;
    c.profile = rp.profile.get();
    c.history = rp.history.get();
    c.profile_generation = rp.history ? rp.history->newest() : 0;
    c.aggregate = slot.aggregate.get();
    set->profiles.push_back(rp.profile);
    if (rp.history) set->histories.push_back(rp.history);
    if (rule.parent) {
      c.parent = rp.new_parent ? rp.new_parent.get() : slot.parent.get();
      c.parent_profile = rp.parent_profile.get();
      c.parent_history = rp.new_parent ? nullptr : rp.parent_history.get();
      c.parent_generation = c.parent_history ? c.parent_history->newest() : 0;
      set->profiles.push_back(rp.parent_profile);
      if (c.parent_history) set->histories.push_back(rp.parent_history);
    }
    if (rule.cluster) {
      const Plan::ClusterPlan& cp = plan.clusters.find(*rule.cluster)->second;
      c.cluster = cp.lease;
      c.cluster_share = cp.share.get();
      c.cluster_share_generation = cp.share_generation;
      set->profiles.push_back(cp.share);
    }
    if (keyed) set->keyed.push_back(static_cast<std::uint32_t>(i));
    for (unsigned w = 0; w < workers; ++w) {
      WorkerRule& mine = set->worker_rules[i * workers + w];
      mine.counters = slot.counters[w].get();
      if (keyed) mine.keys = keys_kept ? slot.keys[w].get() : rp.new_keys[w].get();
      if (rule.per_key.max_flows != 0) mine.flows = keys_kept ? slot.flows[w].get() : rp.new_flows[w].get();
      if (queue != 0) mine.ledger = ledgers_kept ? slot.ledgers[w].get() : rp.new_ledgers[w].get();
      const bool local = local_meters(workers);
      mine.aggregate = local ? slot.local_aggregates[w].get() : c.aggregate;
      if (rule.parent) mine.parent = !local ? c.parent : rp.new_parent ? rp.new_local_parents[w].get() : slot.local_parents[w].get();
    }
  }
  // Every new index allocated: now committed, all of them (a big index takes a while: not before the
  // others are known to fit).
  for (std::size_t i = 0; i < n; ++i)
    for (auto& table : plan.rules[i].new_keys)
      if (!table->make_resident()) {
        plan.short_of_memory = true;
        return key_index_unavailable(policy.rules[i]);
      }
  plan.set = std::move(set);
  plan.limits = limits;
  return true;
}

static_assert(std::is_nothrow_move_assignable_v<std::shared_ptr<const policer::Profile>>, "commit() cannot fail");

void Engine::commit(Plan& plan) noexcept {
  Retired& retired = plan.retired;
  // Rules by name: each slot takes what the plan made for it; replaced tables and given-up meters go
  // with the old set (a worker may still be using them).
  const Policy& policy = *plan.set->policy;
  for (std::size_t i = 0; i < plan.rules.size(); ++i) {
    Plan::RulePlan& rp = plan.rules[i];
    auto& entry = plan.slots.find(policy.rules[i].name)->second;
    entry = rp.created ? std::move(rp.created) : std::move(slots_.find(policy.rules[i].name)->second);
    Slot& slot = *entry;
    slot.profile = std::move(rp.profile);
    slot.history = std::move(rp.history);
    if (rp.new_parent) slot.parent = std::move(rp.new_parent), slot.local_parents = std::move(rp.new_local_parents);
    if (rp.drop_parent) {
      retired.meters.push_back(std::move(slot.parent));
      for (auto& meter : slot.local_parents) retired.meters.push_back(std::move(meter));
      slot.local_parents.clear();
    }
    slot.parent_profile = std::move(rp.parent_profile);
    slot.parent_history = std::move(rp.parent_history);
    if (!rp.new_keys.empty() || rp.drop_keys) {
      for (auto& table : slot.keys) retired.tables.push_back(std::move(table));
      for (auto& table : slot.flows) retired.flow_tables.push_back(std::move(table));
      slot.keys = std::move(rp.new_keys);
      slot.flows = std::move(rp.new_flows);
    }
    slot.per_key = policy.rules[i].per_key;
    if (!rp.new_ledgers.empty() || rp.drop_ledgers) {
      for (auto& ledger : slot.ledgers) retired.ledgers.push_back(std::move(ledger));
      slot.ledgers = std::move(rp.new_ledgers);
    }
  }
  for (auto& [name, slot] : slots_)
    if (slot) retired.slots.push_back(std::move(slot));  // deleted rules
  slots_ = std::move(plan.slots);
  next_slot_ += static_cast<std::uint32_t>(plan.rules.size());
  profiles_ = std::move(plan.profiles);
  {
    std::lock_guard guard(clusters_mutex_);
    for (auto& [name, cluster] : clusters_) cluster.in_use = false;
    for (auto& [name, cp] : plan.clusters) {
      Cluster& cluster = clusters_[name];
      if (cp.created) cluster.lease = std::move(cp.created);
      cluster.share = std::move(cp.share);
      cluster.share_generation = cp.share_generation;
      cluster.budget = cp.budget;
      cluster.in_use = true;
    }
  }

  // Publish; the old set (and what it alone used) is freed after a grace period.
  published_.store(plan.set.get(), std::memory_order_release);
  retired.set = std::move(current_);
  current_ = std::move(plan.set);
  retired.token = rcu_->start();
  retired_.push_back(std::move(retired));
  limits_ = plan.limits;
  classifier_builds_ += plan.built_classifier;
}

// A cluster meter the policy names: its budget must be a 1R2C profile (two colors: green within the
// shared rate, red above); its share is the budget divided by the boxes, at least one token.
Expected<bool> Engine::plan_cluster(const std::string& name, const policer::Params& budget, std::uint64_t generation,
                                    Plan& plan) const {
  if (budget.algorithm != policer::Algorithm::one_rate_two_color)
    return Error{name, "a cluster meter's profile is 1r2c (green within the shared rate, red above), not " +
                           std::string(policer::to_string(budget.algorithm))};
  if (plan.clusters.contains(name)) return true;  // another rule of the policy names it too
  Plan::ClusterPlan& cp = plan.clusters[name];
  cp.budget = budget;
  policer::Params share = budget;
  share.cir = std::max<std::uint64_t>(1, budget.cir / cluster_boxes_);
  share.cbs = std::max<std::uint64_t>(1, budget.cbs / cluster_boxes_);
  const auto current = clusters_.find(name);
  if (current != clusters_.end()) {
    cp.lease = current->second.lease.get();
    if (current->second.share->params() == share) {
      cp.share = current->second.share;
      cp.share_generation = current->second.share_generation;
      return true;
    }
  }
  auto profile = policer::Profile::make(share, tick_rate_);
  if (!profile) return Error{name, "its share of " + std::to_string(cluster_boxes_) + " boxes: " + profile.error().message};
  cp.share = std::make_shared<const policer::Profile>(*profile);
  cp.share_generation = generation;
  if (cp.lease == nullptr) {
    cp.created = std::make_unique<policer::ClusterLease>(*cp.share, generation, cluster_start_mode_);
    cp.lease = cp.created.get();
  }
  return true;
}

std::vector<ClusterInfo> Engine::clusters() const {
  std::lock_guard guard(clusters_mutex_);
  std::vector<ClusterInfo> out;
  out.reserve(clusters_.size());
  for (const auto& [name, cluster] : clusters_) out.push_back({name, cluster.budget, cluster.lease.get(), cluster.in_use});
  return out;
}

void Engine::reclaim() noexcept {
  std::size_t done = 0;
  while (done < retired_.size() && rcu_->passed(retired_[done].token)) ++done;
  retired_.erase(retired_.begin(), retired_.begin() + static_cast<std::ptrdiff_t>(done));
}

std::size_t Engine::retired_sets() const noexcept { return retired_.size(); }

void Engine::maintain() noexcept {
  for (unsigned w = 0; w < current_->workers; ++w)
    for (const std::uint32_t rule : current_->keyed) current_->worker_rule(rule, w).keys->replenish();
  reclaim();
}

void Engine::process(std::span<PacketView> burst, std::span<Verdict> verdicts, Worker::VerdictsRead read) noexcept {
  Worker& worker = *workers_[0];
  worker.online();
  worker.process(burst, verdicts, {}, read);
  // The control side's work, on this thread: the tables the burst took chunks from, or gave chunks
  // back to, topped up and drained (others have nothing to do), then what retired sets owned freed.
  for (KeyedMeters* table : worker.tables_touched()) table->replenish();
  worker.offline();
  reclaim();
}

RuleCounters Engine::counters(std::size_t rule) const noexcept {
  RuleCounters sum;
  for (unsigned w = 0; w < current_->workers; ++w) current_->worker_rule(rule, w).counters->add_to(sum);
  return sum;
}

RuleCounters Engine::counters(std::size_t rule, unsigned worker) const noexcept {
  RuleCounters sum;
  current_->worker_rule(rule, worker).counters->add_to(sum);
  return sum;
}

std::uint32_t Engine::worker_capacity(std::size_t rule) const noexcept {
  const CompiledRule& r = current_->rules[rule];
  return worker_capacity_of(r.per_key.capacity, r.placement, current_->workers);
}

std::size_t Engine::live_keys(std::size_t rule, unsigned worker) const noexcept {
  const KeyedMeters* table = current_->worker_rule(rule, worker).keys;
  return table != nullptr ? table->size() : 0;
}

DefaultCounters Engine::default_counters() const noexcept {
  DefaultCounters sum;
  for (const auto& worker : workers_) worker->default_counters().add_to(sum);
  return sum;
}

template <class Fn>
void Engine::each_table(std::size_t rule, Fn&& fn) const {
  for (unsigned w = 0; w < current_->workers; ++w)
    if (const KeyedMeters* table = current_->worker_rule(rule, w).keys) fn(*table);
}

void Engine::for_each_key(std::size_t rule, const KeyVisitor& fn) const {
  for (unsigned w = 0; w < current_->workers; ++w)
    if (const KeyedMeters* table = current_->worker_rule(rule, w).keys)
      table->for_each([&](const MeterKey& key, const policer::State& state, const KeyCounters& c) {
        fn(LiveKey{key, state, c, w});
      });
}

std::size_t Engine::live_keys(std::size_t rule) const noexcept {
  std::size_t sum = 0;
  each_table(rule, [&](const KeyedMeters& table) { sum += table.size(); });
  return sum;
}

std::size_t Engine::key_index_bytes(std::size_t rule) const noexcept {
  std::size_t sum = 0;
  each_table(rule, [&](const KeyedMeters& table) { sum += table.index_bytes(); });
  return sum;
}

std::size_t Engine::key_entry_bytes(std::size_t rule) const noexcept {
  std::size_t sum = 0;
  each_table(rule, [&](const KeyedMeters& table) { sum += table.entry_bytes(); });
  return sum;
}

std::size_t Engine::key_spare_bytes(std::size_t rule) const noexcept {
  std::size_t sum = 0;
  each_table(rule, [&](const KeyedMeters& table) { sum += table.spare_bytes(); });
  return sum;
}

std::size_t Engine::key_memory_bytes(std::size_t rule) const noexcept {
  std::size_t sum = 0;
  each_table(rule, [&](const KeyedMeters& table) { sum += table.memory_bytes(); });
  return sum;
}

std::uint64_t Engine::keys_starved(std::size_t rule) const noexcept {
  std::uint64_t sum = 0;
  each_table(rule, [&](const KeyedMeters& table) { sum += table.starved(); });
  return sum;
}

}  // namespace tricolor::dataplane
