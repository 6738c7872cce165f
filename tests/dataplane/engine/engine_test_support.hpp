#pragma once
// Shared by the engine's tests: frames built byte by byte, profiles and rules, and a harness that runs
// one worker on the test's thread (Engine::process).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/engine/engine.hpp"

namespace tricolor::dataplane::engine_test {

inline constexpr std::uint64_t kHz = 1'000'000'000;

// Ethernet [+ 802.1Q] + IPv4 + UDP to 10.0.0.<host>:<dport>, `size` bytes. Byte by byte (GCC 12 warns
// falsely, -Warray-bounds, on vector range inserts inlined into some callers).
inline std::vector<std::uint8_t> udp4(std::size_t size, std::uint8_t host, std::uint16_t dport, std::uint8_t dscp = 0,
                                      bool tagged = false) {
  std::vector<std::uint8_t> f;
  f.reserve(size);
  auto put = [&](std::initializer_list<unsigned> bytes) {
    for (const unsigned b : bytes) f.push_back(static_cast<std::uint8_t>(b));
  };
  put({2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2});
  if (tagged) put({0x81, 0x00, 0x00, 0x07});
  const std::size_t l3 = size - f.size() - 2;
  put({0x08, 0x00, 0x45, unsigned(dscp << 2), unsigned(l3 >> 8), unsigned(l3 & 0xff), 0, 0, 0, 0, 64, 17, 0, 0, 192, 0,
       2, 1, 10, 0, 0, host});
  put({0x03, 0xe8, unsigned(dport >> 8), unsigned(dport & 0xff), unsigned((l3 - 20) >> 8), unsigned((l3 - 20) & 0xff),
       0, 0});
  f.resize(size, 0);
  return f;
}

inline policer::Params params_1r2c(std::uint64_t cir, std::uint64_t cbs) {
  policer::Params p;
  p.algorithm = policer::Algorithm::one_rate_two_color;
  p.cir = cir;
  p.cbs = cbs;
  return p;
}

inline Rule rule(std::string name, std::uint8_t host, std::string profile) {
  Rule r;
  r.name = std::move(name);
  r.profile = std::move(profile);
  Prefix dst;
  dst.address = {10, 0, 0, host};
  dst.length = 32;
  r.match.dst = dst;
  return r;
}

struct Harness {
  std::unique_ptr<Engine> engine;
  std::vector<std::vector<std::uint8_t>> frames;
  std::vector<PacketView> views;
  std::vector<Verdict> verdicts;

  explicit Harness(const Policy& policy) {
    auto made = Engine::create(policy, *policer::TickRate::make(kHz));
    EXPECT_TRUE(made.ok()) << made.error().message;
    engine = std::move(*made);
  }
  // Sends one burst; frames are copied so that remarks can be inspected.
  void send(std::vector<std::vector<std::uint8_t>> burst, std::uint64_t now, bool stripped = false) {
    frames = std::move(burst);
    views.clear();
    for (auto& f : frames)
      views.push_back(PacketView{f.data(), std::uint32_t(f.size()), std::uint32_t(f.size()), now, 0, 0x0007, stripped});
    verdicts.assign(views.size(), Verdict{});
    engine->process(views, verdicts);
  }
};

}  // namespace tricolor::dataplane::engine_test
