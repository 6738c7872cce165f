#include "dataplane/replay/link_types.hpp"

#include <pcap/pcap.h>

#include <algorithm>

namespace tricolor::dataplane::link_types {

namespace {
std::uint32_t be32(const std::uint8_t* bytes) {
  return std::uint32_t{bytes[0]} << 24 | std::uint32_t{bytes[1]} << 16 | std::uint32_t{bytes[2]} << 8 |
         std::uint32_t{bytes[3]};
}
}  // namespace

// pcapng carries LINKTYPE_ values; libpcap names DLT_ values. They are equal except for these, whose
// DLT_ values differ between platforms.
constexpr std::uint32_t kLinkTypeAtmRfc1483 = 100;
constexpr std::uint32_t kLinkTypeSlipBsdos = 102;
constexpr std::uint32_t kLinkTypePppBsdos = 103;

int dlt_for(std::uint32_t link_type) {
  switch (link_type) {
    case kLinkTypeAtmRfc1483: return DLT_ATM_RFC1483;
    case kRaw: return DLT_RAW;
    case kLinkTypeSlipBsdos: return DLT_SLIP_BSDOS;
    case kLinkTypePppBsdos: return DLT_PPP_BSDOS;
    default: return static_cast<int>(link_type);
  }
}

std::string name(std::uint32_t link_type) {
  const char* text = pcap_datalink_val_to_name(dlt_for(link_type));
  return "link type " + std::to_string(link_type) + " (" + (text != nullptr ? text : "unknown") + ")";
}

std::string refusal(std::uint32_t link_type) {
  return name(link_type) +
         " is not one tricolor reads: Ethernet (1), LINUX_SLL (113), LINUX_SLL2 (276), RAW (101), IPV4 (228), "
         "IPV6 (229), NULL (0) or LOOP (108)";
}

// The link types besides Ethernet that operators' captures come in, and how each is made an Ethernet
// frame for the engine (capture.hpp).
constexpr std::uint32_t kLinkTypeNull = 0;         // BSD loopback: the address family, host byte order
constexpr std::uint32_t kLinkTypeLoop = 108;       // OpenBSD loopback: the same, network byte order
constexpr std::uint32_t kLinkTypeLinuxSll = 113;   // Linux cooked v1: 16 bytes, the protocol last
constexpr std::uint32_t kLinkTypeLinuxSll2 = 276;  // Linux cooked v2: 20 bytes, the protocol first
constexpr std::uint32_t kLinkTypeIpv4 = 228;
constexpr std::uint32_t kLinkTypeIpv6 = 229;
constexpr std::uint16_t kEtherTypeIpv4 = 0x0800, kEtherTypeIpv6 = 0x86dd;
constexpr std::size_t kEtherTypeOffset = 12;

bool readable(std::uint32_t link_type) {
  switch (link_type) {
    case kLinkTypeEthernet: case kLinkTypeNull: case kLinkTypeLoop: case kLinkTypeLinuxSll:
    case kLinkTypeLinuxSll2: case kRaw: case kLinkTypeIpv4: case kLinkTypeIpv6: return true;
    default: return false;
  }
}

namespace {

std::size_t link_header_bytes(std::uint32_t link_type) {
  switch (link_type) {
    case kLinkTypeNull: case kLinkTypeLoop: return 4;
    case kLinkTypeLinuxSll: return 16;
    case kLinkTypeLinuxSll2: return 20;
    default: return 0;  // raw IP
  }
}

// A loopback header's address family: AF_INET is 2 everywhere; AF_INET6 is 10 (Linux), 24 (NetBSD,
// OpenBSD), 28 (FreeBSD), 30 (macOS).
std::uint16_t ether_type_of_family(std::uint32_t family) {
  if (family == 2) return kEtherTypeIpv4;
  if (family == 10 || family == 24 || family == 28 || family == 30) return kEtherTypeIpv6;
  return 0;
}

// The Ethernet type a record's link-layer header names (`data`: the record's bytes, header first); 0
// when it names none, or the header is cut short: the engine then takes the frame as not IP.
std::uint16_t ether_type_of(std::uint32_t link_type, std::span<const std::uint8_t> data) {
  const auto u16 = [&](std::size_t at) { return static_cast<std::uint16_t>(data[at] << 8 | data[at + 1]); };
  if (data.size() < link_header_bytes(link_type)) return 0;
  switch (link_type) {
    case kLinkTypeLinuxSll: return u16(14);
    case kLinkTypeLinuxSll2: return u16(0);
    case kLinkTypeLoop: return ether_type_of_family(be32(data.data()));
    case kLinkTypeNull: {
      // Host byte order of the capturing machine: a family fits 16 bits, so the other order shows.
      const std::uint32_t family = be32(data.data());
      return ether_type_of_family(family > 0xffff ? __builtin_bswap32(family) : family);
    }
    case kLinkTypeIpv4: return kEtherTypeIpv4;
    case kLinkTypeIpv6: return kEtherTypeIpv6;
    case kRaw:
      if (data.empty()) return 0;
      return (data[0] >> 4) == 4 ? kEtherTypeIpv4 : (data[0] >> 4) == 6 ? kEtherTypeIpv6 : 0;
    default: return 0;
  }
}

}  // namespace

// A record of a link type other than Ethernet, made an Ethernet frame in place (capture.hpp).
void to_ethernet(std::uint32_t link_type, CaptureRecord& record) {
  record.link_header.clear();
  if (link_type == kLinkTypeEthernet) return;
  const std::uint16_t ether_type = ether_type_of(link_type, record.data);
  const std::size_t header = std::min(link_header_bytes(link_type), record.data.size());
  record.link_header.assign(record.data.begin(), record.data.begin() + static_cast<std::ptrdiff_t>(header));
  if (header > kEthernetHeaderBytes)
    record.data.erase(record.data.begin(), record.data.begin() + static_cast<std::ptrdiff_t>(header - kEthernetHeaderBytes));
  else
    record.data.insert(record.data.begin(), kEthernetHeaderBytes - header, 0);
  std::fill(record.data.begin(), record.data.begin() + kEtherTypeOffset, 0);
  record.data[kEtherTypeOffset] = static_cast<std::uint8_t>(ether_type >> 8);
  record.data[kEtherTypeOffset + 1] = static_cast<std::uint8_t>(ether_type);
  record.wire_length = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(UINT32_MAX, std::uint64_t{record.wire_length} - std::min<std::uint64_t>(record.wire_length, header) +
                                              kEthernetHeaderBytes));
}


std::span<const std::uint8_t> frame_for(std::uint32_t link_type, const CaptureRecord& record,
                                        std::vector<std::uint8_t>& scratch, std::uint64_t& wire_length) {
  wire_length = record.wire_length;
  if (link_type == kLinkTypeEthernet) return record.data;
  const std::size_t ethernet = std::min(record.data.size(), kEthernetHeaderBytes);
  scratch.assign(record.link_header.begin(), record.link_header.end());
  scratch.insert(scratch.end(), record.data.begin() + static_cast<std::ptrdiff_t>(ethernet), record.data.end());
  wire_length = wire_length - std::min<std::uint64_t>(wire_length, kEthernetHeaderBytes) + record.link_header.size();
  return scratch;
}

}  // namespace tricolor::dataplane::link_types
