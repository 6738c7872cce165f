// The body of a rule and its actions.
#include "control/language/rule_body.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "control/language/language_internal.hpp"
#include "control/language/print.hpp"
#include "control/language/values.hpp"
#include "control/language/words.hpp"

namespace tricolor::control::detail {

using dataplane::Action;
using dataplane::ColorMap;
using dataplane::ColorMapKind;
using dataplane::InputColor;
using dataplane::Rule;
using policer::Color;

namespace {

struct ClauseSpec {
  std::string_view keyword;
  std::string_view expect;  // what its value is
};
// clang-format off
enum class Clause : std::uint8_t {
  port, vlan, src, dst, proto, sport, dport, dscp, profile, per, timeout, capacity, fallback, parent, cluster, input, length,
  max_flows, flow_timeout, flow_capacity, flow_excess
};
// clang-format on
constexpr std::size_t kClauseCount = 21;
constexpr std::array<ClauseSpec, kClauseCount> kClauses{{
    {"port", kExpectPorts},
    {"vlan", kExpectVlan},
    {"src", kExpectPrefix},
    {"dst", kExpectPrefix},
    {"proto", kExpectProtocol},
    {"sport", kExpectL4Ports},
    {"dport", kExpectL4Ports},
    {"dscp", kExpectDscp},
    {"profile", "a profile name"},
    {"per", kExpectPerKey},
    {"timeout", kExpectDuration},
    {"capacity", kExpectCapacity},
    {"fallback", kExpectFallback},
    {"parent", "a profile name"},
    {"cluster", "a profile name"},
    {"input", kExpectInput},
    {"length", kExpectLength},
    {"max-flows", kExpectMaxFlows},
    {"flow-timeout", kExpectDuration},
    {"flow-capacity", kExpectFlowCapacity},
    {"flow-excess", kExpectColor},
}};

// After 'input map': [pcp-map NAME] [dscp-map NAME] [unmapped COLOR], in any order, each at most once,
// at least one map. `map_token` is the word 'map', the subject when no map is given.
std::optional<Error> parse_input_maps(Cursor& c, const Store& store, std::string_view map_token, Rule& rule) {
  std::array<bool, 3> seen{};
  while (true) {
    const std::string_view key = c.peek();
    const std::size_t which = key == "pcp-map" ? 0 : key == "dscp-map" ? 1 : key == "unmapped" ? 2 : 3;
    if (which == 3) break;
    c.take();
    if (seen[which]) return at(key, cat(key, " given twice"));
    seen[which] = true;
    if (which == 2) {
      const auto token = c.expect(kExpectColor);
      if (!token) return token.error();
      const auto color = color_index(*token);
      if (!color) return not_a_keyword(*token, cat("expected ", kExpectColor));
      rule.input_default = static_cast<Color>(*color);
      continue;
    }
    const ColorMapKind kind = which == 0 ? ColorMapKind::pcp : ColorMapKind::dscp;
    const auto token = c.expect(cat("a ", color_map_kind_name(kind), " color map name"));
    if (!token) return token.error();
    const ColorMap* map = store.find_color_map(*token);
    if (!map) return at(*token, "no such color map");
    if (map->kind != kind)
      return at(*token, cat("color map ", *token, " is a ", color_map_kind_name(map->kind), " map; ", key, " needs a ",
                            color_map_kind_name(kind), " map"));
    (which == 0 ? rule.pcp_map : rule.dscp_map) = std::string(*token);
  }
  if (!seen[0] && !seen[1]) return at(map_token, "input map needs a map: pcp-map NAME, dscp-map NAME or both");
  return std::nullopt;
}

}  // namespace

Expected<Rule> parse_rule_body(Cursor& c, const Store& store, std::string_view name) {
  Rule rule;
  rule.name = std::string(name);
  auto& match = rule.match;
  using enum Clause;
  std::array<bool, kClauseCount> seen{};
  std::array<bool, 3> color_seen{};
  std::array<std::array<bool, 3>, 3> pair_seen{};
  std::string_view first_pair;    // for the error when the input is blind
  std::string_view ports_clause;  // sport or dport, for the error when the protocol has no ports
  std::string_view per_clause;    // timeout, capacity or fallback, for the error when there is no 'per'
  std::string_view flow_clause;   // flow-timeout, -capacity or -excess, for the error when there is no 'max-flows'

  while (!c.done()) {
    const std::string_view key = c.take();
    const auto clause_it =
        std::find_if(kClauses.begin(), kClauses.end(), [&](const ClauseSpec& s) { return s.keyword == key; });
    if (clause_it != kClauses.end()) {
      const auto clause = static_cast<Clause>(clause_it - kClauses.begin());
      if (seen[static_cast<std::size_t>(clause)]) return at(key, cat(key, " given twice"));
      seen[static_cast<std::size_t>(clause)] = true;
      const auto value = c.expect(clause_it->expect);
      if (!value) return value.error();
      const std::string_view token = *value;
      switch (clause) {
        case port: {
          auto ports = parse_ports(token);
          if (!ports) return ports.error();
          match.ports = std::move(*ports);
          break;
        }
        case vlan: {
          const auto id = parse_number(token, 4095);
          if (!id) return at(token, cat("expected ", kExpectVlan));
          match.vlan = static_cast<std::uint16_t>(*id);
          break;
        }
        case src:
        case dst: {
          auto prefix = parse_prefix(token);
          if (!prefix) return prefix.error();
          const auto& other = clause == src ? match.dst : match.src;
          if (other && other->ipv6 != prefix->ipv6) {
            const std::string_view family = prefix->ipv6 ? "IPv6" : "IPv4",
                                   other_family = prefix->ipv6 ? "IPv4" : "IPv6";
            return at(token, cat(key, " is ", family, " but ", clause == src ? "dst" : "src", " is ", other_family,
                                 "; src and dst must be the same family"));
          }
          (clause == src ? match.src : match.dst) = *prefix;
          break;
        }
        case proto: {
          const auto protocol = parse_protocol(token);
          if (!protocol) return protocol.error();
          if (!ports_clause.empty() && !carries_ports(*protocol))
            return at(token, cat(ports_clause, " needs proto tcp, udp or sctp (or no proto); ",
                                 format_protocol(*protocol), " has no ports"));
          match.protocol = *protocol;
          break;
        }
        case sport:
        case dport: {
          if (match.protocol && !carries_ports(*match.protocol))
            return at(key, cat(key, " needs proto tcp, udp or sctp (or no proto); ", format_protocol(*match.protocol),
                               " has no ports"));
          auto ranges = parse_l4_ports(token);
          if (!ranges) return ranges.error();
          (clause == sport ? match.src_ports : match.dst_ports) = std::move(*ranges);
          if (ports_clause.empty()) ports_clause = key;
          break;
        }
        case dscp: {
          auto values = parse_dscp_list(token);
          if (!values) return values.error();
          match.dscp = std::move(*values);
          break;
        }
        case profile:
        case parent:
        case cluster:
          if (!store.find_profile(token)) return at(token, "no such profile");
          if (clause == profile)
            rule.profile = std::string(token);
          else if (clause == parent)
            rule.parent = std::string(token);
          else
            rule.cluster = std::string(token);
          break;
        case per: {
          const auto per_key = parse_per_key(token);
          if (!per_key) return per_key.error();
          // timeout, capacity and fallback may come first: keep what they set.
          rule.per_key.kind = per_key->kind;
          rule.per_key.ipv4_prefix = per_key->ipv4_prefix;
          rule.per_key.ipv6_prefix = per_key->ipv6_prefix;
          break;
        }
        case timeout: {
          const auto ns = parse_timeout(token);
          if (!ns) return ns.error();
          rule.per_key.idle_timeout_ns = *ns;
          if (per_clause.empty()) per_clause = key;
          break;
        }
        case capacity: {
          const auto keys = parse_capacity(token);
          if (!keys) return keys.error();
          rule.per_key.capacity = *keys;
          if (per_clause.empty()) per_clause = key;
          break;
        }
        case fallback: {
          const auto it = std::find_if(kFallbacks.begin(), kFallbacks.end(),
                                       [&](const FallbackName& f) { return f.name == token; });
          if (it == kFallbacks.end()) return not_a_keyword(token, cat("expected ", kExpectFallback));
          rule.per_key.fallback = it->fallback;
          if (per_clause.empty()) per_clause = key;
          break;
        }
        case max_flows: {
          const auto flows = parse_number(token, dataplane::kMaxFlowsPerKey);
          if (!flows || *flows == 0) return at(token, cat("expected ", kExpectMaxFlows));
          rule.per_key.max_flows = static_cast<std::uint32_t>(*flows);
          if (per_clause.empty()) per_clause = key;
          break;
        }
        case flow_timeout: {
          const auto ns = parse_timeout(token);
          if (!ns) return ns.error();
          rule.per_key.flow_timeout_ns = *ns;
          if (flow_clause.empty()) flow_clause = key;
          break;
        }
        case flow_capacity: {
          const auto flows = parse_capacity(token);
          if (!flows) return flows.error();
          if (*flows > dataplane::kMaxFlowCapacity) return at(token, "flow-capacity must be 1 to 16m (16777216) flows");
          rule.per_key.flow_capacity = *flows;
          if (flow_clause.empty()) flow_clause = key;
          break;
        }
        case flow_excess: {
          const auto color = color_index(token);
          if (!color) return not_a_keyword(token, cat("expected ", kExpectColor));
          rule.per_key.flow_excess = static_cast<Color>(*color);
          if (flow_clause.empty()) flow_clause = key;
          break;
        }
        case input:
          if (token == "blind") {
            rule.input = InputColor::blind;
          } else if (token == "dscp") {
            rule.input = InputColor::dscp;
          } else if (token == "map") {
            rule.input = InputColor::mapped;
            if (auto error = parse_input_maps(c, store, token, rule)) return *error;
          } else {
            return not_a_keyword(token, cat("expected ", kExpectInput));
          }
          break;
        case length: {
          const auto metered = parse_length(token);
          if (!metered) return metered.error();
          rule.length = *metered;
          break;
        }
      }
      continue;
    }

    if (const auto color = color_index(key)) {
      if (color_seen[*color]) return at(key, cat(key, " given twice"));
      color_seen[*color] = true;
      const auto action = parse_action(c);
      if (!action) return action.error();
      if (action->shape_max_delay_ns && *color != static_cast<std::size_t>(Color::red))
        return at(key, cat("only red packets are shaped: 'red shape max-delay D' (a ", key, " packet leaves now)"));
      rule.on_color[*color] = *action;
      continue;
    }

    if (const std::size_t arrow = key.find('>'); arrow != std::string_view::npos) {
      const auto in = color_index(key.substr(0, arrow)), out = color_index(key.substr(arrow + 1));
      if (!in || !out)
        return not_a_keyword(key, "expected a color pair IN>OUT such as green>yellow (colors green, yellow, red)");
      if (*out < *in)
        return at(key,
                  cat("never happens: a color-aware meter never turns a ", kColors[*in], " packet ", kColors[*out]));
      if (pair_seen[*in][*out]) return at(key, cat(key, " given twice"));
      pair_seen[*in][*out] = true;
      if (first_pair.empty()) first_pair = key;
      const auto action = parse_action(c);
      if (!action) return action.error();
      if (action->shape_max_delay_ns) return at(key, "a color pair cannot shape: a shaping rule is color-blind ('red shape max-delay D')");
      rule.on_pair[*in][*out] = *action;
      continue;
    }

    if (key == "queue")
      return at(key, "queue belongs to a shaping action, right after it: red shape max-delay D queue N");
    if (key == "pcp-map" || key == "dscp-map" || key == "unmapped")
      return at(key, cat(key,
                         " belongs to 'input map', right after it: input map [pcp-map NAME] [dscp-map NAME] "
                         "[unmapped COLOR]"));
    return not_a_keyword(key, kExpectClause);
  }

  if (!seen[static_cast<std::size_t>(profile)]) return Error{"", "missing 'profile PROFILE'"};
  if (!per_clause.empty() && !seen[static_cast<std::size_t>(per)])
    return at(per_clause, cat(per_clause, " needs per-key meters: add 'per KEY' (src, dst, src+dport or 5-tuple)"));
  if (!flow_clause.empty() && rule.per_key.max_flows == 0)
    return at(flow_clause, cat(flow_clause, " needs a flow limit: add 'max-flows N'"));
  if (rule.per_key.max_flows != 0) {
    if (rule.per_key.kind == dataplane::KeyKind::five_tuple)
      return at("max-flows", "max-flows needs a key of several flows: with per 5-tuple each key is one flow");
    if (rule.on_color[static_cast<std::size_t>(Color::red)].shape_max_delay_ns)
      return at("max-flows", "a max-flows rule cannot shape: a refused flow's packet is red and never conforms later");
  }
  if (rule.on_color[static_cast<std::size_t>(Color::red)].shape_max_delay_ns) {
    if (rule.input != InputColor::blind) return at("shape", "a shaping rule is color-blind: it cannot have 'input dscp' or 'input map'");
    if (rule.parent) return at("shape", "a shaping rule cannot have a parent meter: the parent would color a packet again after its release");
    if (rule.cluster) return at("shape", "a shaping rule cannot have a cluster meter: the cluster would color a packet again after its release");
  }
  if (!first_pair.empty() && rule.input == InputColor::blind)
    return at(first_pair, "a color pair IN>OUT needs a color-aware input: 'input dscp' or 'input map ...'");
  return rule;
}

// ACTION: forward | drop | remark DSCP [pcp N] | pcp N [remark DSCP]
Expected<Action> parse_action(Cursor& c) {
  const auto word = c.expect(kExpectAction);
  if (!word) return word.error();
  Action action;
  if (*word == "forward") {
  } else if (*word == "drop") {
    action.drop = true;
  } else if (*word == "shape") {
    // shape max-delay DURATION: held until the meter colors the packet green, dropped if later.
    if (!c.accept("max-delay"))
      return at(c.peek().empty() ? *word : c.peek(), cat("shape takes max-delay: ", kExpectShapeDelay));
    const auto token = c.expect(kExpectShapeDelay);
    if (!token) return token.error();
    const auto ns = parse_duration(*token);
    if (!ns) return ns.error();
    if (*ns < kMinShapeDelayNs || *ns > dataplane::kMaxShapeDelayNs)
      return at(*token, "max-delay must be from 1us to 1s");
    action.drop = true;  // what a packet that would wait longer gets
    action.shape_max_delay_ns = *ns;
    // queue N: at most N held at once per worker.
    if (c.accept("queue")) {
      const auto packets = c.expect(kExpectShapeQueue);
      if (!packets) return packets.error();
      const auto queue = parse_shape_queue(*packets);
      if (!queue) return queue.error();
      action.shape_queue = *queue;
    }
  } else if (*word == "remark" || *word == "pcp") {
    // remark DSCP [pcp N] | pcp N [remark DSCP]: one or both parts, either first.
    bool remark = *word == "remark";
    for (int part = 0; part < 2; ++part) {
      if (remark) {
        const auto dscp = c.expect(kExpectOneDscp);
        if (!dscp) return dscp.error();
        const auto value = parse_one_dscp(*dscp);
        if (!value) return value.error();
        action.dscp = *value;
      } else {
        const auto pcp = c.expect(kExpectPcp);
        if (!pcp) return pcp.error();
        const auto value = parse_pcp(*pcp);
        if (!value) return value.error();
        action.pcp = *value;
      }
      remark = !remark;
      if (part == 0 && !c.accept(remark ? "remark" : "pcp")) break;
    }
  } else {
    return not_a_keyword(*word, cat("expected ", kExpectAction));
  }
  // remark and pcp cannot start anything else in a command: say why this one does not fit.
  const std::string_view stray = c.peek();
  if (stray == "remark" || stray == "pcp") {
    if (action.shape_max_delay_ns) return at(stray, cat("shape cannot be combined with ", stray, ": a released packet takes the green action"));
    if (action.drop) return at(stray, cat("drop cannot be combined with ", stray));
    if (!action.dscp && !action.pcp)
      return at(stray, stray == "remark"
                           ? "forward takes nothing more; 'remark DSCP' alone forwards the packet remarked"
                           : "forward takes nothing more; 'pcp N' alone forwards the packet with that PCP");
    return at(stray, cat(stray, " given twice in one action"));
  }
  return action;
}

}  // namespace tricolor::control::detail
