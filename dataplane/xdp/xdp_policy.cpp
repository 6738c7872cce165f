#include "dataplane/xdp/xdp_policy.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

namespace tricolor::dataplane::xdp {
namespace {

Error refuse(const Rule& rule, const std::string& why) {
  return Error{rule.name, "rule " + rule.name + ": the XDP dataplane cannot run it: " + why};
}

bool runs(policer::Algorithm a) noexcept {
  using policer::Algorithm;
  return a == Algorithm::one_rate_two_color || a == Algorithm::srtcm || a == Algorithm::trtcm ||
         a == Algorithm::trtcm_4115 || a == Algorithm::fixed_window || a == Algorithm::gcra;
}

txdp_action to_xdp(const Action& a) noexcept {
  txdp_action out{};
  out.drop = a.drop ? 1 : 0;
  out.remark = a.dscp ? 1 : 0;
  out.dscp = a.dscp.value_or(0);
  return out;
}

// address & mask == want: the prefix's bytes and its mask.
void prefix_bytes(const Prefix& p, std::uint8_t* want, std::uint8_t* mask) {
  const unsigned bytes = p.ipv6 ? 16 : 4;
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned bits = i >= bytes ? 0 : p.length >= 8 * (i + 1) ? 8 : p.length > 8 * i ? p.length - 8 * i : 0;
    mask[i] = static_cast<std::uint8_t>(0xff00u >> bits);
    want[i] = p.address[i] & mask[i];
  }
}

// The key's address mask (keys.hpp's copy_masked as a mask).
void key_mask(unsigned bytes, unsigned prefix, std::uint8_t* mask) {
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned bits = i >= bytes ? 0 : prefix >= 8 * (i + 1) ? 8 : prefix > 8 * i ? prefix - 8 * i : 0;
    mask[i] = static_cast<std::uint8_t>(0xff00u >> bits);
  }
}

Expected<policer::Profile> profile_of(const Policy& policy, const Rule& rule, const std::string& name, bool per_key) {
  const ProfileDef* def = policy.find_profile(name);
  if (def == nullptr) return refuse(rule, "no profile named " + name);
  if (!runs(def->params.algorithm))
    return refuse(rule, "profile " + name + " uses " + std::string(policer::to_string(def->params.algorithm)) +
                            ", which the XDP program does not run (it runs 1r2c, srtcm, trtcm, rfc4115, "
                            "fixed-window, gcra)");
  if (per_key) {
    if (auto valid = policer::validate_per_key(def->params); !valid) return refuse(rule, valid.error().message);
  }
  auto tick_rate = policer::TickRate::make(kHz);
  if (!tick_rate) return tick_rate.error();
  auto made = policer::Profile::make(def->params, *tick_rate);
  if (!made) return refuse(rule, made.error().message);
  return made;
}

Expected<bool> translate_match(const Rule& rule, txdp_rule& out) {
  const Match& m = rule.match;
  if (!m.ports.empty()) return refuse(rule, "it matches ingress ports, which the XDP program does not see yet");
  if (m.src_ports.size() > kMaxPortRanges || m.dst_ports.size() > kMaxPortRanges)
    return refuse(rule, "more than " + std::to_string(kMaxPortRanges) + " port ranges in one field");
  if (m.src && m.dst && m.src->ipv6 != m.dst->ipv6) return refuse(rule, "an IPv4 and an IPv6 prefix (it matches nothing)");
  if (m.vlan) out.fields |= TXDP_MATCH_VLAN, out.vlan = *m.vlan;
  if (m.src) {
    out.fields |= TXDP_MATCH_SRC;
    out.family = m.src->ipv6 ? 6 : 4;
    prefix_bytes(*m.src, out.src_addr, out.src_mask);
  }
  if (m.dst) {
    out.fields |= TXDP_MATCH_DST;
    out.family = m.dst->ipv6 ? 6 : 4;
    prefix_bytes(*m.dst, out.dst_addr, out.dst_mask);
  }
  if (m.protocol) out.fields |= TXDP_MATCH_PROTOCOL, out.protocol = *m.protocol;
  out.src_ranges = static_cast<std::uint8_t>(m.src_ports.size());
  for (std::size_t i = 0; i < m.src_ports.size(); ++i) out.src_port[i] = {m.src_ports[i].first, m.src_ports[i].last};
  out.dst_ranges = static_cast<std::uint8_t>(m.dst_ports.size());
  for (std::size_t i = 0; i < m.dst_ports.size(); ++i) out.dst_port[i] = {m.dst_ports[i].first, m.dst_ports[i].last};
  if (!m.dscp.empty()) {
    out.fields |= TXDP_MATCH_DSCP;
    for (const std::uint8_t d : m.dscp) out.dscp_set |= std::uint64_t{1} << (d & 63);
  }
  return true;
}

