#pragma once
// Frames built byte by byte from the protocol layouts, independently of the parser. The builder
// records which header each byte range belongs to (the error a capture cut inside it must give) and
// where the headers are, so tests can state expectations without trusting the code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "dataplane/engine/actions.hpp"
#include "dataplane/engine/parse.hpp"

namespace tricolor::dataplane {
// Lets GoogleTest print errors by name.
inline void PrintTo(ParseError error, std::ostream* os) { *os << to_string(error); }
}  // namespace tricolor::dataplane

namespace tricolor::test {

using dataplane::L3;
using dataplane::PacketView;
using dataplane::ParseError;
using dataplane::Parsed;
using Bytes = std::vector<std::uint8_t>;

namespace ether_type {
inline constexpr std::uint16_t ipv4 = 0x0800, arp = 0x0806, ipv6 = 0x86dd, lacp = 0x8809;
inline constexpr std::uint16_t vlan = 0x8100, qinq = 0x88a8, qinq_legacy = 0x9100;
}  // namespace ether_type

namespace next_header {
inline constexpr std::uint8_t hop_by_hop = 0, tcp = 6, udp = 17, routing = 43, fragment = 44, esp = 50,
                              ah = 51, icmpv6 = 58, no_next = 59, destination_options = 60, icmp = 1,
                              gre = 47, sctp = 132;
}  // namespace next_header

inline constexpr std::size_t kMacsLength = 12;
inline constexpr std::size_t kEthernetLength = 14;
inline constexpr std::size_t kIpv4HeaderLength = 20;
inline constexpr std::size_t kIpv6HeaderLength = 40;
inline constexpr std::size_t kIpv4ChecksumOffset = 10;
inline constexpr std::size_t kPortsLength = 4;
inline constexpr std::uint16_t kIpv4MoreFragments = 0x2000;
inline constexpr std::uint16_t kIpv4DontFragment = 0x4000;
inline constexpr std::uint16_t kIpv4FragmentBits = 0x3fff;  // MF and the fragment offset
inline constexpr std::uint32_t kFlowLabelAllOnes = 0xfffff;  // 20 bits

using Ipv4Address = std::array<std::uint8_t, 4>;
using Ipv6Address = std::array<std::uint8_t, 16>;

struct Ipv4Spec {
  std::uint8_t tos = 0;
  std::size_t option_words = 0;        // IHL = 5 + option_words
  std::uint16_t identification = 0x1234;
  std::uint16_t flags_fragment = kIpv4DontFragment;
  std::uint8_t ttl = 64;
  Ipv4Address src{192, 0, 2, 1};
  Ipv4Address dst{198, 51, 100, 7};
};

struct Ipv6Spec {
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0x12345;
  std::uint8_t hop_limit = 64;
  Ipv6Address src{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
  Ipv6Address dst{0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd};
};

// A byte range the parser needs, and the error it must report when the capture ends inside it.
struct Region {
  std::size_t end;
  ParseError error;
};

struct Frame {
  Bytes bytes;
  std::vector<Region> needed;  // in frame order
  std::size_t l3_offset = 0;   // 0 when not IP
  std::size_t l4_offset = 0;   // the upper-layer header (after any extension headers); 0 when none

  // What the parser needs to read: a capture of this many bytes parses like the whole frame.
  std::size_t needed_length() const { return needed.empty() ? 0 : needed.back().end; }
  // The error a capture of `length` bytes must give (wire length unchanged).
  ParseError error_for_capture(std::size_t length) const {
    for (const Region& region : needed) {
      if (length < region.end) return region.error;
    }
    return ParseError::none;
  }
};

class FrameBuilder {
 public:
  FrameBuilder() {
    for (std::size_t i = 0; i < kMacsLength; ++i) bytes_.push_back(static_cast<std::uint8_t>(0xa0 + i));
    type_slot_ = reserve16();
    needed_.push_back({bytes_.size(), ParseError::truncated_ethernet});
  }

