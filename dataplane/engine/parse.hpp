#pragma once
// Ethernet, 802.1Q and QinQ (0x8100, 0x88a8, and 0x9100 outer tags), IPv4 with options, IPv6 with
// extension headers skipped (hop-by-hop, routing, fragment, destination options, AH; ESP and "no next
// header" end the chain), TCP, UDP, SCTP, ICMP, ICMPv6. Every fragment of a datagram, first or later,
// is reported with ports 0 so that all fragments meet the same meter. Reads only within
// view.captured bytes whatever the frame says; a frame it cannot parse gets a ParseError.
#include "dataplane/engine/packet.hpp"

namespace tricolor::dataplane {

Parsed parse(const PacketView& view) noexcept;

}  // namespace tricolor::dataplane