bool same(const txdp_profile& a, const txdp_profile& b) noexcept { return std::memcmp(&a, &b, sizeof a) == 0; }

// The history after `now` replaced `before` at `tick` (none if they are the same profile); the oldest
// change is dropped, and remembered as forgotten, past TXDP_PROFILE_HISTORY.
txdp_history next_history(const txdp_history& history, const txdp_profile& before, const txdp_profile& now,
                          std::uint64_t tick) {
  txdp_history next = history;
  if (same(before, now)) return next;
  if (next.count == TXDP_PROFILE_HISTORY) {
    next.forgotten_version = next.changes[0].version;
    next.forgotten_tick = next.changes[0].tick;
    std::copy(next.changes + 1, next.changes + TXDP_PROFILE_HISTORY, next.changes);
    --next.count;
  }
  next.version = history.version + 1;
  next.changes[next.count++] = txdp_change{next.version, tick, before};
  return next;
}

}  // namespace

txdp_profile to_xdp(const policer::Profile& p) noexcept {
  txdp_profile out{};
  for (std::size_t b = 0; b < policer::kBuckets; ++b) {
    out.size[b] = p.size(b);
    out.rate[b] = p.rate(b);
    out.fill_ticks[b] = p.fill_ticks(b);
  }
  // cost(length) = min(length, cap) * per_byte + per_packet: both read back through cost().
  out.cost_per_packet = p.cost(0);
  out.cost_per_byte = p.cost(1) - p.cost(0);
  out.limit = p.limiter().limit;
  out.window_ticks = p.limiter().ticks;
  out.algorithm = static_cast<std::uint32_t>(p.algorithm());
  out.unit = static_cast<std::uint32_t>(p.unit());
  return out;
}

