#pragma once
// Little capture writers for the tests and the fuzz corpus, independent of dataplane/replay/capture.cpp: they
// lay out pcap and pcapng byte by byte in either byte order, and remember where each record or block
// ends so that tests can cut a capture anywhere and know what a reader must return.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "dataplane/replay/capture.hpp"

namespace tricolor::test {

using Bytes = std::vector<std::uint8_t>;
using dataplane::CaptureRecord;

// Appends integers in a chosen byte order.
class ByteWriter {
 public:
  explicit ByteWriter(bool big_endian) : big_endian_(big_endian) {}

  void u8(std::uint8_t value) { bytes_.push_back(value); }
  void u16(std::uint16_t value) { put(value, 2); }
  void u32(std::uint32_t value) { put(value, 4); }
  void u64(std::uint64_t value) { put(value, 8); }
  // Byte by byte: gcc 12 at -O3 warns falsely (-Wstringop-overflow) about vector::insert here.
  void raw(const Bytes& data) {
    for (const std::uint8_t byte : data) {
      bytes_.push_back(byte);
    }
  }
  void pad_to_4() {
    while (bytes_.size() % 4 != 0) {
      bytes_.push_back(0);
    }
  }
  void set_u32(std::size_t offset, std::uint32_t value) {
    for (int i = 0; i < 4; ++i) {
      const int shift = big_endian_ ? 8 * (3 - i) : 8 * i;
      bytes_[offset + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(value >> shift);
    }
  }
  std::size_t size() const { return bytes_.size(); }
  const Bytes& bytes() const { return bytes_; }
  bool big_endian() const { return big_endian_; }

 private:
  void put(std::uint64_t value, int length) {
    for (int i = 0; i < length; ++i) {
      const int shift = big_endian_ ? 8 * (length - 1 - i) : 8 * i;
      bytes_.push_back(static_cast<std::uint8_t>(value >> shift));
    }
  }

  bool big_endian_;
  Bytes bytes_;
};

// A frame of `length` bytes whose content depends on `seed`, so that records cannot be confused.
inline Bytes frame(std::size_t length, std::uint8_t seed) {
  Bytes data(length);
  for (std::size_t i = 0; i < length; ++i) {
    data[i] = static_cast<std::uint8_t>(seed * 31 + i * 7);
  }
  return data;
}

// What a reader returns for a frame whose last `fcs` bytes on the wire are an FCS the capture declares:
// the frame without them (wire length floored at 0, captured bytes cut to it).
inline void remove_fcs(CaptureRecord& expected, std::uint32_t fcs) {
  expected.wire_length = expected.wire_length > fcs ? expected.wire_length - fcs : 0;
  if (expected.data.size() > expected.wire_length) {
    expected.data.resize(expected.wire_length);
  }
}

// What a test expects of a capture: its bytes, the records a reader returns, and for each offset where a
// cut leaves a whole capture (the end of the file header or of a record/block), how many records come
// before it.
struct TestCapture {
  std::string name;
  Bytes bytes;
  std::vector<CaptureRecord> records;
  std::vector<std::pair<std::size_t, std::size_t>> clean_cuts;  // offset, records before it
  std::size_t header_length = 0;  // a cut before this fails at open
};

constexpr std::uint32_t kPcapMicroMagic = 0xa1b2c3d4;
constexpr std::uint32_t kPcapNanoMagic = 0xa1b23c4d;
constexpr std::uint32_t kEthernet = 1;
constexpr std::uint32_t kRawIp = 101;

// pcap's link-type word: the FCS length (16-bit words) in bits 28-31, "present" in bit 26.
constexpr std::uint32_t kPcapFcsPresent = 0x04000000;
constexpr std::uint32_t with_fcs(std::uint32_t link_type, std::uint32_t fcs_bytes) {
  return link_type | (fcs_bytes / 2) << 28 | kPcapFcsPresent;
}

class PcapBuilder {
 public:
  PcapBuilder(bool nanosecond, bool big_endian, std::uint32_t link_type = kEthernet,
              std::uint32_t snap_length = 65535, std::uint16_t minor_version = 4)
      : nanosecond_(nanosecond),
        fcs_length_((link_type & kPcapFcsPresent) != 0 ? (link_type >> 28) * 2 : 0),
        out_(big_endian) {
    out_.u32(nanosecond ? kPcapNanoMagic : kPcapMicroMagic);
    out_.u16(2);
    out_.u16(minor_version);
    out_.u32(0);  // thiszone
    out_.u32(0);  // sigfigs
    out_.u32(snap_length);
    out_.u32(link_type);
    capture_.header_length = out_.size();
    capture_.clean_cuts.emplace_back(out_.size(), 0);
  }

