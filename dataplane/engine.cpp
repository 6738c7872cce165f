#include "dataplane/engine.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <new>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "dataplane/actions.hpp"
#include "dataplane/memory_text.hpp"
#include "dataplane/parse.hpp"
#include "policer/quote.hpp"

namespace tricolor::dataplane {

using KeyedMeters = KeyTable<kKeySize>;

struct Engine::RuleState {
  RuleState(const policer::Profile& p, std::uint64_t now) : meter(p, now), profile(&p) {}
  policer::SharedMeter meter;         // the aggregate meter (per-key rules: the fallback), shared by workers
  const policer::Profile* profile;    // the profile `meter` runs on (control side only)
  std::unique_ptr<policer::SharedMeter> parent;
  const policer::Profile* parent_profile = nullptr;
  // Per-key rules: the configuration the table was made with, and the table (owned by this engine's
  // worker; both address families, so that the capacity counts all the rule's keys).
  PerKey per_key;
  std::unique_ptr<KeyedMeters> keys;
  const policer::Profile* key_profile_before = nullptr;
  std::uint64_t key_profile_changed_at = 0;
  RuleCounters counters;
};

namespace {
constexpr std::uint32_t kStrippedTagBytes = 4;
constexpr std::int64_t kL1OverheadBytes = 24;  // preamble and SFD 8, inter-frame gap 12, FCS 4
constexpr std::size_t kPrefetchAhead = 4;      // frames whose first line is fetched while parsing
constexpr std::size_t kSweepBudget = 64;       // key-table index slots examined per burst

std::uint32_t l2_bytes(const PacketView& v) noexcept {
  return v.wire_length + (v.has_stripped_vlan ? kStrippedTagBytes : 0);
}

std::uint64_t ticks(std::uint64_t ns, policer::TickRate rate) {
  return static_cast<std::uint64_t>(static_cast<unsigned __int128>(ns) * rate.hz() / 1'000'000'000u);  // cold path
}

// A new key that found its rule's table full and whose fallback is not the aggregate meter: no meter
// saw it, so it skips the parent and takes the default action or a drop.
bool unmetered(const Verdict& v, KeyFallback fallback) noexcept {
  return v.table_full && fallback != KeyFallback::aggregate;
}

bool same_tables(const PerKey& a, const PerKey& b) {
  return a.kind == b.kind && a.ipv4_prefix == b.ipv4_prefix && a.ipv6_prefix == b.ipv6_prefix &&
         a.capacity == b.capacity && a.idle_timeout_ns == b.idle_timeout_ns;
}
}  // namespace

std::uint32_t metered_length(const PacketView& view, const Parsed& parsed, const MeteredLength& length) noexcept {
  std::int64_t base = 0;
  switch (length.base) {
    case LengthBase::l1: base = std::int64_t{l2_bytes(view)} + kL1OverheadBytes; break;
    case LengthBase::l2: base = l2_bytes(view); break;
    case LengthBase::l3: base = parsed.l3_length; break;
  }
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(base + length.adjust, 0, UINT32_MAX));
}

Expected<std::unique_ptr<Engine>> Engine::create(const Policy& policy, policer::TickRate tick_rate, std::uint64_t now,
                                                 const EngineLimits& limits) {
  std::unique_ptr<Engine> engine(new Engine(tick_rate));
  if (auto ok = engine->update(policy, now, limits); !ok) return ok.error();
  return engine;
}

Engine::Engine(policer::TickRate tick_rate) : tick_rate_(tick_rate) {}
Engine::~Engine() = default;

// Everything a policy change needs, made aside by prepare() (which may fail, or run out of memory,
// without touching the engine); commit() then only moves pointers and cannot fail.
struct Engine::Plan {
  Policy policy;
  EngineLimits limits;
  std::unique_ptr<Classifier> classifier;
  std::map<std::string, std::unique_ptr<policer::Profile>> fresh;     // new or changed profiles, by name
  std::map<std::string, std::unique_ptr<policer::Profile>> profiles;  // the next profiles_: names only until commit
  std::map<std::string, std::unique_ptr<RuleState>> states;          // the next rule_states_: names only until commit
  // Per rule, in order.
  std::vector<const policer::Profile*> profile, parent_profile;  // the objects it will run on
  std::vector<std::unique_ptr<RuleState>> new_state;              // a new rule's state, else null
  std::vector<std::unique_ptr<policer::SharedMeter>> new_parent;  // a parent meter it did not have, else null
  std::vector<std::unique_ptr<KeyedMeters>> new_keys;             // a new key table, else null (kept or none)
  std::vector<CompiledRule> compiled;                             // all but the state's fields
  std::vector<RuleState*> keyed;                                  // reserved
};

namespace {

Error key_index_unavailable(const Rule& rule) {
  const std::uint32_t capacity = rule.per_key.capacity;
  return Error{rule.name, "rule " + rule.name + ": cannot allocate its key index: capacity " + capacity_text(capacity) +
                              " keys needs " + bytes_text(KeyedMeters::index_bytes_for(capacity)) + " (" +
                              std::to_string(KeyedMeters::index_slots_for(capacity)) + " index slots of 8 bytes, and " +
                              std::to_string(KeyedMeters::kBookkeepingBytesPerChunk) +
                              " bytes of bookkeeping per 4096 keys), resident from the start: out of memory"};
}

}  // namespace

Expected<bool> Engine::update(const Policy& policy, std::uint64_t now) { return update(policy, now, limits_); }

Expected<bool> Engine::update(const Policy& policy, std::uint64_t now, const EngineLimits& limits) {
  // The plan dies after the commit with whatever the commit did not take; if preparing it failed,
  // with everything it had made (a classifier, key tables).
  Plan plan;
  try {
    if (auto ok = prepare(policy, now, limits, plan); !ok) return ok.error();
    retired_profiles_.reserve(retired_profiles_.size() + profiles_.size());  // commit() retires at most these
  } catch (const std::bad_alloc&) {
    return Error{"memory", "the policy cannot be installed: out of memory (nothing was changed)"};
  }
  commit(plan, now);
  return true;
}

Expected<bool> Engine::prepare(const Policy& policy, std::uint64_t now, const EngineLimits& limits, Plan& plan) const {
  // Names, indexed once (the first of a name wins, as Policy::find_* would have it).
  std::unordered_map<std::string_view, const ProfileDef*> profile_defs;
  std::unordered_map<std::string_view, const ColorMap*> color_maps;
  profile_defs.reserve(policy.profiles.size());
  color_maps.reserve(policy.color_maps.size());
  for (const ProfileDef& def : policy.profiles) profile_defs.emplace(def.name, &def);
  for (const ColorMap& map : policy.color_maps) color_maps.emplace(map.name, &map);

  // Profiles, in order: new or changed ones translated; every name gets a slot in the next table.
  for (const ProfileDef& def : policy.profiles) {
    if (profile_defs.at(def.name) != &def) continue;  // a later definition of a name: unused
    plan.profiles.emplace(def.name, nullptr);
    auto current = profiles_.find(def.name);
    if (current != profiles_.end() && current->second->params() == def.params) continue;
    auto profile = policer::Profile::make(def.params, tick_rate_);
    if (!profile) return Error{profile.error().subject, "profile " + def.name + ": " + profile.error().message};
    plan.fresh.emplace(def.name, std::make_unique<policer::Profile>(*profile));
  }
  // The object a profile name will run on once committed (profile objects never move).
  auto final_profile = [&](const std::string& name) -> const policer::Profile* {
    if (auto it = plan.fresh.find(name); it != plan.fresh.end()) return it->second.get();
    return profiles_.at(name).get();
  };

  // References, and each rule's name once.
  std::unordered_set<std::string_view> rule_names;
  rule_names.reserve(policy.rules.size());
  for (const Rule& rule : policy.rules) {
    if (!rule_names.insert(rule.name).second) return Error{rule.name, "rule " + rule.name + " is defined twice"};
    for (const auto* name : {&rule.profile, rule.parent ? &*rule.parent : nullptr}) {
      if (name != nullptr && !profile_defs.contains(*name))
        return Error{*name, "rule " + rule.name + ": no such profile " + quote(*name)};
    }
    for (const auto& map : {rule.pcp_map, rule.dscp_map}) {
      if (map && !color_maps.contains(*map))
        return Error{*map, "rule " + rule.name + ": no such color map " + quote(*map)};
    }
  }

  auto classifier = Classifier::build(policy.rules, ClassifierLimits{limits.max_classifier_entries});
  if (!classifier) return classifier.error();
  plan.classifier = std::move(*classifier);

  // Per rule: its objects, a state if it is new, a parent meter if it gains one, a key table if it is
  // new or its key definition, capacity or timeout changed (its index allocated now, resident below).
  const std::size_t n = policy.rules.size();
  plan.profile.reserve(n);
  plan.parent_profile.reserve(n);
  plan.new_state.resize(n);
  plan.new_parent.resize(n);
  plan.new_keys.resize(n);
  plan.compiled.reserve(n);
  plan.keyed.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Rule& rule = policy.rules[i];
    const policer::Profile* profile = final_profile(rule.profile);
    const policer::Profile* parent = rule.parent ? final_profile(*rule.parent) : nullptr;
    plan.profile.push_back(profile);
    plan.parent_profile.push_back(parent);
    plan.states.emplace(rule.name, nullptr);
    const auto old = rule_states_.find(rule.name);
    const RuleState* state = old != rule_states_.end() ? old->second.get() : nullptr;
    if (state == nullptr) plan.new_state[i] = std::make_unique<RuleState>(*profile, now);
    if (parent != nullptr && (state == nullptr || !state->parent))
      plan.new_parent[i] = std::make_unique<policer::SharedMeter>(*parent, now);
    const bool keys_kept = state != nullptr && state->keys && same_tables(state->per_key, rule.per_key);
    if (rule.per_key.kind != KeyKind::none && !keys_kept) {
      plan.new_keys[i] = KeyedMeters::allocate(rule.per_key.capacity, ticks(rule.per_key.idle_timeout_ns, tick_rate_));
      if (!plan.new_keys[i]) return key_index_unavailable(rule);
    }

    CompiledRule& c = plan.compiled.emplace_back();
    c.input = rule.input;
    c.length = rule.length;
    for (std::size_t in = 0; in < 3; ++in)
      for (std::size_t out = 0; out < 3; ++out)
        c.action[in][out] = (rule.input != InputColor::blind && rule.on_pair[in][out]) ? *rule.on_pair[in][out]
                                                                                       : rule.on_color[out];
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
    c.key_profile = profile;
  }
  // Every new index allocated: now committed, all of them (a big index takes a while: not before the
  // others are known to fit).
  for (std::size_t i = 0; i < n; ++i)
    if (plan.new_keys[i] && !plan.new_keys[i]->make_resident()) return key_index_unavailable(policy.rules[i]);
  plan.policy = policy;
  plan.limits = limits;
  return true;
}