Expected<RuleSetImage> translate(const Policy& policy, const RuleSetImage* previous, std::uint64_t change_tick) {
  RuleSetImage image;
  if (policy.rules.size() > kMaxRules)
    return Error{"rules", "the XDP dataplane runs at most " + std::to_string(kMaxRules) + " rules; the policy has " +
                              std::to_string(policy.rules.size()) + " (rule " + policy.rules[kMaxRules].name +
                              " is the first beyond)"};
  if (policy.default_action.pcp) return Error{"default", "the XDP dataplane cannot set a PCP (default action)"};
  image.set.rule_count = static_cast<std::uint32_t>(policy.rules.size());
  image.set.default_action = to_xdp(policy.default_action);
  image.rules.resize(policy.rules.size());
  // Slots: a rule of a name the previous image had keeps its slot; the others take the lowest slots
  // that image left unused (its own slots, those of rules this change deletes included, are not free
  // until the next change: packets may still read them under the old set).
  std::vector<std::optional<std::size_t>> was(policy.rules.size());  // the rule's position in previous
  bool taken[kMaxRules] = {};
  if (previous != nullptr)
    for (std::size_t j = 0; j < previous->rules.size(); ++j) {
      taken[previous->rules[j].slot] = true;
      if (j >= previous->names.size()) continue;
      for (std::size_t i = 0; i < policy.rules.size(); ++i)
        if (policy.rules[i].name == previous->names[j]) was[i] = j;
    }
  std::size_t next_free = 0;
  image.names.reserve(policy.rules.size());
  for (std::size_t i = 0; i < policy.rules.size(); ++i) {
    const Rule& rule = policy.rules[i];
    txdp_rule& out = image.rules[i];
    out = txdp_rule{};
    image.names.push_back(rule.name);
    if (was[i]) {
      out.slot = previous->rules[*was[i]].slot;
    } else {
      while (next_free < kMaxRules && taken[next_free]) ++next_free;
      if (next_free == kMaxRules)
        return refuse(rule, "no free rule slot in the XDP program: its " + std::to_string(kMaxRules) +
                                " slots hold the running policy's rules and this change's new ones; the slots of "
                                "rules a change deletes are free from the next change on");
      out.slot = static_cast<std::uint32_t>(next_free);
      taken[next_free] = true;
    }
    if (auto matched = translate_match(rule, out); !matched) return matched.error();
    if (rule.cluster) return refuse(rule, "a cluster meter (" + *rule.cluster + "), whose leases the XDP program does not take");
    if (rule.on_color[static_cast<std::size_t>(Color::red)].shape_max_delay_ns)
      return refuse(rule, "shaping (red shape), which would hold packets: XDP passes or drops each frame at once");
    if (rule.per_key.max_flows != 0)
      return refuse(rule, "max-flows " + std::to_string(rule.per_key.max_flows) +
                              " (concurrent flows per key), whose flow tables the XDP program does not keep");

    // Metering.
    const bool per_key = rule.per_key.kind != KeyKind::none;
    auto profile = profile_of(policy, rule, rule.profile, per_key);
    if (!profile) return profile.error();
    out.profile = to_xdp(*profile);
    if (rule.parent) {
      auto parent = profile_of(policy, rule, *rule.parent, false);
      if (!parent) return parent.error();
      out.parent_profile = to_xdp(*parent);
      out.has_parent = 1;
    }
    out.input = static_cast<std::uint8_t>(rule.input);
    out.input_default = static_cast<std::uint8_t>(rule.input_default);
    if (rule.input == InputColor::mapped) {
      if (rule.pcp_map) {
        const ColorMap* map = policy.find_color_map(*rule.pcp_map);
        if (map == nullptr) return refuse(rule, "no color map named " + *rule.pcp_map);
        out.has_pcp_map = 1;
        for (std::size_t c = 0; c < 8; ++c) out.pcp_map[c] = static_cast<std::uint8_t>(map->colors[c]);
      }
      if (rule.dscp_map) {
        const ColorMap* map = policy.find_color_map(*rule.dscp_map);
        if (map == nullptr) return refuse(rule, "no color map named " + *rule.dscp_map);
        out.has_dscp_map = 1;
        for (std::size_t c = 0; c < 64; ++c) out.dscp_map[c] = static_cast<std::uint8_t>(map->colors[c]);
      }
    }
    out.length_base = static_cast<std::uint8_t>(rule.length.base);
    out.length_adjust = rule.length.adjust;

    // Per-key meters.
    out.key_kind = static_cast<std::uint8_t>(rule.per_key.kind);
    out.fallback = static_cast<std::uint8_t>(rule.per_key.fallback);
    if (per_key) {
      out.key_capacity = rule.per_key.capacity;
      out.idle_ticks = static_cast<std::uint64_t>(static_cast<unsigned __int128>(rule.per_key.idle_timeout_ns) * kHz /
                                                  1'000'000'000u);  // the engine's ticks(), at 1e9
      key_mask(4, rule.per_key.ipv4_prefix, out.key_mask4);
      key_mask(16, rule.per_key.ipv6_prefix, out.key_mask6);
    }

    // Actions by (input, output) color: on_pair for color-aware rules, else on_color.
    for (std::size_t in = 0; in < 3; ++in) {
      for (std::size_t color = 0; color < 3; ++color) {
        const Action& a = rule.input != InputColor::blind && rule.on_pair[in][color] ? *rule.on_pair[in][color]
                                                                                     : rule.on_color[color];
        if (a.pcp) return refuse(rule, "a PCP remark, which the XDP program does not make");
        out.action[in][color] = to_xdp(a);
      }
    }

    // Profile versions: a new rule starts at 1; a kept rule whose profile changed moves on by one, its
    // history keeping the profile it replaced (rule_set.hpp's ProfileHistory::with).
    out.history.version = 1;
    out.parent_history.version = 1;
    if (was[i]) {
      // The same name: the same rule, its slot and meters kept.
      const txdp_rule& before = previous->rules[*was[i]];
      out.history = next_history(before.history, before.profile, out.profile, change_tick);
      out.parent_history = next_history(before.parent_history, before.parent_profile, out.parent_profile, change_tick);
    }
  }
  return image;
}

}  // namespace tricolor::dataplane::xdp
