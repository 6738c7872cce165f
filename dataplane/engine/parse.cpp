// One forward pass over the frame: Ethernet and its tags, then IPv4 or IPv6 (extension headers
// skipped), then the L4 ports. Every read is preceded by a bounds check against the readable end (never
// beyond view.captured), fields are loaded without assuming alignment (memcpy), and nothing
// allocates, throws or dispatches virtually: this runs for every packet in the daemon.
#include "dataplane/engine/parse.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace tricolor::dataplane {
namespace {

// Ethernet II and 802.1Q / 802.1ad tags.
constexpr std::uint32_t kEtherTypeOffset = 12;  // after the destination and source MACs
constexpr std::uint32_t kEtherTypeLength = 2;
constexpr std::uint32_t kEthernetHeaderLength = kEtherTypeOffset + kEtherTypeLength;
constexpr std::uint32_t kTpidLength = 2;
constexpr std::uint32_t kVlanTagLength = 4;  // TPID and TCI
constexpr std::uint8_t kMaxFrameVlans = 2;   // QinQ
constexpr std::uint16_t kVlanIdMask = 0x0fff;
constexpr unsigned kPcpShift = 13;  // PCP: the top 3 bits of the TCI
constexpr std::uint16_t kTpid8021q = 0x8100;
constexpr std::uint16_t kTpid8021ad = 0x88a8;
constexpr std::uint16_t kTpidLegacyQinQ = 0x9100;
constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
constexpr std::uint16_t kEtherTypeIpv6 = 0x86dd;

// DSCP and ECN share the IPv4 TOS byte and the IPv6 traffic class: DSCP in the top 6 bits.
constexpr unsigned kEcnBits = 2;
constexpr std::uint8_t kEcnMask = 0x03;

// IPv4.
constexpr std::uint8_t kIpv4Version = 4;
constexpr std::uint32_t kIpv4MinHeaderLength = 20;
constexpr std::uint32_t kIpv4HeaderLengthUnit = 4;  // IHL counts 32-bit words
constexpr std::uint8_t kIpv4IhlMask = 0x0f;
constexpr std::uint32_t kIpv4TosOffset = 1;
constexpr std::uint32_t kIpv4TotalLengthOffset = 2;
constexpr std::uint32_t kIpv4FragmentOffset = 6;  // flags and fragment offset
constexpr std::uint32_t kIpv4ProtocolOffset = 9;
constexpr std::uint32_t kIpv4SourceOffset = 12;
constexpr std::uint32_t kIpv4DestinationOffset = 16;
constexpr std::size_t kIpv4AddressLength = 4;
constexpr std::uint16_t kIpv4MoreFragments = 0x2000;
constexpr std::uint16_t kIpv4FragmentOffsetMask = 0x1fff;

// IPv6.
constexpr std::uint8_t kIpv6Version = 6;
constexpr std::uint32_t kIpv6HeaderLength = 40;
constexpr std::uint32_t kIpv6PayloadLengthOffset = 4;
constexpr std::uint32_t kIpv6NextHeaderOffset = 6;
constexpr std::uint32_t kIpv6SourceOffset = 8;
constexpr std::uint32_t kIpv6DestinationOffset = 24;
constexpr std::size_t kIpv6AddressLength = 16;
constexpr std::uint8_t kLowNibble = 0x0f;
constexpr unsigned kNibbleBits = 4;
constexpr std::uint32_t kMaxL3Length = 0xffff;  // what Parsed::l3_length can hold

// IPv6 extension headers we skip. ESP (50) and "no next header" (59) end the chain like any upper layer.
constexpr std::uint8_t kHopByHop = 0;
constexpr std::uint8_t kRouting = 43;
constexpr std::uint8_t kFragment = 44;
constexpr std::uint8_t kAuthentication = 51;
constexpr std::uint8_t kDestinationOptions = 60;
constexpr unsigned kMaxIpv6ExtensionHeaders = 8;
constexpr std::uint32_t kExtensionPrefixLength = 2;  // next header and length: enough to size it
constexpr std::uint32_t kExtensionLengthOffset = 1;
constexpr std::uint32_t kExtensionLengthUnit = 8;    // generic: (length + 1) * 8 bytes
constexpr std::uint32_t kAuthenticationLengthUnit = 4;  // AH: (length + 2) * 4 bytes (RFC 4302)
constexpr std::uint32_t kAuthenticationLengthBias = 2;
constexpr std::uint32_t kFragmentHeaderLength = 8;
constexpr std::uint32_t kFragmentOffsetFlagsOffset = 2;
constexpr std::uint16_t kIpv6FragmentOffsetMask = 0xfff8;
constexpr std::uint16_t kIpv6MoreFragments = 0x0001;

// L4: TCP, UDP and SCTP all start with the source and destination ports.
constexpr std::uint32_t kL4PortsLength = 4;
constexpr std::uint32_t kDestinationPortOffset = 2;

using parse_detail::has_ports;
using parse_detail::load_be16;

inline bool is_vlan_tpid(std::uint16_t ether_type) noexcept {
  return ether_type == kTpid8021q || ether_type == kTpid8021ad || ether_type == kTpidLegacyQinQ;
}

inline bool is_ipv6_extension(std::uint8_t next_header) noexcept {
  return next_header == kHopByHop || next_header == kRouting || next_header == kFragment ||
         next_header == kAuthentication || next_header == kDestinationOptions;
}

inline void set_traffic_class(Parsed& out, std::uint8_t traffic_class) noexcept {
  out.dscp = static_cast<std::uint8_t>(traffic_class >> kEcnBits);
  out.ecn = static_cast<std::uint8_t>(traffic_class & kEcnMask);
}

// Ports of a TCP, UDP or SCTP header at l4_offset. They must lie before readable_end, which is both
// within the capture and within the datagram (an Ethernet pad after a short datagram holds no ports).
ParseError parse_ports(const std::uint8_t* frame, std::uint32_t readable_end, std::uint32_t l4_offset,
                       Parsed& out) noexcept {
  if (!has_ports(out.protocol)) return ParseError::none;
  if (l4_offset + kL4PortsLength > readable_end) return ParseError::truncated_l4;
  out.src_port = load_be16(frame + l4_offset);
  out.dst_port = load_be16(frame + l4_offset + kDestinationPortOffset);
  // TCP flags (flows per key): read when captured; a header cut before them is no error (ports
  // suffice to classify), the packet then has no flags.
  constexpr std::uint32_t kTcpFlagsOffset = 13;
  if (out.protocol == ip_protocol::tcp && l4_offset + kTcpFlagsOffset < readable_end)
    out.tcp_flags = frame[l4_offset + kTcpFlagsOffset];
  return ParseError::none;
}

// The caller guarantees captured >= out.l3_offset.
ParseError parse_ipv4(const std::uint8_t* frame, std::uint32_t captured, std::uint32_t wire_l3_bytes,
                      Parsed& out) noexcept {
  const std::uint32_t l3_offset = out.l3_offset;
  const std::uint32_t captured_l3_bytes = captured - l3_offset;
  if (captured_l3_bytes < kIpv4MinHeaderLength) return ParseError::truncated_ipv4;
  const std::uint8_t* ip = frame + l3_offset;
  if ((ip[0] >> kNibbleBits) != kIpv4Version) return ParseError::bad_ipv4_version;
  const std::uint32_t header_length = (ip[0] & kIpv4IhlMask) * kIpv4HeaderLengthUnit;
  if (header_length < kIpv4MinHeaderLength) return ParseError::bad_ipv4_header_length;
  if (captured_l3_bytes < header_length) return ParseError::truncated_ipv4;

  set_traffic_class(out, ip[kIpv4TosOffset]);
  out.protocol = ip[kIpv4ProtocolOffset];
  std::memcpy(out.src.data(), ip + kIpv4SourceOffset, kIpv4AddressLength);
  std::memcpy(out.dst.data(), ip + kIpv4DestinationOffset, kIpv4AddressLength);

  const std::uint32_t total_length = load_be16(ip + kIpv4TotalLengthOffset);
  if (total_length < header_length || total_length > wire_l3_bytes) return ParseError::bad_ipv4_total_length;
  out.l3_length = static_cast<std::uint16_t>(total_length);

  const std::uint16_t fragment_field = load_be16(ip + kIpv4FragmentOffset);
  if ((fragment_field & (kIpv4MoreFragments | kIpv4FragmentOffsetMask)) != 0) {
    out.fragment = true;  // every fragment, first or later, meets the same meter: no ports
    return ParseError::none;
  }
  const std::uint32_t readable_end = std::min(captured, l3_offset + total_length);
  return parse_ports(frame, readable_end, l3_offset + header_length, out);
}

// The caller guarantees captured >= out.l3_offset.
ParseError parse_ipv6(const std::uint8_t* frame, std::uint32_t captured, std::uint32_t wire_l3_bytes,
                      Parsed& out) noexcept {
  const std::uint32_t l3_offset = out.l3_offset;
  if (captured - l3_offset < kIpv6HeaderLength) return ParseError::truncated_ipv6;
  const std::uint8_t* ip = frame + l3_offset;
  if ((ip[0] >> kNibbleBits) != kIpv6Version) return ParseError::bad_ipv6_version;

  // The traffic class straddles the first two bytes: low nibble of byte 0, high nibble of byte 1.
  set_traffic_class(out, static_cast<std::uint8_t>(((ip[0] & kLowNibble) << kNibbleBits) | (ip[1] >> kNibbleBits)));
  std::memcpy(out.src.data(), ip + kIpv6SourceOffset, kIpv6AddressLength);
  std::memcpy(out.dst.data(), ip + kIpv6DestinationOffset, kIpv6AddressLength);

  const std::uint32_t datagram_length = kIpv6HeaderLength + load_be16(ip + kIpv6PayloadLengthOffset);
  if (datagram_length > wire_l3_bytes) return ParseError::bad_ipv6_payload_length;
  // Only a coalesced (LRO) packet can exceed 65535 bytes; Parsed holds 16 bits, so it saturates.
  out.l3_length = static_cast<std::uint16_t>(std::min(datagram_length, kMaxL3Length));

  // Extension headers must lie within both the capture and the datagram's payload.
  const std::uint32_t readable_end = std::min(captured, l3_offset + datagram_length);
  std::uint8_t next_header = ip[kIpv6NextHeaderOffset];
  std::uint32_t cursor = l3_offset + kIpv6HeaderLength;
  for (unsigned headers = 0; is_ipv6_extension(next_header); ++headers) {
    if (headers == kMaxIpv6ExtensionHeaders) return ParseError::ipv6_extension_chain_too_long;
    if (cursor + kExtensionPrefixLength > readable_end) return ParseError::truncated_ipv6_extension;
    const std::uint8_t* extension = frame + cursor;
    const std::uint32_t length_field = extension[kExtensionLengthOffset];
    std::uint32_t length = (length_field + 1) * kExtensionLengthUnit;
    if (next_header == kAuthentication) length = (length_field + kAuthenticationLengthBias) * kAuthenticationLengthUnit;
    if (next_header == kFragment) length = kFragmentHeaderLength;  // its second byte is reserved
    if (cursor + length > readable_end) return ParseError::truncated_ipv6_extension;
    if (next_header == kFragment) {
      const std::uint16_t offset_flags = load_be16(extension + kFragmentOffsetFlagsOffset);
      // An atomic fragment (offset 0, no more fragments) is a whole datagram: keep parsing.
      if ((offset_flags & (kIpv6FragmentOffsetMask | kIpv6MoreFragments)) != 0) {
        out.fragment = true;
        out.protocol = extension[0];  // the same for every fragment of the datagram
        return ParseError::none;
      }
    }
    next_header = extension[0];
    cursor += length;
  }
  out.protocol = next_header;
  return parse_ports(frame, readable_end, cursor, out);
}

ParseError parse_frame(const PacketView& view, Parsed& out) noexcept {
  const std::uint8_t* frame = view.data;
  const std::uint32_t captured = view.captured;
  if (view.has_stripped_vlan) {  // the NIC's tag was the outermost
    out.has_vlan = true;
    out.vlan_id = view.stripped_tci & kVlanIdMask;
    out.pcp = static_cast<std::uint8_t>(view.stripped_tci >> kPcpShift);
  }
  if (captured < kEthernetHeaderLength) return ParseError::truncated_ethernet;

  std::uint32_t type_offset = kEtherTypeOffset;
  std::uint16_t ether_type = load_be16(frame + type_offset);
  while (ether_type != kEtherTypeIpv4 && is_vlan_tpid(ether_type)) {  // untagged IPv4, the usual: one test
    if (out.frame_vlans == kMaxFrameVlans) return ParseError::too_many_vlans;
    const std::uint32_t tci_offset = type_offset + kTpidLength;
    const std::uint32_t inner_type_offset = type_offset + kVlanTagLength;
    if (inner_type_offset + kEtherTypeLength > captured) return ParseError::truncated_vlan;
    if (out.frame_vlans == 0) {
      out.outer_tci_offset = static_cast<std::uint16_t>(tci_offset);
      if (!view.has_stripped_vlan) {
        const std::uint16_t tci = load_be16(frame + tci_offset);
        out.vlan_id = tci & kVlanIdMask;
        out.pcp = static_cast<std::uint8_t>(tci >> kPcpShift);
      }
      out.has_vlan = true;
    }
    ++out.frame_vlans;
    type_offset = inner_type_offset;
    ether_type = load_be16(frame + type_offset);
  }

  const std::uint32_t l3_offset = type_offset + kEtherTypeLength;
  out.l3_offset = static_cast<std::uint16_t>(l3_offset);
  const std::uint32_t wire_l3_bytes = view.wire_length > l3_offset ? view.wire_length - l3_offset : 0;
  switch (ether_type) {
    case kEtherTypeIpv4:
      out.l3 = L3::ipv4;
      return parse_ipv4(frame, captured, wire_l3_bytes, out);
    case kEtherTypeIpv6:
      out.l3 = L3::ipv6;
      return parse_ipv6(frame, captured, wire_l3_bytes, out);
    default:
      return ParseError::none;  // ARP, LACP, ...: not IP, nothing more to find
  }
}

}  // namespace

