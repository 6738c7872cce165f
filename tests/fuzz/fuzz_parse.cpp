// libFuzzer target for parse(), remark_dscp() and set_pcp().
//
// Input: a 6-byte header, then the frame.
//   [0] flags: bit 0 the NIC stripped a tag; bit 1 the wire length exceeds the capture (a snaplen),
//       bit 2 it falls short of it (an inconsistent view); bit 3 scales that difference by 256
//   [1..2] the stripped TCI, big-endian
//   [3] the difference between wire length and capture
//   [4] the DSCP to remark with (low 6 bits); [5] the PCP to set (low 3 bits)
// The frame is copied into a heap buffer of exactly its size, so ASan reports any read past the capture.
//
// Invariants checked: parse() is deterministic and its result is self-consistent; every shorter
// prefix of the frame (up to kPrefixSweepLimit) parses like the whole frame or fails for truncation
// (and, each in a buffer that ends where it ends, reads nothing past its end); a successful parse
// lets remark_dscp() change only the DSCP bits (and the IPv4 checksum, keeping the header's ones'
// complement sum, so a right checksum stays right and a wrong one as wrong), after which the frame
// parses the same but for the new DSCP; set_pcp() changes only the outermost tag's PCP bits; a failed
// parse lets neither change anything. The inline path for the usual frame, parse_plain_ipv4(), either
// declines and leaves its result untouched or gives every field exactly as parse_any() does, and parse()
// is parse_any() — on the whole frame and on each prefix. A plain burst's reading of the frame,
// plain_ipv4(), accepts the same frames, and its fields and the keys made of them are the Parsed's.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "dataplane/engine/actions.hpp"
#include "dataplane/engine/keys.hpp"
#include "dataplane/engine/parse.hpp"

namespace {

using namespace tricolor::dataplane;

constexpr std::size_t kInputHeaderLength = 6;
constexpr std::uint8_t kFlagStrippedVlan = 0x01;
constexpr std::uint8_t kFlagWireLonger = 0x02;
constexpr std::uint8_t kFlagWireShorter = 0x04;
constexpr std::uint8_t kFlagScaleDifference = 0x08;
constexpr std::uint32_t kDifferenceScale = 256;
constexpr std::uint8_t kDscpMask = 0x3f;
constexpr std::uint8_t kPcpMask = 0x07;

constexpr std::uint32_t kEthernetHeaderLength = 14;
constexpr std::uint32_t kVlanTagLength = 4;
constexpr std::uint16_t kMaxVlanId = 0x0fff;
constexpr std::uint32_t kIpv4MinHeaderLength = 20;
constexpr std::uint32_t kIpv6HeaderLength = 40;
constexpr std::uint32_t kIpv4ChecksumOffset = 10;
constexpr std::uint8_t kIpv4IhlMask = 0x0f;
constexpr std::uint32_t kIpv4HeaderLengthUnit = 4;  // IHL counts 32-bit words
constexpr std::uint8_t kMaxDscp = 63;
constexpr std::uint8_t kMaxEcn = 3;
constexpr std::uint16_t kTciWithoutPcp = 0x1fff;
constexpr unsigned kPcpShiftInTci = 13;
constexpr std::uint8_t kTciByteWithoutPcp = 0x1f;
constexpr unsigned kPcpShiftInByte = 5;
constexpr std::uint32_t kOnesComplementModulus = 0xffff;
// Prefixes swept per input: covers every header chain short of very long extension headers, and
// keeps the quadratic copying cheap.
constexpr std::size_t kPrefixSweepLimit = 512;

void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_parse: invariant broken: %s\n", what);
    std::abort();
  }
}

bool same(const Parsed& a, const Parsed& b) {
  return a.error == b.error && a.l3 == b.l3 && a.has_vlan == b.has_vlan && a.frame_vlans == b.frame_vlans &&
         a.vlan_id == b.vlan_id && a.outer_tci_offset == b.outer_tci_offset && a.l3_offset == b.l3_offset &&
         a.l3_length == b.l3_length && a.protocol == b.protocol && a.dscp == b.dscp && a.ecn == b.ecn &&
         a.fragment == b.fragment && a.src_port == b.src_port && a.dst_port == b.dst_port && a.src == b.src &&
         a.dst == b.dst;
}

