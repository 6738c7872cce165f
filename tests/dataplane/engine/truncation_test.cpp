// The truncation sweep: every prefix of a set of valid frames, each in a heap buffer of exactly its
// size (under ASan a read past the capture fails the test). A snaplen cut (captured = prefix, wire
// length = the whole frame) must give the truncation error of the header it cuts, exactly when it
// cuts a header the parser needs, and otherwise parse exactly like the whole frame. A frame cut on
// the wire (wire length = prefix too) must never pass as a whole IP datagram.
#include <gtest/gtest.h>

#include <string>

#include "tests/dataplane/engine/frame_builder.hpp"

namespace tricolor::test {
namespace {

struct NamedFrame {
  std::string name;
  Frame frame;
};

std::vector<NamedFrame> valid_frames() {
  std::vector<NamedFrame> frames;
  frames.push_back({"arp", FrameBuilder().ether_payload(ether_type::arp, 28).build()});
  frames.push_back({"lacp in qinq", FrameBuilder().vlan(ether_type::qinq, 1).vlan(ether_type::vlan, 2).ether_payload(ether_type::lacp, 110).build()});
  frames.push_back({"ipv4 tcp", FrameBuilder().ipv4().tcp(1, 2).payload(16).build()});
  frames.push_back({"802.1q ipv4 ihl 15 udp", FrameBuilder().vlan(ether_type::vlan, 7).ipv4({.option_words = 10}).udp(3, 4).payload(3).build()});
  frames.push_back({"0x9100 qinq ipv4 sctp", FrameBuilder().vlan(ether_type::qinq_legacy, 8).vlan(ether_type::vlan, 9).ipv4().sctp(5, 6).build()});
  frames.push_back({"ipv4 first fragment", FrameBuilder().ipv4({.flags_fragment = kIpv4MoreFragments}).tcp(1, 2).payload(8).build()});
  frames.push_back({"ipv4 later fragment", FrameBuilder().ipv4({.flags_fragment = 3}).ip_payload(next_header::udp, 24).build()});
  frames.push_back({"ipv4 icmp", FrameBuilder().ipv4().ip_payload(next_header::icmp, 8).build()});
  frames.push_back({"ipv6 udp", FrameBuilder().ipv6().udp(7, 8).payload(4).build()});
  frames.push_back({"ipv6 icmpv6", FrameBuilder().ipv6().ip_payload(next_header::icmpv6, 8).build()});
  frames.push_back({"ipv6 no next header", FrameBuilder().ipv6().ip_payload(next_header::no_next, 0).build()});
  frames.push_back({"ipv6 chain", FrameBuilder()
                                       .ipv6()
                                       .ipv6_options(next_header::hop_by_hop, 16)
                                       .ipv6_options(next_header::routing, 24)
                                       .ipv6_fragment(0, false)
                                       .ipv6_ah(20)
                                       .ipv6_options(next_header::destination_options, 8)
                                       .tcp(9, 10)
                                       .build()});
  frames.push_back({"ipv6 first fragment", FrameBuilder().ipv6().ipv6_options(next_header::hop_by_hop).ipv6_fragment(0, true).tcp(1, 2).build()});
  frames.push_back({"ipv6 later fragment", FrameBuilder().ipv6().ipv6_fragment(9, false).ip_payload(next_header::udp, 16).build()});
  frames.push_back({"ipv6 esp", FrameBuilder().ipv6().ipv6_options(next_header::hop_by_hop).ip_payload(next_header::esp, 32).build()});
  FrameBuilder eight = FrameBuilder().vlan(ether_type::vlan, 3).ipv6();
  for (int i = 0; i < 8; ++i) eight.ipv6_options(next_header::destination_options);
  frames.push_back({"ipv6 eight extension headers", eight.udp(11, 12).build()});
  return frames;
}

void sweep(const Frame& frame, std::optional<std::uint16_t> stripped_tci) {
  Capture whole(frame.bytes);
  if (stripped_tci) whole.stripped(*stripped_tci);
  const Parsed full = whole.parse();
  ASSERT_EQ(full.error, ParseError::none) << describe(full);
  ASSERT_LE(frame.needed_length(), frame.bytes.size());
  for (std::size_t prefix = 0; prefix <= frame.bytes.size(); ++prefix) {
    SCOPED_TRACE("captured " + std::to_string(prefix) + " of " + std::to_string(frame.bytes.size()));
    Capture cut(frame.bytes, prefix, frame.bytes.size());
    if (stripped_tci) cut.stripped(*stripped_tci);
    const Parsed p = cut.parse();
    ASSERT_EQ(p.error, frame.error_for_capture(prefix)) << describe(p);
    if (prefix >= frame.needed_length()) expect_same_parse(p, full);
  }
}

TEST(TruncationSweep, SnaplenCutsGiveTheCutHeadersError) {
  for (const NamedFrame& named : valid_frames()) {
    SCOPED_TRACE(named.name);
    sweep(named.frame, std::nullopt);
  }
}

TEST(TruncationSweep, SameWithAStrippedTag) {
  for (const NamedFrame& named : valid_frames()) {
    SCOPED_TRACE(named.name);
    sweep(named.frame, 0x2fff);
  }
}

TEST(TruncationSweep, FramesCutOnTheWireAreNeverWholeDatagrams) {
  for (const NamedFrame& named : valid_frames()) {
    SCOPED_TRACE(named.name);
    const bool ip = named.frame.l3_offset != 0;
    for (std::size_t prefix = 0; prefix < named.frame.bytes.size(); ++prefix) {
      SCOPED_TRACE(prefix);
      const Parsed p = Capture(named.frame.bytes, prefix, prefix).parse();
      if (ip) {
        EXPECT_NE(p.error, ParseError::none) << describe(p);
      } else {
        EXPECT_EQ(p.error, named.frame.error_for_capture(prefix)) << describe(p);
      }
    }
  }
}

}  // namespace
}  // namespace tricolor::test