Parsed parse_any(const PacketView& view) noexcept {
  Parsed parsed;
  parsed.error = parse_frame(view, parsed);
  return parsed;
}

std::string_view to_string(ParseError error) noexcept {
  switch (error) {
    case ParseError::none: return "none";
    case ParseError::truncated_ethernet: return "truncated_ethernet";
    case ParseError::truncated_vlan: return "truncated_vlan";
    case ParseError::too_many_vlans: return "too_many_vlans";
    case ParseError::truncated_ipv4: return "truncated_ipv4";
    case ParseError::bad_ipv4_version: return "bad_ipv4_version";
    case ParseError::bad_ipv4_header_length: return "bad_ipv4_header_length";
    case ParseError::bad_ipv4_total_length: return "bad_ipv4_total_length";
    case ParseError::truncated_ipv6: return "truncated_ipv6";
    case ParseError::bad_ipv6_version: return "bad_ipv6_version";
    case ParseError::bad_ipv6_payload_length: return "bad_ipv6_payload_length";
    case ParseError::truncated_ipv6_extension: return "truncated_ipv6_extension";
    case ParseError::ipv6_extension_chain_too_long: return "ipv6_extension_chain_too_long";
    case ParseError::truncated_l4: return "truncated_l4";
    case ParseError::count_: break;
  }
  return "unknown";
}

}  // namespace tricolor::dataplane
