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

// Two verdicts the same in every field; else the first that differs, named.
inline ::testing::AssertionResult same_verdict(const Verdict& a, const Verdict& b) {
  const auto differ = [](const char* field, auto x, auto y) {
    return ::testing::AssertionFailure() << field << " differs: " << +x << " against " << +y;
  };
  if (a.rule != b.rule) return differ("rule", a.rule, b.rule);
  if (a.in != b.in) return differ("in", static_cast<int>(a.in), static_cast<int>(b.in));
  if (a.out != b.out) return differ("out", static_cast<int>(a.out), static_cast<int>(b.out));
  if (a.drop != b.drop) return differ("drop", a.drop, b.drop);
  if (a.dscp_set != b.dscp_set) return differ("dscp_set", a.dscp_set, b.dscp_set);
  if (a.pcp_set != b.pcp_set) return differ("pcp_set", a.pcp_set, b.pcp_set);
  if (a.dscp != b.dscp) return differ("dscp", a.dscp, b.dscp);
  if (a.pcp != b.pcp) return differ("pcp", a.pcp, b.pcp);
  if (a.reason != b.reason) return differ("reason", static_cast<int>(a.reason), static_cast<int>(b.reason));
  if (a.error != b.error) return differ("error", static_cast<int>(a.error), static_cast<int>(b.error));
  if (a.metered_length != b.metered_length) return differ("metered_length", a.metered_length, b.metered_length);
  if (a.keyed != b.keyed) return differ("keyed", a.keyed, b.keyed);
  if (a.table_full != b.table_full) return differ("table_full", a.table_full, b.table_full);
  if (a.handoff != b.handoff) return differ("handoff", a.handoff, b.handoff);
  if (a.flow_refused != b.flow_refused) return differ("flow_refused", a.flow_refused, b.flow_refused);
  if (a.queue_full != b.queue_full) return differ("queue_full", a.queue_full, b.queue_full);
  if (a.owner != b.owner) return differ("owner", a.owner, b.owner);
  if (a.delay != b.delay) return differ("delay", a.delay, b.delay);
  return ::testing::AssertionSuccess();
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
