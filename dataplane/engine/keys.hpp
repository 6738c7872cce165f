#pragma once
// Meter keys of per-key rules: the fields a rule's PerKey names, masked, in one fixed-size byte array
// that the rule's key table hashes and compares (one table per rule, both address families, so that
// a rule's capacity counts all its keys). Unused fields are zero.
//   address family 0 (4 or 6), src 1..16, dst 17..32 (IPv4 in the first 4 bytes of each),
//   src port 33..34, dst port 35..36, protocol 37, zero 38..39
#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/policy.hpp"

namespace tricolor::dataplane {

inline constexpr std::size_t kKeySize = 40;
using MeterKey = std::array<std::uint8_t, kKeySize>;

namespace key_layout {
inline constexpr std::size_t family = 0, src = 1, dst = 17, src_port = 33, dst_port = 35, protocol = 37;
}

namespace detail {
inline void copy_masked(std::uint8_t* out, const std::uint8_t* address, unsigned bytes, unsigned prefix) {
  if (prefix >= 8 * bytes) {  // the whole address (the default): one copy, not a mask per byte
    std::memcpy(out, address, bytes);
    return;
  }
  for (unsigned i = 0; i < bytes; ++i) {
    const unsigned bits = prefix >= 8 * (i + 1) ? 8 : prefix > 8 * i ? prefix - 8 * i : 0;
    out[i] = static_cast<std::uint8_t>(address[i] & static_cast<std::uint8_t>(0xff00u >> bits));
  }
}
inline void store16(std::uint8_t* out, std::uint16_t v) {
  out[0] = static_cast<std::uint8_t>(v >> 8);
  out[1] = static_cast<std::uint8_t>(v);
}
inline bool has_src(KeyKind k) { return k == KeyKind::src || k == KeyKind::src_dport || k == KeyKind::five_tuple; }
inline bool has_dst(KeyKind k) { return k == KeyKind::dst || k == KeyKind::five_tuple; }
}  // namespace detail

// The key of a parsed IP packet for a per-key rule.
inline void make_key(const PerKey& per, const Parsed& p, MeterKey& key) noexcept {
  using namespace key_layout;
  key.fill(0);
  const bool ipv6 = p.l3 == L3::ipv6;
  const unsigned bytes = ipv6 ? 16 : 4, prefix = ipv6 ? per.ipv6_prefix : per.ipv4_prefix;
  key[family] = ipv6 ? 6 : 4;
  if (detail::has_src(per.kind)) detail::copy_masked(key.data() + src, p.src.data(), bytes, prefix);
  if (detail::has_dst(per.kind)) detail::copy_masked(key.data() + dst, p.dst.data(), bytes, prefix);
  if (per.kind == KeyKind::five_tuple) {
    detail::store16(key.data() + src_port, p.src_port);
    key[protocol] = p.protocol;
  }
  if (per.kind == KeyKind::src_dport || per.kind == KeyKind::five_tuple) detail::store16(key.data() + dst_port, p.dst_port);
}

// The key as an operator reads it: "10.1.2.0/24", "2001:db8::1", "10.0.0.1:443",
// "udp 10.0.0.1:1000>10.0.0.2:53" (IPv6 addresses with ports in brackets).
inline std::string key_text(const PerKey& per, const MeterKey& key) {
  using namespace key_layout;
  const bool ipv6 = key[family] == 6;
  const unsigned address_bytes = ipv6 ? 16 : 4;
  const unsigned prefix = ipv6 ? per.ipv6_prefix : per.ipv4_prefix;
  const bool ports = per.kind == KeyKind::src_dport || per.kind == KeyKind::five_tuple;
  auto address = [&](const std::uint8_t* a) {
    char text[INET6_ADDRSTRLEN];
    inet_ntop(ipv6 ? AF_INET6 : AF_INET, a, text, sizeof text);
    std::string s = text;
    if (prefix < address_bytes * 8) s += "/" + std::to_string(prefix);
    return ipv6 && ports ? "[" + s + "]" : s;
  };
  auto port_at = [&](std::size_t offset) { return std::to_string((key[offset] << 8) | key[offset + 1]); };
  switch (per.kind) {
    case KeyKind::src: return address(key.data() + src);
    case KeyKind::dst: return address(key.data() + dst);
    case KeyKind::src_dport: return address(key.data() + src) + ":" + port_at(dst_port);
    case KeyKind::five_tuple: {
      const std::uint8_t proto = key[protocol];
      const std::string name = proto == ip_protocol::tcp ? "tcp" : proto == ip_protocol::udp ? "udp"
                             : proto == ip_protocol::sctp ? "sctp" : proto == ip_protocol::icmp ? "icmp"
                             : proto == ip_protocol::icmpv6 ? "icmpv6" : std::to_string(proto);
      return name + " " + address(key.data() + src) + ":" + port_at(src_port) + ">" + address(key.data() + dst) + ":" +
             port_at(dst_port);
    }
    case KeyKind::none: break;
  }
  return "-";
}

}  // namespace tricolor::dataplane