  // `fraction` is in the file's unit (µs or ns); the expected record is worked out here.
  PcapBuilder& record(std::uint32_t seconds, std::uint32_t fraction, const Bytes& data,
                      std::uint32_t wire_length) {
    out_.u32(seconds);
    out_.u32(fraction);
    out_.u32(static_cast<std::uint32_t>(data.size()));
    out_.u32(wire_length);
    out_.raw(data);
    CaptureRecord expected;
    expected.timestamp_ns = std::uint64_t{seconds} * 1'000'000'000 +
                            std::uint64_t{fraction} * (nanosecond_ ? 1 : 1000);
    expected.wire_length = wire_length < data.size() ? static_cast<std::uint32_t>(data.size()) : wire_length;
    expected.interface = 0;
    expected.data = data;
    remove_fcs(expected, fcs_length_);
    capture_.records.push_back(expected);
    capture_.clean_cuts.emplace_back(out_.size(), capture_.records.size());
    return *this;
  }

  TestCapture finish(std::string name) {
    capture_.name = std::move(name);
    capture_.bytes = out_.bytes();
    return capture_;
  }

 private:
  bool nanosecond_;
  std::uint32_t fcs_length_;  // from the link-type word, for the expected records
  ByteWriter out_;
  TestCapture capture_;
};

// pcapng: blocks are appended one after another; the byte order may change at each section header.
class PcapngBuilder {
 public:
  static constexpr std::uint32_t kSectionHeader = 0x0a0d0d0a;
  static constexpr std::uint32_t kInterfaceDescription = 1;
  static constexpr std::uint32_t kSimplePacket = 3;
  static constexpr std::uint32_t kEnhancedPacket = 6;
  static constexpr std::uint16_t kTsresol = 9;
  static constexpr std::uint16_t kTsoffset = 14;
  static constexpr std::uint16_t kComment = 1;
  static constexpr std::uint16_t kFcslen = 13;
  static constexpr std::uint16_t kPacketFlags = 2;
  static constexpr std::uint16_t kPacketHash = 3;

  struct Option {
    std::uint16_t code;
    Bytes value;
  };

  // Starts a section in the given byte order; the first one is the file header.
  PcapngBuilder& section(bool big_endian, std::uint16_t major = 1, std::vector<Option> options = {}) {
    big_endian_ = big_endian;
    ByteWriter body(big_endian);
    body.u32(0x1a2b3c4d);
    body.u16(major);
    body.u16(0);
    body.u64(~std::uint64_t{0});  // section length unknown
    write_options(body, options);
    append_block(kSectionHeader, body);
    interface_fcs_.clear();
    if (capture_.header_length == 0) {
      capture_.header_length = bytes_.size();
    }
    return *this;
  }

  // Options in the section's byte order: if_tsresol (one byte) and if_tsoffset (signed seconds).
  Option tsresol(std::uint8_t value) const { return Option{kTsresol, Bytes{value}}; }
  Option tsoffset(std::int64_t seconds) const {
    ByteWriter value(big_endian_);
    value.u64(static_cast<std::uint64_t>(seconds));
    return Option{kTsoffset, value.bytes()};
  }
  static Option comment(const std::string& text) { return Option{kComment, Bytes(text.begin(), text.end())}; }
  // if_fcslen (octets) for interfaces; epb_flags for enhanced packets, whose bits 5-8 are the packet's
  // FCS length in octets and bits 0-1 its direction.
  static Option fcslen(std::uint8_t octets) { return Option{kFcslen, Bytes{octets}}; }
  Option packet_flags(std::uint32_t fcs_octets, std::uint32_t direction = 0) const {
    ByteWriter value(big_endian_);
    value.u32(fcs_octets << 5 | direction);
    return Option{kPacketFlags, value.bytes()};
  }
  static Option packet_hash(const Bytes& value) { return Option{kPacketHash, value}; }

  PcapngBuilder& interface(std::uint32_t link_type = kEthernet, std::uint32_t snap_length = 0,
                           std::vector<Option> options = {}) {
    ByteWriter body(big_endian_);
    body.u16(static_cast<std::uint16_t>(link_type));
    body.u16(0);
    body.u32(snap_length);
    write_options(body, options);
    append_block(kInterfaceDescription, body);
    std::uint32_t fcs = 0;
    for (const Option& option : options) {
      if (option.code == kFcslen) {
        fcs = option.value.at(0);
      }
    }
    interface_fcs_.push_back(fcs);
    return *this;
  }

