// In-place rewrites of an accepted frame. Each checks that the bytes it writes lie within the capture,
// so a Parsed that does not belong to the view cannot make it write out of bounds.
#include "dataplane/engine/actions.hpp"

namespace tricolor::dataplane {
namespace {

constexpr std::uint8_t kMaxDscp = 63;  // 6 bits
constexpr std::uint8_t kMaxPcp = 7;    // 3 bits
constexpr unsigned kEcnBits = 2;
constexpr std::uint8_t kEcnMask = 0x03;

// IPv4: the TOS byte is the low half of the header's first 16-bit word, which the checksum covers.
constexpr std::uint32_t kIpv4TosOffset = 1;
constexpr std::uint32_t kIpv4IdentificationOffset = 4;
constexpr std::uint32_t kIpv4ChecksumOffset = 10;
constexpr std::uint32_t kIpv4ChecksumEnd = kIpv4ChecksumOffset + 2;
constexpr std::uint16_t kHighByteMask = 0xff00;
constexpr std::uint32_t kOnesComplementMask = 0xffff;
constexpr unsigned kCarryShift = 16;

// IPv6: the traffic class is the low nibble of byte 0 and the high nibble of byte 1.
constexpr std::uint32_t kIpv6TrafficClassEnd = 2;
constexpr unsigned kNibbleBits = 4;
constexpr std::uint8_t kLowNibble = 0x0f;
constexpr std::uint8_t kHighNibble = 0xf0;

// 802.1Q TCI: PCP (3 bits), DEI (1), VID (12). In the frame the PCP is the top of the TCI's first byte.
constexpr unsigned kPcpShiftInTci = 13;
constexpr std::uint16_t kTciWithoutPcp = 0x1fff;
constexpr unsigned kPcpShiftInByte = 5;
constexpr std::uint8_t kTciByteWithoutPcp = 0x1f;

inline std::uint16_t load_be16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

inline void store_be16(std::uint8_t* p, std::uint16_t value) noexcept {
  p[0] = static_cast<std::uint8_t>(value >> 8);
  p[1] = static_cast<std::uint8_t>(value);
}

// Folds the carries of a 32-bit sum of 16-bit words back in (ones' complement addition).
inline std::uint16_t fold_carries(std::uint32_t sum) noexcept {
  sum = (sum & kOnesComplementMask) + (sum >> kCarryShift);
  sum = (sum & kOnesComplementMask) + (sum >> kCarryShift);
  return static_cast<std::uint16_t>(sum);
}

bool remark_ipv4(PacketView& view, std::uint32_t l3_offset, std::uint8_t dscp) noexcept {
  if (l3_offset + kIpv4ChecksumEnd > view.captured) return false;
  std::uint8_t* ip = view.data + l3_offset;
  const std::uint8_t tos = static_cast<std::uint8_t>((dscp << kEcnBits) | (ip[kIpv4TosOffset] & kEcnMask));
  if (tos == ip[kIpv4TosOffset]) return true;  // nothing changes, checksum included
  const std::uint16_t old_word = load_be16(ip);
  const std::uint16_t new_word = static_cast<std::uint16_t>((old_word & kHighByteMask) | tos);
  const std::uint16_t old_checksum = load_be16(ip + kIpv4ChecksumOffset);
  // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'). Incremental, so a wrong checksum stays wrong by as much.
  const std::uint32_t sum = (~std::uint32_t{old_checksum} & kOnesComplementMask) +
                            (~std::uint32_t{old_word} & kOnesComplementMask) + new_word;
  store_be16(ip + kIpv4ChecksumOffset, static_cast<std::uint16_t>(~fold_carries(sum)));
  ip[kIpv4TosOffset] = tos;
  return true;
}

bool remark_ipv6(PacketView& view, std::uint32_t l3_offset, std::uint8_t dscp) noexcept {
  if (l3_offset + kIpv6TrafficClassEnd > view.captured) return false;
  std::uint8_t* ip = view.data + l3_offset;
  const std::uint8_t ecn = (ip[1] >> kNibbleBits) & kEcnMask;
  const std::uint8_t traffic_class = static_cast<std::uint8_t>((dscp << kEcnBits) | ecn);
  ip[0] = static_cast<std::uint8_t>((ip[0] & kHighNibble) | (traffic_class >> kNibbleBits));
  ip[1] = static_cast<std::uint8_t>((ip[1] & kLowNibble) | ((traffic_class & kLowNibble) << kNibbleBits));
  return true;
}

}  // namespace

bool stamp_ipv4_identification(PacketView& view, const Parsed& parsed, std::uint16_t value) noexcept {
  if (parsed.error != ParseError::none || parsed.l3 != L3::ipv4) return false;
  if (parsed.l3_offset + kIpv4ChecksumEnd > view.captured) return false;
  std::uint8_t* ip = view.data + parsed.l3_offset;
  const std::uint16_t old_word = load_be16(ip + kIpv4IdentificationOffset);
  const std::uint16_t old_checksum = load_be16(ip + kIpv4ChecksumOffset);
  const std::uint32_t sum = (~std::uint32_t{old_checksum} & kOnesComplementMask) +
                            (~std::uint32_t{old_word} & kOnesComplementMask) + value;  // RFC 1624 eqn. 3
  store_be16(ip + kIpv4ChecksumOffset, static_cast<std::uint16_t>(~fold_carries(sum)));
  store_be16(ip + kIpv4IdentificationOffset, value);
  return true;
}

bool remark_dscp(PacketView& view, const Parsed& parsed, std::uint8_t dscp) noexcept {
  // A frame that failed to parse is not trusted to be what its fields say; a DSCP over 6 bits is a bug.
  if (parsed.error != ParseError::none || dscp > kMaxDscp) return false;
  switch (parsed.l3) {
    case L3::ipv4: return remark_ipv4(view, parsed.l3_offset, dscp);
    case L3::ipv6: return remark_ipv6(view, parsed.l3_offset, dscp);
    case L3::none: return false;
  }
  return false;
}

bool set_pcp(PacketView& view, const Parsed& parsed, std::uint8_t pcp) noexcept {
  if (parsed.error != ParseError::none || pcp > kMaxPcp) return false;
  if (view.has_stripped_vlan) {  // the outermost tag; the NIC inserts it again on transmit
    view.stripped_tci = static_cast<std::uint16_t>((view.stripped_tci & kTciWithoutPcp) | (pcp << kPcpShiftInTci));
    return true;
  }
  if (parsed.frame_vlans == 0 || parsed.outer_tci_offset >= view.captured) return false;
  std::uint8_t& tci_high = view.data[parsed.outer_tci_offset];  // PCP, DEI and the top of the VID
  tci_high = static_cast<std::uint8_t>((tci_high & kTciByteWithoutPcp) | (pcp << kPcpShiftInByte));
  return true;
}

}  // namespace tricolor::dataplane
