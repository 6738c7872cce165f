// The printed forms of profiles, color maps, rules and actions: commands that load back to the same
// values (load(print(p)) == p).
#include "control/language/print.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "control/language/language.hpp"
#include "control/language/language_internal.hpp"
#include "control/language/words.hpp"

namespace tricolor::control::detail {

using dataplane::Action;
using dataplane::ColorMap;
using dataplane::ColorMapKind;
using dataplane::InputColor;
using dataplane::KeyFallback;
using dataplane::LengthBase;
using dataplane::PerKey;
using dataplane::PortRange;
using dataplane::ProfileDef;
using dataplane::Rule;
using policer::Color;
using policer::Params;

namespace {

std::string format_ports(const std::vector<std::uint16_t>& ports) {
  std::string text;
  for (std::size_t i = 0; i < ports.size(); ++i) text.append(i ? "," : "").append(std::to_string(ports[i]));
  return text;
}

std::string format_port_ranges(const std::vector<PortRange>& ranges) {
  std::string text;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(ranges[i].first);
    if (ranges[i].last != ranges[i].first) text.append("-").append(std::to_string(ranges[i].last));
  }
  return text;
}

std::string format_length(const dataplane::MeteredLength& length) {
  std::string text = length.base == LengthBase::l1 ? "l1" : length.base == LengthBase::l2 ? "l2" : "l3";
  if (length.adjust > 0) text.append("+").append(std::to_string(length.adjust));
  if (length.adjust < 0) text.append(std::to_string(length.adjust));
  return text;
}

std::string format_per_key(const PerKey& per_key) {
  std::string text;
  for (const auto& named : kKeyKinds)
    if (named.kind == per_key.kind) text = std::string(named.name);
  const PerKey defaults;
  if (per_key.ipv6_prefix != defaults.ipv6_prefix)
    text += cat("/", std::to_string(per_key.ipv4_prefix), ",", std::to_string(per_key.ipv6_prefix));
  else if (per_key.ipv4_prefix != defaults.ipv4_prefix)
    text += cat("/", std::to_string(per_key.ipv4_prefix));
  return text;
}

std::string_view format_fallback(KeyFallback fallback) {
  for (const auto& named : kFallbacks)
    if (named.fallback == fallback) return named.name;
  return kFallbacks[0].name;
}

// The values of one color, compactly: runs of consecutive values as ranges N-M, single DSCP values by
// name where they have one.
std::string format_color_values(const ColorMap& map, Color color) {
  const std::size_t size = color_map_size(map.kind);
  std::string text;
  for (std::size_t value = 0; value < size;) {
    if (map.colors[value] != color) {
      ++value;
      continue;
    }
    std::size_t last = value;
    while (last + 1 < size && map.colors[last + 1] == color) ++last;
    if (!text.empty()) text += ',';
    if (last > value)
      text.append(std::to_string(value)).append("-").append(std::to_string(last));
    else
      text += map.kind == ColorMapKind::dscp ? format_dscp(static_cast<std::uint8_t>(value))
                                             : std::to_string(value);
    value = last + 1;
  }
  return text;
}

}  // namespace

std::string format_protocol(std::uint8_t protocol) {
  for (const auto& named : kProtocols)
    if (named.value == protocol) return std::string(named.name);
  return std::to_string(protocol);
}

std::string format_action(const Action& action) {
  if (action.shape_max_delay_ns)
    return "shape max-delay " + format_duration(*action.shape_max_delay_ns) +
           (action.shape_queue ? " queue " + format_capacity(*action.shape_queue) : "");
  if (action.drop) return "drop";
  if (!action.dscp && !action.pcp) return "forward";
  std::string text;
  if (action.dscp) text.append("remark ").append(format_dscp(*action.dscp));
  if (action.pcp) text.append(text.empty() ? "" : " ").append("pcp ").append(std::to_string(*action.pcp));
  return text;
}

std::string format_profile(const ProfileDef& profile) {
  const Params& p = profile.params;
  const AlgorithmSpec& spec = algorithm_spec(p.algorithm);
  std::string text = cat("profile add ", profile.name, " ", spec.name);
  for (const std::string_view name : spec.params) {
    if (name.empty()) continue;
    const ParamSpec& param = kParams[*param_index(name)];
    const std::uint64_t value = param.get(p);
    // An RFC meter's missing parameter is 0 and left out. A limiter's are all printed, 0 too (a
    // tolerance or max-burst of 0 is a choice), and so is a defaulted cold-factor: the operator sees
    // what is in effect.
    if (value == 0 && !policer::is_limiter(p.algorithm)) continue;
    text.append(" ").append(name).append(" ");
    switch (param.kind) {
      case ParamKind::rate: text += format_rate(value, p.unit); break;
      case ParamKind::burst: text += format_burst(value, p.unit); break;
      case ParamKind::duration: text += format_duration(value); break;
      case ParamKind::count: text += std::to_string(value); break;
    }
  }
  return text;
}