// Every field, the PCP and the TCP flags too.
bool identical(const Parsed& a, const Parsed& b) {
  return same(a, b) && a.pcp == b.pcp && a.tcp_flags == b.tcp_flags;
}

// A plain burst's reading of a frame (worker.cpp): plain_ipv4() accepts exactly the frames
// parse_plain_ipv4() does, its fields are the Parsed's, and the key built from them is make_key()'s of
// the Parsed, for every key kind and a few prefixes.
void check_plain_fields(const PacketView& view, const Parsed& general) {
  PlainIpv4 plain;
  Parsed fast;
  const bool accepted = tricolor::dataplane::plain_ipv4(view, plain);
  require(accepted == tricolor::dataplane::parse_plain_ipv4(view, fast), "plain_ipv4 accepts what parse_plain_ipv4 does");
  if (!accepted) return;
  std::uint32_t s, d;
  std::memcpy(&s, general.src.data(), sizeof s);
  std::memcpy(&d, general.dst.data(), sizeof d);
  require(plain.total_length == general.l3_length && plain.protocol == general.protocol &&
              plain.addresses() == (std::uint64_t{s} | std::uint64_t{d} << 32),
          "a plain frame's fields are its Parsed's");
  for (const KeyKind kind : {KeyKind::src, KeyKind::dst, KeyKind::src_dport, KeyKind::five_tuple}) {
    for (const std::uint8_t prefix : {32, 24, 1, 0}) {
      PerKey per;
      per.kind = kind;
      per.ipv4_prefix = prefix;
      const KeyShape shape(per);
      MeterKey parsed_key{}, plain_key{};
      std::uint64_t parsed_pair[2], plain_pair[2];
      make_key(shape, general, parsed_key, parsed_pair);
      store_ipv4_key(shape, plain.protocol, plain.raw_ports(), plain.addresses(), plain_key, plain_pair);
      require(parsed_key == plain_key && parsed_pair[0] == plain_pair[0] && parsed_pair[1] == plain_pair[1],
              "a plain frame's key is its Parsed's");
    }
  }
}

void check_plain_path(const PacketView& view) {
  const Parsed general = tricolor::dataplane::parse_any(view);
  Parsed fast;
  if (tricolor::dataplane::parse_plain_ipv4(view, fast)) {
    require(general.error == ParseError::none && identical(fast, general),
            "the usual frame's inline parse gives what parse_any gives");
  } else {
    require(identical(fast, Parsed{}), "a declined inline parse leaves its result untouched");
  }
  require(identical(parse(view), general), "parse() is parse_any()");
  check_plain_fields(view, general);
}

bool has_ports(std::uint8_t protocol) {
  return protocol == ip_protocol::tcp || protocol == ip_protocol::udp || protocol == ip_protocol::sctp;
}

// The ones' complement sum of an IPv4 header, checksum included, reduced mod 0xffff (0 for a right one).
std::uint32_t ipv4_header_sum(const std::uint8_t* ip) {
  const std::uint32_t header_length = (ip[0] & kIpv4IhlMask) * kIpv4HeaderLengthUnit;
  std::uint32_t sum = 0;
  for (std::uint32_t i = 0; i < header_length; i += 2) sum += static_cast<std::uint32_t>((ip[i] << 8) | ip[i + 1]);
  return sum % kOnesComplementModulus;
}

// Whether `after` equals `before` at every offset but the allowed ones.
bool unchanged_except(const std::vector<std::uint8_t>& before, const std::uint8_t* after,
                      std::initializer_list<std::size_t> allowed = {}) {
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (std::find(allowed.begin(), allowed.end(), i) != allowed.end()) continue;
    if (before[i] != after[i]) return false;
  }
  return true;
}