static_assert(std::is_nothrow_move_assignable_v<Policy>, "commit() cannot fail");

void Engine::commit(Plan& plan, std::uint64_t now) noexcept {
  // Profiles: each name takes its fresh object or keeps its current one; replaced and removed ones are
  // retired (a worker may still be reading them); update() reserved the room for them.
  for (auto& [name, slot] : plan.profiles) {
    const auto fresh = plan.fresh.find(name);
    slot = fresh != plan.fresh.end() ? std::move(fresh->second) : std::move(profiles_.find(name)->second);
  }
  for (auto& [name, old] : profiles_)
    if (old) retired_profiles_.push_back(std::move(old));
  profiles_ = std::move(plan.profiles);

  // Rule states by name: a kept rule moves its meters to their (possibly new) profiles, keeping levels
  // within the same algorithm and unit; a new rule gets full meters.
  for (std::size_t i = 0; i < plan.compiled.size(); ++i) {
    const Rule& rule = plan.policy.rules[i];
    const policer::Profile& profile = *plan.profile[i];
    auto& slot = plan.states.find(rule.name)->second;
    slot = plan.new_state[i] ? std::move(plan.new_state[i]) : std::move(rule_states_.find(rule.name)->second);
    RuleState& state = *slot;
    if (state.profile != &profile) {
      state.meter.change_profile(profile, now);
      // Keys follow on their next packet (see meter_keyed), from this instant.
      state.key_profile_before = state.profile;
      state.key_profile_changed_at = now;
      state.profile = &profile;
    }
    // Hierarchy: the parent aggregate keeps its levels across changes like any meter.
    if (const policer::Profile* parent = plan.parent_profile[i]) {
      if (plan.new_parent[i]) state.parent = std::move(plan.new_parent[i]);
      else if (state.parent_profile != parent) state.parent->change_profile(*parent, now);
      state.parent_profile = parent;
    } else {
      state.parent.reset();
      state.parent_profile = nullptr;
    }
    // Key tables: kept while the key definition, capacity and timeout stay; otherwise made afresh.
    if (rule.per_key.kind == KeyKind::none) {
      state.keys.reset();
    } else if (plan.new_keys[i]) {
      state.keys = std::move(plan.new_keys[i]);
      state.key_profile_before = nullptr;
    }
    state.per_key = rule.per_key;
    if (state.keys) plan.keyed.push_back(&state);

    CompiledRule& c = plan.compiled[i];
    c.state = &state;
    c.counters = &state.counters;
    c.key_profile_before = state.key_profile_before;
    c.key_profile_changed_at = state.key_profile_changed_at;
    c.parent = state.parent.get();
  }
  rule_states_ = std::move(plan.states);  // states of deleted rules go with the old map
  rules_ = std::move(plan.compiled);
  keyed_states_ = std::move(plan.keyed);
  sweep_cursor_ = 0;
  classifier_ = std::move(plan.classifier);
  policy_ = std::move(plan.policy);
  limits_ = plan.limits;
}

