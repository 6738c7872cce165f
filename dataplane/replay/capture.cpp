// Reading captures. pcap is read by libpcap (written by capture_writer.cpp); pcapng by our own streaming reader so that
// each packet's interface id is known. Both readers stream through a FILE (a file on disk, or fmemopen
// over the caller's bytes), so neither reads a whole file into memory.
//
// Conventions shared by both readers:
// - A record never has more captured bytes than its wire length: a record claiming fewer bytes on the
//   wire than were captured from it gets wire_length = data.size() (a frame cannot be shorter on the
//   wire than what was captured of it).
// - A record never holds an FCS: when the capture declares one (pcap: the FCS bits of the link-type word;
//   pcapng: if_fcslen, or the FCS length in a packet's epb_flags), its bytes are removed from the end of
//   the frame, after the rule above, so that L2 lengths and the frames written out exclude it.
// - next() returns false at the first record or block that is cut short, malformed or unsupported (a
//   pcapng interface that is not Ethernet after the first packet), and truncated() then says true; a
//   capture that ends cleanly between records ends with truncated() false.
// - open() fails for what is wrong before the first record: a missing or unreadable file, a file that is
//   not a capture, a pcap file header or first pcapng section header that is cut short or malformed, and
//   a link type not read (link_types.hpp; for pcapng: any interface described before the first packet).
#include "dataplane/replay/capture.hpp"

#include <pcap/pcap.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "dataplane/replay/link_types.hpp"
#include "policer/quote.hpp"

