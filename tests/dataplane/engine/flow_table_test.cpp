// A max-flows rule's flow table (dataplane/engine/flow_table.hpp) against a std::map of open flows:
// random opens, finds, closes and sweeps over keys crowded into few home slots' worth of table, so
// that deletions shift clusters back and wrap around the end.
#include <gtest/gtest.h>

#include <map>

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
  EXPECT_EQ(table->memory_bytes(), 128u * 64u);
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
    if (op == 9) {  // a sweep of a few slots: what it closes was idle, and the model closes it too
      table->sweep(now, 8, [&](const FlowTable::Flow& idle) {
        const auto m = model.find(idle.incarnation);
        ASSERT_NE(m, model.end());
        EXPECT_GE(now - m->second, kIdle);
        model.erase(m);
      });
    }
    ASSERT_EQ(table->size(), model.size());
  }
}

}  // namespace
}  // namespace tricolor::dataplane