  // `expected_ns` is worked out by the test from the interface's resolution and offset.
  PcapngBuilder& enhanced(std::uint32_t interface_id, std::uint64_t ticks, const Bytes& data,
                          std::uint32_t wire_length, std::uint64_t expected_ns,
                          std::vector<Option> options = {}) {
    ByteWriter body(big_endian_);
    body.u32(interface_id);
    body.u32(static_cast<std::uint32_t>(ticks >> 32));
    body.u32(static_cast<std::uint32_t>(ticks));
    body.u32(static_cast<std::uint32_t>(data.size()));
    body.u32(wire_length);
    body.raw(data);
    body.pad_to_4();
    write_options(body, options);
    CaptureRecord expected;
    expected.timestamp_ns = expected_ns;
    expected.wire_length = wire_length < data.size() ? static_cast<std::uint32_t>(data.size()) : wire_length;
    expected.interface = static_cast<std::uint16_t>(interface_id);
    expected.data = data;
    std::uint32_t fcs = interface_fcs(interface_id);
    for (const Option& option : options) {
      if (option.code == kPacketFlags && option.value.size() == 4) {
        std::uint32_t flags = 0;
        for (int i = 0; i < 4; ++i) {
          flags = flags << 8 | option.value[static_cast<std::size_t>(big_endian_ ? i : 3 - i)];
        }
        if (const std::uint32_t packet_fcs = flags >> 5 & 0xf; packet_fcs != 0) {
          fcs = packet_fcs;  // overrides if_fcslen
        }
      }
    }
    remove_fcs(expected, fcs);
    capture_.records.push_back(expected);
    append_block(kEnhancedPacket, body);
    return *this;
  }

  // `block_data` is what the block holds (padded here); the reader keeps min(block data, wire length,
  // snap length), which the test states as `expected_captured`.
  PcapngBuilder& simple(const Bytes& block_data, std::uint32_t wire_length, std::size_t expected_captured) {
    ByteWriter body(big_endian_);
    body.u32(wire_length);
    body.raw(block_data);
    body.pad_to_4();
    CaptureRecord expected;
    expected.timestamp_ns = 0;
    expected.wire_length = wire_length;
    expected.interface = 0;
    expected.data.assign(block_data.begin(),
                         block_data.begin() + static_cast<std::ptrdiff_t>(expected_captured));
    remove_fcs(expected, interface_fcs(0));
    capture_.records.push_back(expected);
    append_block(kSimplePacket, body);
    return *this;
  }

  // Any other block: the reader must skip it.
  PcapngBuilder& other(std::uint32_t type, const Bytes& body_bytes) {
    ByteWriter body(big_endian_);
    body.raw(body_bytes);
    body.pad_to_4();
    append_block(type, body);
    return *this;
  }

  bool big_endian() const { return big_endian_; }
  const Bytes& bytes() const { return bytes_; }

  TestCapture finish(std::string name) {
    capture_.name = std::move(name);
    capture_.bytes = bytes_;
    return capture_;
  }

 private:
  std::uint32_t interface_fcs(std::uint32_t interface_id) const {
    return interface_id < interface_fcs_.size() ? interface_fcs_[interface_id] : 0;
  }

  void write_options(ByteWriter& body, const std::vector<Option>& options) const {
    if (options.empty()) {
      return;
    }
    for (const Option& option : options) {
      body.u16(option.code);
      body.u16(static_cast<std::uint16_t>(option.value.size()));
      body.raw(option.value);
      body.pad_to_4();
    }
    body.u16(0);  // opt_endofopt
    body.u16(0);
  }

  void append_block(std::uint32_t type, const ByteWriter& body) {
    ByteWriter block(big_endian_);
    const auto length = static_cast<std::uint32_t>(12 + body.size());
    block.u32(type);
    block.u32(length);
    block.raw(body.bytes());
    block.u32(length);
    bytes_.insert(bytes_.end(), block.bytes().begin(), block.bytes().end());
    capture_.clean_cuts.emplace_back(bytes_.size(), capture_.records.size());
  }

  bool big_endian_ = false;
  std::vector<std::uint32_t> interface_fcs_;  // the section's interfaces' if_fcslen, for expected records
  Bytes bytes_;
  TestCapture capture_;
};

}  // namespace tricolor::test
