#pragma once
// The obvious reading of a rule's match, one field after another. Not the fast path (the Classifier
// is): it is the linear baseline of bench/classify_bench and the reference the classifier is tested
// against.
#include <algorithm>
#include <cstring>

#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/policy.hpp"

namespace tricolor::dataplane {

inline bool prefix_contains(const Prefix& prefix, L3 l3, const std::array<std::uint8_t, 16>& address) {
  if ((l3 == L3::ipv6) != prefix.ipv6) return false;
  const unsigned whole = prefix.length / 8, rest = prefix.length % 8;
  if (std::memcmp(prefix.address.data(), address.data(), whole) != 0) return false;
  if (rest == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (prefix.address[whole] & mask) == (address[whole] & mask);
}

inline bool in_ranges(const std::vector<PortRange>& ranges, std::uint16_t port) {
  return ranges.empty() ||
         std::any_of(ranges.begin(), ranges.end(), [&](const PortRange& r) { return r.first <= port && port <= r.last; });
}

inline bool matches(const Match& m, const PacketView& view, const Parsed& p) {
  if (p.error != ParseError::none || p.l3 == L3::none) return false;
  if (!m.ports.empty() && std::find(m.ports.begin(), m.ports.end(), view.port) == m.ports.end()) return false;
  if (m.vlan && !(p.has_vlan && p.vlan_id == *m.vlan)) return false;
  if (m.src && !prefix_contains(*m.src, p.l3, p.src)) return false;
  if (m.dst && !prefix_contains(*m.dst, p.l3, p.dst)) return false;
  if (m.protocol && p.protocol != *m.protocol) return false;
  if (!in_ranges(m.src_ports, p.src_port) || !in_ranges(m.dst_ports, p.dst_port)) return false;
  if (!m.dscp.empty() && std::find(m.dscp.begin(), m.dscp.end(), p.dscp) == m.dscp.end()) return false;
  return true;
}

// First-match-wins over the rules, one by one.
inline std::uint32_t first_match(std::span<const Rule> rules, const PacketView& view, const Parsed& parsed) {
  for (std::size_t i = 0; i < rules.size(); ++i)
    if (matches(rules[i].match, view, parsed)) return static_cast<std::uint32_t>(i);
  return UINT32_MAX;
}

}  // namespace tricolor::dataplane