  // A tag: fills the pending EtherType with the TPID; the tag's region runs to the inner EtherType.
  FrameBuilder& vlan(std::uint16_t tpid, std::uint16_t tci) {
    fill16(type_slot_, tpid);
    put16(tci);
    type_slot_ = reserve16();
    needed_.push_back({bytes_.size(), ParseError::truncated_vlan});
    return *this;
  }

  // A non-IP payload (ARP, LACP, ...): the parser needs nothing of it.
  FrameBuilder& ether_payload(std::uint16_t type, std::size_t length) {
    fill16(type_slot_, type);
    pad(length);
    return *this;
  }

  FrameBuilder& ipv4(const Ipv4Spec& spec = {}) {
    fill16(type_slot_, ether_type::ipv4);
    ipv4_offset_ = l3_offset_ = bytes_.size();
    put8(static_cast<std::uint8_t>(0x40 | (5 + spec.option_words)));  // version 4, IHL
    put8(spec.tos);
    reserve16();  // total length, filled by build()
    put16(spec.identification);
    put16(spec.flags_fragment);
    put8(spec.ttl);
    next_header_slot_ = reserve8();
    reserve16();  // checksum, filled by build()
    put(spec.src);
    put(spec.dst);
    for (std::size_t i = 0; i < spec.option_words * 4; ++i) put8(i % 4 == 3 ? 0x00 : 0x01);  // NOPs, EOL
    needed_.push_back({bytes_.size(), ParseError::truncated_ipv4});
    if ((spec.flags_fragment & kIpv4FragmentBits) != 0) fragmented_ = true;
    return *this;
  }

  FrameBuilder& ipv6(const Ipv6Spec& spec = {}) {
    fill16(type_slot_, ether_type::ipv6);
    ipv6_offset_ = l3_offset_ = bytes_.size();
    put8(static_cast<std::uint8_t>(0x60 | (spec.traffic_class >> 4)));  // version 6, traffic class high
    put8(static_cast<std::uint8_t>(((spec.traffic_class & 0x0f) << 4) | ((spec.flow_label >> 16) & 0x0f)));
    put16(static_cast<std::uint16_t>(spec.flow_label));
    reserve16();  // payload length, filled by build()
    next_header_slot_ = reserve8();
    put8(spec.hop_limit);
    put(spec.src);
    put(spec.dst);
    needed_.push_back({bytes_.size(), ParseError::truncated_ipv6});
    return *this;
  }

  // Hop-by-hop, routing or destination options: `length` bytes, a multiple of 8, at least 8.
  FrameBuilder& ipv6_options(std::uint8_t type, std::size_t length = 8) {
    EXPECT_TRUE(length >= 8 && length % 8 == 0) << "bad test frame: extension length " << length;
    return extension(type, static_cast<std::uint8_t>(length / 8 - 1), length);
  }
  // Authentication header: `length` bytes, a multiple of 4, at least 12 (RFC 4302).
  FrameBuilder& ipv6_ah(std::size_t length = 24) {
    EXPECT_TRUE(length >= 12 && length % 4 == 0) << "bad test frame: AH length " << length;
    return extension(next_header::ah, static_cast<std::uint8_t>(length / 4 - 2), length);
  }
  // Fragment header: offset in 8-byte units.
  FrameBuilder& ipv6_fragment(std::uint16_t offset_units, bool more_fragments) {
    fill8(next_header_slot_, next_header::fragment);
    next_header_slot_ = reserve8();
    put8(0);  // reserved
    put16(static_cast<std::uint16_t>((offset_units << 3) | (more_fragments ? 1 : 0)));
    put16(0xcafe);  // identification
    put16(0xf00d);
    if (!fragmented_) needed_.push_back({bytes_.size(), ParseError::truncated_ipv6_extension});
    if (offset_units != 0 || more_fragments) fragmented_ = true;
    return *this;
  }

