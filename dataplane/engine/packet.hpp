#pragma once
// The packet as the policy engine sees it: bytes plus a few facts from the receive path. The daemon
// fills views from mbufs without copying; tricolor-replay fills them from capture records. Parsing,
// classification, metering and actions only ever see views, so both run the very same code.
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tricolor::dataplane {

struct PacketView {
  std::uint8_t* data = nullptr;       // the frame from its Ethernet header; writable (remarks)
  std::uint32_t captured = 0;         // bytes readable at `data` (pcap caplen; the mbuf's first segment)
  std::uint32_t wire_length = 0;      // frame length on the wire, FCS excluded (pcap len; mbuf pkt_len)
  std::uint64_t arrival = 0;          // ticks of the table's clock (one TSC read per burst in the daemon)
  std::uint16_t port = 0;             // ingress port (pcapng: interface id)
  std::uint16_t stripped_tci = 0;     // VLAN TCI the NIC removed from the frame, if has_stripped_vlan
  bool has_stripped_vlan = false;
};

// Why a frame could not be parsed. Such frames are counted by reason and take the default action.
enum class ParseError : std::uint8_t {
  none,
  truncated_ethernet,        // shorter than an Ethernet header
  truncated_vlan,            // a VLAN tag cut short
  too_many_vlans,            // more than two tags in the frame (QinQ is two)
  truncated_ipv4,            // shorter than the IPv4 header it announces
  bad_ipv4_version,          // EtherType IPv4 but version field not 4
  bad_ipv4_header_length,    // IHL below 5
  bad_ipv4_total_length,     // total length below the header length, or beyond the wire length
  truncated_ipv6,            // shorter than the fixed IPv6 header
  bad_ipv6_version,          // EtherType IPv6 but version field not 6
  bad_ipv6_payload_length,   // payload length beyond the wire length
  truncated_ipv6_extension,  // an extension header cut short
  ipv6_extension_chain_too_long,  // more than 8 extension headers
  truncated_l4,              // a first fragment / unfragmented packet too short for its ports
  count_,
};
inline constexpr std::size_t kParseErrors = static_cast<std::size_t>(ParseError::count_);
std::string_view to_string(ParseError error) noexcept;

enum class L3 : std::uint8_t { none, ipv4, ipv6 };  // none: not IP (ARP, LACP, ...)

namespace ip_protocol {
inline constexpr std::uint8_t icmp = 1, tcp = 6, udp = 17, icmpv6 = 58, sctp = 132;
}

// What the parser found. Offsets are from the start of the frame. Addresses are in network order;
// an IPv4 address sits in the first 4 bytes.
struct Parsed {
  ParseError error = ParseError::none;
  L3 l3 = L3::none;
  bool has_vlan = false;              // a tag in the frame or a stripped one
  std::uint8_t frame_vlans = 0;       // tags in the frame (0..2), a stripped one not counted
  std::uint16_t vlan_id = 0;          // the outermost tag's VLAN id (the stripped tag's if any)
  std::uint8_t pcp = 0;               // the outermost tag's priority code point
  std::uint8_t tcp_flags = 0;         // TCP (unfragmented or first fragment): FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10
  std::uint16_t outer_tci_offset = 0; // offset of the outermost in-frame tag's TCI; 0 when none
  std::uint16_t l3_offset = 0;
  std::uint16_t l3_length = 0;        // IPv4 total length; IPv6 40 + payload length
  std::uint8_t protocol = 0;          // IPv4 protocol; IPv6 upper-layer next header
  std::uint8_t dscp = 0;
  std::uint8_t ecn = 0;
  bool fragment = false;              // any fragment of a datagram (first or later): ports are 0
  std::uint16_t src_port = 0;         // TCP/UDP/SCTP ports, host order; 0 for other protocols
  std::uint16_t dst_port = 0;
  std::array<std::uint8_t, 16> src{};
  std::array<std::uint8_t, 16> dst{};
};
static_assert(sizeof(Parsed) == 54, "a burst builds 32 of these: tcp_flags fills what was padding");
static_assert(offsetof(Parsed, dst_port) == offsetof(Parsed, src_port) + sizeof(Parsed::src_port),
              "the two ports are one 32-bit word: see swap_port_bytes");

// A parse's error and L3 as one 16-bit word (the two bytes lie side by side): an IP packet parsed
// without error is one comparison with kIpv4Parsed or kIpv6Parsed, not a test of each (issue 23).
inline std::uint16_t error_and_l3(const Parsed& p) noexcept {
  static_assert(offsetof(Parsed, error) == 0 && offsetof(Parsed, l3) == 1 && std::endian::native == std::endian::little);
  std::uint16_t word;
  std::memcpy(&word, &p, sizeof word);
  return word;
}
inline constexpr std::uint16_t kIpv4Parsed = static_cast<std::uint16_t>(static_cast<unsigned>(L3::ipv4) << 8 |
                                                                        static_cast<unsigned>(ParseError::none));
inline constexpr std::uint16_t kIpv6Parsed = static_cast<std::uint16_t>(static_cast<unsigned>(L3::ipv6) << 8 |
                                                                        static_cast<unsigned>(ParseError::none));

// Two ports as one 32-bit word, source first, between the frame's byte order and Parsed's (host, on a
// little-endian machine): the word's byte swap swaps each port's bytes and the two ports, the rotation
// puts the ports back in place. Two instructions for what two loads and two swaps did (issue 23).
inline std::uint32_t swap_port_bytes(std::uint32_t both) noexcept {
  static_assert(std::endian::native == std::endian::little, "big-endian: the word is already in order");
  return std::rotl(__builtin_bswap32(both), 16);
}

namespace tcp_flag {
inline constexpr std::uint8_t fin = 0x01, syn = 0x02, rst = 0x04, ack = 0x10;
}

}  // namespace tricolor::dataplane
