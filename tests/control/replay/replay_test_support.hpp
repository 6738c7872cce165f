#pragma once
// Shared by the end-to-end tests of tricolor-replay: a pcap writer and a frame builder independent of
// tricolor's own, running the real binary, reading its CSV.
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dataplane/replay/splitmix64.hpp"

namespace tricolor::test {

namespace fs = std::filesystem;

inline std::string replay_binary() {
  const char* path = std::getenv("TRICOLOR_REPLAY");
  return path ? path : "tricolor-replay";
}

using Rng = tricolor::SplitMix64;

inline void put16le(std::string& s, std::uint16_t v) { s.push_back(char(v & 0xff)), s.push_back(char(v >> 8)); }
inline void put32le(std::string& s, std::uint32_t v) { put16le(s, std::uint16_t(v)), put16le(s, std::uint16_t(v >> 16)); }

struct Packet {
  std::uint64_t time_ns;
  std::vector<std::uint8_t> frame;
};

// A nanosecond pcap of Ethernet frames.
inline void write_pcap(const fs::path& path, const std::vector<Packet>& packets) {
  std::string out;
  put32le(out, 0xa1b23c4d);
  put16le(out, 2), put16le(out, 4), put32le(out, 0), put32le(out, 0), put32le(out, 65535), put32le(out, 1);
  for (const Packet& p : packets) {
    put32le(out, std::uint32_t(p.time_ns / 1'000'000'000)), put32le(out, std::uint32_t(p.time_ns % 1'000'000'000));
    put32le(out, std::uint32_t(p.frame.size())), put32le(out, std::uint32_t(p.frame.size()));
    out.append(p.frame.begin(), p.frame.end());
  }
  std::ofstream(path, std::ios::binary) << out;
}

// Ethernet [+ 802.1Q tag] + IPv4 or IPv6 + UDP/TCP, `size` bytes in all.
struct FrameSpec {
  bool ipv6 = false;
  std::array<std::uint8_t, 16> src{};  // IPv4 in the first 4 bytes
  std::array<std::uint8_t, 16> dst{};
  std::uint8_t protocol = 17;
  std::uint16_t sport = 1000, dport = 2000;
  std::uint8_t dscp = 0;
  int vlan = -1;  // no tag
  std::uint8_t pcp = 0;
  std::size_t size = 100;
};

inline std::vector<std::uint8_t> build_frame(const FrameSpec& s) {
  std::vector<std::uint8_t> f = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2};
  if (s.vlan >= 0) {
    const std::uint16_t tci = std::uint16_t((s.pcp << 13) | s.vlan);
    f.insert(f.end(), {0x81, 0x00, std::uint8_t(tci >> 8), std::uint8_t(tci)});
  }
  const std::size_t l3 = s.size - f.size() - 2;
  if (s.ipv6) {
    f.insert(f.end(), {0x86, 0xdd});
    const std::uint32_t first = (6u << 28) | (std::uint32_t(s.dscp) << 22);
    for (int shift = 24; shift >= 0; shift -= 8) f.push_back(std::uint8_t(first >> shift));
    const std::size_t payload = l3 - 40;
    f.insert(f.end(), {std::uint8_t(payload >> 8), std::uint8_t(payload), s.protocol, 64});
    f.insert(f.end(), s.src.begin(), s.src.end());
    f.insert(f.end(), s.dst.begin(), s.dst.end());
  } else {
    const std::size_t ip = f.size() + 2;
    f.insert(f.end(), {0x08, 0x00, 0x45, std::uint8_t(s.dscp << 2), std::uint8_t(l3 >> 8), std::uint8_t(l3), 0, 0, 0x40, 0,
                       64, s.protocol, 0, 0});
    f.insert(f.end(), s.src.begin(), s.src.begin() + 4);
    f.insert(f.end(), s.dst.begin(), s.dst.begin() + 4);
    std::uint32_t sum = 0;
    for (std::size_t i = ip; i < ip + 20; i += 2) sum += (f[i] << 8) | f[i + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    f[ip + 10] = std::uint8_t(~sum >> 8), f[ip + 11] = std::uint8_t(~sum);
  }
  f.insert(f.end(), {std::uint8_t(s.sport >> 8), std::uint8_t(s.sport), std::uint8_t(s.dport >> 8), std::uint8_t(s.dport)});
  if (s.protocol == 6) {
    f.insert(f.end(), {0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0});
  } else {
    const std::size_t udp_length = l3 - (s.ipv6 ? 40 : 20);
    f.insert(f.end(), {std::uint8_t(udp_length >> 8), std::uint8_t(udp_length), 0, 0});
  }
  f.resize(s.size, 0x5a);
  return f;
}

struct CommandResult {
  int status;
  std::string output;
};

inline CommandResult run(const std::string& command) {
  CommandResult r{0, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) r.output.append(buffer, n);
  r.status = pclose(pipe);
  return r;
}

inline std::vector<std::vector<std::string>> read_csv(const fs::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A scratch folder per test, removed unless KEEP is set.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& name)
      : path(fs::temp_directory_path() / (name + "-" + std::to_string(getpid()))) {
    fs::create_directories(path);
  }
  ~ScratchDir() {
    if (!std::getenv("KEEP")) fs::remove_all(path);
  }
};

}  // namespace tricolor::test