  // Upper-layer headers. Ports are needed (4 bytes) unless a fragment header came before.
  FrameBuilder& tcp(std::uint16_t src_port, std::uint16_t dst_port) {
    return ported(next_header::tcp, src_port, dst_port, 20);
  }
  FrameBuilder& udp(std::uint16_t src_port, std::uint16_t dst_port) {
    return ported(next_header::udp, src_port, dst_port, 8);
  }
  FrameBuilder& sctp(std::uint16_t src_port, std::uint16_t dst_port) {
    return ported(next_header::sctp, src_port, dst_port, 12);
  }
  // Any other upper layer (ICMP, ESP, no next header, a later fragment's data): nothing needed.
  FrameBuilder& ip_payload(std::uint8_t protocol, std::size_t length) {
    fill8(next_header_slot_, protocol);
    if (l4_offset_ == 0) l4_offset_ = bytes_.size();
    pad(length);
    return *this;
  }

  FrameBuilder& payload(std::size_t length) {
    pad(length);
    return *this;
  }

  // Fills the IP lengths (and the IPv4 checksum) from the bytes so far.
  Frame build() {
    Bytes bytes = bytes_;
    if (ipv4_offset_) {
      const std::size_t ip = *ipv4_offset_;
      store16(bytes, ip + 2, static_cast<std::uint16_t>(bytes.size() - ip));
      const std::size_t header_length = (bytes[ip] & 0x0f) * 4u;
      store16(bytes, ip + kIpv4ChecksumOffset, ipv4_checksum(bytes, ip, header_length));
    }
    if (ipv6_offset_) {
      const std::size_t ip = *ipv6_offset_;
      store16(bytes, ip + 4, static_cast<std::uint16_t>(bytes.size() - ip - kIpv6HeaderLength));
    }
    return Frame{std::move(bytes), needed_, l3_offset_, l4_offset_};
  }

  // The IPv4 header checksum recomputed from scratch (the checksum field counted as zero).
  static std::uint16_t ipv4_checksum(const Bytes& bytes, std::size_t offset, std::size_t header_length) {
    std::uint32_t sum = 0;
    for (std::size_t i = 0; i < header_length; i += 2) {
      if (i == kIpv4ChecksumOffset) continue;
      sum += static_cast<std::uint32_t>((bytes[offset + i] << 8) | bytes[offset + i + 1]);
    }
    while (sum > 0xffff) sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<std::uint16_t>(~sum);
  }

  static void store16(Bytes& bytes, std::size_t offset, std::uint16_t value) {
    bytes[offset] = static_cast<std::uint8_t>(value >> 8);
    bytes[offset + 1] = static_cast<std::uint8_t>(value);
  }

 private:
  FrameBuilder& extension(std::uint8_t type, std::uint8_t length_field, std::size_t length) {
    fill8(next_header_slot_, type);
    const std::size_t start = bytes_.size();
    next_header_slot_ = reserve8();
    put8(length_field);
    while (bytes_.size() < start + length) put8(static_cast<std::uint8_t>(bytes_.size()));
    if (!fragmented_) needed_.push_back({bytes_.size(), ParseError::truncated_ipv6_extension});
    return *this;
  }

  FrameBuilder& ported(std::uint8_t protocol, std::uint16_t src_port, std::uint16_t dst_port,
                       std::size_t header_length) {
    fill8(next_header_slot_, protocol);
    l4_offset_ = bytes_.size();
    put16(src_port);
    put16(dst_port);
    if (!fragmented_) needed_.push_back({bytes_.size(), ParseError::truncated_l4});
    pad(header_length - kPortsLength);
    return *this;
  }

  void put8(std::uint8_t value) { bytes_.push_back(value); }
  void put16(std::uint16_t value) {
    put8(static_cast<std::uint8_t>(value >> 8));
    put8(static_cast<std::uint8_t>(value));
  }
  template <std::size_t N>
  void put(const std::array<std::uint8_t, N>& value) {
    bytes_.insert(bytes_.end(), value.begin(), value.end());
  }
  void pad(std::size_t length) {
    for (std::size_t i = 0; i < length; ++i) put8(static_cast<std::uint8_t>(0x5a ^ i));
  }
  std::size_t reserve8() {
    put8(0);
    return bytes_.size() - 1;
  }
  std::size_t reserve16() {
    put16(0);
    return bytes_.size() - 2;
  }
  void fill8(std::size_t offset, std::uint8_t value) { bytes_[offset] = value; }
  void fill16(std::size_t offset, std::uint16_t value) { store16(bytes_, offset, value); }

