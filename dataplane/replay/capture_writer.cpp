// Writing captures: a nanosecond pcap through libpcap, of the link type the capture was read with
// (link_types.hpp puts each record's own link-layer header back).
#include <pcap/pcap.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>

#include "dataplane/replay/capture.hpp"
#include "dataplane/replay/link_types.hpp"
#include "policer/quote.hpp"

namespace tricolor::dataplane {
namespace {

constexpr std::uint64_t kNanosecondsPerSecond = 1'000'000'000;
constexpr int kWriterSnapLength = 262144;  // libpcap's largest Ethernet snapshot length
constexpr std::uint64_t kPcapSecondsMask = 0xffffffff;  // pcap seconds are 32 bits

struct PcapCloser {
  void operator()(pcap_t* pcap) const noexcept { pcap_close(pcap); }
};
using PcapPtr = std::unique_ptr<pcap_t, PcapCloser>;

class PcapWriter final : public CaptureWriter {
 public:
  PcapWriter(std::string path, PcapPtr dead, pcap_dumper_t* dumper, std::uint32_t link_type)
      : path_(std::move(path)), dead_(std::move(dead)), dumper_(dumper), link_type_(link_type) {}

  ~PcapWriter() override {
    if (dumper_ != nullptr) {
      pcap_dump_close(dumper_);
    }
  }

  void write(const CaptureRecord& record) override {
    if (dumper_ == nullptr) {
      return;
    }
    pcap_pkthdr header{};
    // pcap holds 32-bit seconds: times from 2106 on wrap around, and are counted for the caller to warn.
    const std::uint64_t seconds = record.timestamp_ns / kNanosecondsPerSecond;
    if (seconds > kPcapSecondsMask) {
      if (out_of_range_.count == 0) {
        out_of_range_.first_ns = record.timestamp_ns;
      }
      ++out_of_range_.count;
    }
    header.ts.tv_sec = static_cast<time_t>(seconds & kPcapSecondsMask);
    header.ts.tv_usec = static_cast<suseconds_t>(record.timestamp_ns % kNanosecondsPerSecond);
    // Not Ethernet: the record's own link-layer header back in place of the reader's 14 bytes.
    std::uint64_t wire_length = 0;
    const std::span<const std::uint8_t> bytes = link_types::frame_for(link_type_, record, frame_, wire_length);
    // Longer frames are cut to the snapshot length so that libpcap can read the file back, and the
    // wire length is never below the captured length.
    header.caplen = static_cast<bpf_u_int32>(std::min<std::size_t>(bytes.size(), static_cast<std::size_t>(kWriterSnapLength)));
    header.len = std::max(static_cast<bpf_u_int32>(std::min<std::uint64_t>(wire_length, UINT32_MAX)), header.caplen);
    pcap_dump(reinterpret_cast<u_char*>(dumper_), &header, bytes.data());
    if (write_errno_ == 0 && std::ferror(pcap_dump_file(dumper_))) {
      write_errno_ = errno != 0 ? errno : EIO;
    }
  }

  OutOfRangeTimestamps out_of_range_timestamps() const override { return out_of_range_; }

  Expected<bool> close() override {
    if (dumper_ == nullptr) {
      return Error{path_, "capture " + quote(path_, kQuotePathMaxBytes) + " is already closed"};
    }
    int error = write_errno_;
    if (pcap_dump_flush(dumper_) != 0 && error == 0) {
      error = errno != 0 ? errno : EIO;
    }
    if (std::ferror(pcap_dump_file(dumper_)) && error == 0) {
      error = EIO;
    }
    pcap_dump_close(dumper_);
    dumper_ = nullptr;
    if (error != 0) {
      return Error{path_, "cannot write capture " + quote(path_, kQuotePathMaxBytes) + ": " + std::strerror(error)};
    }
    return true;
  }

 private:
  std::string path_;
  PcapPtr dead_;
  pcap_dumper_t* dumper_;
  std::uint32_t link_type_;
  std::vector<std::uint8_t> frame_;  // a record with its own link-layer header, reused
  int write_errno_ = 0;
  OutOfRangeTimestamps out_of_range_;
};

}  // namespace

Expected<std::unique_ptr<CaptureWriter>> CaptureWriter::open(const std::string& path, std::uint32_t link_type) {
  if (!link_types::readable(link_type))
    return Error{path, "cannot write capture " + quote(path, kQuotePathMaxBytes) + ": " + link_types::refusal(link_type)};
  PcapPtr dead(pcap_open_dead_with_tstamp_precision(link_types::dlt_for(link_type), kWriterSnapLength,
                                                    PCAP_TSTAMP_PRECISION_NANO));
  if (!dead) {
    return Error{path, "cannot write capture " + quote(path, kQuotePathMaxBytes) + ": libpcap could not start a writer"};
  }
  pcap_dumper_t* dumper = pcap_dump_open(dead.get(), path.c_str());
  if (dumper == nullptr) {
    // libpcap's message starts with the path; say it once.
    std::string reason = pcap_geterr(dead.get());
    if (reason.starts_with(path + ": ")) {
      reason.erase(0, path.size() + 2);
    }
    return Error{path, "cannot write capture " + quote(path, kQuotePathMaxBytes) + ": " + reason};
  }
  return std::unique_ptr<CaptureWriter>(std::make_unique<PcapWriter>(path, std::move(dead), dumper, link_type));
}

}  // namespace tricolor::dataplane