void Engine::apply(PacketView& view, const Parsed& parsed, const Action& action, Verdict& verdict) noexcept {
  if (action.drop) {
    verdict.drop = true;
    return;
  }
  if (action.dscp && remark_dscp(view, parsed, *action.dscp)) {
    verdict.dscp_set = true;
    verdict.dscp = *action.dscp;
  }
  if (action.pcp && set_pcp(view, parsed, *action.pcp)) {
    verdict.pcp_set = true;
    verdict.pcp = *action.pcp;
  }
}

void Engine::take_default(PacketView& view, const Parsed& parsed, DefaultReason reason, Verdict& verdict) noexcept {
  verdict.reason = reason;
  verdict.error = parsed.error;
  DefaultCounters& c = default_counters_;
  ++c.packets;
  c.bytes += l2_bytes(view);
  switch (reason) {
    case DefaultReason::malformed: ++c.malformed[static_cast<std::size_t>(parsed.error)]; break;
    case DefaultReason::non_ip: ++c.non_ip; break;
    case DefaultReason::no_match: ++c.no_match; break;
    case DefaultReason::none: break;
  }
  apply(view, parsed, policy_.default_action, verdict);
  if (verdict.drop) {
    ++c.dropped_packets;
    c.dropped_bytes += l2_bytes(view);
  }
}

