// A max-flows rule's flow table (dataplane/engine/flow_table.hpp) against a std::map of open flows:
// random opens, finds, closes and sweeps over keys crowded into few home slots' worth of table, so
// that deletions shift clusters back and wrap around the end.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "dataplane/engine/flow_table.hpp"
#include "dataplane/replay/splitmix64.hpp"

namespace tricolor::dataplane {
namespace {

MeterKey flow_key(std::uint32_t n) {
  MeterKey k{};
  k[0] = 4;
  k[1] = 6;
  k[2] = std::uint8_t(n >> 8), k[3] = std::uint8_t(n);
  k[8] = 10, k[11] = std::uint8_t(n >> 16);
  return k;
}

TEST(FlowTable, RandomOperationsAgreeWithAMapOfOpenFlows) {
  constexpr std::uint32_t kCapacity = 37;  // 128 slots: most flows of the 200 below find it full
  constexpr std::uint64_t kIdle = 1000;
  auto table = FlowTable::make(kCapacity, kIdle, heap_memory());
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->memory_bytes(), 128u * 64u + 257u * 8u);  // the slots, then 256 buckets' sentinels and the scratch one
  std::map<std::uint32_t, std::uint64_t> model;  // flow -> tick of its latest packet
  SplitMix64 rng{27};
  std::uint64_t now = 1;
  for (int step = 0; step < 200'000; ++step) {
    now += rng.below(20);
    const std::uint32_t n = std::uint32_t(rng.below(200));
    const MeterKey key = flow_key(n);
    const std::uint64_t hash = table->hash(key);
    FlowTable::Flow* f = table->find(key, hash);
    const auto it = model.find(n);
    ASSERT_EQ(f != nullptr, it != model.end()) << "step " << step << " flow " << n;
    const std::uint64_t op = rng.below(10);
    if (f != nullptr) {
      EXPECT_EQ(f->key, key);
      EXPECT_EQ(f->incarnation, n);
      if (op < 3) {
        table->close(*f);
        model.erase(it);
      } else {
        f->last = now;
        it->second = now;
      }
    } else if (op < 7) {
      FlowTable::Flow* opened = table->open(key, hash, now, n);
      ASSERT_EQ(opened != nullptr, model.size() < kCapacity) << "step " << step;
      if (opened != nullptr) model[n] = now;
    }
    if (op == 9) {  // the buckets gone by: what they close was idle, and the model closes it too
      table->expire_due(now, FlowTable::Expiry::whole_buckets, [&](const FlowTable::Flow& idle) {
        const auto m = model.find(idle.incarnation);
        ASSERT_NE(m, model.end());
        EXPECT_GE(now - m->second, kIdle);
        model.erase(m);
      });
    }
    ASSERT_EQ(table->size(), model.size());
  }
  EXPECT_TRUE(table->consistent());
}

// Exact expiry (Expiry::exact): after expire_due(now), no flow idle at `now` is open and none that is
// not idle was closed, whatever the time steps (within a bucket, across a few, past a revolution);
// the bucket lists stay well linked through opens, packets, closes and the shifts deletions make.
// Capacities of the fewest buckets (256) and of more (40 000 flows: 1024).
TEST(FlowTable, ExactExpiryLeavesNoIdleFlowAndClosesNoLiveOne) {
  for (const std::uint32_t capacity : {300u, 40'000u})
  for (const std::uint64_t idle : {std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{1'000'000'000}}) {
    auto table = FlowTable::make(capacity, idle, heap_memory());
    ASSERT_NE(table, nullptr);
    std::map<std::uint32_t, std::uint64_t> model;  // flow -> tick of its latest packet
    SplitMix64 rng{idle + capacity};
    std::uint64_t now = 1'700'000'000'000'000'000;
    std::uint64_t closed_by_expiry = 0;
    for (int step = 0; step < 100'000; ++step) {
      // Mostly small steps, some of the order of the timeout, a few of many revolutions.
      const std::uint64_t kind = rng.below(100);
      now += kind < 80 ? rng.below(idle / 64 + 2) : kind < 99 ? rng.below(2 * idle + 2) : idle * (300 + rng.below(1000));
      const std::uint32_t n = std::uint32_t(rng.below(1000));
      const MeterKey key = flow_key(n);
      const std::uint64_t hash = table->hash(key);
      FlowTable::Flow* f = table->find(key, hash);
      const auto it = model.find(n);
      ASSERT_EQ(f != nullptr, it != model.end()) << "step " << step;
      const std::uint64_t op = rng.below(10);
      if (f != nullptr) {
        if (op < 2) {
          table->close(*f);
          model.erase(it);
        } else {
          FlowTable::touch(*f, now);
          it->second = now;
        }
      } else if (model.size() < capacity) {
        ASSERT_NE(table->open(key, hash, now, n), nullptr);
        model[n] = now;
      }
      const auto expiry = op < 5 ? FlowTable::Expiry::exact : FlowTable::Expiry::whole_buckets;
      const std::size_t closed = table->expire_due(now, expiry, [&](const FlowTable::Flow& gone) {
        const auto m = model.find(gone.incarnation);
        ASSERT_NE(m, model.end());
        ASSERT_GE(now - m->second, idle) << "closed a live flow at step " << step;
        EXPECT_EQ(gone.last, m->second);
        model.erase(m);
      });
      closed_by_expiry += closed;
      if (expiry == FlowTable::Expiry::exact) {
        for (const auto& [flow, last] : model) ASSERT_LT(now - last, idle) << "flow " << flow << " idle, open, step " << step;
      }
      ASSERT_EQ(table->size(), model.size());
      if (step % 97 == 0) {
        ASSERT_TRUE(table->consistent()) << "step " << step;
      }
    }
    EXPECT_TRUE(table->consistent());
    EXPECT_GT(closed_by_expiry, 1000u) << "idle " << idle;
  }
}

// A clock that steps back: a flow is never made older by an earlier packet, and a flow whose
// deadline is behind the wheel's cursor (opened at an earlier tick than the last expiry) is still
// found by the exact expiry.
TEST(FlowTable, AClockSteppingBackKeepsExpiryExact) {
  constexpr std::uint64_t kIdle = 1000;
  auto table = FlowTable::make(16, kIdle, heap_memory());
  ASSERT_NE(table, nullptr);
  const auto none = [](const FlowTable::Flow&) { FAIL() << "nothing is idle"; };
  EXPECT_EQ(table->expire_due(100'000, FlowTable::Expiry::exact, none), 0u);
  const MeterKey a = flow_key(1), b = flow_key(2);
  FlowTable::Flow* fa = table->open(a, table->hash(a), 90'000, 1);  // behind the cursor
  ASSERT_NE(fa, nullptr);
  FlowTable::touch(*fa, 80'000);  // earlier: no effect
  EXPECT_EQ(fa->last, 90'000u);
  ASSERT_NE(table->open(b, table->hash(b), 100'000, 2), nullptr);
  EXPECT_TRUE(table->consistent());
  std::vector<std::uint32_t> gone;
  const auto note = [&](const FlowTable::Flow& f) { gone.push_back(f.incarnation); };
  EXPECT_EQ(table->expire_due(100'000, FlowTable::Expiry::exact, note), 1u);  // a: idle since 91 000
  EXPECT_EQ(gone, std::vector<std::uint32_t>{1});
  EXPECT_EQ(table->expire_due(100'999, FlowTable::Expiry::exact, note), 0u);
  EXPECT_EQ(table->expire_due(101'000, FlowTable::Expiry::exact, note), 1u);
  EXPECT_EQ(table->size(), 0u);
  EXPECT_TRUE(table->consistent());
}

}  // namespace
}  // namespace tricolor::dataplane
