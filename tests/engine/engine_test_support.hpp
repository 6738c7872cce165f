#pragma once
// Shared by the engine's tests: frames built byte by byte, profiles and rules, and a harness that runs
// one worker on the test's thread (Engine::process).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/engine.hpp"

namespace tricolor::dataplane::engine_test {

inline constexpr std::uint64_t kHz = 1'000'000'000;

// Ethernet [+ 802.1Q] + IPv4 + UDP to 10.0.0.<host>:<dport>, `size` bytes.
inline std::vector<std::uint8_t> udp4(std::size_t size, std::uint8_t host, std::uint16_t dport, std::uint8_t dscp = 0,
                               bool tagged = false) {
  std::vector<std::uint8_t> f = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2};
  if (tagged) f.insert(f.end(), {0x81, 0x00, 0x00, 0x07});
  const std::size_t l3 = size - f.size() - 2;
  f.insert(f.end(), {0x08, 0x00, 0x45, std::uint8_t(dscp << 2), std::uint8_t(l3 >> 8), std::uint8_t(l3), 0, 0, 0, 0, 64, 17,
                     0, 0, 192, 0, 2, 1, 10, 0, 0, host});
  f.insert(f.end(), {0x03, 0xe8, std::uint8_t(dport >> 8), std::uint8_t(dport), std::uint8_t((l3 - 20) >> 8),
                     std::uint8_t(l3 - 20), 0, 0});
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
