// remark_dscp() and set_pcp(): exactly the bits they own change. IPv4 checksums are checked against a
// recomputation from scratch (frame_builder.hpp), and a wrong checksum must stay wrong by the same
// ones' complement amount.
#include <gtest/gtest.h>

#include <string>

#include "tests/dataplane/engine/frame_builder.hpp"

namespace tricolor::test {
namespace {

using dataplane::remark_dscp;
using dataplane::set_pcp;

constexpr std::size_t kTosOffset = 1;
constexpr std::uint32_t kOnesComplementModulus = 0xffff;  // 0x0000 and 0xffff are both zero
constexpr std::uint8_t kDscpValues = 64;
constexpr std::uint8_t kPcpValues = 8;

std::uint16_t load16(const Bytes& bytes, std::size_t offset) {
  return static_cast<std::uint16_t>((bytes[offset] << 8) | bytes[offset + 1]);
}

std::uint16_t stored_checksum(const Bytes& bytes, std::size_t ip) { return load16(bytes, ip + kIpv4ChecksumOffset); }
std::uint16_t recomputed_checksum(const Bytes& bytes, std::size_t ip) {
  return FrameBuilder::ipv4_checksum(bytes, ip, (bytes[ip] & 0x0f) * 4u);
}
// How far a stored checksum is from the right one, in ones' complement arithmetic.
std::uint32_t checksum_error(const Bytes& bytes, std::size_t ip) {
  return (stored_checksum(bytes, ip) + kOnesComplementModulus - recomputed_checksum(bytes, ip)) % kOnesComplementModulus;
}

// Every byte equal except at the listed offsets.
void expect_only_changed(const Bytes& before, const Bytes& after, std::vector<std::size_t> allowed) {
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (std::find(allowed.begin(), allowed.end(), i) != allowed.end()) continue;
    EXPECT_EQ(before[i], after[i]) << "byte " << i;
  }
}

// Parses the capture, remarks it and checks the result parses the same but for the DSCP.
void remark_and_reparse(Capture& capture, std::uint8_t dscp) {
  const Parsed before = capture.parse();
  ASSERT_EQ(before.error, ParseError::none);
  ASSERT_TRUE(remark_dscp(capture.view, before, dscp));
  Parsed expected = before;
  expected.dscp = dscp;
  expect_same_parse(capture.parse(), expected);
}

// --- DSCP, IPv4 --------------------------------------------------------------------------------------

TEST(RemarkDscpIpv4, KeepsEcnAndTheChecksumRight) {
  for (const std::size_t option_words : {0u, 3u}) {
    for (std::uint8_t ecn = 0; ecn < 4; ++ecn) {
      for (const std::uint8_t old_dscp : {0, 10, 46, 63}) {
        const Ipv4Spec spec{.tos = static_cast<std::uint8_t>(old_dscp << 2 | ecn), .option_words = option_words};
        const Frame frame = FrameBuilder().vlan(ether_type::vlan, 5).ipv4(spec).udp(1, 2).payload(9).build();
        for (std::uint8_t dscp = 0; dscp < kDscpValues; ++dscp) {
          SCOPED_TRACE("ecn " + std::to_string(ecn) + " dscp " + std::to_string(old_dscp) + " -> " + std::to_string(dscp));
          Capture capture(frame.bytes);
          remark_and_reparse(capture, dscp);
          const std::size_t ip = frame.l3_offset;
          EXPECT_EQ(capture.buffer[ip + kTosOffset], dscp << 2 | ecn);
          EXPECT_EQ(stored_checksum(capture.buffer, ip), recomputed_checksum(capture.buffer, ip));
          expect_only_changed(frame.bytes, capture.buffer, {ip + kTosOffset, ip + kIpv4ChecksumOffset, ip + kIpv4ChecksumOffset + 1});
        }
      }
    }
  }
}

TEST(RemarkDscpIpv4, ChecksumsAtTheOnesComplementEdges) {
  // Headers whose right checksum before or after the remark is 0x0000 (their sum is 0xffff, "-0"):
  // the incremental update must land on the same representation as a recomputation.
  int after_zero = 0, before_zero = 0;
  for (unsigned id = 0; id <= 0xffff; ++id) {
    const Frame frame = FrameBuilder().ipv4({.tos = 0x01, .identification = static_cast<std::uint16_t>(id)}).build();
    const std::size_t ip = frame.l3_offset;
    Bytes remarked = frame.bytes;
    remarked[ip + kTosOffset] = (46 << 2) | 0x01;
    const bool zero_before = stored_checksum(frame.bytes, ip) == 0;
    const bool zero_after = recomputed_checksum(remarked, ip) == 0;
    if (!zero_before && !zero_after) continue;
    after_zero += zero_after;
    before_zero += zero_before;
    SCOPED_TRACE(id);
    Capture capture(frame.bytes);
    remark_and_reparse(capture, 46);
    EXPECT_EQ(stored_checksum(capture.buffer, ip), recomputed_checksum(capture.buffer, ip));
  }
  EXPECT_GT(after_zero, 0);
  EXPECT_GT(before_zero, 0);
}

TEST(RemarkDscpIpv4, WrongChecksumStaysWrongByTheSameAmount) {
  const Frame frame = FrameBuilder().ipv4({.tos = 0x03, .option_words = 2}).tcp(1, 2).build();
  const std::size_t ip = frame.l3_offset;
  const std::uint16_t right = stored_checksum(frame.bytes, ip);
  for (const std::uint16_t delta : {1, 2, 0x100, 0x7fff, 0x8000, 0xfffe, 0xffff}) {
    for (std::uint8_t dscp = 0; dscp < kDscpValues; ++dscp) {
      SCOPED_TRACE("delta " + std::to_string(delta) + " dscp " + std::to_string(dscp));
      Bytes wrong = frame.bytes;
      FrameBuilder::store16(wrong, ip + kIpv4ChecksumOffset, static_cast<std::uint16_t>(right + delta));
      const std::uint32_t error_before = checksum_error(wrong, ip);
      Capture capture(wrong);
      remark_and_reparse(capture, dscp);
      EXPECT_EQ(checksum_error(capture.buffer, ip), error_before);
    }
  }
}

TEST(RemarkDscpIpv4, SameDscpChangesNoByte) {
  Frame frame = FrameBuilder().ipv4({.tos = (26 << 2) | 2}).udp(1, 2).build();
  FrameBuilder::store16(frame.bytes, frame.l3_offset + kIpv4ChecksumOffset, 0xffff);  // wrong, "-0" form
  Capture capture(frame.bytes);
  remark_and_reparse(capture, 26);
  EXPECT_EQ(capture.buffer, frame.bytes);
}

// --- DSCP, IPv6 --------------------------------------------------------------------------------------

TEST(RemarkDscpIpv6, TrafficClassAcrossTwoBytes) {
  for (unsigned traffic_class = 0; traffic_class < 256; traffic_class += 5) {  // every ECN, many DSCPs
    const Ipv6Spec spec{.traffic_class = static_cast<std::uint8_t>(traffic_class), .flow_label = kFlowLabelAllOnes};
    const Frame frame = FrameBuilder().ipv6(spec).ipv6_options(next_header::hop_by_hop).tcp(1, 2).build();
    for (std::uint8_t dscp = 0; dscp < kDscpValues; ++dscp) {
      SCOPED_TRACE("tc " + std::to_string(traffic_class) + " -> dscp " + std::to_string(dscp));
      Capture capture(frame.bytes);
      remark_and_reparse(capture, dscp);
      const std::size_t ip = frame.l3_offset;
      const unsigned expected_tc = (dscp << 2) | (traffic_class & 3);
      EXPECT_EQ(capture.buffer[ip], 0x60 | (expected_tc >> 4));            // version kept
      EXPECT_EQ(capture.buffer[ip + 1], ((expected_tc & 0x0f) << 4) | 0x0f);  // flow label's top kept
      expect_only_changed(frame.bytes, capture.buffer, {ip, ip + 1});
    }
  }
}

// --- DSCP refusals -----------------------------------------------------------------------------------

TEST(RemarkDscp, RefusesAndChangesNothing) {
  struct Case {
    std::string name;
    Bytes frame;
    std::uint8_t dscp;
  };
  const std::vector<Case> cases = {
      {"arp", FrameBuilder().ether_payload(ether_type::arp, 28).build().bytes, 10},
      {"tagged lacp", FrameBuilder().vlan(ether_type::vlan, 1).ether_payload(ether_type::lacp, 100).build().bytes, 10},
      {"parse error", FrameBuilder().ipv4().ip_payload(next_header::tcp, 2).build().bytes, 10},
      {"ipv4 dscp over 6 bits", FrameBuilder().ipv4().udp(1, 2).build().bytes, 64},
      {"ipv6 dscp over 6 bits", FrameBuilder().ipv6().udp(1, 2).build().bytes, 255},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Capture capture(c.frame);
    EXPECT_FALSE(remark_dscp(capture.view, capture.parse(), c.dscp));
    EXPECT_EQ(capture.buffer, c.frame);
  }
}

TEST(RemarkDscp, AParsedOfAnotherFrameCannotWriteOutOfBounds) {
  const Bytes frame = FrameBuilder().ether_payload(ether_type::arp, 28).build().bytes;
  for (const L3 l3 : {L3::ipv4, L3::ipv6}) {
    Capture capture(frame);
    Parsed foreign;
    foreign.l3 = l3;
    foreign.l3_offset = static_cast<std::uint16_t>(frame.size() - 1);
    EXPECT_FALSE(remark_dscp(capture.view, foreign, 1));
    EXPECT_EQ(capture.buffer, frame);
  }
}

// --- PCP ---------------------------------------------------------------------------------------------

TEST(SetPcp, SingleTagKeepsDeiAndVid) {
  const Frame frame = FrameBuilder().vlan(ether_type::vlan, 0x1abc).ipv4().udp(1, 2).build();  // DEI set
  for (std::uint8_t pcp = 0; pcp < kPcpValues; ++pcp) {
    SCOPED_TRACE(static_cast<int>(pcp));
    Capture capture(frame.bytes);
    const Parsed before = capture.parse();
    ASSERT_TRUE(set_pcp(capture.view, before, pcp));
    EXPECT_EQ(load16(capture.buffer, kEthernetLength), (pcp << 13) | 0x1abc);
    expect_only_changed(frame.bytes, capture.buffer, {kEthernetLength});
    expect_same_parse(capture.parse(), before);
  }
}

TEST(SetPcp, QinQChangesTheOuterTagOnly) {
  const Frame frame = FrameBuilder().vlan(ether_type::qinq, 0xe064).vlan(ether_type::vlan, 0xa0c8).ipv6().udp(1, 2).build();
  Capture capture(frame.bytes);
  const Parsed before = capture.parse();
  ASSERT_TRUE(set_pcp(capture.view, before, 2));
  EXPECT_EQ(load16(capture.buffer, kEthernetLength), 0x4064);
  EXPECT_EQ(load16(capture.buffer, kEthernetLength + 4), 0xa0c8);
  expect_only_changed(frame.bytes, capture.buffer, {kEthernetLength});
  expect_same_parse(capture.parse(), before);
}

TEST(SetPcp, StrippedTagIsTheOneChanged) {
  for (const bool in_frame_tag : {false, true}) {
    SCOPED_TRACE(in_frame_tag);
    FrameBuilder builder;
    if (in_frame_tag) builder.vlan(ether_type::vlan, 0x6123);
    const Frame frame = builder.ipv4().tcp(1, 2).build();
    for (std::uint8_t pcp = 0; pcp < kPcpValues; ++pcp) {
      Capture capture(frame.bytes);
      capture.stripped(0xb0ff);  // PCP 5, DEI set, VID 0x0ff
      const Parsed before = capture.parse();
      ASSERT_TRUE(set_pcp(capture.view, before, pcp));
      EXPECT_EQ(capture.view.stripped_tci, (pcp << 13) | 0x10ff);
      EXPECT_TRUE(capture.view.has_stripped_vlan);
      EXPECT_EQ(capture.buffer, frame.bytes);  // the in-frame tag is inner: untouched
      expect_same_parse(capture.parse(), before);
    }
  }
}

TEST(SetPcp, RefusesAndChangesNothing) {
  struct Case {
    std::string name;
    Bytes frame;
    std::uint8_t pcp;
  };
  const std::vector<Case> cases = {
      {"untagged ipv4", FrameBuilder().ipv4().udp(1, 2).build().bytes, 3},
      {"untagged arp", FrameBuilder().ether_payload(ether_type::arp, 28).build().bytes, 3},
      {"pcp over 3 bits", FrameBuilder().vlan(ether_type::vlan, 1).ipv4().udp(1, 2).build().bytes, 8},
      {"parse error", FrameBuilder().vlan(ether_type::vlan, 1).ipv4().ip_payload(next_header::udp, 1).build().bytes, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Capture capture(c.frame);
    EXPECT_FALSE(set_pcp(capture.view, capture.parse(), c.pcp));
    EXPECT_EQ(capture.buffer, c.frame);
  }
  Capture stripped(FrameBuilder().ipv4().udp(1, 2).build().bytes);
  stripped.stripped(0x0001);
  EXPECT_FALSE(set_pcp(stripped.view, stripped.parse(), 8));
  EXPECT_EQ(stripped.view.stripped_tci, 0x0001);
}

TEST(SetPcp, AParsedOfAnotherFrameCannotWriteOutOfBounds) {
  const Bytes frame = FrameBuilder().ether_payload(ether_type::arp, 28).build().bytes;
  Capture capture(frame);
  Parsed foreign;
  foreign.has_vlan = true;
  foreign.frame_vlans = 1;
  foreign.outer_tci_offset = static_cast<std::uint16_t>(frame.size());
  EXPECT_FALSE(set_pcp(capture.view, foreign, 1));
  EXPECT_EQ(capture.buffer, frame);
}

}  // namespace
}  // namespace tricolor::test
