#pragma once
// Ethernet, 802.1Q and QinQ (0x8100, 0x88a8, and 0x9100 outer tags), IPv4 with options, IPv6 with
// extension headers skipped (hop-by-hop, routing, fragment, destination options, AH; ESP and "no next
// header" end the chain), TCP, UDP, SCTP, ICMP, ICMPv6. Every fragment of a datagram, first or later,
// is reported with ports 0 so that all fragments meet the same meter. Reads only within
// view.captured bytes whatever the frame says; a frame it cannot parse gets a ParseError.
//
// The usual frame, untagged Ethernet carrying IPv4 without options, is parsed inline (parse_plain_ipv4);
// any other, or one of those with something to report, out of line (parse_any). Both give the same
// Parsed for a frame the first accepts (tests/dataplane/engine/parse_test.cpp, tests/fuzz/fuzz_parse.cpp).
// The usual frame's fields can also be read without a Parsed (PlainIpv4: a worker's plain burst).
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstring>

#include "dataplane/engine/packet.hpp"

namespace tricolor::dataplane {

// Any frame: the general parser.
Parsed parse_any(const PacketView& view) noexcept;

namespace parse_detail {
// One unaligned 16-bit load and a byte swap (two instructions; two byte loads, a shift and an OR were
// five, issue 23).
inline std::uint16_t load_be16(const std::uint8_t* p) noexcept {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap16(v);
  return v;
}

// The same 16 bits as they lie in the frame, and a constant in that order: a test of a field against a
// constant needs no swap.
inline std::uint16_t load_raw16(const std::uint8_t* p) noexcept {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
constexpr std::uint16_t network16(std::uint16_t host) noexcept {
  return std::endian::native == std::endian::little ? static_cast<std::uint16_t>(host << 8 | host >> 8) : host;
}

// TCP, UDP and SCTP, as a table of 256 flags: one load, no comparison (a 256-bit set's shift and
// mask cost six instructions more a packet).
inline constexpr std::array<bool, 256> kPorted = [] {
  std::array<bool, 256> ported{};
  ported[ip_protocol::tcp] = ported[ip_protocol::udp] = ported[ip_protocol::sctp] = true;
  return ported;
}();
inline bool has_ports(std::uint8_t protocol) noexcept { return kPorted[protocol]; }
}  // namespace parse_detail

// The fields of a plain IPv4 frame, read where the frame holds them: an untagged Ethernet frame (no
// tag stripped either) carrying IPv4 with a 20-byte header, its total length within the wire's, and,
// unless a fragment or a protocol without ports, its ports within both the capture and the datagram.
// What parse_plain_ipv4 stores into a Parsed, and all a burst under a set of one IPv4 entry reads of
// its frames when it builds no Parsed (worker.cpp, the plain burst): one test of a frame, two users.
struct PlainIpv4 {
  static constexpr std::uint32_t kL3Offset = 14;              // after the MACs and the EtherType
  static constexpr std::uint32_t kL4Offset = kL3Offset + 20;  // after a header of IHL 5
  static constexpr std::uint32_t kPortsEnd = kL4Offset + 4;   // source and destination ports

  const std::uint8_t* ip;
  std::uint32_t total_length;
  std::uint32_t readable_end;  // of the frame: within the capture and the datagram
  std::uint8_t protocol;
  bool fragment;               // any fragment: its ports are not read
  bool ports;                  // not a fragment, and a protocol with ports (TCP, UDP, SCTP)

