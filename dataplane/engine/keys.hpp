#pragma once
// Meter keys of per-key rules: the fields a rule's PerKey names, masked, in one fixed-size byte array
// that the rule's key table hashes and compares (one table per rule, both address families, so that
// a rule's capacity counts all its keys). Unused fields are zero.
//   address family 0 (4 or 6), protocol 1, src port 2..3, dst port 4..5, zero 6..7, then the addresses:
//   IPv4 src 8..11, dst 12..15, zero 16..39; IPv6 src 8..23, dst 24..39
// An IPv4 key lies in its first 16 bytes: its table hashes two words instead of five (secret_hash.hpp:
// the same hash, the zero words' share computed once), a third of a per-key packet's hashing.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/policy.hpp"

namespace tricolor::dataplane {

inline constexpr std::size_t kKeySize = 40;
using MeterKey = std::array<std::uint8_t, kKeySize>;

namespace key_layout {
inline constexpr std::size_t family = 0, protocol = 1, src_port = 2, dst_port = 4, src = 8;
inline constexpr std::size_t dst(bool ipv6) noexcept { return ipv6 ? 24 : 12; }
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
constexpr bool has_src(KeyKind k) { return k == KeyKind::src || k == KeyKind::src_dport || k == KeyKind::five_tuple; }
constexpr bool has_dst(KeyKind k) { return k == KeyKind::dst || k == KeyKind::five_tuple; }
}  // namespace detail

// A rule's key definition worked out once, when its set is built (the slow path's translation): the
// key's first word and an IPv4 key's address word as masks over every field, so that an IPv4 packet's
// key is two loads, two ORs and two ANDs. Built per packet from PerKey's kind and prefix it took 51
// instructions, 8% of a per-key packet's (callgrind, tricolor-bench-engine BM_engine_per_key/4096,
// issue 23).
struct KeyShape {
  KeyShape() = default;
  constexpr explicit KeyShape(const PerKey& per) noexcept : kind(per.kind), ipv6_prefix(per.ipv6_prefix) {
    const bool ports = per.kind == KeyKind::src_dport || per.kind == KeyKind::five_tuple;
    const bool five = per.kind == KeyKind::five_tuple;
    // family 0, protocol 1, src port 2..3, dst port 4..5 (key_layout).
    head_mask = 0xff | (five ? 0xffffffull << 8 : 0) | (ports ? 0xffffull << 32 : 0);
    // The prefix's mask in network byte order (a shift by 32 is undefined: /0 is no bits).
    const std::uint32_t mask =
        per.ipv4_prefix == 0 ? 0 : __builtin_bswap32(~std::uint32_t{0} << (32 - std::min<unsigned>(per.ipv4_prefix, 32)));
    ipv4_addresses_mask = (detail::has_src(per.kind) ? std::uint64_t{mask} : 0) |
                          (detail::has_dst(per.kind) ? std::uint64_t{mask} << 32 : 0);
  }
  std::uint64_t head_mask = 0;            // of the key's first word
  std::uint64_t ipv4_addresses_mask = 0;  // of an IPv4 key's second word: source low, destination high
  KeyKind kind = KeyKind::none;           // for IPv6 keys
  std::uint8_t ipv6_prefix = 128;
};

// An IPv4 key's two words (the rest of it is zero), from its fields as a frame holds them
// (`raw_ports`: both ports, source first, 0 without ports; `addresses`: source in the low half).
[[gnu::always_inline]] inline void ipv4_key_words(const KeyShape& shape, std::uint8_t protocol, std::uint32_t raw_ports,
                                                  std::uint64_t addresses, std::uint64_t* pair) noexcept {
  pair[0] = (std::uint64_t{4} | std::uint64_t{protocol} << 8 | std::uint64_t{raw_ports} << 16) & shape.head_mask;
  pair[1] = addresses & shape.ipv4_addresses_mask;
}
// The IPv4 key of those two words.
[[gnu::always_inline]] inline void store_ipv4_words(std::uint64_t first, std::uint64_t second, MeterKey& key) noexcept {
  static_assert(std::endian::native == std::endian::little, "the words below are little-endian");
  // Word by word: a local array of the five words copied whole was also stored on the stack, dead
  // (GCC 12), three stores a packet.
  std::memcpy(key.data(), &first, sizeof first);
  std::memcpy(key.data() + sizeof first, &second, sizeof second);
  std::memset(key.data() + 2 * sizeof first, 0, kKeySize - 2 * sizeof first);
}

// An IPv4 key from its fields as a frame holds them, stored as its two words and the zero tail; the
// words into `pair`. make_key's IPv4 keys.
[[gnu::always_inline]] inline void store_ipv4_key(const KeyShape& shape, std::uint8_t protocol, std::uint32_t raw_ports,
                                                  std::uint64_t addresses, MeterKey& key, std::uint64_t* pair) noexcept {
  ipv4_key_words(shape, protocol, raw_ports, addresses, pair);
  store_ipv4_words(pair[0], pair[1], key);
}

// The key of a parsed IP packet for a per-key rule. An IPv4 key is built as its two words, each
// stored whole: a key built by narrower stores and read back as words by the hash stalls on store
// forwarding (secret_hash.hpp). Always inlined: with two callers on the packet path (the per-key loop
// and max-flows' flow key) GCC made it a call, 4% of tricolord's worker samples (issue 23).
// `pair`, if given: the key's first two words (native order), all that is not zero of an IPv4 key;
// returns whether the key is IPv4, so that a caller may hash it from registers (SecretHash::of_pair).
[[gnu::always_inline]] inline bool make_key(const KeyShape& shape, const Parsed& p, MeterKey& key,
                                            std::uint64_t* pair) noexcept {
  using namespace key_layout;
  static_assert(std::endian::native == std::endian::little, "the words below are little-endian");
  const bool ipv6 = p.l3 == L3::ipv6;
  std::uint32_t ports;  // both in one load, back to the frame's byte order
  std::memcpy(&ports, reinterpret_cast<const unsigned char*>(&p) + offsetof(Parsed, src_port), sizeof ports);
  const std::uint64_t head = (std::uint64_t{ipv6 ? 6u : 4u} | std::uint64_t{p.protocol} << 8 |
                              std::uint64_t{swap_port_bytes(ports)} << 16) &
                             shape.head_mask;
  if (!ipv6) {
    std::uint32_t s, d;
    std::memcpy(&s, p.src.data(), 4);
    std::memcpy(&d, p.dst.data(), 4);
    std::uint64_t words[2];
    store_ipv4_key(shape, p.protocol, swap_port_bytes(ports), std::uint64_t{s} | std::uint64_t{d} << 32, key,
                   pair != nullptr ? pair : words);
    return true;
  }
  key.fill(0);
  std::memcpy(key.data(), &head, sizeof head);
  if (detail::has_src(shape.kind)) detail::copy_masked(key.data() + src, p.src.data(), 16, shape.ipv6_prefix);
  if (detail::has_dst(shape.kind)) detail::copy_masked(key.data() + dst(true), p.dst.data(), 16, shape.ipv6_prefix);
  if (pair != nullptr) std::memcpy(pair, key.data(), 2 * sizeof *pair);
  return false;
}
[[gnu::always_inline]] inline void make_key(const KeyShape& shape, const Parsed& p, MeterKey& key) noexcept {
  make_key(shape, p, key, nullptr);
}
// The same from the rule's definition (the slow path, tests, tricolor-replay's key list).
[[gnu::always_inline]] inline void make_key(const PerKey& per, const Parsed& p, MeterKey& key) noexcept {
  make_key(KeyShape(per), p, key);
}

// A flow of a max-flows rule (flow_table.hpp): its 5-tuple, whole addresses, in the key layout.
inline constexpr PerKey kFlowKey{.kind = KeyKind::five_tuple};

// The meter key of a rule's key definition for a flow's 5-tuple (a flow table's sweep closing a flow
// finds its key this way: the flow's fields are a superset of any key's).
inline void key_of_flow(const PerKey& per, const MeterKey& flow, MeterKey& key) noexcept {
  using namespace key_layout;
  Parsed p;
  p.l3 = flow[family] == 6 ? L3::ipv6 : L3::ipv4;
  p.protocol = flow[protocol];
  p.src_port = static_cast<std::uint16_t>(flow[src_port] << 8 | flow[src_port + 1]);
  p.dst_port = static_cast<std::uint16_t>(flow[dst_port] << 8 | flow[dst_port + 1]);
  const bool ipv6 = p.l3 == L3::ipv6;
  std::memcpy(p.src.data(), flow.data() + src, ipv6 ? 16 : 4);
  std::memcpy(p.dst.data(), flow.data() + dst(ipv6), ipv6 ? 16 : 4);
  make_key(per, p, key);
}

// The order an operator reads keys in (ties of `key list`): family, source, destination, source port,
// destination port, protocol, whatever the byte layout.
inline bool key_less(const MeterKey& a, const MeterKey& b) noexcept {
  using namespace key_layout;
  if (a[family] != b[family]) return a[family] < b[family];
  const bool ipv6 = a[family] == 6;
  const std::size_t bytes = ipv6 ? 16 : 4;
  if (const int c = std::memcmp(a.data() + src, b.data() + src, bytes); c != 0) return c < 0;
  if (const int c = std::memcmp(a.data() + dst(ipv6), b.data() + dst(ipv6), bytes); c != 0) return c < 0;
  if (const int c = std::memcmp(a.data() + src_port, b.data() + src_port, 4); c != 0) return c < 0;  // then dst port
  return a[protocol] < b[protocol];
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
    case KeyKind::dst: return address(key.data() + dst(ipv6));
    case KeyKind::src_dport: return address(key.data() + src) + ":" + port_at(dst_port);
    case KeyKind::five_tuple: {
      const std::uint8_t proto = key[protocol];
      const std::string name = proto == ip_protocol::tcp ? "tcp" : proto == ip_protocol::udp ? "udp"
                             : proto == ip_protocol::sctp ? "sctp" : proto == ip_protocol::icmp ? "icmp"
                             : proto == ip_protocol::icmpv6 ? "icmpv6" : std::to_string(proto);
      return name + " " + address(key.data() + src) + ":" + port_at(src_port) + ">" + address(key.data() + dst(ipv6)) + ":" +
             port_at(dst_port);
    }
    case KeyKind::none: break;
  }
  return "-";
}

}  // namespace tricolor::dataplane