bool is_truncation(ParseError error) {
  switch (error) {
    case ParseError::truncated_ethernet:
    case ParseError::truncated_vlan:
    case ParseError::truncated_ipv4:
    case ParseError::truncated_ipv6:
    case ParseError::truncated_ipv6_extension:
    case ParseError::truncated_l4:
      return true;
    default:
      return false;
  }
}

// Every shorter prefix of the frame as the capture (a snaplen), placed to end exactly at the end of
// a heap buffer so that ASan catches a read past it. A prefix that parses must parse exactly like
// the whole frame (nothing beyond it was needed); if the whole frame parses, a prefix can only fail
// for being cut short.
void check_prefixes(const std::vector<std::uint8_t>& frame, const PacketView& whole_view, const Parsed& whole) {
  const std::size_t limit = std::min(frame.size(), kPrefixSweepLimit);
  std::vector<std::uint8_t> buffer(limit);
  for (std::size_t length = 0; length < limit; ++length) {
    std::uint8_t* start = buffer.data() + (limit - length);
    std::memcpy(start, frame.data(), length);
    PacketView view = whole_view;
    view.data = start;
    view.captured = static_cast<std::uint32_t>(length);
    const Parsed p = parse(view);
    check_plain_path(view);
    if (p.error == ParseError::none) {
      require(same(p, whole), "a prefix that parses parses like the whole frame");
    } else if (whole.error == ParseError::none) {
      require(is_truncation(p.error), "a prefix of a good frame fails only for truncation");
    }
  }
}

void check_consistent(const PacketView& view, const Parsed& p) {
  require(to_string(p.error) != "unknown", "every error has a name");
  require(p.frame_vlans <= 2, "at most two tags in the frame");
  if (p.error != ParseError::none) return;
  require(p.has_vlan == (view.has_stripped_vlan || p.frame_vlans > 0), "has_vlan");
  require(p.outer_tci_offset == (p.frame_vlans > 0 ? kEthernetHeaderLength : 0), "outer_tci_offset");
  require(p.l3_offset == kEthernetHeaderLength + kVlanTagLength * p.frame_vlans, "l3_offset");
  require(p.vlan_id <= kMaxVlanId, "vlan_id is 12 bits");
  require(p.dscp <= kMaxDscp && p.ecn <= kMaxEcn, "dscp and ecn widths");
  require(!p.fragment || (p.src_port == 0 && p.dst_port == 0), "fragments have no ports");
  require(has_ports(p.protocol) || (p.src_port == 0 && p.dst_port == 0), "ports only for TCP, UDP, SCTP");
  const std::uint32_t wire_l3 = view.wire_length > p.l3_offset ? view.wire_length - p.l3_offset : 0;
  switch (p.l3) {
    case L3::none:
      require(p.l3_length == 0 && p.protocol == 0 && !p.fragment && p.dscp == 0 && p.ecn == 0, "non-IP is empty");
      break;
    case L3::ipv4:
      require(p.l3_offset + kIpv4MinHeaderLength <= view.captured, "IPv4 header captured");
      require(p.l3_length >= kIpv4MinHeaderLength && p.l3_length <= wire_l3, "IPv4 total length");
      break;
    case L3::ipv6:
      require(p.l3_offset + kIpv6HeaderLength <= view.captured, "IPv6 header captured");
      require(p.l3_length >= kIpv6HeaderLength && p.l3_length <= wire_l3, "IPv6 length");
      break;
  }
}