Color Engine::input_color(const CompiledRule& rule, const Parsed& parsed) const noexcept {
  switch (rule.input) {
    case InputColor::blind: return Color::green;
    case InputColor::dscp: return color_from_dscp(parsed.dscp);
    case InputColor::mapped:
      if (rule.has_pcp_map && parsed.has_vlan) return rule.pcp_map[parsed.pcp & 7];
      if (rule.has_dscp_map) return rule.dscp_map[parsed.dscp & 63];
      return rule.input_default;
  }
  return Color::green;
}

void Engine::meter_keyed(CompiledRule& rule, std::span<const std::uint8_t> packets, std::span<const PacketView> burst,
                         std::span<const Parsed> parsed, std::span<const std::uint32_t> lengths,
                         std::span<const Color> in, std::span<Color> out, std::span<Verdict> verdicts) noexcept {
  const std::size_t n = packets.size();
  RuleState& state = *rule.state;
  KeyedMeters& table = *state.keys;
  const policer::Profile& profile = *rule.key_profile;
  const bool blind = rule.input == InputColor::blind;
  // Hash every key and prefetch its index slot; then look each up (creating or renewing its meter) and
  // prefetch the entry; then meter each packet on its own meter.
  MeterKey keys[kMaxBurst];
  std::uint64_t hashes[kMaxBurst];
  KeyedMeters::Entry* entries[kMaxBurst];
  std::uint64_t times[kMaxBurst];
  for (std::size_t k = 0; k < n; ++k) {
    make_key(rule.per_key, parsed[packets[k]], keys[k]);
    hashes[k] = table.hash(keys[k]);
    table.prefetch(hashes[k]);
    times[k] = burst[packets[k]].arrival;
  }
  for (std::size_t k = 0; k < n; ++k) {
    KeyedMeters::Outcome outcome;
    entries[k] = table.acquire(keys[k], hashes[k], times[k], policer::full_state(profile, times[k]), outcome);
    state.counters.keys_created += outcome == KeyedMeters::Outcome::created;
    state.counters.keys_renewed += outcome == KeyedMeters::Outcome::renewed;
    if (entries[k] != nullptr) {  // both lines: the levels in the first, the tick and counters in the second
      __builtin_prefetch(entries[k], 1);
      __builtin_prefetch(reinterpret_cast<const char*>(entries[k]) + 64, 1);
    }
  }
  policer::with_algorithm(profile.algorithm(), [&](auto algo) {
    using Algo = decltype(algo);
    for (std::size_t k = 0; k < n; ++k) {
      KeyedMeters::Entry* e = entries[k];
      if (e == nullptr) continue;
      KeyedMeters::begin_write(*e);
      // A profile change reaches each key on its next packet: its levels are brought to the instant of
      // the change at the old rate, clamped to the new sizes (policer's live change), then go on.
      if (rule.key_profile_before != nullptr && e->state.last < rule.key_profile_changed_at)
        policer::change_profile(e->state, *rule.key_profile_before, profile, rule.key_profile_changed_at);
      const Color color = blind ? policer::check_blind<Algo>(e->state, profile, times[k], lengths[k])
                                : policer::check_aware<Algo>(e->state, profile, times[k], lengths[k], in[k]);
      const auto c = static_cast<std::size_t>(color);
      ++e->counters.packets[c];
      e->counters.bytes[c] += l2_bytes(burst[packets[k]]);
      KeyedMeters::end_write(*e);
      out[k] = color;
      verdicts[packets[k]].keyed = true;
    }
  });
  // New keys that found the table full take the rule's fallback: with `aggregate`, metered together by
  // the rule's aggregate meter; otherwise they are marked and handled with the actions.
  std::uint64_t fb_times[kMaxBurst];
  std::uint32_t fb_lengths[kMaxBurst];
  Color fb_in[kMaxBurst], fb_out[kMaxBurst];
  std::size_t fb_slot[kMaxBurst], fallbacks = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (entries[k] != nullptr) continue;
    verdicts[packets[k]].table_full = true;
    ++state.counters.table_full;
    out[k] = Color::red;
    fb_times[fallbacks] = times[k];
    fb_lengths[fallbacks] = lengths[k];
    fb_in[fallbacks] = in[k];
    fb_slot[fallbacks++] = k;
  }
  if (fallbacks != 0 && rule.per_key.fallback == KeyFallback::aggregate) {
    state.meter.check_burst({fb_times, fallbacks}, {fb_lengths, fallbacks},
                            blind ? std::span<const Color>() : std::span<const Color>(fb_in, fallbacks),
                            {fb_out, fallbacks});
    for (std::size_t j = 0; j < fallbacks; ++j) out[fb_slot[j]] = fb_out[j];
  }
}