namespace tricolor::dataplane {
namespace {

// The first four bytes of a capture, read big-endian.
constexpr std::uint32_t kPcapMicrosecondMagic = 0xa1b2c3d4;
constexpr std::uint32_t kPcapNanosecondMagic = 0xa1b23c4d;
constexpr std::uint32_t kPcapngSectionHeaderType = 0x0a0d0d0a;  // the same read either way round
constexpr std::uint32_t kPcapngByteOrderMagic = 0x1a2b3c4d;

constexpr std::size_t kMagicLength = 4;
constexpr std::size_t kPcapFileHeaderLength = 24;
constexpr std::size_t kPcapLinkTypeOffset = 20;
// The link-type word's top 6 bits carry the FCS length (see pcap_datalink_ext below); libpcap 1.10 takes
// the rest, reserved bits included, as the link type, and so does the error naming it.
constexpr std::uint32_t kPcapLinkTypeMask = 0x03ffffff;
constexpr std::uint32_t kPcapFcsUnitBytes = 2;  // the FCS length is in 16-bit words


// pcapng block types and sizes: every block is type, total length, body, total length again.
constexpr std::uint32_t kInterfaceDescriptionBlockType = 1;
constexpr std::uint32_t kSimplePacketBlockType = 3;
constexpr std::uint32_t kEnhancedPacketBlockType = 6;
constexpr std::uint32_t kBlockHeaderLength = 8;
constexpr std::uint32_t kBlockTrailerLength = 4;
constexpr std::uint32_t kMinBlockLength = kBlockHeaderLength + kBlockTrailerLength;
constexpr std::uint32_t kBlockAlignment = 4;
constexpr std::uint32_t kSectionHeaderFieldsLength = 16;  // byte-order magic, version, section length
constexpr std::uint32_t kInterfaceDescriptionFieldsLength = 8;  // link type, reserved, snap length
constexpr std::uint32_t kEnhancedPacketFieldsLength = 20;       // interface, time (2), lengths (2)
constexpr std::uint32_t kSimplePacketFieldsLength = 4;          // original length
constexpr std::uint16_t kSupportedMajorVersion = 1;
// Blocks we hold in memory (section headers, interfaces, packets) are refused above this size, as
// libpcap does, so that a corrupt length cannot make us allocate gigabytes; other blocks are skipped
// whatever their size.
constexpr std::uint32_t kMaxHeldBlockLength = 16 * 1024 * 1024;
// Interface ids must fit CaptureRecord::interface.
constexpr std::size_t kMaxInterfaces = 65536;

// Interface description options.
constexpr std::uint16_t kOptionEndOfOptions = 0;
constexpr std::uint16_t kOptionTimestampResolution = 9;  // if_tsresol
constexpr std::uint16_t kOptionTimestampOffset = 14;     // if_tsoffset
constexpr std::uint16_t kOptionFcsLength = 13;           // if_fcslen
constexpr std::uint16_t kOptionHeaderLength = 4;
constexpr std::uint16_t kTimestampResolutionLength = 1;
constexpr std::uint16_t kTimestampOffsetLength = 8;
constexpr std::uint16_t kFcsLengthLength = 1;
constexpr std::uint8_t kBinaryResolutionFlag = 0x80;
constexpr std::uint8_t kResolutionExponentMask = 0x7f;
constexpr std::uint8_t kDefaultDecimalExponent = 6;  // microseconds

// Enhanced packet block options: epb_flags, whose bits 5-8 are the packet's FCS length in octets (0: not
// given, the interface's if_fcslen applies).
constexpr std::uint16_t kOptionPacketFlags = 2;
constexpr std::uint16_t kPacketFlagsLength = 4;
constexpr unsigned kPacketFlagsFcsShift = 5;
constexpr std::uint32_t kPacketFlagsFcsMask = 0xf;

constexpr std::uint64_t kNanosecondsPerSecond = 1'000'000'000;
constexpr std::uint64_t kNanosecondsPerMicrosecond = 1'000;
constexpr unsigned kNanosecondExponent = 9;
constexpr unsigned kLargestUint64PowerOfTen = 19;


constexpr std::size_t kReadBufferLength = 256 * 1024;  // fewer system calls than stdio's 4 KiB
constexpr std::uint64_t kSkipBySeekingAbove = 64 * 1024;
constexpr std::size_t kSkipChunkLength = 4096;

using Uint128 = unsigned __int128;
using Int128 = __int128;

struct FileCloser {
  void operator()(std::FILE* file) const noexcept { std::fclose(file); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

struct PcapCloser {
  void operator()(pcap_t* pcap) const noexcept { pcap_close(pcap); }
};
using PcapPtr = std::unique_ptr<pcap_t, PcapCloser>;

Error capture_error(const std::string& name, const std::string& what) {
  return Error{name, "capture " + quote(name, kQuotePathMaxBytes) + ": " + what};
}

std::string hex32(std::uint32_t value) {
  std::array<char, 16> text{};
  std::snprintf(text.data(), text.size(), "0x%08x", value);
  return text.data();
}

std::uint32_t big_endian_u32(const std::uint8_t* bytes) {
  return std::uint32_t{bytes[0]} << 24 | std::uint32_t{bytes[1]} << 16 | std::uint32_t{bytes[2]} << 8 |
         std::uint32_t{bytes[3]};
}

// Integers in a pcapng section's byte order, which is not necessarily the host's.
struct ByteOrder {
  bool big_endian = false;

  std::uint16_t u16(const std::uint8_t* bytes) const {
    return big_endian ? static_cast<std::uint16_t>(bytes[0] << 8 | bytes[1])
                      : static_cast<std::uint16_t>(bytes[1] << 8 | bytes[0]);
  }
  std::uint32_t u32(const std::uint8_t* bytes) const {
    const std::uint32_t value = big_endian_u32(bytes);
    return big_endian ? value : __builtin_bswap32(value);
  }
  std::uint64_t u64(const std::uint8_t* bytes) const {
    const std::uint64_t first = u32(bytes);
    const std::uint64_t second = u32(bytes + 4);
    return big_endian ? first << 32 | second : second << 32 | first;
  }
};

// A frame's lengths once the FCS the capture declares is removed. The FCS is the last `fcs_length` bytes
// of the frame on the wire, so the wire length loses them and the captured bytes are cut to the new wire
// length; a record snapped before the FCS keeps all its bytes. A record no longer than the FCS (a runt,
// or a corrupt length) becomes an empty frame of wire length 0 rather than ending the capture: it stays
// one record, which the engine counts as malformed (shorter than an Ethernet header). `wire_length` is
// at least `captured` here.
struct FrameLengths {
  std::uint32_t wire_length;
  std::uint32_t captured;
};

FrameLengths without_fcs(std::uint32_t wire_length, std::uint32_t captured, std::uint32_t fcs_length) {
  const std::uint32_t wire = wire_length - std::min(wire_length, fcs_length);
  return {wire, std::min(captured, wire)};
}

// The stream a reader reads from, with what must outlive it: the bytes behind fmemopen and the stdio
// buffer. Members are destroyed in reverse order, so the FILE goes first.
struct Input {
  std::optional<std::uint64_t> memory_length;  // lets a reader refuse a block longer than what is left
  std::vector<std::uint8_t> memory;
  std::unique_ptr<char[]> buffer;
  FilePtr file;
};

Expected<Input> open_file(const std::string& path) {
  Input input;
  input.file.reset(std::fopen(path.c_str(), "rb"));
  if (!input.file) {
    const int error = errno;
    return capture_error(path, std::string("cannot open: ") + std::strerror(error));
  }
  struct stat status {};
  if (fstat(fileno(input.file.get()), &status) == 0 && S_ISDIR(status.st_mode)) {
    return capture_error(path, "is a directory, not a capture file");
  }
  input.buffer = std::make_unique<char[]>(kReadBufferLength);
  std::setvbuf(input.file.get(), input.buffer.get(), _IOFBF, kReadBufferLength);
  return input;
}

Expected<Input> open_memory(std::vector<std::uint8_t> bytes, const std::string& name) {
  if (bytes.empty()) {
    return capture_error(name, "is empty, not a capture");
  }
  Input input;
  input.memory = std::move(bytes);
  input.memory_length = input.memory.size();
  input.file.reset(fmemopen(input.memory.data(), input.memory.size(), "rb"));
  if (!input.file) {
    const int error = errno;
    return capture_error(name, std::string("cannot read from memory: ") + std::strerror(error));
  }
  return input;
}

// ---------------------------------------------------------------------------------------------------
// pcap, through libpcap.

class PcapReader final : public CaptureReader {
 public:
  PcapReader(Input input, PcapPtr pcap, bool nanosecond_file, std::uint32_t fcs_length, std::uint32_t link_type)
      : input_(std::move(input)),
        pcap_(std::move(pcap)),
        nanosecond_file_(nanosecond_file),
        fcs_length_(fcs_length),
        link_type_(link_type) {}

  bool next(CaptureRecord& record) override {
    if (stopped_) {
      return false;
    }
    pcap_pkthdr* header = nullptr;
    const u_char* data = nullptr;
    const int status = pcap_next_ex(pcap_.get(), &header, &data);
    if (status != 1) {
      // PCAP_ERROR_BREAK is the end of the file between records; PCAP_ERROR a record cut short or
      // one libpcap refuses (a captured length beyond its limit).
      stopped_ = true;
      truncated_ = status != PCAP_ERROR_BREAK;
      if (truncated_) stop_reason_ = pcap_geterr(pcap_.get());
      return false;
    }
    // libpcap sign-extends the file's 32-bit fields and multiplies a microsecond fraction by 1000;
    // undo both to get the file's unsigned seconds and fraction back.
    const std::uint64_t seconds = static_cast<std::uint32_t>(header->ts.tv_sec);
    const std::uint64_t fraction_ns =
        nanosecond_file_
            ? std::uint64_t{static_cast<std::uint32_t>(header->ts.tv_usec)}
            : std::uint64_t{static_cast<std::uint32_t>(header->ts.tv_usec /
                                                       static_cast<long>(kNanosecondsPerMicrosecond))} *
                  kNanosecondsPerMicrosecond;
    record.timestamp_ns = seconds * kNanosecondsPerSecond + fraction_ns;
    const FrameLengths lengths = without_fcs(std::max(header->len, header->caplen), header->caplen, fcs_length_);
    record.data.assign(data, data + lengths.captured);
    record.wire_length = lengths.wire_length;
    record.interface = 0;
    link_types::to_ethernet(link_type_, record);
    return true;
  }

  bool truncated() const override { return truncated_; }
  std::string stop_reason() const override { return stop_reason_; }
  CaptureFormat format() const override { return CaptureFormat::pcap; }
  std::uint32_t link_type() const override { return link_type_; }

 private:
  Input input_;  // its FILE is owned by pcap_ (pcap_close closes it); the rest must outlive pcap_
  PcapPtr pcap_;
  bool nanosecond_file_;
  std::uint32_t fcs_length_;  // bytes at the end of every frame
  std::uint32_t link_type_;
  bool stopped_ = false;
  bool truncated_ = false;
  std::string stop_reason_;
};

// `header` holds the first bytes of the file (the magic number at least).
Expected<std::unique_ptr<CaptureReader>> open_pcap(Input input, const std::string& name,
                                                   const std::array<std::uint8_t, kPcapFileHeaderLength>& header,
                                                   std::size_t header_length) {
  const std::uint32_t magic = big_endian_u32(header.data());
  const bool nanosecond_file =
      magic == kPcapNanosecondMagic || magic == __builtin_bswap32(kPcapNanosecondMagic);
  std::array<char, PCAP_ERRBUF_SIZE> message{};
  pcap_t* pcap =
      pcap_fopen_offline_with_tstamp_precision(input.file.get(), PCAP_TSTAMP_PRECISION_NANO, message.data());
  if (pcap == nullptr) {
    return capture_error(name, std::string("cannot read the pcap file header: ") + message.data());
  }
  static_cast<void>(input.file.release());  // pcap_close closes it
  PcapPtr owned(pcap);
  const int dlt = pcap_datalink(pcap);
  // libpcap succeeded, so the whole file header was there: the file's own LINKTYPE_ number.
  std::uint32_t link_type = dlt == DLT_RAW ? link_types::kRaw : static_cast<std::uint32_t>(dlt);
  if (header_length == kPcapFileHeaderLength) {
    const ByteOrder order{magic == kPcapMicrosecondMagic || magic == kPcapNanosecondMagic};
    link_type = order.u32(header.data() + kPcapLinkTypeOffset) & kPcapLinkTypeMask;
  }
  if (!link_types::readable(link_type)) return capture_error(name, link_types::refusal(link_type));
  // pcap_datalink_ext is the link-type word's upper half, as libpcap read it in the file's byte order;
  // without the "present" bit the FCS length is unknown, and LINKTYPE_ETHERNET frames have none.
  const auto extension = static_cast<std::uint32_t>(pcap_datalink_ext(pcap));
  const std::uint32_t fcs_length = link_type == kLinkTypeEthernet && LT_FCS_LENGTH_PRESENT(extension) != 0
                                       ? LT_FCS_LENGTH(extension) * kPcapFcsUnitBytes
                                       : 0;
  return std::unique_ptr<CaptureReader>(
      std::make_unique<PcapReader>(std::move(input), std::move(owned), nanosecond_file, fcs_length, link_type));
}

// ---------------------------------------------------------------------------------------------------
// pcapng, by our own reader.

struct Interface {
  std::uint32_t link_type = 0;
  std::uint32_t snap_length = 0;  // 0: no limit
  bool binary_resolution = false;  // ticks of 2^-exponent s, else 10^-exponent s
  std::uint8_t resolution_exponent = kDefaultDecimalExponent;
  std::int64_t offset_seconds = 0;
  std::uint8_t fcs_length = 0;  // if_fcslen: octets at the end of every frame, unless epb_flags says
};

constexpr std::uint64_t power_of_ten(unsigned exponent) {
  std::uint64_t value = 1;
  for (unsigned i = 0; i < exponent; ++i) {
    value *= 10;
  }
  return value;
}

// Ticks of the interface's resolution, plus its offset, as nanoseconds since the epoch: exact when the
// resolution is a whole number of nanoseconds, else rounded down. Empty when that is before the epoch or
// beyond 64 bits of nanoseconds (year 2554). 128 bits hold every intermediate value: ticks·10⁹ < 2⁹⁴,
// |offset|·10⁹ < 2⁹³.
std::optional<std::uint64_t> interface_time_ns(std::uint64_t ticks, const Interface& interface) {
  const unsigned exponent = interface.resolution_exponent;
  Uint128 ns = 0;
  if (interface.binary_resolution) {
    ns = (Uint128{ticks} * kNanosecondsPerSecond) >> exponent;  // exponent ≤ 127
  } else if (exponent <= kNanosecondExponent) {
    ns = Uint128{ticks} * power_of_ten(kNanosecondExponent - exponent);
  } else if (exponent - kNanosecondExponent <= kLargestUint64PowerOfTen) {
    ns = ticks / power_of_ten(exponent - kNanosecondExponent);
  }  // else a tick is at most 10^-29 s: any 64-bit count of them is under a nanosecond
  const Int128 total = static_cast<Int128>(ns) +
                       Int128{interface.offset_seconds} * static_cast<Int128>(kNanosecondsPerSecond);
  if (total < 0 || total > static_cast<Int128>(UINT64_MAX)) {
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(total);
}

std::uint32_t padded_to_block_alignment(std::uint32_t length) {  // at most a block's length: no overflow
  return (length + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
}

// Walks a block's options (`options`: what follows the block's fixed fields, up to its trailer) until
// opt_endofopt or the end (opt_endofopt may be left out when the options fill the block), handing each
// to take(code, value). Returns why they are malformed, which makes the block bad: an option running past
// the block, or what take() refuses (an option we use whose length is wrong).
template <typename Take>
std::optional<std::string> walk_options(std::span<const std::uint8_t> options, const ByteOrder& order,
                                        std::string_view block_kind, Take&& take) {
  std::size_t at = 0;
  while (options.size() - at >= kOptionHeaderLength) {
    const std::uint16_t code = order.u16(options.data() + at);
    const std::uint16_t value_length = order.u16(options.data() + at + 2);
    if (code == kOptionEndOfOptions) {
      break;
    }
    const std::size_t value_at = at + kOptionHeaderLength;
    if (padded_to_block_alignment(value_length) > options.size() - value_at) {
      return std::string(block_kind) + " option " + std::to_string(code) + " runs past the end of its block";
    }
    if (std::optional<std::string> refused = take(code, options.subspan(value_at, value_length))) {
      return refused;
    }
    at = value_at + padded_to_block_alignment(value_length);
  }
  return std::nullopt;
}

std::string wrong_option_length(std::string_view option, std::size_t length, std::size_t expected) {
  return std::string(option) + " option of " + std::to_string(length) + " bytes, not " + std::to_string(expected);
}

class PcapngReader final : public CaptureReader {
 public:
  explicit PcapngReader(Input input) : input_(std::move(input)) {}

  // Reads the first section header and every block up to the first packet, so that open reports an
  // interface that is not Ethernet rather than a capture that stops before its first record.
  std::optional<Error> start(const std::string& name) {
    if (read_block(pending_) != Block::other) {
      return capture_error(name, "is not a readable pcapng capture: " + problem_);
    }
    for (;;) {
      switch (read_block(pending_)) {
        case Block::packet:
          has_pending_ = true;
          return std::nullopt;
        case Block::other:
          continue;
        case Block::not_ethernet:
          return capture_error(name, problem_);
        case Block::end:
          stopped_ = true;
          return std::nullopt;
        case Block::bad:
          stopped_ = true;
          truncated_ = true;
          return std::nullopt;
      }
    }
  }

  bool next(CaptureRecord& record) override {
    if (has_pending_) {
      has_pending_ = false;
      record = std::move(pending_);
      return true;
    }
    while (!stopped_) {
      switch (read_block(record)) {
        case Block::packet:
          return true;
        case Block::other:
          break;
        case Block::end:
          stopped_ = true;
          break;
        case Block::bad:
        case Block::not_ethernet:
          stopped_ = true;
          truncated_ = true;
          break;
      }
    }
    return false;
  }

  bool truncated() const override { return truncated_; }
  std::string stop_reason() const override { return truncated_ ? problem_ : std::string(); }
  CaptureFormat format() const override { return CaptureFormat::pcapng; }
  std::uint32_t link_type() const override { return link_type_.value_or(kLinkTypeEthernet); }

 private:
  enum class Block { packet, other, end, bad, not_ethernet };

  Block read_block(CaptureRecord& record) {
    block_start_ = position_;
    std::array<std::uint8_t, kBlockHeaderLength> header{};
    const std::size_t got = std::fread(header.data(), 1, header.size(), input_.file.get());
    position_ += got;
    if (got == 0 && !std::ferror(input_.file.get())) {
      return Block::end;  // cleanly between blocks
    }
    if (got < header.size()) {
      return bad("cut short in a block header");
    }
    const std::uint32_t type = order_.u32(header.data());
    if (type == kPcapngSectionHeaderType) {
      return read_section_header(header);
    }
    const std::uint32_t length = order_.u32(header.data() + 4);
    if (length < kMinBlockLength || length % kBlockAlignment != 0) {
      return bad("block length " + std::to_string(length) + " is not a multiple of 4 of at least 12");
    }
    if (!fits(length)) {
      return bad("cut short in a block of " + std::to_string(length) + " bytes");
    }
    switch (type) {
      case kInterfaceDescriptionBlockType: return read_interface_description(length);
      case kEnhancedPacketBlockType: return read_enhanced_packet(length, record);
      case kSimplePacketBlockType: return read_simple_packet(length, record);
      default: return skip_block(type, length);
    }
  }

  Block read_section_header(const std::array<std::uint8_t, kBlockHeaderLength>& header) {
    std::array<std::uint8_t, kSectionHeaderFieldsLength> fields{};
    if (!read_exact(fields.data(), fields.size())) {
      return bad("cut short in a section header block");
    }
    const std::uint32_t byte_order_magic = big_endian_u32(fields.data());
    if (byte_order_magic == kPcapngByteOrderMagic) {
      order_.big_endian = true;
    } else if (byte_order_magic == __builtin_bswap32(kPcapngByteOrderMagic)) {
      order_.big_endian = false;
    } else {
      return bad("byte-order magic " + hex32(byte_order_magic) + " is not " + hex32(kPcapngByteOrderMagic) +
                 " in either byte order");
    }
    const std::uint32_t length = order_.u32(header.data() + 4);
    if (length < kMinBlockLength + kSectionHeaderFieldsLength || length % kBlockAlignment != 0) {
      return bad("section header block length " + std::to_string(length) +
                 " is not a multiple of 4 of at least 28");
    }
    if (!fits(length)) {
      return bad("cut short in a section header block of " + std::to_string(length) + " bytes");
    }
    const std::uint16_t major = order_.u16(fields.data() + 4);
    const std::uint16_t minor = order_.u16(fields.data() + 6);
    if (major != kSupportedMajorVersion) {
      return bad("pcapng version " + std::to_string(major) + "." + std::to_string(minor) +
                 " is not supported (only 1.x)");
    }
    // The options (and the section length, often unknown) are of no use to us.
    if (!skip(length - kMinBlockLength - kSectionHeaderFieldsLength) || !trailer_matches(length)) {
      return bad("cut short in a section header block");
    }
    interfaces_.clear();  // interface ids are numbered per section
    return Block::other;
  }

  Block read_interface_description(std::uint32_t length) {
    if (length < kMinBlockLength + kInterfaceDescriptionFieldsLength || length > kMaxHeldBlockLength) {
      return bad("interface description block length " + std::to_string(length) + " is out of range");
    }
    block_.resize(length - kBlockHeaderLength);
    if (!read_exact(block_.data(), block_.size())) {
      return bad("cut short in an interface description block");
    }
    const std::uint32_t trailer = order_.u32(block_.data() + block_.size() - kBlockTrailerLength);
    if (trailer != length) {
      return trailer_mismatch(trailer, length);
    }
    if (interfaces_.size() == kMaxInterfaces) {
      return bad("more than " + std::to_string(kMaxInterfaces) + " interfaces in a section");
    }
    Interface interface;
    interface.link_type = order_.u16(block_.data());
    interface.snap_length = order_.u32(block_.data() + 4);
    const std::span<const std::uint8_t> options(block_.data() + kInterfaceDescriptionFieldsLength,
                                                block_.size() - kInterfaceDescriptionFieldsLength - kBlockTrailerLength);
    const auto take = [&](std::uint16_t code, std::span<const std::uint8_t> value) -> std::optional<std::string> {
      switch (code) {
        case kOptionTimestampResolution:
          if (value.size() != kTimestampResolutionLength) {
            return wrong_option_length("if_tsresol", value.size(), kTimestampResolutionLength);
          }
          interface.binary_resolution = (value[0] & kBinaryResolutionFlag) != 0;
          interface.resolution_exponent = value[0] & kResolutionExponentMask;
          break;
        case kOptionTimestampOffset:
          if (value.size() != kTimestampOffsetLength) {
            return wrong_option_length("if_tsoffset", value.size(), kTimestampOffsetLength);
          }
          interface.offset_seconds = static_cast<std::int64_t>(order_.u64(value.data()));
          break;
        case kOptionFcsLength:
          // In octets, as Wireshark reads it and as the specification's example ('4') has it; its
          // text says bits, which no known writer follows.
          if (value.size() != kFcsLengthLength) {
            return wrong_option_length("if_fcslen", value.size(), kFcsLengthLength);
          }
          interface.fcs_length = value[0];
          break;
        default:
          break;  // of no use to us
      }
      return std::nullopt;
    };
    if (std::optional<std::string> malformed = walk_options(options, order_, "interface", take)) {
      return bad(std::move(*malformed));
    }
    interfaces_.push_back(interface);
    if (!link_types::readable(interface.link_type)) {
      problem_ = "interface " + std::to_string(interfaces_.size() - 1) + ": " +
                 link_types::refusal(interface.link_type);
      return Block::not_ethernet;
    }
    // One link type for the whole capture: what --out writes back (a pcap has one).
    if (!link_type_) link_type_ = interface.link_type;
    if (*link_type_ != interface.link_type) {
      problem_ = "interface " + std::to_string(interfaces_.size() - 1) + ": " + link_types::name(interface.link_type) +
                 ", where an interface before it is " + link_types::name(*link_type_) +
                 ": a capture of one link type is needed (editcap or tcpdump -i IFACE can make one)";
      return Block::not_ethernet;
    }
    return Block::other;
  }

  Block read_enhanced_packet(std::uint32_t length, CaptureRecord& record) {
    if (length < kMinBlockLength + kEnhancedPacketFieldsLength || length > kMaxHeldBlockLength) {
      return bad("enhanced packet block length " + std::to_string(length) + " is out of range");
    }
    std::array<std::uint8_t, kEnhancedPacketFieldsLength> fields{};
    if (!read_exact(fields.data(), fields.size())) {
      return bad("cut short in an enhanced packet block");
    }
    const std::uint32_t interface_id = order_.u32(fields.data());
    const std::uint64_t ticks = std::uint64_t{order_.u32(fields.data() + 4)} << 32 | order_.u32(fields.data() + 8);
    const std::uint32_t captured = order_.u32(fields.data() + 12);
    const std::uint32_t original = order_.u32(fields.data() + 16);
    const std::uint32_t room = length - kMinBlockLength - kEnhancedPacketFieldsLength;
    if (interface_id >= interfaces_.size()) {  // so also ≤ 65535
      return bad("enhanced packet block names interface " + std::to_string(interface_id) + " of " +
                 std::to_string(interfaces_.size()));
    }
    if (captured > room) {
      return bad("enhanced packet block captured length " + std::to_string(captured) + " exceeds its room " +
                 std::to_string(room));
    }
    const std::optional<std::uint64_t> timestamp = interface_time_ns(ticks, interfaces_[interface_id]);
    if (!timestamp) {
      return bad("enhanced packet block timestamp is before 1970 or after 2554");
    }
    // The data, padded to 4 bytes, then the options, which fill the rest of the block (room is a
    // multiple of 4, so the padded data fits in it).
    const std::uint32_t padded_data = padded_to_block_alignment(captured);
    record.data.resize(captured);
    block_.resize(room - padded_data);
    if (!read_exact(record.data.data(), captured) || !skip(padded_data - captured) ||
        !read_exact(block_.data(), block_.size()) || !trailer_matches(length)) {
      return bad("cut short in an enhanced packet block");
    }
    std::uint32_t packet_fcs_length = 0;  // not given
    const auto take = [&](std::uint16_t code, std::span<const std::uint8_t> value) -> std::optional<std::string> {
      if (code == kOptionPacketFlags) {
        if (value.size() != kPacketFlagsLength) {
          return wrong_option_length("epb_flags", value.size(), kPacketFlagsLength);
        }
        packet_fcs_length = (order_.u32(value.data()) >> kPacketFlagsFcsShift) & kPacketFlagsFcsMask;
      }
      return std::nullopt;
    };
    if (std::optional<std::string> malformed = walk_options(block_, order_, "enhanced packet", take)) {
      return bad(std::move(*malformed));
    }
    const std::uint32_t fcs_length =
        packet_fcs_length != 0 ? packet_fcs_length : interfaces_[interface_id].fcs_length;
    const FrameLengths lengths = without_fcs(std::max(original, captured), captured, fcs_length);
    record.timestamp_ns = *timestamp;
    record.wire_length = lengths.wire_length;
    record.interface = static_cast<std::uint16_t>(interface_id);
    record.data.resize(lengths.captured);
    link_types::to_ethernet(link_type(), record);
    return Block::packet;
  }

  Block read_simple_packet(std::uint32_t length, CaptureRecord& record) {
    if (length < kMinBlockLength + kSimplePacketFieldsLength || length > kMaxHeldBlockLength) {
      return bad("simple packet block length " + std::to_string(length) + " is out of range");
    }
    if (interfaces_.empty()) {
      return bad("simple packet block before any interface description");
    }
    std::array<std::uint8_t, kSimplePacketFieldsLength> fields{};
    if (!read_exact(fields.data(), fields.size())) {
      return bad("cut short in a simple packet block");
    }
    const std::uint32_t original = order_.u32(fields.data());
    const std::uint32_t room = length - kMinBlockLength - kSimplePacketFieldsLength;
    // The block has no captured length: it is the original length, limited by the room in the block
    // and by the interface's snapshot length.
    std::uint32_t captured = std::min(room, original);
    if (interfaces_[0].snap_length != 0) {
      captured = std::min(captured, interfaces_[0].snap_length);
    }
    record.data.resize(captured);
    if (!read_exact(record.data.data(), captured) || !skip(room - captured) || !trailer_matches(length)) {
      return bad("cut short in a simple packet block");
    }
    const FrameLengths lengths = without_fcs(original, captured, interfaces_[0].fcs_length);
    record.timestamp_ns = 0;  // a simple packet block has no timestamp
    record.wire_length = lengths.wire_length;
    record.interface = 0;
    record.data.resize(lengths.captured);
    link_types::to_ethernet(link_type(), record);
    return Block::packet;
  }

  Block skip_block(std::uint32_t type, std::uint32_t length) {
    if (!skip(length - kMinBlockLength) || !trailer_matches(length)) {
      return bad("cut short in a block of type " + hex32(type));
    }
    return Block::other;
  }

  // Whether a block of `length` bytes from the current block's start fits in what is left of an input
  // in memory, so that a cut-short block is not allocated or read first. Files are read as they come.
  bool fits(std::uint32_t length) const {
    return !input_.memory_length || length <= *input_.memory_length - block_start_;
  }

  bool trailer_matches(std::uint32_t length) {
    std::array<std::uint8_t, kBlockTrailerLength> trailer{};
    if (!read_exact(trailer.data(), trailer.size())) {
      bad("cut short before a block's trailing length");
      return false;
    }
    const std::uint32_t trailing_length = order_.u32(trailer.data());
    if (trailing_length != length) {
      trailer_mismatch(trailing_length, length);
      return false;
    }
    return true;
  }

  Block trailer_mismatch(std::uint32_t trailing_length, std::uint32_t length) {
    return bad("trailing block length " + std::to_string(trailing_length) + " differs from the leading " +
               std::to_string(length));
  }

  bool read_exact(void* destination, std::size_t count) {
    const std::size_t got = count == 0 ? 0 : std::fread(destination, 1, count, input_.file.get());
    position_ += got;
    return got == count;
  }

  bool skip(std::uint64_t count) {
    if (count > kSkipBySeekingAbove) {
      // Past the end of a file this succeeds and the trailer read that follows fails.
      if (fseeko(input_.file.get(), static_cast<off_t>(count), SEEK_CUR) != 0) {
        return false;
      }
      position_ += count;
      return true;
    }
    std::array<std::uint8_t, kSkipChunkLength> scratch;
    while (count > 0) {
      const std::size_t chunk = std::min<std::uint64_t>(count, scratch.size());
      if (!read_exact(scratch.data(), chunk)) {
        return false;
      }
      count -= chunk;
    }
    return true;
  }

  // Remembers why reading stopped, for open's error messages; only the first reason is kept.
  Block bad(std::string why) {
    if (problem_.empty()) {
      problem_ = "block at offset " + std::to_string(block_start_) + ": " + std::move(why);
    }
    return Block::bad;
  }

  Input input_;
  ByteOrder order_;
  std::vector<Interface> interfaces_;
  std::optional<std::uint32_t> link_type_;  // every interface's, of every section (the first one's)
  std::vector<std::uint8_t> block_;  // an interface description's body, or a packet's options
  CaptureRecord pending_;            // the first packet, read by start()
  bool has_pending_ = false;
  bool stopped_ = false;
  bool truncated_ = false;
  std::uint64_t position_ = 0;
  std::uint64_t block_start_ = 0;
  std::string problem_;
};

// ---------------------------------------------------------------------------------------------------

Expected<std::unique_ptr<CaptureReader>> open_input(Input input, const std::string& name) {
  std::array<std::uint8_t, kPcapFileHeaderLength> header{};
  const std::size_t got = std::fread(header.data(), 1, header.size(), input.file.get());
  if (std::ferror(input.file.get())) {
    const int error = errno;
    return capture_error(name, std::string("cannot read: ") + std::strerror(error));
  }
  if (got == 0) {
    return capture_error(name, "is empty, not a capture");
  }
  if (got < kMagicLength) {
    return capture_error(name, "is too short (" + std::to_string(got) + " bytes) to be a capture");
  }
  if (fseeko(input.file.get(), 0, SEEK_SET) != 0) {
    const int error = errno;
    return capture_error(name, std::string("cannot seek back to the start: ") + std::strerror(error));
  }
  const std::uint32_t magic = big_endian_u32(header.data());
  switch (magic) {
    case kPcapMicrosecondMagic:
    case kPcapNanosecondMagic:
    case __builtin_bswap32(kPcapMicrosecondMagic):
    case __builtin_bswap32(kPcapNanosecondMagic):
      return open_pcap(std::move(input), name, header, got);
    case kPcapngSectionHeaderType: {
      auto reader = std::make_unique<PcapngReader>(std::move(input));
      if (std::optional<Error> error = reader->start(name)) {
        return std::move(*error);
      }
      return std::unique_ptr<CaptureReader>(std::move(reader));
    }
    default:
      return capture_error(name, "is not a pcap or pcapng capture (it starts with " + hex32(magic) + ")");
  }
}

}  // namespace

Expected<std::unique_ptr<CaptureReader>> CaptureReader::open(const std::string& path) {
  Expected<Input> input = open_file(path);
  if (!input) {
    return input.error();
  }
  return open_input(std::move(input).value(), path);
}

Expected<std::unique_ptr<CaptureReader>> CaptureReader::open_bytes(std::vector<std::uint8_t> bytes,
                                                                   const std::string& name) {
  Expected<Input> input = open_memory(std::move(bytes), name);
  if (!input) {
    return input.error();
  }
  return open_input(std::move(input).value(), name);
}


}  // namespace tricolor::dataplane