  Bytes bytes_;
  std::vector<Region> needed_;
  std::size_t type_slot_ = 0;
  std::size_t next_header_slot_ = 0;
  std::size_t l3_offset_ = 0;
  std::size_t l4_offset_ = 0;
  std::optional<std::size_t> ipv4_offset_;
  std::optional<std::size_t> ipv6_offset_;
  bool fragmented_ = false;  // after a real fragment header the parser reads nothing more
};

// A frame in a heap buffer of exactly `captured` bytes, so ASan catches a read past the capture.
struct Capture {
  Bytes buffer;
  PacketView view;

  explicit Capture(const Bytes& frame, std::optional<std::size_t> captured = std::nullopt,
                   std::optional<std::size_t> wire_length = std::nullopt)
      : buffer(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(captured.value_or(frame.size()))) {
    view.data = buffer.data();
    view.captured = static_cast<std::uint32_t>(buffer.size());
    view.wire_length = static_cast<std::uint32_t>(wire_length.value_or(frame.size()));
  }
  Capture(const Capture&) = delete;  // the view points into the buffer
  Capture& operator=(const Capture&) = delete;

  Capture& stripped(std::uint16_t tci) {
    view.has_stripped_vlan = true;
    view.stripped_tci = tci;
    return *this;
  }
  Parsed parse() const { return dataplane::parse(view); }
};

inline Parsed parse_bytes(const Bytes& frame) { return Capture(frame).parse(); }

inline std::string describe(const Parsed& p) {
  std::string s = "error=" + std::string(to_string(p.error)) + " l3=" + std::to_string(static_cast<int>(p.l3)) +
                  " has_vlan=" + std::to_string(p.has_vlan) + " frame_vlans=" + std::to_string(p.frame_vlans) +
                  " vlan_id=" + std::to_string(p.vlan_id) + " outer_tci_offset=" + std::to_string(p.outer_tci_offset) +
                  " l3_offset=" + std::to_string(p.l3_offset) + " l3_length=" + std::to_string(p.l3_length) +
                  " protocol=" + std::to_string(p.protocol) + " dscp=" + std::to_string(p.dscp) +
                  " ecn=" + std::to_string(p.ecn) + " fragment=" + std::to_string(p.fragment) +
                  " ports=" + std::to_string(p.src_port) + "/" + std::to_string(p.dst_port);
  return s;
}

// Every field, so a test can say "parses exactly like that".
inline void expect_same_parse(const Parsed& actual, const Parsed& expected) {
  EXPECT_EQ(actual.error, expected.error);
  EXPECT_EQ(actual.l3, expected.l3);
  EXPECT_EQ(actual.has_vlan, expected.has_vlan);
  EXPECT_EQ(actual.frame_vlans, expected.frame_vlans);
  EXPECT_EQ(actual.vlan_id, expected.vlan_id);
  EXPECT_EQ(actual.outer_tci_offset, expected.outer_tci_offset);
  EXPECT_EQ(actual.l3_offset, expected.l3_offset);
  EXPECT_EQ(actual.l3_length, expected.l3_length);
  EXPECT_EQ(actual.protocol, expected.protocol);
  EXPECT_EQ(actual.dscp, expected.dscp);
  EXPECT_EQ(actual.ecn, expected.ecn);
  EXPECT_EQ(actual.fragment, expected.fragment);
  EXPECT_EQ(actual.src_port, expected.src_port);
  EXPECT_EQ(actual.dst_port, expected.dst_port);
  EXPECT_EQ(actual.src, expected.src);
  EXPECT_EQ(actual.dst, expected.dst);
}

inline std::array<std::uint8_t, 16> widen(const Ipv4Address& address) {
  std::array<std::uint8_t, 16> wide{};
  std::copy(address.begin(), address.end(), wide.begin());
  return wide;
}

}  // namespace tricolor::test
