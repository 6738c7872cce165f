// The shaping timing wheel (dataplane/dpdk/timing_wheel.hpp) on ints: never early, exact (nothing due
// is left behind), FIFO within a tick, slot order, laps past the span, full, the empty wheel's jump,
// take_all; and against a reference model (a list sorted by tick) under random traffic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "dataplane/dpdk/timing_wheel.hpp"

namespace tricolor::dataplane {
namespace {

// Slots of 8 ticks, 64 of them (the least a wheel has): small enough to lap often.
constexpr WheelGeometry kSmall{3, 6};

std::vector<int> drain_all(TimingWheel<int>& wheel, std::uint64_t now, std::size_t chunk = 4) {
  std::vector<int> got;
  std::vector<int> out(chunk);
  while (const std::size_t n = wheel.drain(now, out)) got.insert(got.end(), out.begin(), out.begin() + static_cast<long>(n));
  return got;
}

TEST(WheelGeometry, AboutAMicrosecondAndSpansTheDelay) {
  const WheelGeometry ns = WheelGeometry::for_clock(1'000'000'000, 1'000'000'000);
  EXPECT_EQ(ns.slot_shift, 10u);  // 1024 ns
  EXPECT_EQ(ns.slot_bits, 20u);   // 976563 slots + 2 -> 2^20
  const WheelGeometry tsc21 = WheelGeometry::for_clock(2'100'000'000, 1'000'000'000);
  EXPECT_EQ(tsc21.slot_shift, 11u);  // 2048 ticks: 0.98 us
  const WheelGeometry tsc3 = WheelGeometry::for_clock(3'000'000'000, 1'000'000'000);
  EXPECT_EQ(tsc3.slot_shift, 12u);   // 4096 ticks (1.37 us) is nearer 3000 by ratio than 2048 (0.68 us)
  for (const std::uint64_t hz : {1'000'000'000ull, 2'100'000'000ull, 3'000'000'000ull, 4'000'000'000ull, 1'000'000ull}) {
    const WheelGeometry g = WheelGeometry::for_clock(hz, 1'000'000'000);
    const std::uint64_t span = (std::uint64_t{1} << g.slot_bits) << g.slot_shift;
    EXPECT_GE(span, hz + 2 * (std::uint64_t{1} << g.slot_shift)) << hz;  // one second and two slots
    EXPECT_LT(span / 2, hz + 2 * (std::uint64_t{1} << g.slot_shift)) << hz;  // the least power of two
  }
}

TEST(TimingWheel, NeverEarlyAndNothingDueLeftBehind) {
  TimingWheel<int> wheel(16, kSmall);
  ASSERT_TRUE(wheel.insert(100, 1));
  ASSERT_TRUE(wheel.insert(101, 2));
  ASSERT_TRUE(wheel.insert(117, 3));
  EXPECT_TRUE(drain_all(wheel, 99).empty());
  EXPECT_EQ(drain_all(wheel, 100), std::vector<int>{1});  // its tick, in its slot's middle (96..103)
  EXPECT_EQ(drain_all(wheel, 116), std::vector<int>{2});
  EXPECT_EQ(drain_all(wheel, 117), std::vector<int>{3});
  EXPECT_EQ(wheel.size(), 0u);
}

TEST(TimingWheel, FifoWithinATickAndWithinASlot) {
  TimingWheel<int> wheel(64, kSmall);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(wheel.insert(200 + (i >= 10 ? 3 : 0), i));
  std::vector<int> expected(20);
  for (int i = 0; i < 20; ++i) expected[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(drain_all(wheel, 203, 3), expected);
}

TEST(TimingWheel, OutOfOrderTicksInOneSlotLeaveWhenDue) {
  // A later insert with an earlier tick (another flow, a shorter delay) is not stuck behind the head.
  TimingWheel<int> wheel(16, kSmall);
  ASSERT_TRUE(wheel.insert(205, 1));
  ASSERT_TRUE(wheel.insert(201, 2));
  ASSERT_TRUE(wheel.insert(207, 3));
  ASSERT_TRUE(wheel.insert(202, 4));
  EXPECT_EQ(drain_all(wheel, 202), (std::vector<int>{2, 4}));
  EXPECT_EQ(drain_all(wheel, 206), std::vector<int>{1});
  EXPECT_EQ(drain_all(wheel, 207), std::vector<int>{3});
  EXPECT_TRUE(wheel.empty());
}

TEST(TimingWheel, SlotOrderAcrossSlots) {
  TimingWheel<int> wheel(16, kSmall);
  ASSERT_TRUE(wheel.insert(300, 3));
  ASSERT_TRUE(wheel.insert(100, 1));
  ASSERT_TRUE(wheel.insert(200, 2));
  ASSERT_TRUE(wheel.insert(100, 10));
  EXPECT_EQ(drain_all(wheel, 1000, 1), (std::vector<int>{1, 10, 2, 3}));
}

TEST(TimingWheel, LapsPastTheSpan) {
  // 64 slots of 8 ticks: 512 ticks a lap. Items up to 500 ticks ahead, the clock run over 20 laps.
  TimingWheel<int> wheel(1024, kSmall);
  std::vector<std::pair<std::uint64_t, int>> held;
  int next = 0;
  for (std::uint64_t now = 0; now < 20 * 512; now += 37) {
    for (const int i : drain_all(wheel, now)) {
      const auto it = std::find_if(held.begin(), held.end(), [&](const auto& h) { return h.second == i; });
      ASSERT_NE(it, held.end());
      EXPECT_LE(it->first, now) << "item " << i << " left early";
      held.erase(it);
    }
    for (const auto& h : held) EXPECT_GT(h.first, now) << "item " << h.second << " due and not drained";
    const std::uint64_t release = now + 1 + static_cast<std::uint64_t>(next * 97) % 500;
    ASSERT_TRUE(wheel.insert(release, next));
    held.emplace_back(release, next++);
  }
  EXPECT_EQ(wheel.size(), held.size());
}

TEST(TimingWheel, BeyondTheSpanIsRefused) {
  TimingWheel<int> wheel(16, kSmall);
  ASSERT_TRUE(wheel.insert(12, 1));
  EXPECT_TRUE(drain_all(wheel, 9).empty());           // the cursor at slot 1 (8..15)
  EXPECT_TRUE(wheel.insert(8 + 63 * 8 + 7, 2));        // slot 64: the last one of this lap
  EXPECT_FALSE(wheel.insert(8 + 64 * 8, 3));           // slot 65 would land on slot 1's
  EXPECT_EQ(drain_all(wheel, 10000), (std::vector<int>{1, 2}));
}

TEST(TimingWheel, FullIsRefusedUntilSomethingLeaves) {
  TimingWheel<int> wheel(3, kSmall);
  EXPECT_TRUE(wheel.insert(50, 1));
  EXPECT_TRUE(wheel.insert(60, 2));
  EXPECT_TRUE(wheel.insert(70, 3));
  EXPECT_FALSE(wheel.insert(55, 4));
  EXPECT_EQ(wheel.size(), 3u);
  EXPECT_EQ(drain_all(wheel, 50), std::vector<int>{1});
  EXPECT_TRUE(wheel.insert(55, 4));
  EXPECT_EQ(drain_all(wheel, 100), (std::vector<int>{4, 2, 3}));
  TimingWheel<int> none(0, kSmall);
  EXPECT_FALSE(none.insert(1, 1));
}

TEST(TimingWheel, EmptyDrainJumpsTheCursor) {
  // Nothing held: a drain moves the cursor to now's slot without scanning the slots between.
  TimingWheel<int> wheel(4, WheelGeometry::for_clock(1'000'000'000, 1'000'000'000));
  const std::uint64_t far = 123'456'789'000'000;  // about 34 hours of ns: many laps
  EXPECT_EQ(drain_all(wheel, far), std::vector<int>{});
  EXPECT_EQ(wheel.cursor_slot(), far >> 10);
  ASSERT_TRUE(wheel.insert(far + 999'000'000, 1));  // within the span of the jumped cursor
  EXPECT_TRUE(drain_all(wheel, far + 998'999'999).empty());
  EXPECT_EQ(drain_all(wheel, far + 999'000'000), std::vector<int>{1});
}

TEST(TimingWheel, AReleaseAlreadyPastLeavesAtTheNextDrain) {
  TimingWheel<int> wheel(4, kSmall);
  ASSERT_TRUE(wheel.insert(400, 1));
  EXPECT_TRUE(drain_all(wheel, 399).empty());
  ASSERT_TRUE(wheel.insert(100, 2));  // before the cursor: into the oldest slot, due
  EXPECT_EQ(drain_all(wheel, 399), std::vector<int>{2});
  EXPECT_EQ(drain_all(wheel, 400), std::vector<int>{1});
}

TEST(TimingWheel, TakeAllEmptiesTheWheelInSlotOrder) {
  TimingWheel<int> wheel(8, kSmall);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(wheel.insert(1000 - static_cast<std::uint64_t>(i) * 40, i));
  std::vector<int> got, out(3);
  while (const std::size_t n = wheel.take_all(out)) got.insert(got.end(), out.begin(), out.begin() + static_cast<long>(n));
  EXPECT_EQ(got, (std::vector<int>{7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_TRUE(wheel.empty());
  EXPECT_EQ(wheel.take_all(out), 0u);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(wheel.insert(2000, i));  // every node back in the free list
  EXPECT_FALSE(wheel.insert(2000, 8));
}

// Random traffic against a reference: flows with non-decreasing ticks each (as the engine guarantees
// per meter), several flows sharing slots, the clock in random steps. At each drain exactly the items
// due leave, and each flow's items leave in its order.
TEST(TimingWheel, MatchesAReferenceUnderRandomTraffic) {
  std::mt19937_64 random(27);
  for (int round = 0; round < 20; ++round) {
    TimingWheel<int> wheel(64, kSmall);
    struct Held {
      std::uint64_t release;
      int flow, item;
    };
    std::vector<Held> held;
    std::vector<std::uint64_t> last_release(5, 0);
    std::vector<int> last_out(5, -1);
    std::uint64_t now = random() % 100'000;
    int next = 0;
    for (int step = 0; step < 3000; ++step) {
      // As the forwarder does: a drain (at a clock that moved on, or not) before each insert.
      now += random() % 12;
      for (const int i : drain_all(wheel, now, 1 + random() % 8)) {
        const auto it = std::find_if(held.begin(), held.end(), [&](const Held& h) { return h.item == i; });
        ASSERT_NE(it, held.end());
        ASSERT_LE(it->release, now) << "early";
        const std::size_t f = static_cast<std::size_t>(it->flow);
        ASSERT_GT(i, last_out[f]) << "flow " << f << " reordered";
        last_out[f] = i;
        held.erase(it);
      }
      for (const Held& h : held) ASSERT_GT(h.release, now) << "item " << h.item << " due and left behind";
      ASSERT_EQ(wheel.size(), held.size());
      const int flow = static_cast<int>(random() % 5);
      const std::uint64_t release = std::max(now + 1 + random() % 400, last_release[static_cast<std::size_t>(flow)]);
      const int item = next++ * 8 + flow;
      if (wheel.insert(release, item)) {
        held.push_back({release, flow, item});
        last_release[static_cast<std::size_t>(flow)] = release;
      } else {
        ASSERT_EQ(held.size(), 64u) << "refused while not full";
      }
    }
  }
}

}  // namespace
}  // namespace tricolor::dataplane
