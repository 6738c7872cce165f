#pragma once
// Reading and writing captures: pcap (microsecond and nanosecond, either byte order) through libpcap,
// and pcapng (section header, interface description, enhanced and simple packet blocks; if_tsresol,
// if_tsoffset, if_fcslen, epb_flags) read by our own code so that each packet's interface id is known
// (libpcap does not expose it).
// Link types: Ethernet, and the ones operators' captures come in: Linux "cooked" (LINUX_SLL and
// LINUX_SLL2, what `tcpdump -i any` writes), raw IP (RAW, IPV4, IPV6) and BSD loopback (NULL, LOOP).
// A record of another link type is handed over as an Ethernet frame: its link-layer header replaced by
// 14 bytes (zero addresses, the Ethernet type the header names, or 0 when it names none the engine
// knows: such a frame is not IP), the header kept aside in `link_header` so that the writer can put it
// back. A pcapng capture's interfaces must all be of one link type.
// Records never hold an FCS: one the capture declares (pcap: the FCS length in the link-type word;
// pcapng: if_fcslen, or a packet's epb_flags) is removed from the end of each frame, so that data and
// wire_length are the frame without FCS, as L2 lengths count it. A frame no longer than its FCS becomes
// an empty record of wire length 0.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "policer/expected.hpp"

namespace tricolor::dataplane {

struct CaptureRecord {
  std::uint64_t timestamp_ns = 0;   // since the epoch
  std::uint32_t wire_length = 0;    // original length on the wire, without FCS
  std::uint16_t interface = 0;      // pcapng interface id; 0 for pcap
  std::vector<std::uint8_t> data;   // captured bytes (possibly fewer than wire_length)
  // A capture that is not Ethernet: the record's own link-layer header (data then starts with 14
  // Ethernet bytes in its place, and wire_length counts those instead). Empty for Ethernet and raw IP.
  std::vector<std::uint8_t> link_header;
};

inline constexpr std::uint32_t kLinkTypeEthernet = 1;  // LINKTYPE_ETHERNET

enum class CaptureFormat { pcap, pcapng };

class CaptureReader {
 public:
  virtual ~CaptureReader() = default;
  // Opens a pcap or pcapng file, telling them apart by their magic number. Errors name the file and
  // what is wrong with it (missing, not a capture, unsupported link type, ...).
  static Expected<std::unique_ptr<CaptureReader>> open(const std::string& path);
  // The same from bytes in memory (tests and fuzzing); `name` stands for the path in errors.
  static Expected<std::unique_ptr<CaptureReader>> open_bytes(std::vector<std::uint8_t> bytes,
                                                             const std::string& name = "<memory>");

  // The next record, false at the end. A file cut short inside a record (or a block) ends the capture
  // there: the records before it were returned, and truncated() says so.
  virtual bool next(CaptureRecord& record) = 0;
  virtual bool truncated() const = 0;
  // Why reading stopped early (a record cut short, a malformed block, ...); empty unless truncated().
  virtual std::string stop_reason() const = 0;
  virtual CaptureFormat format() const = 0;
  // The capture's LINKTYPE_ value (kLinkTypeEthernet, 113 for LINUX_SLL, ...).
  virtual std::uint32_t link_type() const = 0;
};

// Writes a nanosecond-resolution pcap of frames without FCS, of the reader's link type (Ethernet: 1).
class CaptureWriter {
 public:
  virtual ~CaptureWriter() = default;
  // `link_type`: the capture's LINKTYPE_ value (one the reader accepts): records are written back with
  // their own link-layer header in place of the 14 Ethernet bytes the reader put there.
  static Expected<std::unique_ptr<CaptureWriter>> open(const std::string& path,
                                                       std::uint32_t link_type = kLinkTypeEthernet);
  virtual void write(const CaptureRecord& record) = 0;

  // pcap's seconds are unsigned 32 bits: a record from 2106-02-07 06:28:16 UTC on is still written, with
  // its seconds modulo 2^32 (so it reads back as 136 years earlier), and counted here so that the caller
  // can warn. `first_ns` is the first such record's timestamp (ns since the epoch), 0 while count is 0.
  struct OutOfRangeTimestamps {
    std::uint64_t count = 0;
    std::uint64_t first_ns = 0;
  };
  virtual OutOfRangeTimestamps out_of_range_timestamps() const = 0;

  // Flushes and closes; false (with the reason) if the data could not be written.
  virtual Expected<bool> close() = 0;
};

}  // namespace tricolor::dataplane