std::string format_color_map(const ColorMap& map) {
  std::string text = cat("color-map add ", map.name, " ", color_map_kind_name(map.kind));
  bool any = false;
  for (const Color color : {Color::yellow, Color::red}) {
    const std::string values = format_color_values(map, color);
    if (values.empty()) continue;
    text.append(" ").append(color_name(color)).append(" ").append(values);
    any = true;
  }
  // Green is the default and never printed, except for a map that is all green: the command needs
  // one color.
  if (!any) text.append(" green ").append(format_color_values(map, Color::green));
  return text;
}

std::string format_rule(const Rule& rule) {
  const auto& m = rule.match;
  std::string text = cat("rule add ", rule.name);
  auto clause = [&](std::string_view keyword, const std::string& value) {
    text.append(" ").append(keyword).append(" ").append(value);
  };
  if (!m.ports.empty()) clause("port", format_ports(m.ports));
  if (m.vlan) clause("vlan", std::to_string(*m.vlan));
  if (m.src) clause("src", format_prefix(*m.src));
  if (m.dst) clause("dst", format_prefix(*m.dst));
  if (m.protocol) clause("proto", format_protocol(*m.protocol));
  if (!m.src_ports.empty()) clause("sport", format_port_ranges(m.src_ports));
  if (!m.dst_ports.empty()) clause("dport", format_port_ranges(m.dst_ports));
  if (!m.dscp.empty()) {
    std::string list;
    for (std::size_t i = 0; i < m.dscp.size(); ++i) list.append(i ? "," : "").append(format_dscp(m.dscp[i]));
    clause("dscp", list);
  }
  clause("profile", rule.profile);
  const PerKey per_defaults;
  if (rule.per_key.kind != dataplane::KeyKind::none) {
    clause("per", format_per_key(rule.per_key));
    if (rule.per_key.idle_timeout_ns != per_defaults.idle_timeout_ns)
      clause("timeout", format_duration(rule.per_key.idle_timeout_ns));
    if (rule.per_key.capacity != per_defaults.capacity)
      clause("capacity", format_capacity(rule.per_key.capacity));
    if (rule.per_key.fallback != per_defaults.fallback)
      clause("fallback", std::string(format_fallback(rule.per_key.fallback)));
    if (rule.per_key.max_flows != 0) {
      clause("max-flows", std::to_string(rule.per_key.max_flows));
      if (rule.per_key.flow_timeout_ns != per_defaults.flow_timeout_ns)
        clause("flow-timeout", format_duration(rule.per_key.flow_timeout_ns));
      if (rule.per_key.flow_capacity != per_defaults.flow_capacity)
        clause("flow-capacity", format_capacity(rule.per_key.flow_capacity));
      if (rule.per_key.flow_excess != per_defaults.flow_excess)
        clause("flow-excess", std::string(kColors[static_cast<std::size_t>(rule.per_key.flow_excess)]));
    }
  }
  if (rule.parent) clause("parent", *rule.parent);
  if (rule.cluster) clause("cluster", *rule.cluster);
  if (rule.input == InputColor::dscp) clause("input", "dscp");
  if (rule.input == InputColor::mapped) {
    std::string input = "map";
    if (rule.pcp_map) input.append(" pcp-map ").append(*rule.pcp_map);
    if (rule.dscp_map) input.append(" dscp-map ").append(*rule.dscp_map);
    if (rule.input_default != Color::green) input.append(" unmapped ").append(color_name(rule.input_default));
    clause("input", input);
  }
  if (rule.length != dataplane::MeteredLength{}) clause("length", format_length(rule.length));
  const Rule defaults;  // only actions that differ from Rule's defaults are printed
  for (std::size_t color = 0; color < 3; ++color)
    if (rule.on_color[color] != defaults.on_color[color]) clause(kColors[color], format_action(rule.on_color[color]));
  for (std::size_t in = 0; in < 3; ++in)
    for (std::size_t out = 0; out < 3; ++out)
      if (const auto& action = rule.on_pair[in][out])
        clause(cat(kColors[in], ">", kColors[out]), format_action(*action));
  return text;
}

}  // namespace tricolor::control::detail

namespace tricolor::control {

std::string print(const Policy& policy) {
  std::string out;
  for (const auto& p : policy.profiles) out.append(detail::format_profile(p)).append("\n");
  for (const auto& m : policy.color_maps) out.append(detail::format_color_map(m)).append("\n");
  for (const auto& r : policy.rules) out.append(detail::format_rule(r)).append("\n");
  if (policy.default_action != dataplane::Action{})
    out.append("default ").append(detail::format_action(policy.default_action)).append("\n");
  return out;
}

}  // namespace tricolor::control