void check_remark(PacketView& view, const Parsed& parsed, std::uint8_t dscp) {
  const std::vector<std::uint8_t> before(view.data, view.data + view.captured);
  const bool ip = parsed.error == ParseError::none && parsed.l3 != L3::none;
  const std::uint32_t sum_before = ip && parsed.l3 == L3::ipv4 ? ipv4_header_sum(view.data + parsed.l3_offset) : 0;
  const bool remarked = remark_dscp(view, parsed, dscp);
  require(remarked == ip, "remark_dscp accepts exactly the parsed IP frames");
  if (!remarked) {
    require(unchanged_except(before, view.data), "a refused remark changes nothing");
    return;
  }
  if (parsed.l3 == L3::ipv4) {
    const std::uint8_t* ip_header = view.data + parsed.l3_offset;
    require(ipv4_header_sum(ip_header) == sum_before, "the checksum keeps the header's sum (RFC 1624)");
    const std::size_t l3 = parsed.l3_offset;
    require(unchanged_except(before, view.data, {l3 + 1, l3 + kIpv4ChecksumOffset, l3 + kIpv4ChecksumOffset + 1}),
            "IPv4 remark writes TOS and checksum only");
  } else {
    require(unchanged_except(before, view.data, {parsed.l3_offset, parsed.l3_offset + 1u}), "IPv6 remark writes the traffic class only");
  }
  Parsed expected = parsed;
  expected.dscp = dscp;
  require(same(parse(view), expected), "after a remark the frame parses the same but for the DSCP");
}

void check_pcp(PacketView& view, const Parsed& parsed, std::uint8_t pcp) {
  const std::vector<std::uint8_t> before(view.data, view.data + view.captured);
  const std::uint16_t tci_before = view.stripped_tci;
  const bool set = set_pcp(view, parsed, pcp);
  require(set == (parsed.error == ParseError::none && parsed.has_vlan), "set_pcp accepts exactly tagged frames");
  if (!set) {
    require(unchanged_except(before, view.data) && view.stripped_tci == tci_before, "a refused set_pcp changes nothing");
    return;
  }
  if (view.has_stripped_vlan) {
    require(view.stripped_tci == ((tci_before & kTciWithoutPcp) | (pcp << kPcpShiftInTci)), "stripped PCP set, rest kept");
    require(unchanged_except(before, view.data), "stripped PCP leaves the frame alone");
  } else {
    const std::uint8_t tci_high = view.data[parsed.outer_tci_offset];
    require((tci_high >> kPcpShiftInByte) == pcp, "in-frame PCP set");
    require((tci_high & kTciByteWithoutPcp) == (before[parsed.outer_tci_offset] & kTciByteWithoutPcp), "DEI and VID kept");
    require(unchanged_except(before, view.data, {parsed.outer_tci_offset}), "set_pcp writes the outer TCI only");
  }
  require(same(parse(view), parsed), "PCP is not part of what the parser reports");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* input, std::size_t size) {
  if (size < kInputHeaderLength) return 0;
  const std::uint8_t flags = input[0];
  const std::uint16_t stripped_tci = static_cast<std::uint16_t>((input[1] << 8) | input[2]);
  std::uint32_t difference = input[3];
  if (flags & kFlagScaleDifference) difference *= kDifferenceScale;
  const std::uint8_t dscp = input[4] & kDscpMask;
  const std::uint8_t pcp = input[5] & kPcpMask;

  // Exactly the frame's size, on the heap: one byte more and ASan would miss a one-byte overread.
  std::vector<std::uint8_t> frame(input + kInputHeaderLength, input + size);
  PacketView view;
  view.data = frame.data();
  view.captured = static_cast<std::uint32_t>(frame.size());
  view.wire_length = view.captured;
  if (flags & kFlagWireLonger) view.wire_length += difference;
  if (flags & kFlagWireShorter) view.wire_length = view.wire_length > difference ? view.wire_length - difference : 0;
  view.has_stripped_vlan = (flags & kFlagStrippedVlan) != 0;
  view.stripped_tci = stripped_tci;

  const Parsed parsed = parse(view);
  require(same(parse(view), parsed), "parse is deterministic");
  check_plain_path(view);
  check_consistent(view, parsed);
  check_prefixes(frame, view, parsed);
  check_remark(view, parsed, dscp);
  check_pcp(view, parse(view), pcp);
  return 0;
}
