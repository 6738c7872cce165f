// After a policy is installed, a worker's packet path asks nothing of the allocator or of the
// kernel's memory calls (tests/allocation_probe.hpp): not for new keys (their chunks come from a pool
// the control side keeps), not for keys that expire (their chunks go back through a queue the control
// side drains), not for a profile change a meter catches up on (into a sliding window too), a full
// table's fallback, a parent, a remark or the default action, shaping under a queue (queue N, its
// ledger made at install); nor the one-shape hash or the flow cache. The control side (update, maintain) runs between bursts, outside the probe, as it runs on its
// own thread in the daemon. Plain build only (sanitizers interpose malloc).
#include <gtest/gtest.h>

#include <vector>

#include "tests/allocation_probe.hpp"
#include "tests/dataplane/engine/engine_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using namespace engine_test;
using tricolor::test::AllocationCalls;
using tricolor::test::AllocationProbe;

// Ethernet + IPv4 + UDP from 11.<source> to 10.0.0.<host>.
std::vector<std::uint8_t> from(std::uint32_t source, std::uint8_t host, std::uint8_t dscp = 0) {
  auto f = udp4(100, host, 53, dscp);
  f[26] = 11, f[27] = std::uint8_t(source >> 16), f[28] = std::uint8_t(source >> 8), f[29] = std::uint8_t(source);
  return f;
}

