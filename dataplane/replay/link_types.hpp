#pragma once
// The link types a capture may have (LINKTYPE_ values, as pcap file headers and pcapng interfaces carry
// them), and how a record of one that is not Ethernet becomes an Ethernet frame for the engine and back
// (capture.hpp says what operators see). Used by the capture readers and the writer.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dataplane/replay/capture.hpp"

namespace tricolor::dataplane::link_types {

inline constexpr std::uint32_t kRaw = 101;  // raw IP; libpcap names it DLT_RAW, whose value varies
inline constexpr std::size_t kEthernetHeaderBytes = 14;

// libpcap's DLT_ value for a LINKTYPE_ value.
int dlt_for(std::uint32_t link_type);
// "link type 113 (LINUX_SLL)".
std::string name(std::uint32_t link_type);
// Why a capture of this link type is refused, naming the ones read.
std::string refusal(std::uint32_t link_type);
bool readable(std::uint32_t link_type);

// A record of `link_type` made an Ethernet frame in place: its link-layer header moved to
// record.link_header, 14 bytes naming the protocol in its place, wire_length counting those.
void to_ethernet(std::uint32_t link_type, CaptureRecord& record);
// The bytes to write for a record read from a capture of `link_type` (Ethernet: its data as it is;
// else its own link-layer header and what follows the 14 Ethernet bytes, built in `scratch`), and the
// wire length that goes with them.
std::span<const std::uint8_t> frame_for(std::uint32_t link_type, const CaptureRecord& record,
                                        std::vector<std::uint8_t>& scratch, std::uint64_t& wire_length);

}  // namespace tricolor::dataplane::link_types
