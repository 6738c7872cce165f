#pragma once
// A policy as data: profiles, an ordered list of rules (first match wins) and a default action. The
// command language (control/) reads and prints it; the engine (dataplane/engine.hpp) compiles it.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policer/profile.hpp"

namespace tricolor::dataplane {

using policer::Color;

struct ProfileDef {
  std::string name;
  policer::Params params;  // rates in bytes/s or packets/s, bursts in bytes or packets
  friend bool operator==(const ProfileDef&, const ProfileDef&) = default;
};

struct Prefix {
  bool ipv6 = false;
  std::array<std::uint8_t, 16> address{};  // network order; IPv4 in the first 4 bytes; host bits zero
  std::uint8_t length = 0;                 // 0..32 or 0..128
  friend bool operator==(const Prefix&, const Prefix&) = default;
};

struct PortRange {
  std::uint16_t first = 0;
  std::uint16_t last = 65535;
  friend bool operator==(const PortRange&, const PortRange&) = default;
};

// Every field is optional; an empty list matches anything. A rule with an IPv4 prefix matches only
// IPv4, with an IPv6 prefix only IPv6, with neither both. Non-IP frames match no rule.
struct Match {
  std::vector<std::uint16_t> ports;        // ingress ports
  std::optional<std::uint16_t> vlan;       // outermost VLAN id
  std::optional<Prefix> src;
  std::optional<Prefix> dst;
  std::optional<std::uint8_t> protocol;
  std::vector<PortRange> src_ports;        // L4 source port ranges (TCP, UDP, SCTP; fragments have 0)
  std::vector<PortRange> dst_ports;
  std::vector<std::uint8_t> dscp;          // DSCP values 0..63
  friend bool operator==(const Match&, const Match&) = default;
};

// What happens to a packet of a given color: dropped, or forwarded, optionally remarked.
struct Action {
  bool drop = false;
  std::optional<std::uint8_t> dscp;  // remark DSCP (ECN bits kept)
  std::optional<std::uint8_t> pcp;   // set the outermost VLAN tag's PCP (tagged frames only)
  friend bool operator==(const Action&, const Action&) = default;
};

// The length a packet is metered with: L1 = frame + 24 (preamble and SFD 8, inter-frame gap 12, FCS
// 4), L2 = frame without FCS (a NIC-stripped VLAN tag counted), L3 = IP total length whatever tags
// precede it; plus a signed adjustment, the result floored at 0.
enum class LengthBase : std::uint8_t { l1, l2, l3 };
struct MeteredLength {
  LengthBase base = LengthBase::l2;
  std::int32_t adjust = 0;
  friend bool operator==(const MeteredLength&, const MeteredLength&) = default;
};

// Where a color-aware rule takes the input color from. For now a fixed map from DSCP (RFC 2597):
// AFx2 (12, 20, 28, 36) yellow, AFx3 (14, 22, 30, 38) red, anything else green.
enum class InputColor : std::uint8_t { blind, dscp };

struct Rule {
  std::string name;
  Match match;
  std::string profile;
  InputColor input = InputColor::blind;
  MeteredLength length;
  // By output color; defaults: green and yellow forwarded, red dropped.
  std::array<Action, 3> on_color{Action{}, Action{}, Action{true, std::nullopt, std::nullopt}};
  // Color-aware only: by (input, output) color pair, taking precedence over on_color.
  std::array<std::array<std::optional<Action>, 3>, 3> on_pair{};
  friend bool operator==(const Rule&, const Rule&) = default;
};

struct Policy {
  std::vector<ProfileDef> profiles;  // in order of definition
  std::vector<Rule> rules;           // first match wins
  Action default_action;             // non-IP, malformed, and packets no rule matches
  friend bool operator==(const Policy&, const Policy&) = default;

  const ProfileDef* find_profile(std::string_view name) const;
  const Rule* find_rule(std::string_view name) const;
};

inline const ProfileDef* Policy::find_profile(std::string_view name) const {
  for (const auto& p : profiles)
    if (p.name == name) return &p;
  return nullptr;
}
inline const Rule* Policy::find_rule(std::string_view name) const {
  for (const auto& r : rules)
    if (r.name == name) return &r;
  return nullptr;
}

// The fixed DSCP -> input color map of InputColor::dscp.
inline Color color_from_dscp(std::uint8_t dscp) noexcept {
  switch (dscp) {
    case 12: case 20: case 28: case 36: return Color::yellow;
    case 14: case 22: case 30: case 38: return Color::red;
    default: return Color::green;
  }
}

}  // namespace tricolor::dataplane
