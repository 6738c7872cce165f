#pragma once
// A policy as data: profiles, an ordered list of rules (first match wins) and a default action. The
// command language (control/language/) reads and prints it; the engine (dataplane/engine/engine.hpp) compiles it.
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

// max-flows N: 1 .. kMaxFlowsPerKey; flow-capacity: 1 .. kMaxFlowCapacity flows per worker.
inline constexpr std::uint32_t kMaxFlowsPerKey = 1u << 24;
inline constexpr std::uint32_t kMaxFlowCapacity = 1u << 24;

// Shaping holds a packet at most this long (a held packet's delay fits a Verdict's 32-bit tick count on
// a TSC of up to 4 GHz, and a worker's timing wheel spans it).
inline constexpr std::uint64_t kMaxShapeDelayNs = 1'000'000'000;
// queue N: 1 .. kMaxShapeQueue packets held per rule and worker.
inline constexpr std::uint32_t kMaxShapeQueue = 1u << 20;

// What happens to a packet of a given color: dropped, or forwarded, optionally remarked.
struct Action {
  bool drop = false;
  std::optional<std::uint8_t> dscp;  // remark DSCP (ECN bits kept)
  std::optional<std::uint8_t> pcp;   // set the outermost VLAN tag's PCP (tagged frames only)
  // Red only, shaping (issue 27): a packet that does not conform now is held until the tick at which
  // its meter colors it green (policer/shaping.hpp), at most this many nanoseconds, and released green
  // (the green action applies); one that would wait longer is dropped. `drop` is then true: what a
  // late packet gets. 1 ns .. kMaxShapeDelayNs.
  std::optional<std::uint64_t> shape_max_delay_ns = std::nullopt;
  // With shaping, `queue N`: the rule holds at most N packets at once on each worker; a packet that
  // would wait while N are held is dropped, taking nothing (doc/engine.md "Shaping"). 1 .. kMaxShapeQueue.
  std::optional<std::uint32_t> shape_queue = std::nullopt;
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

// Where a color-aware rule takes the input color from.
//   blind:  every packet enters green.
//   dscp:   the fixed RFC 2597 map: AFx2 (12, 20, 28, 36) yellow, AFx3 (14, 22, 30, 38) red, else green.
//   mapped: the rule's color maps (below): the PCP map for a tagged packet, else the DSCP map, else
//           the rule's default input color.
enum class InputColor : std::uint8_t { blind, dscp, mapped };

// A named input-color table, as DPDK rte_mtr's dscp_table / vlan_table: 64 entries indexed by DSCP
// or 8 by VLAN PCP.
enum class ColorMapKind : std::uint8_t { dscp, pcp };
struct ColorMap {
  std::string name;
  ColorMapKind kind = ColorMapKind::dscp;
  std::array<Color, 64> colors{};  // indexed by DSCP (0..63) or PCP (0..7); unset entries green
  friend bool operator==(const ColorMap&, const ColorMap&) = default;
};

// Per-key meters: instead of one aggregate meter, a rule may meter each distinct key separately.
// Addresses may be masked to a prefix (per /24 of IPv4 sources, per /64 of IPv6 sources, ...).
enum class KeyKind : std::uint8_t {
  none,        // one aggregate meter for the rule
  src,         // source address
  dst,         // destination address
  src_dport,   // source address and destination port
  five_tuple,  // addresses, protocol, ports
};
// What a new key gets when the rule's table is full.
enum class KeyFallback : std::uint8_t {
  aggregate,       // the rule's aggregate meter (its `profile`), shared by all such keys
  default_action,  // the policy's default action, unmetered
  drop,
};
struct PerKey {
  KeyKind kind = KeyKind::none;
  std::uint8_t ipv4_prefix = 32;     // source/destination addresses masked to this length
  std::uint8_t ipv6_prefix = 128;
  std::uint64_t idle_timeout_ns = 60'000'000'000;  // a key idle this long starts again full
  std::uint32_t capacity = 1u << 20;              // live keys of the rule, both address families
  KeyFallback fallback = KeyFallback::aggregate;
  // Concurrent flows per key (issue 27, doc/engine.md "Flows per key"): 0 = no limit. A packet of a
  // new flow whose key has max_flows open is refused: red, and it opens nothing.
  std::uint32_t max_flows = 0;
  std::uint64_t flow_timeout_ns = 60'000'000'000;  // a flow idle this long is closed
  std::uint32_t flow_capacity = 65'536;            // open flows per worker (the flow table, made at load)
  Color flow_excess = Color::red;                  // a refused flow's packet's color (its action applies)
  friend bool operator==(const PerKey&, const PerKey&) = default;
};

struct Rule {
  std::string name;
  Match match;
  std::string profile;               // the aggregate meter's profile, or each key's with per_key
  PerKey per_key;
  // Hierarchy: a parent aggregate meter above the rule's meters. The child (per key or aggregate)
  // checks first; the parent then checks color-aware with the child's color as input; a packet the
  // child marks red skips the parent; a packet the parent marks red refunds nothing to the child. The
  // packet's color is the parent's.
  std::optional<std::string> parent;  // the parent's profile
  // A cluster meter (issue 26): a budget that every box naming the same profile as cluster shares,
  // leased in chunks (policer/cluster_lease.hpp). Checked last: a packet still green after the rule's
  // meters and its parent stays green only on the cluster's tokens. The profile is a 1R2C (CIR, CBS).
  std::optional<std::string> cluster;
  InputColor input = InputColor::blind;
  std::optional<std::string> pcp_map;   // InputColor::mapped: ColorMap names
  std::optional<std::string> dscp_map;
  Color input_default = Color::green;   // InputColor::mapped: for a packet no map applies to
  MeteredLength length;
  // By output color; defaults: green and yellow forwarded, red dropped.
  std::array<Action, 3> on_color{Action{}, Action{}, Action{true, std::nullopt, std::nullopt}};
  // Color-aware only: by (input, output) color pair, taking precedence over on_color.
  std::array<std::array<std::optional<Action>, 3>, 3> on_pair{};
  friend bool operator==(const Rule&, const Rule&) = default;
};

struct Policy {
  std::vector<ProfileDef> profiles;  // in order of definition
  std::vector<ColorMap> color_maps;  // in order of definition
  std::vector<Rule> rules;           // first match wins
  Action default_action;             // non-IP, malformed, and packets no rule matches
  friend bool operator==(const Policy&, const Policy&) = default;

  const ProfileDef* find_profile(std::string_view name) const;
  const ColorMap* find_color_map(std::string_view name) const;
  const Rule* find_rule(std::string_view name) const;
};

inline const ProfileDef* Policy::find_profile(std::string_view name) const {
  for (const auto& p : profiles)
    if (p.name == name) return &p;
  return nullptr;
}
inline const ColorMap* Policy::find_color_map(std::string_view name) const {
  for (const auto& m : color_maps)
    if (m.name == name) return &m;
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
