#include "dataplane/replay/demo.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "dataplane/replay/capture.hpp"
#include "dataplane/replay/splitmix64.hpp"

namespace tricolor::dataplane {
namespace {

constexpr std::uint64_t kNanosPerSecond = 1'000'000'000;
constexpr std::uint64_t kStart = 1'767'225'600ull * kNanosPerSecond;  // 2026-01-01T00:00:00Z

using Random = SplitMix64;  // the same traffic everywhere for a given seed

// ---- a small frame builder (valid IPv4 header checksums; L4 checksums left 0) ----
struct Frame {
  std::vector<std::uint8_t> bytes;
  void put8(std::uint8_t v) { bytes.push_back(v); }
  void put16(std::uint16_t v) { put8(static_cast<std::uint8_t>(v >> 8)), put8(static_cast<std::uint8_t>(v)); }
  void put32(std::uint32_t v) { put16(static_cast<std::uint16_t>(v >> 16)), put16(static_cast<std::uint16_t>(v)); }
  void put(std::span<const std::uint8_t> b) { bytes.insert(bytes.end(), b.begin(), b.end()); }
};

constexpr std::array<std::uint8_t, 6> kRouterMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
constexpr std::array<std::uint8_t, 6> kHostMac{0x02, 0x00, 0x00, 0x00, 0x00, 0x02};

void ethernet(Frame& f, std::uint16_t ethertype, int vlan) {
  f.put(kRouterMac);
  f.put(kHostMac);
  if (vlan >= 0) {
    f.put16(0x8100);
    f.put16(static_cast<std::uint16_t>(vlan));
  }
  f.put16(ethertype);
}

std::uint16_t ipv4_checksum(const std::uint8_t* header, std::size_t length) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < length; i += 2) sum += (header[i] << 8) | header[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

std::uint32_t ipv4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  return (std::uint32_t{a} << 24) | (std::uint32_t{b} << 16) | (std::uint32_t{c} << 8) | d;
}

void l4(Frame& f, std::uint8_t protocol, std::uint16_t sport, std::uint16_t dport, std::size_t payload) {
  f.put16(sport);
  f.put16(dport);
  if (protocol == 6) {  // TCP: seq, ack, offset 5, ACK|PSH, window, checksum, urgent
    f.put32(1), f.put32(1), f.put8(5 << 4), f.put8(0x18), f.put16(65535), f.put16(0), f.put16(0);
  } else {  // UDP: length, checksum
    f.put16(static_cast<std::uint16_t>(8 + payload)), f.put16(0);
  }
  f.bytes.insert(f.bytes.end(), payload, 0x5a);
}

std::size_t l4_header(std::uint8_t protocol) { return protocol == 6 ? 20 : 8; }

// An Ethernet frame of `size` bytes (FCS excluded) carrying IPv4 and TCP or UDP.
std::vector<std::uint8_t> ipv4_frame(std::size_t size, int vlan, std::uint32_t src, std::uint32_t dst,
                                     std::uint8_t protocol, std::uint16_t sport, std::uint16_t dport,
                                     std::uint8_t dscp) {
  Frame f;
  ethernet(f, 0x0800, vlan);
  const std::size_t ip_start = f.bytes.size();
  const std::size_t total = size - ip_start;
  f.put8(0x45), f.put8(static_cast<std::uint8_t>(dscp << 2)), f.put16(static_cast<std::uint16_t>(total));
  f.put16(0x1234), f.put16(0x4000), f.put8(64), f.put8(protocol), f.put16(0);
  f.put32(src), f.put32(dst);
  const std::uint16_t sum = ipv4_checksum(f.bytes.data() + ip_start, 20);
  f.bytes[ip_start + 10] = static_cast<std::uint8_t>(sum >> 8);
  f.bytes[ip_start + 11] = static_cast<std::uint8_t>(sum);
  l4(f, protocol, sport, dport, total - 20 - l4_header(protocol));
  return f.bytes;
}

std::vector<std::uint8_t> ipv6_frame(std::size_t size, std::uint16_t src_last, std::uint8_t dscp) {
  Frame f;
  ethernet(f, 0x86dd, -1);
  const std::size_t payload = size - f.bytes.size() - 40;
  f.put32((6u << 28) | (std::uint32_t{dscp} << 22));
  f.put16(static_cast<std::uint16_t>(payload)), f.put8(17), f.put8(64);
  const std::array<std::uint8_t, 14> src_prefix{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  f.put(src_prefix), f.put16(src_last);
  const std::array<std::uint8_t, 16> dst{0x20, 0x01, 0x0d, 0xb8, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  f.put(dst);
  l4(f, 17, 40000, 4791, payload - 8);
  return f.bytes;
}

std::vector<std::uint8_t> arp_frame() {
  Frame f;
  ethernet(f, 0x0806, -1);
  f.put16(1), f.put16(0x0800), f.put8(6), f.put8(4), f.put16(1);
  f.put(kHostMac), f.put32(ipv4(10, 0, 0, 1)), f.put(std::array<std::uint8_t, 6>{}), f.put32(ipv4(10, 0, 0, 254));
  f.bytes.resize(60, 0);
  return f.bytes;
}

// One generated flow: how its packets look and how often they come.
struct Flow {
  enum Kind { web, dns, voice, bulk6, guest, other, arp, broken } kind;
  std::uint64_t bits_per_second;  // offered load
  std::uint64_t next = kStart;
  std::uint64_t sent = 0;
};

std::size_t imix(Random& r) {
  const std::uint64_t x = r.below(12);
  return x < 7 ? 64 : x < 11 ? 576 : 1500;
}

std::vector<std::uint8_t> make_packet(Flow& f, Random& r) {
  const std::uint32_t client = ipv4(10, 0, static_cast<std::uint8_t>(r.below(4)), static_cast<std::uint8_t>(1 + r.below(200)));
  switch (f.kind) {
    case Flow::web:
      return ipv4_frame(imix(r), r.below(4) == 0 ? 100 : -1, client, ipv4(10, 1, 0, 10), 6,
                        static_cast<std::uint16_t>(30000 + r.below(20000)), r.below(3) == 0 ? 80 : 443, 0);
    case Flow::dns:
      return ipv4_frame(90, -1, client, ipv4(10, 53, 0, 53), 17, static_cast<std::uint16_t>(30000 + r.below(20000)), 53, 0);
    case Flow::voice:
      return ipv4_frame(214, -1, client, ipv4(10, 2, 0, 5), 17, 16384, 16386, 46);
    case Flow::bulk6: {
      static constexpr std::uint8_t kAfClass1[3] = {10, 12, 14};  // AF11, AF12, AF13: green, yellow, red in
      return ipv6_frame(imix(r) < 500 ? 128 : 1400, static_cast<std::uint16_t>(1 + r.below(50)), kAfClass1[r.below(3)]);
    }
    case Flow::guest:  // many guests, each a little: per-source meters under one aggregate
      return ipv4_frame(imix(r), -1, ipv4(10, 9, static_cast<std::uint8_t>(r.below(4)), static_cast<std::uint8_t>(1 + r.below(250))),
                        ipv4(192, 168, 8, 8), 17, 5000, 8080, 0);
    case Flow::other:
      return ipv4_frame(imix(r), -1, client, ipv4(192, 168, 7, 7), 17, 5000, 9999, 0);
    case Flow::arp:
      return arp_frame();
    case Flow::broken: {
      auto frame = ipv4_frame(64, -1, client, ipv4(10, 1, 0, 10), 6, 1234, 80, 0);
      frame[14] = 0x43;  // IHL 3: a malformed IPv4 header
      return frame;
    }
  }
  return {};
}

std::uint64_t mean_size(Flow::Kind k) {
  switch (k) {
    case Flow::web: case Flow::guest: case Flow::other: return (7 * 64 + 4 * 576 + 1500) / 12;
    case Flow::dns: return 90;
    case Flow::voice: return 214;
    case Flow::bulk6: return (7 * 128 + 5 * 1400) / 12;
    case Flow::arp: case Flow::broken: return 60;
  }
  return 100;
}

}  // namespace

const char* demo_policy() {
  return R"(# tricolor-replay --demo: the example policy (the command language; see README)
profile add gold trtcm cir 5mbit cbs 32k pir 10mbit pbs 64k
profile add dns srtcm cir 1kpps cbs 64pkt ebs 128pkt
profile add voice 1r2c cir 2mbit cbs 16k
profile add bulk trtcm4115 cir 2mbit cbs 16k eir 2mbit ebs 16k
rule add web dst 10.1.0.0/16 proto tcp dport 80,443 profile gold yellow remark af12 red drop
rule add dns proto udp dport 53 profile dns red drop
rule add voice dscp ef profile voice red remark be
rule add bulk6 src 2001:db8::/32 profile bulk input dscp length l3 yellow remark af12 red drop
profile add guest 1r2c cir 16kbit cbs 2k
profile add guests-total srtcm cir 400kbit cbs 16k ebs 16k
rule add guests dst 192.168.8.0/24 profile guest per src timeout 10s parent guests-total red drop
)";
}

Expected<std::uint64_t> write_demo_capture(const std::string& path, std::uint64_t seconds, std::uint64_t seed) {
  auto writer = CaptureWriter::open(path);
  if (!writer) return writer.error();
  std::vector<Flow> flows = {
      {Flow::web, 15'000'000},  {Flow::dns, 3'000 * 90 * 8}, {Flow::voice, 4'000'000}, {Flow::bulk6, 6'000'000},
      {Flow::guest, 1'000'000}, {Flow::other, 1'000'000}, {Flow::arp, 200 * 8 * 60}, {Flow::broken, 20 * 8 * 64},
  };
  Random random{seed};
  const std::uint64_t end = kStart + seconds * kNanosPerSecond;
  std::uint64_t written = 0;
  for (;;) {
    Flow& f = *std::min_element(flows.begin(), flows.end(), [](const Flow& a, const Flow& b) { return a.next < b.next; });
    if (f.next >= end) break;
    CaptureRecord record;
    record.data = make_packet(f, random);
    record.wire_length = static_cast<std::uint32_t>(record.data.size());
    record.timestamp_ns = f.next;
    (*writer)->write(record);
    ++written;
    // Gaps spread from 0.25x to 2.4x the mean for the offered load, so that traffic comes in bursts.
    const std::uint64_t mean_gap = mean_size(f.kind) * 8 * kNanosPerSecond / f.bits_per_second;
    const std::uint64_t u = 1 + random.below(1000);
    const std::uint64_t factor = u < 368 ? 250 : u < 632 ? 750 : u < 865 ? 1250 : 2400;  // per mille
    f.next += std::max<std::uint64_t>(1, mean_gap * factor / 1000);
  }
  if (auto closed = (*writer)->close(); !closed) return closed.error();
  return written;
}

Expected<bool> write_demo_policy(const std::string& path) {
  std::ofstream out(path);
  out << demo_policy();
  out.close();
  if (!out) return Error{path, "cannot write " + path};
  return true;
}

}  // namespace tricolor::dataplane
