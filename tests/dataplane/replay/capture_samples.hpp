#pragma once
// Well-formed sample captures, shared by the tests (which read them back and cut them at every byte)
// and by the fuzz corpus generator. Every expected timestamp is worked out by hand in the comments.
#include <vector>

#include "tests/dataplane/replay/capture_builders.hpp"

namespace tricolor::test {

// Seconds past 2^31, so that a reader taking pcap's 32-bit seconds as signed gets them wrong.
constexpr std::uint32_t kLateSeconds = 0xf0000000;
constexpr std::uint64_t kSecond = 1'000'000'000;

inline TestCapture sample_pcap(bool nanosecond, bool big_endian) {
  PcapBuilder pcap(nanosecond, big_endian);
  const std::uint32_t fraction = nanosecond ? 123'456'789 : 123'456;
  pcap.record(1'700'000'000, fraction, frame(60, 1), 60)
      .record(1'700'000'001, 0, frame(33, 2), 1500)      // snapped: 33 of 1500 bytes
      .record(1'700'000'001, 1, Bytes{}, 64)              // nothing captured
      .record(kLateSeconds, nanosecond ? 999'999'999 : 999'999, frame(14, 3), 10)  // len < caplen
      .record(0, 0, frame(5, 4), 5);                      // the epoch
  return pcap.finish(std::string(nanosecond ? "pcap-ns" : "pcap-us") + (big_endian ? "-be" : "-le"));
}

// One section with one Ethernet interface (default resolution: µs), enhanced packets with and without
// options, simple packets, and blocks of other types that must be skipped.
inline TestCapture sample_pcapng(bool big_endian) {
  PcapngBuilder pcapng;
  pcapng.section(big_endian, 1, {PcapngBuilder::comment("made by hand")});
  pcapng.other(4, frame(24, 9));  // name resolution block, before the interface
  pcapng.interface(kEthernet, 0, {PcapngBuilder::comment("eth0")});
  // 1'700'000'000.123456 s in µs ticks.
  pcapng.enhanced(0, 1'700'000'000'123'456, frame(60, 1), 60, 1'700'000'000'123'456'000);
  pcapng.other(5, frame(20, 8));             // interface statistics block
  pcapng.other(0x00000bad, frame(13, 7));    // custom block
  pcapng.other(0x80000001, Bytes{});         // local-use block type, empty body
  pcapng.enhanced(0, 1'700'000'001'000'000, frame(33, 2), 1500, 1'700'000'001'000'000'000,
                  {PcapngBuilder::comment("snapped")});
  pcapng.simple(frame(30, 3), 30, 30);       // block data padded to 32; 30 captured
  pcapng.simple(frame(40, 4), 1500, 40);     // block holds 40 of 1500
  pcapng.enhanced(0, 0, frame(14, 5), 10, 0);  // wire length below captured: raised to 14
  pcapng.enhanced(0, 7, Bytes{}, 0, 7'000);
  return pcapng.finish(big_endian ? "pcapng-be" : "pcapng-le");
}

// Interfaces with different if_tsresol and if_tsoffset; packets on each, out of order.
inline TestCapture sample_pcapng_interfaces(bool big_endian) {
  PcapngBuilder pcapng;
  pcapng.section(big_endian);
  pcapng.interface();                                                   // 0: µs (default)
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(9)});                  // 1: ns
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(0x80 | 10)});          // 2: 2^-10 s
  pcapng.interface(kEthernet, 0, {pcapng.tsoffset(1'600'000'000)});     // 3: µs + offset
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(12)});                 // 4: ps
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(0), pcapng.tsoffset(-10)});  // 5: s, offset -10 s
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(0x80 | 32)});          // 6: 2^-32 s
  pcapng.enhanced(0, 1'700'000'000'123'456, frame(20, 1), 20, 1'700'000'000'123'456'000);
  pcapng.enhanced(1, 1'700'000'000'987'654'321, frame(21, 2), 21, 1'700'000'000'987'654'321);
  // 1'700'000'000 s and one tick of 2^-10 s: 10^9/1024 = 976562.5 ns, rounded down.
  pcapng.enhanced(2, 1'700'000'000ull * 1024 + 1, frame(22, 3), 22, 1'700'000'000 * kSecond + 976'562);
  // 100.000123 s after the offset.
  pcapng.enhanced(3, 100'000'123, frame(23, 4), 23, 1'600'000'100 * kSecond + 123'000);
  // 5 s + 1999 ps = 5 s + 1.999 ns, rounded down.
  pcapng.enhanced(4, 5'000'000'001'999, frame(24, 5), 24, 5 * kSecond + 1);
  pcapng.enhanced(5, 1'700'000'010, frame(25, 6), 25, 1'700'000'000 * kSecond);
  // 1'700'000'000.5 s in 2^-32 s ticks.
  pcapng.enhanced(6, (1'700'000'000ull << 32) | (1ull << 31), frame(26, 7), 26,
                  1'700'000'000 * kSecond + 500'000'000);
  pcapng.enhanced(0, 1, frame(27, 8), 27, 1'000);  // earlier than the rest: order is the file's
  return pcapng.finish(big_endian ? "pcapng-interfaces-be" : "pcapng-interfaces-le");
}

// Two sections in opposite byte orders: the second one's interface 0 is a different interface.
inline TestCapture sample_pcapng_sections() {
  PcapngBuilder pcapng;
  pcapng.section(false);
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(9)});  // 0: ns
  pcapng.interface();                                     // 1: µs
  pcapng.enhanced(0, 1'700'000'000'000'000'001, frame(40, 1), 40, 1'700'000'000'000'000'001);
  pcapng.enhanced(1, 1'700'000'000'000'002, frame(41, 2), 41, 1'700'000'000'000'002'000);
  pcapng.section(true);
  pcapng.interface(kEthernet, 64, {pcapng.tsresol(0x80 | 10)});  // 0: 2^-10 s, snap length 64
  pcapng.enhanced(0, 2048, frame(42, 3), 42, 2 * kSecond);
  pcapng.simple(frame(100, 4), 100, 64);  // limited by interface 0's snap length
  pcapng.section(false);                    // a section with no interfaces and no packets
  return pcapng.finish("pcapng-sections");
}

// A pcap whose link-type word declares a 4-byte FCS: every record loses it (see remove_fcs).
inline TestCapture sample_pcap_fcs(bool nanosecond, bool big_endian) {
  PcapBuilder pcap(nanosecond, big_endian, with_fcs(kEthernet, 4));
  pcap.record(1'700'000'000, 1, frame(64, 1), 64)   // 60 bytes, wire 60
      .record(1'700'000'000, 2, frame(33, 2), 1500)  // snapped before the FCS: 33 bytes, wire 1496
      .record(1'700'000'000, 3, frame(62, 3), 64)    // snapped inside the FCS: 60 bytes, wire 60
      .record(1'700'000'000, 4, frame(2, 4), 2)      // shorter than the FCS: empty, wire 0
      .record(1'700'000'000, 5, frame(10, 5), 6);    // wire raised to 10, then 6 bytes, wire 6
  return pcap.finish(std::string(nanosecond ? "pcap-ns-fcs" : "pcap-us-fcs") + (big_endian ? "-be" : "-le"));
}

// pcapng with if_fcslen on some interfaces, epb_flags overriding it, and options around epb_flags.
inline TestCapture sample_pcapng_fcs(bool big_endian) {
  PcapngBuilder pcapng;
  pcapng.section(big_endian);
  pcapng.interface(kEthernet, 0, {pcapng.fcslen(4)});                    // 0: 4-byte FCS
  pcapng.interface();                                                     // 1: none
  pcapng.interface(kEthernet, 0, {pcapng.tsresol(9), pcapng.fcslen(2), PcapngBuilder::comment("odd")});
  pcapng.enhanced(0, 1, frame(64, 1), 64, 1'000);                                  // 60 of 60
  pcapng.enhanced(1, 2, frame(64, 2), 64, 2'000);                                  // 64 of 64
  pcapng.enhanced(2, 3, frame(64, 3), 64, 3);                                      // 62 of 62
  pcapng.enhanced(0, 4, frame(64, 4), 64, 4'000, {pcapng.packet_flags(0, 1)});     // flags without FCS: 4
  pcapng.enhanced(1, 5, frame(64, 5), 64, 5'000, {pcapng.packet_flags(2)});        // 62 of 62
  pcapng.enhanced(0, 6, frame(64, 6), 64, 6'000,                                    // 6 overrides 4
                  {PcapngBuilder::comment("x"), PcapngBuilder::packet_hash(frame(5, 9)),
                   pcapng.packet_flags(6, 2)});
  pcapng.enhanced(0, 7, frame(30, 7), 1500, 7'000);                                // 30 of 1496
  pcapng.enhanced(0, 8, frame(3, 8), 3, 8'000);                                    // empty, wire 0
  pcapng.simple(frame(40, 9), 40, 40);                                             // interface 0: 36 of 36
  pcapng.section(!big_endian);
  pcapng.interface();                                                     // a new interface 0: none
  pcapng.enhanced(0, 9, frame(64, 10), 64, 9'000);                                 // 64 of 64
  return pcapng.finish(big_endian ? "pcapng-fcs-be" : "pcapng-fcs-le");
}

inline std::vector<TestCapture> sample_captures() {
  return {
      sample_pcap(false, false),         sample_pcap(false, true),
      sample_pcap(true, false),          sample_pcap(true, true),
      sample_pcapng(false),              sample_pcapng(true),
      sample_pcapng_interfaces(false),   sample_pcapng_interfaces(true),
      sample_pcapng_sections(),
      sample_pcap_fcs(false, false),     sample_pcap_fcs(true, true),
      sample_pcapng_fcs(false),          sample_pcapng_fcs(true),
  };
}

}  // namespace tricolor::test
