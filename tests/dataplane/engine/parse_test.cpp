// parse(): every header the parser knows, every branch, every ParseError, on frames built byte by
// byte (frame_builder.hpp). Each frame sits in a heap buffer of exactly its captured size.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/dataplane/engine/frame_builder.hpp"

namespace tricolor::test {
namespace {

constexpr std::size_t kEthernetMinimumFrame = 60;  // without FCS: shorter frames are padded

Bytes with_byte(Bytes bytes, std::size_t offset, std::uint8_t value) {
  bytes[offset] = value;
  return bytes;
}

Bytes padded(Bytes bytes, std::size_t length) {
  bytes.resize(std::max(bytes.size(), length), 0);
  return bytes;
}

// --- Names -------------------------------------------------------------------------------------------

TEST(ParseErrorNames, EveryErrorHasItsEnumeratorName) {
  const std::vector<std::pair<ParseError, std::string_view>> names = {
      {ParseError::none, "none"},
      {ParseError::truncated_ethernet, "truncated_ethernet"},
      {ParseError::truncated_vlan, "truncated_vlan"},
      {ParseError::too_many_vlans, "too_many_vlans"},
      {ParseError::truncated_ipv4, "truncated_ipv4"},
      {ParseError::bad_ipv4_version, "bad_ipv4_version"},
      {ParseError::bad_ipv4_header_length, "bad_ipv4_header_length"},
      {ParseError::bad_ipv4_total_length, "bad_ipv4_total_length"},
      {ParseError::truncated_ipv6, "truncated_ipv6"},
      {ParseError::bad_ipv6_version, "bad_ipv6_version"},
      {ParseError::bad_ipv6_payload_length, "bad_ipv6_payload_length"},
      {ParseError::truncated_ipv6_extension, "truncated_ipv6_extension"},
      {ParseError::ipv6_extension_chain_too_long, "ipv6_extension_chain_too_long"},
      {ParseError::truncated_l4, "truncated_l4"},
  };
  ASSERT_EQ(names.size(), dataplane::kParseErrors) << "a new ParseError needs a name and a test";
  std::set<std::string_view> distinct;
  for (const auto& [error, name] : names) {
    EXPECT_EQ(to_string(error), name);
    distinct.insert(to_string(error));
  }
  EXPECT_EQ(distinct.size(), names.size());
}

TEST(ParseErrorNames, OutOfRangeIsUnknown) {
  EXPECT_EQ(to_string(ParseError::count_), "unknown");
  EXPECT_EQ(to_string(static_cast<ParseError>(200)), "unknown");
}

// --- Ethernet and VLAN tags --------------------------------------------------------------------------

TEST(ParseEthernet, ShorterThanAHeaderIsTruncated) {
  const Bytes arp = FrameBuilder().ether_payload(ether_type::arp, 28).build().bytes;
  for (std::size_t length = 0; length < kEthernetLength; ++length) {
    SCOPED_TRACE(length);
    EXPECT_EQ(Capture(arp, length).parse().error, ParseError::truncated_ethernet);
  }
  EXPECT_EQ(Capture(arp, kEthernetLength).parse().error, ParseError::none);
}

TEST(ParseEthernet, EmptyViewWithNullData) {
  PacketView view;  // data == nullptr, captured == 0
  EXPECT_EQ(dataplane::parse(view).error, ParseError::truncated_ethernet);
}

TEST(ParseEthernet, NonIpFramesAreNotErrors) {
  for (const std::uint16_t type : {ether_type::arp, ether_type::lacp, std::uint16_t{0x88cc} /* LLDP */}) {
    SCOPED_TRACE(type);
    const Parsed p = parse_bytes(FrameBuilder().ether_payload(type, 46).build().bytes);
    EXPECT_EQ(p.error, ParseError::none);
    EXPECT_EQ(p.l3, L3::none);
    EXPECT_FALSE(p.has_vlan);
    EXPECT_EQ(p.frame_vlans, 0);
    EXPECT_EQ(p.l3_offset, kEthernetLength);
    EXPECT_EQ(p.l3_length, 0);
    EXPECT_EQ(p.protocol, 0);
    EXPECT_EQ(p.src_port, 0);
    EXPECT_EQ(p.dst_port, 0);
  }
}

TEST(ParseEthernet, UntaggedIpv4Tcp) {
  const Frame frame = FrameBuilder().ipv4({.tos = 0xb9}).tcp(40000, 443).payload(100).build();
  const Parsed p = parse_bytes(frame.bytes);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_EQ(p.l3, L3::ipv4);
  EXPECT_FALSE(p.has_vlan);
  EXPECT_EQ(p.frame_vlans, 0);
  EXPECT_EQ(p.vlan_id, 0);
  EXPECT_EQ(p.outer_tci_offset, 0);
  EXPECT_EQ(p.l3_offset, kEthernetLength);
  EXPECT_EQ(p.l3_length, kIpv4HeaderLength + 20 + 100);
  EXPECT_EQ(p.protocol, dataplane::ip_protocol::tcp);
  EXPECT_EQ(p.dscp, 0xb9 >> 2);
  EXPECT_EQ(p.ecn, 0xb9 & 3);
  EXPECT_FALSE(p.fragment);
  EXPECT_EQ(p.src_port, 40000);
  EXPECT_EQ(p.dst_port, 443);
  EXPECT_EQ(p.src, widen({192, 0, 2, 1}));
  EXPECT_EQ(p.dst, widen({198, 51, 100, 7}));
}

TEST(ParseVlan, EachTpidIsATag) {
  for (const std::uint16_t tpid : {ether_type::vlan, ether_type::qinq, ether_type::qinq_legacy}) {
    SCOPED_TRACE(tpid);
    // PCP 5 and DEI set: only the 12-bit VID is the VLAN id.
    const Parsed p = parse_bytes(FrameBuilder().vlan(tpid, 0xb000 | 0x123).ipv4().udp(53, 5353).build().bytes);
    EXPECT_EQ(p.error, ParseError::none);
    EXPECT_TRUE(p.has_vlan);
    EXPECT_EQ(p.frame_vlans, 1);
    EXPECT_EQ(p.vlan_id, 0x123);
    EXPECT_EQ(p.pcp, 5);
    EXPECT_EQ(p.outer_tci_offset, kEthernetLength);
    EXPECT_EQ(p.l3_offset, kEthernetLength + 4);
    EXPECT_EQ(p.l3, L3::ipv4);
    EXPECT_EQ(p.src_port, 53);
    EXPECT_EQ(p.dst_port, 5353);
  }
}

TEST(ParseVlan, QinQReportsTheOuterTag) {
  const Parsed p =
      parse_bytes(FrameBuilder().vlan(ether_type::qinq, 0x0064).vlan(ether_type::vlan, 0x00c8).ipv6().udp(1, 2).build().bytes);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_TRUE(p.has_vlan);
  EXPECT_EQ(p.frame_vlans, 2);
  EXPECT_EQ(p.vlan_id, 100);
  EXPECT_EQ(p.outer_tci_offset, kEthernetLength);
  EXPECT_EQ(p.l3_offset, kEthernetLength + 8);
  EXPECT_EQ(p.l3, L3::ipv6);
  EXPECT_EQ(p.src_port, 1);
}

TEST(ParseVlan, ThirdTagIsTooMany) {
  const Bytes three =
      FrameBuilder().vlan(ether_type::qinq, 10).vlan(ether_type::vlan, 20).vlan(ether_type::vlan, 30).ipv4().tcp(1, 2).build().bytes;
  const Parsed p = parse_bytes(three);
  EXPECT_EQ(p.error, ParseError::too_many_vlans);
  EXPECT_TRUE(p.has_vlan);  // filled so far
  EXPECT_EQ(p.frame_vlans, 2);
  EXPECT_EQ(p.vlan_id, 10);
  // The third TPID alone is enough to refuse it, the rest of its tag need not be captured.
  EXPECT_EQ(Capture(three, kEthernetLength + 8).parse().error, ParseError::too_many_vlans);
  // Tags after a NIC-stripped one count the same.
  EXPECT_EQ(Capture(three).stripped(5).parse().error, ParseError::too_many_vlans);
}

TEST(ParseVlan, TagCutShortIsTruncated) {
  const Bytes two = FrameBuilder().vlan(ether_type::qinq, 10).vlan(ether_type::vlan, 20).ipv4().tcp(1, 2).build().bytes;
  // Cut in the outer TCI, before the inner TPID, in the inner TCI, before the inner EtherType.
  for (const std::size_t length : {15u, 16u, 17u, 19u, 20u, 21u}) {
    SCOPED_TRACE(length);
    EXPECT_EQ(Capture(two, length).parse().error, ParseError::truncated_vlan);
  }
}

TEST(ParseVlan, StrippedTagAlone) {
  Capture capture(FrameBuilder().ipv4().tcp(1000, 2000).build().bytes);
  const Parsed p = capture.stripped(0xe000 | 0x0abc).parse();  // PCP 7, DEI 0
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_TRUE(p.has_vlan);
  EXPECT_EQ(p.frame_vlans, 0);
  EXPECT_EQ(p.vlan_id, 0x0abc);
  EXPECT_EQ(p.pcp, 7);
  EXPECT_EQ(p.outer_tci_offset, 0);
  EXPECT_EQ(p.l3_offset, kEthernetLength);
  EXPECT_EQ(p.src_port, 1000);
}

TEST(ParseVlan, StrippedTagIsOutermostBeforeInFrameTags) {
  Capture one(FrameBuilder().vlan(ether_type::vlan, 0x6777).ipv4().tcp(1, 2).build().bytes);
  const Parsed p1 = one.stripped(0x2042).parse();
  EXPECT_EQ(p1.pcp, 1);  // the stripped tag's, not the in-frame tag's 3
  EXPECT_EQ(p1.error, ParseError::none);
  EXPECT_TRUE(p1.has_vlan);
  EXPECT_EQ(p1.frame_vlans, 1);
  EXPECT_EQ(p1.vlan_id, 0x42);
  EXPECT_EQ(p1.outer_tci_offset, kEthernetLength);
  EXPECT_EQ(p1.l3_offset, kEthernetLength + 4);

  Capture two(FrameBuilder().vlan(ether_type::qinq, 0x0777).vlan(ether_type::vlan, 0x0888).ipv6().udp(3, 4).build().bytes);
  const Parsed p2 = two.stripped(0x0042).parse();
  EXPECT_EQ(p2.error, ParseError::none);
  EXPECT_EQ(p2.frame_vlans, 2);
  EXPECT_EQ(p2.vlan_id, 0x42);
  EXPECT_EQ(p2.outer_tci_offset, kEthernetLength);
  EXPECT_EQ(p2.l3_offset, kEthernetLength + 8);
  EXPECT_EQ(p2.src_port, 3);
}

TEST(ParseVlan, TaggedNonIp) {
  const Parsed p = parse_bytes(FrameBuilder().vlan(ether_type::vlan, 9).ether_payload(ether_type::arp, 28).build().bytes);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_EQ(p.l3, L3::none);
  EXPECT_TRUE(p.has_vlan);
  EXPECT_EQ(p.vlan_id, 9);
  EXPECT_EQ(p.l3_offset, kEthernetLength + 4);
}

// --- IPv4 --------------------------------------------------------------------------------------------

TEST(ParseIpv4, OptionsOfEveryLength) {
  for (std::size_t option_words = 0; option_words <= 10; ++option_words) {  // IHL 5..15
    SCOPED_TRACE(option_words);
    const Frame frame = FrameBuilder().ipv4({.option_words = option_words}).tcp(1234, 80).payload(7).build();
    const Parsed p = parse_bytes(frame.bytes);
    EXPECT_EQ(p.error, ParseError::none);
    EXPECT_EQ(p.l3_length, kIpv4HeaderLength + option_words * 4 + 20 + 7);
    EXPECT_EQ(p.src_port, 1234);
    EXPECT_EQ(p.dst_port, 80);
    EXPECT_EQ(frame.l4_offset, kEthernetLength + kIpv4HeaderLength + option_words * 4);
    // The header is needed whole: a capture ending in the options is truncated.
    if (option_words > 0) {
      EXPECT_EQ(Capture(frame.bytes, frame.l4_offset - 1).parse().error, ParseError::truncated_ipv4);
    }
  }
}

TEST(ParseIpv4, DscpAndEcnFromEveryTos) {
  for (unsigned tos = 0; tos < 256; ++tos) {
    const Parsed p = parse_bytes(FrameBuilder().ipv4({.tos = static_cast<std::uint8_t>(tos)}).udp(1, 2).build().bytes);
    ASSERT_EQ(p.error, ParseError::none);
    EXPECT_EQ(p.dscp, tos >> 2) << tos;
    EXPECT_EQ(p.ecn, tos & 3) << tos;
  }
}

TEST(ParseIpv4, BadVersion) {
  const Bytes frame = FrameBuilder().ipv4().tcp(1, 2).build().bytes;
  for (const std::uint8_t first : {0x65, 0x55, 0x05, 0xf5}) {
    SCOPED_TRACE(first);
    const Parsed p = parse_bytes(with_byte(frame, kEthernetLength, first));
    EXPECT_EQ(p.error, ParseError::bad_ipv4_version);
    EXPECT_EQ(p.l3, L3::ipv4);
  }
}

TEST(ParseIpv4, HeaderLengthBelowFive) {
  const Bytes frame = FrameBuilder().ipv4().tcp(1, 2).build().bytes;
  for (std::uint8_t ihl = 0; ihl < 5; ++ihl) {
    SCOPED_TRACE(static_cast<int>(ihl));
    EXPECT_EQ(parse_bytes(with_byte(frame, kEthernetLength, static_cast<std::uint8_t>(0x40 | ihl))).error,
              ParseError::bad_ipv4_header_length);
  }
}

TEST(ParseIpv4, ShorterThanTheMinimumHeader) {
  const Bytes frame = FrameBuilder().ipv4().build().bytes;  // header only, 20 bytes
  for (std::size_t l3 = 0; l3 < kIpv4HeaderLength; ++l3) {
    EXPECT_EQ(Capture(frame, kEthernetLength + l3).parse().error, ParseError::truncated_ipv4) << l3;
  }
  EXPECT_EQ(Capture(frame).parse().error, ParseError::none);
}

TEST(ParseIpv4, TotalLengthBelowHeaderLength) {
  Frame frame = FrameBuilder().ipv4({.option_words = 1}).tcp(1, 2).build();
  const std::size_t total_length_offset = frame.l3_offset + 2;
  FrameBuilder::store16(frame.bytes, total_length_offset, 23);  // header is 24
  EXPECT_EQ(parse_bytes(frame.bytes).error, ParseError::bad_ipv4_total_length);
  FrameBuilder::store16(frame.bytes, total_length_offset, 0);
  EXPECT_EQ(parse_bytes(frame.bytes).error, ParseError::bad_ipv4_total_length);
  FrameBuilder::store16(frame.bytes, total_length_offset, 24);  // header only: no ports to read
  EXPECT_EQ(parse_bytes(frame.bytes).error, ParseError::truncated_l4);
}

TEST(ParseIpv4, TotalLengthAgainstTheWire) {
  Frame frame = FrameBuilder().ipv4().udp(1, 2).payload(10).build();  // total length 38
  const std::size_t total_length_offset = frame.l3_offset + 2;
  EXPECT_EQ(parse_bytes(frame.bytes).l3_length, 38);  // exactly the wire
  FrameBuilder::store16(frame.bytes, total_length_offset, 39);
  EXPECT_EQ(parse_bytes(frame.bytes).error, ParseError::bad_ipv4_total_length);
  FrameBuilder::store16(frame.bytes, total_length_offset, 0xffff);
  EXPECT_EQ(parse_bytes(frame.bytes).error, ParseError::bad_ipv4_total_length);
  // The wire length decides, not the capture: a snaplen of 64 of a 1514-byte frame is fine.
  const Frame big = FrameBuilder().ipv4().tcp(5, 6).payload(1460).build();
  const Parsed p = Capture(big.bytes, 64).parse();
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_EQ(p.l3_length, 1500);
  EXPECT_EQ(p.src_port, 5);
  EXPECT_EQ(Capture(big.bytes, 64, 1513).parse().error, ParseError::bad_ipv4_total_length);
}

TEST(ParseIpv4, EthernetPaddingIsNotPartOfTheDatagram) {
  const Frame frame = FrameBuilder().ipv4().udp(7, 8).payload(2).build();  // 44 bytes, padded to 60
  const Parsed p = parse_bytes(padded(frame.bytes, kEthernetMinimumFrame));
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_EQ(p.l3_length, kIpv4HeaderLength + 8 + 2);
  EXPECT_EQ(p.dst_port, 8);
}

TEST(ParseIpv4, WireShorterThanTheHeadersBeforeIt) {
  // An inconsistent view (wire length below the capture) must not wrap around.
  const Bytes frame = FrameBuilder().vlan(ether_type::vlan, 1).ipv4().tcp(1, 2).build().bytes;
  EXPECT_EQ(Capture(frame, std::nullopt, 10).parse().error, ParseError::bad_ipv4_total_length);
  EXPECT_EQ(Capture(frame, std::nullopt, 0).parse().error, ParseError::bad_ipv4_total_length);
}

TEST(ParseIpv4, FirstFragmentHasNoPorts) {
  const Parsed p =
      parse_bytes(FrameBuilder().ipv4({.flags_fragment = kIpv4MoreFragments}).tcp(1234, 80).payload(1000).build().bytes);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_TRUE(p.fragment);
  EXPECT_EQ(p.protocol, dataplane::ip_protocol::tcp);
  EXPECT_EQ(p.src_port, 0);
  EXPECT_EQ(p.dst_port, 0);
  EXPECT_EQ(p.src, widen({192, 0, 2, 1}));
}

TEST(ParseIpv4, LaterFragmentsNeedNoL4Header) {
  for (const std::uint16_t flags_fragment : {std::uint16_t{185}, std::uint16_t{kIpv4MoreFragments | 185},
                                             std::uint16_t{0x1fff}, std::uint16_t{kIpv4DontFragment | 1}}) {
    SCOPED_TRACE(flags_fragment);
    // Two bytes of a UDP datagram's continuation: far too short for ports, and none are wanted.
    const Parsed p = parse_bytes(FrameBuilder().ipv4({.flags_fragment = flags_fragment}).ip_payload(next_header::udp, 2).build().bytes);
    EXPECT_EQ(p.error, ParseError::none);
    EXPECT_TRUE(p.fragment);
    EXPECT_EQ(p.protocol, dataplane::ip_protocol::udp);
    EXPECT_EQ(p.src_port, 0);
    EXPECT_EQ(p.dst_port, 0);
  }
}

TEST(ParseIpv4, DontFragmentAndReservedFlagAreNotFragments) {
  for (const std::uint16_t flags : {std::uint16_t{0}, kIpv4DontFragment, std::uint16_t{0x8000}}) {
    SCOPED_TRACE(flags);
    const Parsed p = parse_bytes(FrameBuilder().ipv4({.flags_fragment = flags}).udp(11, 12).build().bytes);
    EXPECT_EQ(p.error, ParseError::none);
    EXPECT_FALSE(p.fragment);
    EXPECT_EQ(p.src_port, 11);
  }
}

TEST(ParseIpv4, PortsOfTcpUdpSctp) {
  const Parsed tcp = parse_bytes(FrameBuilder().ipv4().tcp(0x1234, 0xfedc).build().bytes);
  EXPECT_EQ(tcp.protocol, dataplane::ip_protocol::tcp);
  EXPECT_EQ(tcp.src_port, 0x1234);
  EXPECT_EQ(tcp.dst_port, 0xfedc);
  const Parsed udp = parse_bytes(FrameBuilder().ipv4().udp(65535, 0).build().bytes);
  EXPECT_EQ(udp.protocol, dataplane::ip_protocol::udp);
  EXPECT_EQ(udp.src_port, 65535);
  EXPECT_EQ(udp.dst_port, 0);
  const Parsed sctp = parse_bytes(FrameBuilder().ipv4().sctp(2905, 2906).build().bytes);
  EXPECT_EQ(sctp.error, ParseError::none);
  EXPECT_EQ(sctp.protocol, dataplane::ip_protocol::sctp);
  EXPECT_EQ(sctp.src_port, 2905);
  EXPECT_EQ(sctp.dst_port, 2906);
}

TEST(ParseIpv4, OtherProtocolsHaveNoPortsAndNeedNoL4Bytes) {
  for (const std::uint8_t protocol : {next_header::icmp, next_header::gre, std::uint8_t{255}}) {
    for (const std::size_t length : {0u, 1u, 8u}) {
      SCOPED_TRACE(std::to_string(protocol) + " with " + std::to_string(length) + " bytes");
      const Parsed p = parse_bytes(FrameBuilder().ipv4().ip_payload(protocol, length).build().bytes);
      EXPECT_EQ(p.error, ParseError::none);
      EXPECT_EQ(p.protocol, protocol);
      EXPECT_FALSE(p.fragment);
      EXPECT_EQ(p.src_port, 0);
      EXPECT_EQ(p.dst_port, 0);
    }
  }
}

TEST(ParseIpv4, PortsCutShort) {
  const Frame frame = FrameBuilder().ipv4().udp(1, 2).build();
  // Cut by the capture...
  for (std::size_t l4 = 0; l4 < kPortsLength; ++l4) {
    EXPECT_EQ(Capture(frame.bytes, frame.l4_offset + l4).parse().error, ParseError::truncated_l4) << l4;
  }
  EXPECT_EQ(Capture(frame.bytes, frame.l4_offset + kPortsLength).parse().error, ParseError::none);
  // ...or by the datagram: a 3-byte UDP "header" followed by Ethernet padding has no ports.
  const Bytes short_datagram = padded(FrameBuilder().ipv4().ip_payload(next_header::udp, 3).build().bytes, kEthernetMinimumFrame);
  EXPECT_EQ(parse_bytes(short_datagram).error, ParseError::truncated_l4);
}

// --- IPv6 --------------------------------------------------------------------------------------------

TEST(ParseIpv6, UdpAndAddresses) {
  const Ipv6Spec spec;
  const Frame frame = FrameBuilder().ipv6(spec).udp(546, 547).payload(30).build();
  const Parsed p = parse_bytes(frame.bytes);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_EQ(p.l3, L3::ipv6);
  EXPECT_EQ(p.l3_offset, kEthernetLength);
  EXPECT_EQ(p.l3_length, kIpv6HeaderLength + 8 + 30);
  EXPECT_EQ(p.protocol, dataplane::ip_protocol::udp);
  EXPECT_FALSE(p.fragment);
  EXPECT_EQ(p.src_port, 546);
  EXPECT_EQ(p.dst_port, 547);
  EXPECT_EQ(p.src, spec.src);
  EXPECT_EQ(p.dst, spec.dst);
}

TEST(ParseIpv6, DscpAndEcnFromEveryTrafficClass) {
  for (unsigned tc = 0; tc < 256; ++tc) {
    // All-ones flow label: its bits sit beside the traffic class and must not leak into it.
    const Ipv6Spec spec{.traffic_class = static_cast<std::uint8_t>(tc), .flow_label = kFlowLabelAllOnes};
    const Parsed p = parse_bytes(FrameBuilder().ipv6(spec).udp(1, 2).build().bytes);
    ASSERT_EQ(p.error, ParseError::none);
    EXPECT_EQ(p.dscp, tc >> 2) << tc;
    EXPECT_EQ(p.ecn, tc & 3) << tc;
  }
}

TEST(ParseIpv6, BadVersion) {
  const Bytes frame = FrameBuilder().ipv6().udp(1, 2).build().bytes;
  for (const std::uint8_t first : {0x40, 0x70, 0x00}) {
    EXPECT_EQ(parse_bytes(with_byte(frame, kEthernetLength, first)).error, ParseError::bad_ipv6_version) << int{first};
  }
}

TEST(ParseIpv6, ShorterThanTheFixedHeader) {
  const Bytes frame = FrameBuilder().ipv6().ip_payload(next_header::no_next, 0).build().bytes;
  for (std::size_t l3 = 0; l3 < kIpv6HeaderLength; ++l3) {
    EXPECT_EQ(Capture(frame, kEthernetLength + l3).parse().error, ParseError::truncated_ipv6) << l3;
  }
  const Parsed p = parse_bytes(frame);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_EQ(p.protocol, next_header::no_next);
  EXPECT_EQ(p.l3_length, kIpv6HeaderLength);
}

TEST(ParseIpv6, PayloadLengthAgainstTheWire) {
  Frame frame = FrameBuilder().ipv6().tcp(1, 2).build();  // payload 20
  const std::size_t payload_length_offset = frame.l3_offset + 4;
  FrameBuilder::store16(frame.bytes, payload_length_offset, 21);
  EXPECT_EQ(parse_bytes(frame.bytes).error, ParseError::bad_ipv6_payload_length);
  // Padding after the datagram is fine, and the datagram's own length is what l3_length reports.
  FrameBuilder::store16(frame.bytes, payload_length_offset, 20);
  const Parsed p = parse_bytes(padded(frame.bytes, 100));
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_EQ(p.l3_length, kIpv6HeaderLength + 20);
  // A payload length of 0 before a TCP header: the ports are not part of the datagram.
  FrameBuilder::store16(frame.bytes, payload_length_offset, 0);
  EXPECT_EQ(parse_bytes(frame.bytes).error, ParseError::truncated_l4);
  // Inconsistent view: wire shorter than the Ethernet header.
  EXPECT_EQ(Capture(frame.bytes, std::nullopt, 3).parse().error, ParseError::bad_ipv6_payload_length);
}

TEST(ParseIpv6, LengthBeyondSixteenBitsSaturates) {
  // Only a coalesced (LRO) packet gets here: 40 + 65535 does not fit Parsed::l3_length.
  const Frame frame = FrameBuilder().ipv6().udp(1, 2).payload(65535 - 8).build();
  const Parsed p = parse_bytes(frame.bytes);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_EQ(p.l3_length, 65535);
  EXPECT_EQ(p.src_port, 1);
}

TEST(ParseIpv6, EachExtensionHeaderIsSkipped) {
  struct Case {
    std::string name;
    FrameBuilder builder;
  };
  std::vector<Case> cases;
  cases.push_back({"hop-by-hop 8", FrameBuilder().ipv6().ipv6_options(next_header::hop_by_hop, 8)});
  cases.push_back({"hop-by-hop 16", FrameBuilder().ipv6().ipv6_options(next_header::hop_by_hop, 16)});
  cases.push_back({"routing 24", FrameBuilder().ipv6().ipv6_options(next_header::routing, 24)});
  cases.push_back({"destination options 2048", FrameBuilder().ipv6().ipv6_options(next_header::destination_options, 2048)});
  cases.push_back({"AH 12", FrameBuilder().ipv6().ipv6_ah(12)});
  cases.push_back({"AH 24", FrameBuilder().ipv6().ipv6_ah(24)});
  cases.push_back({"AH 1028", FrameBuilder().ipv6().ipv6_ah(1028)});  // length field 255
  cases.push_back({"atomic fragment", FrameBuilder().ipv6().ipv6_fragment(0, false)});
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Frame frame = c.builder.tcp(3333, 4444).payload(5).build();
    const Parsed p = parse_bytes(frame.bytes);
    EXPECT_EQ(p.error, ParseError::none);
    EXPECT_EQ(p.protocol, dataplane::ip_protocol::tcp);
    EXPECT_FALSE(p.fragment);
    EXPECT_EQ(p.src_port, 3333);
    EXPECT_EQ(p.dst_port, 4444);
    EXPECT_EQ(p.l3_length, frame.bytes.size() - kEthernetLength);
  }
}

TEST(ParseIpv6, ChainOfEveryKind) {
  const Frame frame = FrameBuilder()
                          .vlan(ether_type::vlan, 42)
                          .ipv6()
                          .ipv6_options(next_header::hop_by_hop, 8)
                          .ipv6_options(next_header::destination_options, 16)
                          .ipv6_options(next_header::routing, 24)
                          .ipv6_fragment(0, false)
                          .ipv6_ah(16)
                          .ipv6_options(next_header::destination_options, 8)
                          .sctp(36412, 36412)
                          .build();
  const Parsed p = parse_bytes(frame.bytes);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_EQ(p.protocol, dataplane::ip_protocol::sctp);
  EXPECT_EQ(p.src_port, 36412);
  EXPECT_EQ(p.vlan_id, 42);
}

TEST(ParseIpv6, EightExtensionHeadersButNotNine) {
  FrameBuilder eight = FrameBuilder().ipv6();
  for (int i = 0; i < 8; ++i) eight.ipv6_options(next_header::destination_options);
  FrameBuilder nine = eight;
  nine.ipv6_options(next_header::destination_options);
  const Parsed p8 = parse_bytes(FrameBuilder(eight).udp(8, 8).build().bytes);
  EXPECT_EQ(p8.error, ParseError::none);
  EXPECT_EQ(p8.src_port, 8);
  EXPECT_EQ(parse_bytes(nine.udp(9, 9).build().bytes).error, ParseError::ipv6_extension_chain_too_long);
  // The ninth is refused on its announcement, before any of it is read.
  EXPECT_EQ(parse_bytes(FrameBuilder(eight).ip_payload(next_header::hop_by_hop, 0).build().bytes).error,
            ParseError::ipv6_extension_chain_too_long);
  // ESP ending a chain of eight is not a ninth extension header.
  EXPECT_EQ(parse_bytes(FrameBuilder(eight).ip_payload(next_header::esp, 16).build().bytes).error, ParseError::none);
}

TEST(ParseIpv6, FragmentHeaderThatFragments) {
  struct Case {
    std::uint16_t offset_units;
    bool more;
  };
  for (const Case c : {Case{0, true}, Case{1, false}, Case{100, true}, Case{8191, false}}) {
    SCOPED_TRACE(std::to_string(c.offset_units) + (c.more ? " M" : ""));
    // The first fragment carries the TCP header; later ones carry the datagram's continuation.
    FrameBuilder builder = FrameBuilder().ipv6().ipv6_options(next_header::hop_by_hop).ipv6_fragment(c.offset_units, c.more);
    const Frame frame = c.offset_units == 0 ? builder.tcp(80, 8080).payload(64).build()
                                            : builder.ip_payload(next_header::tcp, 3).build();
    const Parsed p = parse_bytes(frame.bytes);
    EXPECT_EQ(p.error, ParseError::none);
    EXPECT_TRUE(p.fragment);
    EXPECT_EQ(p.protocol, dataplane::ip_protocol::tcp);
    EXPECT_EQ(p.src_port, 0);
    EXPECT_EQ(p.dst_port, 0);
  }
}

TEST(ParseIpv6, FragmentHeaderReservedFieldsAreIgnored) {
  Frame frame = FrameBuilder().ipv6().ipv6_fragment(0, false).udp(53, 53).build();
  const std::size_t fragment_header = frame.l3_offset + kIpv6HeaderLength;
  frame.bytes[fragment_header + 1] = 0xff;   // reserved byte, not a length: the header is still 8 bytes
  frame.bytes[fragment_header + 3] |= 0x06;  // the two reserved bits beside M
  const Parsed p = parse_bytes(frame.bytes);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_FALSE(p.fragment);
  EXPECT_EQ(p.src_port, 53);
}

TEST(ParseIpv6, FragmentProtocolIsTheFragmentHeadersNextHeader) {
  // Headers after the fragment header belong to the fragmentable part: every fragment reports the
  // same protocol, the one the fragment header names.
  const Parsed p = parse_bytes(
      FrameBuilder().ipv6().ipv6_fragment(0, true).ipv6_options(next_header::destination_options).udp(1, 2).build().bytes);
  EXPECT_EQ(p.error, ParseError::none);
  EXPECT_TRUE(p.fragment);
  EXPECT_EQ(p.protocol, next_header::destination_options);
}

TEST(ParseIpv6, EspAndNoNextHeaderEndTheChain) {
  for (const std::uint8_t last : {next_header::esp, next_header::no_next}) {
    SCOPED_TRACE(static_cast<int>(last));
    const Parsed direct = parse_bytes(FrameBuilder().ipv6().ip_payload(last, 24).build().bytes);
    EXPECT_EQ(direct.error, ParseError::none);
    EXPECT_EQ(direct.protocol, last);
    EXPECT_EQ(direct.src_port, 0);
    const Parsed after = parse_bytes(FrameBuilder().ipv6().ipv6_options(next_header::hop_by_hop).ipv6_ah().ip_payload(last, 0).build().bytes);
    EXPECT_EQ(after.error, ParseError::none);
    EXPECT_EQ(after.protocol, last);
    EXPECT_FALSE(after.fragment);
  }
}

TEST(ParseIpv6, ExtensionCutShort) {
  const Frame frame = FrameBuilder().ipv6().ipv6_options(next_header::routing, 24).udp(1, 2).build();
  const std::size_t extension = frame.l3_offset + kIpv6HeaderLength;
  // Cut by the capture: before its length byte, and inside it.
  EXPECT_EQ(Capture(frame.bytes, extension + 1).parse().error, ParseError::truncated_ipv6_extension);
  EXPECT_EQ(Capture(frame.bytes, extension + 23).parse().error, ParseError::truncated_ipv6_extension);
  EXPECT_EQ(Capture(frame.bytes, extension + 24).parse().error, ParseError::truncated_l4);
  // Cut by the payload length (trailing bytes on the wire are not the datagram's).
  Bytes short_payload = frame.bytes;
  FrameBuilder::store16(short_payload, frame.l3_offset + 4, 16);
  EXPECT_EQ(parse_bytes(short_payload).error, ParseError::truncated_ipv6_extension);
  // A fragment header needs all 8 bytes.
  const Frame fragment = FrameBuilder().ipv6().ipv6_fragment(1, false).ip_payload(next_header::udp, 8).build();
  EXPECT_EQ(Capture(fragment.bytes, fragment.l3_offset + kIpv6HeaderLength + 7).parse().error,
            ParseError::truncated_ipv6_extension);
}

TEST(ParseIpv6, Icmpv6HasNoPorts) {
  for (const std::size_t length : {0u, 8u}) {
    const Parsed p = parse_bytes(FrameBuilder().ipv6().ip_payload(next_header::icmpv6, length).build().bytes);
    EXPECT_EQ(p.error, ParseError::none);
    EXPECT_EQ(p.protocol, dataplane::ip_protocol::icmpv6);
    EXPECT_EQ(p.src_port, 0);
    EXPECT_EQ(p.dst_port, 0);
  }
}

TEST(ParseIpv6, TcpUdpSctpPortsCutShort) {
  for (const std::uint8_t protocol : {next_header::tcp, next_header::udp, next_header::sctp}) {
    SCOPED_TRACE(static_cast<int>(protocol));
    const Parsed p = parse_bytes(FrameBuilder().ipv6().ip_payload(protocol, 3).build().bytes);
    EXPECT_EQ(p.error, ParseError::truncated_l4);
    EXPECT_EQ(p.protocol, protocol);
  }
}

// --- The inline path for the usual frame ----------------------------------------------------------

// Every field, pcp and tcp_flags included.
bool identical(const Parsed& a, const Parsed& b) {
  return describe(a) == describe(b) && a.pcp == b.pcp && a.tcp_flags == b.tcp_flags && a.src == b.src &&
         a.dst == b.dst;
}

// parse_plain_ipv4 either declines, leaving its Parsed fresh, or gives exactly what parse_any gives: over
// IPv4 frames of every protocol class, TOS, fragment field and header length, each cut at every length,
// with the wire longer, equal, shorter and tiny, a stripped tag or none, a tag in the frame, a bad
// version, a datagram too short for its ports. The usual frame, whole and good, must be taken inline (or the path would be dead code).
TEST(ParsePlainIpv4, DeclinesOrParsesExactlyAsTheGeneralParser) {
  constexpr std::uint16_t kMoreFragments = 0x2000, kReservedFlag = 0x8000;
  std::size_t accepted = 0, declined = 0;
  for (const std::uint8_t protocol : {next_header::tcp, next_header::udp, next_header::sctp, next_header::icmp,
                                      std::uint8_t{255}})
    for (const std::uint8_t tos : {std::uint8_t{0}, std::uint8_t{0xb9}})
      for (const std::uint16_t fragment : {kIpv4DontFragment, std::uint16_t{0}, kMoreFragments, std::uint16_t{1},
                                           kReservedFlag})
        for (const std::size_t options : {0u, 1u})
          for (const bool tagged : {false, true})
            for (const bool short_datagram : {false, true}) {  // 3 bytes of L4, then Ethernet padding
            FrameBuilder builder;
            if (tagged) builder.vlan(0x8100, 0x2005);
            builder.ipv4({.tos = tos, .option_words = options, .flags_fragment = fragment});
            if (short_datagram) builder.ip_payload(protocol, 3);
            else if (protocol == next_header::tcp) builder.tcp(40000, 443);
            else if (protocol == next_header::udp) builder.udp(53, 1234);
            else if (protocol == next_header::sctp) builder.sctp(2905, 2906);
            else builder.ip_payload(protocol, 8);
            Bytes bytes = builder.build().bytes;
            if (protocol == next_header::tcp && !short_datagram) bytes[bytes.size() - 7] = 0x12;  // SYN ACK
            if (short_datagram) bytes = padded(bytes, kEthernetMinimumFrame);
            for (const bool bad_version : {false, true}) {
              Bytes frame = bad_version ? with_byte(bytes, tagged ? 18 : 14, 0x65) : bytes;
              for (std::size_t captured = 0; captured <= frame.size(); ++captured)
                for (const std::size_t wire : {frame.size(), frame.size() - 1, frame.size() + 10, captured,
                                               std::size_t{13}, std::size_t{0}})
                  for (const bool stripped : {false, true}) {
                    SCOPED_TRACE("protocol " + std::to_string(protocol) + " short " + std::to_string(short_datagram) +
                                 " fragment " + std::to_string(fragment) +
                                 " options " + std::to_string(options) + " tagged " + std::to_string(tagged) +
                                 " bad version " + std::to_string(bad_version) + " captured " +
                                 std::to_string(captured) + " wire " + std::to_string(wire) + " stripped " +
                                 std::to_string(stripped));
                    Capture capture(frame, captured, wire);
                    if (stripped) capture.stripped(0x6007);
                    const Parsed general = dataplane::parse_any(capture.view);
                    Parsed fast;
                    if (dataplane::parse_plain_ipv4(capture.view, fast)) {
                      ++accepted;
                      ASSERT_EQ(general.error, ParseError::none);
                      ASSERT_TRUE(identical(fast, general)) << describe(fast) << " / " << describe(general);
                      const bool usual = !tagged && !stripped && options == 0 && !bad_version;
                      ASSERT_TRUE(usual);
                    } else {
                      ++declined;
                      ASSERT_TRUE(identical(fast, Parsed{}));
                      const bool whole_usual = !tagged && !stripped && options == 0 && !bad_version &&
                                               captured == frame.size() && wire == frame.size() &&
                                               general.error == ParseError::none;
                      ASSERT_FALSE(whole_usual) << "the usual frame went the general way";
                    }
                    ASSERT_TRUE(identical(capture.parse(), general));
                  }
            }
          }
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(declined, 0u);
}

}  // namespace
}  // namespace tricolor::test