void Engine::sweep_keys(std::uint64_t now) noexcept {
  if (keyed_states_.empty()) return;
  if (sweep_cursor_ >= keyed_states_.size()) sweep_cursor_ = 0;  // a wrap, not a division per burst
  keyed_states_[sweep_cursor_++]->keys->sweep(now, kSweepBudget);
}

void Engine::process(std::span<PacketView> burst, std::span<Verdict> verdicts) noexcept {
  const std::size_t n = std::min(burst.size(), kMaxBurst);
  Parsed parsed[kMaxBurst];
  std::uint64_t latest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) __builtin_prefetch(burst[i + kPrefetchAhead].data);
    parsed[i] = parse(burst[i]);
    latest = std::max(latest, burst[i].arrival);
  }
  std::uint32_t rule[kMaxBurst];
  classifier_->classify(burst.first(n), std::span<const Parsed>(parsed, n), std::span<std::uint32_t>(rule, n));

  // Default-action packets now; the rest grouped by rule, in arrival order within a rule.
  std::uint8_t order[kMaxBurst];
  std::size_t metered = 0;
  for (std::size_t i = 0; i < n; ++i) {
    verdicts[i] = Verdict{};
    if (parsed[i].error != ParseError::none) take_default(burst[i], parsed[i], DefaultReason::malformed, verdicts[i]);
    else if (parsed[i].l3 == L3::none) take_default(burst[i], parsed[i], DefaultReason::non_ip, verdicts[i]);
    else if (rule[i] == kNoRule) take_default(burst[i], parsed[i], DefaultReason::no_match, verdicts[i]);
    else order[metered++] = static_cast<std::uint8_t>(i);
  }
  std::sort(order, order + metered, [&](std::uint8_t a, std::uint8_t b) {
    return rule[a] != rule[b] ? rule[a] < rule[b] : a < b;
  });

  for (std::size_t start = 0; start < metered;) {
    const std::uint32_t r = rule[order[start]];
    std::size_t end = start;
    while (end < metered && rule[order[end]] == r) ++end;
    const std::size_t count = end - start;
    const std::span<const std::uint8_t> group(order + start, count);
    CompiledRule& cr = rules_[r];
    const bool blind = cr.input == InputColor::blind;

    std::uint64_t times[kMaxBurst];
    std::uint32_t lengths[kMaxBurst];
    Color in[kMaxBurst];
    Color out[kMaxBurst];
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = group[k];
      times[k] = burst[i].arrival;
      lengths[k] = metered_length(burst[i], parsed[i], cr.length);
      in[k] = input_color(cr, parsed[i]);
    }
    if (cr.per_key.kind == KeyKind::none) {
      cr.state->meter.check_burst({times, count}, {lengths, count},
                                  blind ? std::span<const Color>() : std::span<const Color>(in, count), {out, count});
    } else {
      meter_keyed(cr, group, burst.first(n), std::span<const Parsed>(parsed, n), {lengths, count}, {in, count},
                  {out, count}, verdicts);
    }

    // Hierarchy: the packets the child did not mark red go on to the parent, color-aware with the
    // child's color as input; the parent's color is the packet's. Red ones skip it; nothing is refunded.
    if (cr.parent != nullptr) {
      std::uint64_t p_times[kMaxBurst];
      std::uint32_t p_lengths[kMaxBurst];
      Color p_in[kMaxBurst], p_out[kMaxBurst];
      std::size_t p_slot[kMaxBurst], forwarded = 0;
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = group[k];
        if (out[k] == Color::red || unmetered(verdicts[i], cr.per_key.fallback)) continue;
        p_times[forwarded] = times[k];
        p_lengths[forwarded] = lengths[k];
        p_in[forwarded] = out[k];
        p_slot[forwarded++] = k;
      }
      if (forwarded != 0) {
        cr.parent->check_burst({p_times, forwarded}, {p_lengths, forwarded}, {p_in, forwarded}, {p_out, forwarded});
        for (std::size_t j = 0; j < forwarded; ++j) out[p_slot[j]] = p_out[j];
      }
    }

    RuleCounters& counters = *cr.counters;
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = group[k];
      Verdict& v = verdicts[i];
      v.rule = r;
      v.in = in[k];
      v.metered_length = lengths[k];
      if (unmetered(v, cr.per_key.fallback)) {
        // Unmetered: the policy's default action, or a drop.
        if (cr.per_key.fallback == KeyFallback::drop) v.drop = true;
        else apply(burst[i], parsed[i], policy_.default_action, v);
        v.out = Color::red;  // reported, not counted per color: the packet was not metered
        if (v.drop) {
          ++counters.dropped_packets;
          counters.dropped_bytes += l2_bytes(burst[i]);
        }
        continue;
      }
      v.out = out[k];
      const std::size_t color = static_cast<std::size_t>(out[k]);
      const std::uint32_t bytes = l2_bytes(burst[i]);
      ++counters.packets[color];
      counters.bytes[color] += bytes;
      apply(burst[i], parsed[i], cr.action[static_cast<std::size_t>(in[k])][color], v);
      if (v.drop) {
        ++counters.dropped_packets;
        counters.dropped_bytes += bytes;
      }
    }
    start = end;
  }
  sweep_keys(latest);
}

void Engine::for_each_key(std::size_t rule, const KeyVisitor& fn) const {
  const RuleState& s = *rules_[rule].state;
  if (s.keys) s.keys->for_each([&](const MeterKey& key, const policer::State&, const KeyCounters& c) { fn(key, c); });
}

std::size_t Engine::live_keys(std::size_t rule) const noexcept {
  const RuleState& s = *rules_[rule].state;
  return s.keys ? s.keys->size() : 0;
}

std::size_t Engine::key_index_bytes(std::size_t rule) const noexcept {
  const RuleState& s = *rules_[rule].state;
  return s.keys ? s.keys->index_bytes() : 0;
}

std::size_t Engine::key_entry_bytes(std::size_t rule) const noexcept {
  const RuleState& s = *rules_[rule].state;
  return s.keys ? s.keys->entry_bytes() : 0;
}

std::size_t Engine::key_memory_bytes(std::size_t rule) const noexcept {
  return key_index_bytes(rule) + key_entry_bytes(rule);
}

}  // namespace tricolor::dataplane