TEST(EngineNoAllocation, TheWorkersPathAfterInstallAllocatesNothing) {
  if (!AllocationProbe::usable()) GTEST_SKIP() << AllocationProbe::why_unusable();
  Policy policy;
  policy.profiles.push_back({"key", params_1r2c(20'000, 3000)});
  policy.profiles.push_back({"site", params_1r2c(1'000'000, 100'000)});
  Rule keyed = rule("keyed", 1, "key");  // per source, under a parent, remarking yellow... 1R2C: red remarked
  keyed.per_key.kind = KeyKind::src;
  keyed.per_key.capacity = 32768;            // 8 chunks of entries
  keyed.per_key.idle_timeout_ns = kHz / 10;  // keys expire: their chunks go back
  keyed.parent = "site";
  keyed.on_color[2] = Action{false, 10, std::nullopt};
  policy.rules.push_back(keyed);
  Rule small = rule("small", 2, "key");  // a table that fills: the fallback, the aggregate meter
  small.per_key.kind = KeyKind::src;
  small.per_key.capacity = 16;
  policy.rules.push_back(small);
  Rule aware = rule("aware", 3, "site");  // an aggregate, color-aware
  aware.input = InputColor::dscp;
  policy.rules.push_back(aware);
  Rule flows = rule("flows", 5, "key");  // flows per key: opened, refused, the flow table full, expired
  flows.per_key.kind = KeyKind::src;
  flows.per_key.ipv4_prefix = 16;
  flows.per_key.max_flows = 4;
  flows.per_key.flow_capacity = 64;
  flows.per_key.flow_timeout_ns = kHz / 1000;
  policy.rules.push_back(flows);
  // Shaping with queues that fill (20 kB/s against a packet a microsecond): per key and aggregate.
  policy.profiles.push_back({"shape", params_1r2c(20'000, 3000)});
  Rule shaped = rule("shaped", 6, "shape");
  shaped.per_key.kind = KeyKind::src;
  shaped.on_color[2] = Action{true, std::nullopt, std::nullopt, 100'000'000, 4};
  policy.rules.push_back(shaped);
  Rule shaped_aggregate = rule("shaped-aggregate", 7, "shape");
  shaped_aggregate.on_color[2] = Action{true, std::nullopt, std::nullopt, 100'000'000, 3};
  policy.rules.push_back(shaped_aggregate);
  policy.default_action = Action{false, 8, std::nullopt};
  Harness h(policy);
  Engine& engine = *h.engine;
  Worker& worker = engine.worker(0);

  // Frames, views and verdicts made before any probe: only the worker runs inside one.
  constexpr std::size_t kBurst = 32;
  constexpr std::uint32_t kKeys = 20'000;  // about 5 chunks of keys in "keyed"
  std::vector<std::vector<std::uint8_t>> frames;
  for (std::uint32_t i = 0; i < kKeys; ++i) {
    frames.push_back(from(i, 1));
    if (i % 8 == 0) frames.push_back(from(i, 2));        // "small": full after 16 sources
    if (i % 8 == 4) frames.push_back(from(i, 3, 12));    // "aware", AF12: yellow in
    if (i % 16 == 9) frames.push_back(from(i, 4));       // no rule: the default action, a remark
    if (i % 4 == 1) frames.push_back(from(i, 5));        // "flows": a new UDP flow each, all of one /16 key
    if (i % 4 == 2) frames.push_back(from(i % 16, 6));   // "shaped": 16 keys
    if (i % 4 == 3) frames.push_back(from(i, 7));        // "shaped-aggregate"
  }
  std::vector<PacketView> views(kBurst);
  std::vector<Verdict> verdicts(kBurst);
  AllocationCalls calls;
  std::size_t bursts = 0;
  auto run = [&](std::uint64_t start, std::uint64_t step) {
    for (std::size_t i = 0; i < frames.size(); i += kBurst, ++bursts) {
      const std::size_t n = std::min(kBurst, frames.size() - i);
      for (std::size_t k = 0; k < n; ++k)
        views[k] = PacketView{frames[i + k].data(), 100, 100, start + (i + k) * step, 0, 0, false};
      worker.online();
      {
        const AllocationProbe probe;
        worker.process(std::span(views).first(n), std::span(verdicts).first(n));
        const AllocationCalls burst = probe.calls();
        calls.malloc += burst.malloc, calls.calloc += burst.calloc, calls.realloc += burst.realloc;
        calls.aligned += burst.aligned, calls.free += burst.free, calls.new_ += burst.new_;
        calls.delete_ += burst.delete_, calls.mmap += burst.mmap, calls.munmap += burst.munmap;
        calls.madvise += burst.madvise;
      }
      worker.quiescent();
      worker.offline();
      engine.maintain();  // the control side: pools topped up and drained, retired sets freed
    }
  };
  run(0, 1000);  // 20 000 new keys over 20 ms
  // The control side changes the profiles: meters catch up at their next packet (a history to walk).
  policy.profiles[0].params = params_1r2c(40'000, 6000);
  policy.profiles[1].params = params_1r2c(2'000'000, 200'000);
  ASSERT_TRUE(engine.update(policy).ok());
  run(kHz, 1000);  // a second later: every key expired and renewed, chunks released and taken again
  // Into the limiters: the parent and the aggregates become sliding windows of 64 sub-windows (their
  // counters made by update(), on the control side), the keys sliding windows of 4 (in their entries).
  using policer::Algorithm;
  policy.profiles[0].params = {.algorithm = Algorithm::sliding_window, .limit = 3000, .window = 1'000'000, .buckets = 4};
  policy.profiles[1].params = {.algorithm = Algorithm::sliding_window, .limit = 100'000, .window = 10'000'000, .buckets = 64};
  ASSERT_TRUE(engine.update(policy).ok());
  run(2 * kHz, 1000);
  EXPECT_EQ(calls.total(), 0u) << calls.describe() << " in " << bursts << " bursts";
  EXPECT_EQ(engine.live_keys(0), kKeys);
  EXPECT_EQ(engine.keys_starved(0), 0u) << "the control side kept up between bursts";
  EXPECT_GT(engine.counters(1).table_full, 0u) << "the small table filled: its fallback ran";
  EXPECT_GT(engine.counters(0).keys_renewed + engine.counters(0).keys_created, kKeys);
  EXPECT_GT(engine.counters(3).flows_opened, 0u);
  EXPECT_GT(engine.counters(3).flows_refused, 0u) << "the key at max-flows";
  EXPECT_GT(engine.counters(3).flows_expired, 0u) << "the sweep closed idle flows";
  for (std::size_t r : {4u, 5u}) {
    EXPECT_GT(engine.counters(r).shaped_packets, 0u) << r;
    EXPECT_GT(engine.counters(r).queue_overflow_packets, 0u) << r;
  }
}

// The classifier of a one-shape rule set (a hash table, exact_match.hpp) behind a flow cache smaller
// than the flows (flow_cache.hpp): hits, misses, insertions, a new rule set's misses, no allocation.
TEST(EngineNoAllocation, TheOneShapeHashAndTheFlowCacheAllocateNothing) {
  if (!AllocationProbe::usable()) GTEST_SKIP() << AllocationProbe::why_unusable();
  Policy policy;
  policy.profiles.push_back({"p", params_1r2c(1'000'000, 100'000)});
  for (std::uint8_t host = 1; host <= 40; ++host) {
    Rule r = rule("h" + std::to_string(host), host, "p");
    r.match.protocol = 17;
    r.match.dst_ports = {{53, 53}};
    policy.rules.push_back(r);
  }
  EngineOptions options;
  options.limits.flow_cache_entries = 64;
  auto made = Engine::create(policy, *policer::TickRate::make(kHz), options);
  ASSERT_TRUE(made.ok()) << made.error().message;
  Engine& engine = **made;
  Worker& worker = engine.worker(0);
  ASSERT_NE(worker.flow_cache(), nullptr);
  std::vector<std::vector<std::uint8_t>> frames;  // 48 hosts (8 match no rule) x 16 sources: 768 flows
  std::size_t to_rules = 0;
  for (std::uint32_t i = 0; i < 4096; ++i) {
    const auto host = static_cast<std::uint8_t>(1 + i % 48);
    frames.push_back(from(i % 16, host));
    to_rules += host <= 40;
  }
  constexpr std::size_t kBurst = 32;
  std::vector<PacketView> views(kBurst);
  std::vector<Verdict> verdicts(kBurst);
  std::size_t calls = 0, matched = 0;
  auto run = [&](std::uint64_t start) {
    for (std::size_t i = 0; i < frames.size(); i += kBurst) {
      for (std::size_t k = 0; k < kBurst; ++k)
        views[k] = PacketView{frames[i + k].data(), 100, 100, start + i + k, 0, 0, false};
      worker.online();
      {
        const AllocationProbe probe;
        worker.process(views, verdicts);
        calls += probe.calls().total();
      }
      for (const Verdict& v : verdicts) matched += v.rule != kNoRule;
      worker.quiescent();
      worker.offline();
      engine.maintain();
    }
  };
  run(0);
  policy.profiles[0].params = params_1r2c(2'000'000, 100'000);  // a new set: every flow misses once
  ASSERT_TRUE(engine.update(policy).ok());
  run(kHz);
  EXPECT_EQ(calls, 0u);
  EXPECT_EQ(matched, 2 * to_rules);
  EXPECT_GT(worker.flow_cache()->counters().hits.load(), 0u);
  EXPECT_GT(worker.flow_cache()->counters().misses.load(), 0u);
}

}  // namespace
}  // namespace tricolor::dataplane