  // Source and destination as one word, source in the low half, each in the frame's byte order.
  [[gnu::always_inline]] std::uint64_t addresses() const noexcept {
    std::uint64_t both;
    std::memcpy(&both, ip + 12, sizeof both);
    return both;
  }
  // Both ports as the frame holds them, source first; 0 without ports. The load is within the capture
  // whatever the protocol (plain_ipv4 tested kPortsEnd first), so that no branch is taken.
  [[gnu::always_inline]] std::uint32_t raw_ports() const noexcept {
    std::uint32_t both;
    std::memcpy(&both, ip + (kL4Offset - kL3Offset), sizeof both);
    return both & (std::uint32_t{0} - std::uint32_t{ports});
  }
};

// Whether the frame is plain IPv4 (PlainIpv4), and if so its fields into `out`.
[[gnu::always_inline]] inline bool plain_ipv4(const PacketView& view, PlainIpv4& out) noexcept {
  using parse_detail::load_be16;
  using parse_detail::load_raw16;
  using parse_detail::network16;
  constexpr std::uint32_t kL3Offset = PlainIpv4::kL3Offset;
  constexpr std::uint32_t kL4Offset = PlainIpv4::kL4Offset;
  constexpr std::uint32_t kPortsEnd = PlainIpv4::kPortsEnd;
  constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
  constexpr std::uint8_t kVersion4Ihl5 = 0x45;
  constexpr std::uint16_t kFragmentBits = 0x3fff;       // more fragments, and the fragment offset
  if (view.has_stripped_vlan || view.captured < kPortsEnd) return false;
  const std::uint8_t* frame = view.data;
  const std::uint8_t* ip = frame + kL3Offset;
  if (load_raw16(frame + kL3Offset - 2) != network16(kEtherTypeIpv4) || ip[0] != kVersion4Ihl5) return false;
  const std::uint32_t total_length = load_be16(ip + 2);  // at most 65535: the sums below do not wrap
  if (total_length < kL4Offset - kL3Offset || kL3Offset + total_length > view.wire_length) return false;
  const std::uint8_t protocol = ip[9];
  const bool fragment = (load_raw16(ip + 6) & network16(kFragmentBits)) != 0;
  const bool ports = !fragment && parse_detail::has_ports(protocol);
  const std::uint32_t readable_end = std::min(view.captured, kL3Offset + total_length);
  // The ports end within the datagram: within the capture too, which holds kPortsEnd bytes (tested
  // above). truncated_l4 otherwise: parse_any says so. The length first: a frame that needs no ports
  // (an aggregate rule's) then looks its protocol up only when the datagram is that short.
  if (kL3Offset + total_length < kPortsEnd && ports) return false;
  out.ip = ip;
  out.total_length = total_length;
  out.readable_end = readable_end;
  out.protocol = protocol;
  out.fragment = fragment;
  out.ports = ports;
  return true;
}

// A plain IPv4 frame (PlainIpv4): its fields into `out`, which must be a fresh Parsed, and true. Any
// other frame: false, `out` untouched. Half of parse_any's instructions for the usual frame (issue 23).
[[gnu::always_inline]] inline bool parse_plain_ipv4(const PacketView& view, Parsed& out) noexcept {
  constexpr std::uint32_t kTcpFlagsAt = PlainIpv4::kL4Offset + 13;
  PlainIpv4 plain;
  if (!plain_ipv4(view, plain)) return false;
  const std::uint8_t* ip = plain.ip;
  out.l3 = L3::ipv4;
  out.l3_offset = PlainIpv4::kL3Offset;
  out.l3_length = static_cast<std::uint16_t>(plain.total_length);
  out.dscp = static_cast<std::uint8_t>(ip[1] >> 2);
  out.ecn = static_cast<std::uint8_t>(ip[1] & 3);
  out.protocol = plain.protocol;
  out.fragment = plain.fragment;
  std::memcpy(out.src.data(), ip + 12, 4);
  std::memcpy(out.dst.data(), ip + 16, 4);
  if (plain.ports) {
    const std::uint32_t both = swap_port_bytes(plain.raw_ports());  // both ports in one load
    std::memcpy(reinterpret_cast<unsigned char*>(&out) + offsetof(Parsed, src_port), &both, sizeof both);
    if (plain.protocol == ip_protocol::tcp && kTcpFlagsAt < plain.readable_end) out.tcp_flags = view.data[kTcpFlagsAt];
  }
  return true;
}

// Any frame; the usual one inline.
[[gnu::always_inline]] inline Parsed parse(const PacketView& view) noexcept {
  Parsed parsed;
  if (!parse_plain_ipv4(view, parsed)) parsed = parse_any(view);
  return parsed;
}

}  // namespace tricolor::dataplane
