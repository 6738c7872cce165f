#include "dataplane/engine.hpp"

#include <algorithm>

#include "dataplane/actions.hpp"
#include "dataplane/parse.hpp"

namespace tricolor::dataplane {

struct Engine::RuleState {
  RuleState(const policer::Profile& p, std::uint64_t now) : meter(p, now), profile(&p) {}
  policer::SharedMeter meter;         // the rule's aggregate meter, shared by every worker
  const policer::Profile* profile;    // the profile the meter runs on (control side only)
  RuleCounters counters;
};

namespace {
constexpr std::uint32_t kStrippedTagBytes = 4;
constexpr std::int64_t kL1OverheadBytes = 24;  // preamble and SFD 8, inter-frame gap 12, FCS 4
constexpr std::size_t kPrefetchAhead = 4;      // frames whose first line is fetched while parsing

std::uint32_t l2_bytes(const PacketView& v) noexcept {
  return v.wire_length + (v.has_stripped_vlan ? kStrippedTagBytes : 0);
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

Expected<std::unique_ptr<Engine>> Engine::create(const Policy& policy, policer::TickRate tick_rate, std::uint64_t now) {
  std::unique_ptr<Engine> engine(new Engine(tick_rate));
  if (auto ok = engine->update(policy, now); !ok) return ok.error();
  return engine;
}

Engine::Engine(policer::TickRate tick_rate) : tick_rate_(tick_rate) {}
Engine::~Engine() = default;

Expected<bool> Engine::update(const Policy& policy, std::uint64_t now) {
  // 1. Everything that can fail, aside: profiles translated, references checked, classifier built.
  std::map<std::string, std::unique_ptr<policer::Profile>> fresh;  // new or changed profiles
  for (const ProfileDef& def : policy.profiles) {
    auto current = profiles_.find(def.name);
    if (current != profiles_.end() && current->second->params() == def.params) continue;
    auto profile = policer::Profile::make(def.params, tick_rate_);
    if (!profile) return Error{profile.error().subject, "profile " + def.name + ": " + profile.error().message};
    fresh.emplace(def.name, std::make_unique<policer::Profile>(*profile));
  }
  for (const Rule& rule : policy.rules) {
    if (policy.find_profile(rule.profile) == nullptr)
      return Error{rule.profile, "rule " + rule.name + ": no such profile '" + rule.profile + "'"};
  }
  auto classifier = Classifier::build(policy.rules);
  if (!classifier) return classifier.error();

  // 2. Commit. Profiles: changed ones replaced (the old object retired), removed ones retired.
  for (auto& [name, profile] : fresh) {
    auto& slot = profiles_[name];
    if (slot) retired_profiles_.push_back(std::move(slot));
    slot = std::move(profile);
  }
  for (auto it = profiles_.begin(); it != profiles_.end();) {
    if (policy.find_profile(it->first) == nullptr) {
      retired_profiles_.push_back(std::move(it->second));
      it = profiles_.erase(it);
    } else {
      ++it;
    }
  }
  // Rule states by name: a kept rule moves its meter to its (possibly new) profile, keeping levels
  // within the same algorithm and unit; a new rule gets a full meter.
  std::map<std::string, std::unique_ptr<RuleState>> states;
  std::vector<CompiledRule> compiled;
  compiled.reserve(policy.rules.size());
  for (const Rule& rule : policy.rules) {
    const policer::Profile& profile = *profiles_.at(rule.profile);
    std::unique_ptr<RuleState> state;
    if (auto old = rule_states_.find(rule.name); old != rule_states_.end()) {
      state = std::move(old->second);
      if (state->profile != &profile) {
        state->meter.change_profile(profile, now);
        state->profile = &profile;
      }
    } else {
      state = std::make_unique<RuleState>(profile, now);
    }
    CompiledRule c{state.get(), &state->counters, rule.input, rule.length, {}};
    for (std::size_t in = 0; in < 3; ++in)
      for (std::size_t out = 0; out < 3; ++out)
        c.action[in][out] = (rule.input != InputColor::blind && rule.on_pair[in][out]) ? *rule.on_pair[in][out]
                                                                                       : rule.on_color[out];
    compiled.push_back(c);
    states.emplace(rule.name, std::move(state));
  }
  rule_states_ = std::move(states);  // states of deleted rules go with the old map
  rules_ = std::move(compiled);
  classifier_ = std::move(*classifier);
  policy_ = policy;
  return true;
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

void Engine::process(std::span<PacketView> burst, std::span<Verdict> verdicts) noexcept {
  const std::size_t n = std::min(burst.size(), kMaxBurst);
  Parsed parsed[kMaxBurst];
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) __builtin_prefetch(burst[i + kPrefetchAhead].data);
    parsed[i] = parse(burst[i]);
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
    CompiledRule& cr = rules_[r];

    std::uint64_t times[kMaxBurst];
    std::uint32_t lengths[kMaxBurst];
    Color in[kMaxBurst];
    Color out[kMaxBurst];
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = order[start + k];
      times[k] = burst[i].arrival;
      lengths[k] = metered_length(burst[i], parsed[i], cr.length);
      in[k] = cr.input == InputColor::dscp ? color_from_dscp(parsed[i].dscp) : Color::green;
    }
    const bool blind = cr.input == InputColor::blind;
    cr.state->meter.check_burst(std::span<const std::uint64_t>(times, count), std::span<const std::uint32_t>(lengths, count),
                                blind ? std::span<const Color>() : std::span<const Color>(in, count),
                                std::span<Color>(out, count));

    RuleCounters& counters = *cr.counters;
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = order[start + k];
      Verdict& v = verdicts[i];
      v.rule = r;
      v.in = in[k];
      v.out = out[k];
      v.metered_length = lengths[k];
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
}

}  // namespace tricolor::dataplane
