#pragma once
// Rewrites applied to forwarded packets. Both work in place on a frame that parse() accepted.
#include <cstdint>

#include "dataplane/engine/packet.hpp"

namespace tricolor::dataplane {

// Sets the DSCP of an IPv4 or IPv6 packet, keeping the two ECN bits. IPv4: the header checksum is
// updated incrementally (RFC 1624), never recomputed from scratch, so a packet that arrived with a
// wrong checksum keeps it wrong by the same amount. IPv6: the traffic class. Returns false (and
// changes nothing) for a non-IP frame.
bool remark_dscp(PacketView& view, const Parsed& parsed, std::uint8_t dscp) noexcept;

// Sets the PCP of the outermost VLAN tag: the NIC-stripped TCI if there is one, else the first tag in
// the frame. Returns false (and changes nothing) for an untagged frame.
bool set_pcp(PacketView& view, const Parsed& parsed, std::uint8_t pcp) noexcept;

// Test instrumentation (tricolord --stamp-generation): writes `value` into an IPv4 packet's
// identification field, the checksum updated incrementally as remark_dscp does. Returns false (and
// changes nothing) for anything but an accepted IPv4 frame.
bool stamp_ipv4_identification(PacketView& view, const Parsed& parsed, std::uint16_t value) noexcept;

}  // namespace tricolor::dataplane
