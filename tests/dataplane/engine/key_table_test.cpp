// The key table's contract one property at a time: layout, capacity, renewal and expiry, memory
// following the live keys (chunks released, also while readers hold them, and kept as spares or given
// back by the control side), hash quality and secrets, and a key flood.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "dataplane/engine/key_table.hpp"
#include "dataplane/engine/keys.hpp"
#include "tests/dataplane/engine/key_table_test_support.hpp"
#include "tests/policer/meter_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using test::Rng;
using Table4 = KeyTable<16>;
using Table6 = KeyTable<40>;
using Outcome4 = Table4::Outcome;

constexpr std::size_t kEntryBytes = 128;
constexpr std::size_t kChunkEntries = 4096;
constexpr std::size_t kChunkBytes = kChunkEntries * kEntryBytes;

using test_keys::key_of;
using test_keys::made;
using test_keys::pages_not_resident;

policer::State fresh_at(std::uint64_t now) { return policer::State{{1000, 2000}, now}; }

// acquire() plus what a worker does afterwards: a "meter check" at `now` and a packet counted. Before
// it, the control side's replenish(), as if it always kept up (this file tests the table's contract,
// key_table_memory_test.cpp what happens when it does not).
template <class Table>
typename Table::Entry* touch(Table& t, const typename Table::Key& key, std::uint64_t now,
                             typename Table::Outcome& outcome) {
  EXPECT_TRUE(t.replenish());
  typename Table::Entry* e = t.acquire(key, t.hash(key), now, fresh_at(now), outcome);
  if (e != nullptr) {
    Table::begin_write(*e);
    e->state.last = std::max(e->state.last, now);
    e->counters.packets[0] += 1;
    e->counters.bytes[0] += 100;
    Table::end_write(*e);
  }
  return e;
}

template <class Table>
Outcome4 outcome_of(Table& t, std::uint64_t id, std::uint64_t now) {
  typename Table::Outcome o;
  touch(t, key_of<Table>(id), now, o);
  return static_cast<Outcome4>(o);
}

template <class Table>
std::size_t walk_count(const Table& t) {
  std::size_t n = 0;
  t.for_each([&](const auto&, const auto&, const auto&) { ++n; });
  return n;
}

// A full round of the clock hand plus one extra look per removal removes every idle key.
template <class Table>
std::size_t sweep_all(Table& t, std::uint64_t now) {
  return t.sweep(now, 2 * std::max<std::size_t>(t.index_slots(), 1));
}

TEST(KeyTableLayout, EntryIsTwoCacheLinesWithFieldsInOrder) {
  static_assert(sizeof(Table4::Entry) == 128 && sizeof(Table6::Entry) == 128);
  static_assert(alignof(Table4::Entry) == 64);
  Table6::Entry e{};
  const auto* base = reinterpret_cast<const char*>(&e);
  EXPECT_EQ(reinterpret_cast<const char*>(&e.live) - base, 4);
  EXPECT_EQ(reinterpret_cast<const char*>(&e.key) - base, 8);
  EXPECT_EQ(reinterpret_cast<const char*>(&e.state) - base, 8 + 40);
  EXPECT_EQ(reinterpret_cast<const char*>(&e.counters) - base, 8 + 40 + 24);
}

// The fixed cost is paid by make(), all of it resident; the first key adds one chunk, nothing else.
// (Was: nothing allocated before the first acquire(), which then allocated the index and faulted it
// in page by page as keys arrived: a table's memory did not follow its keys, and an index that could
// not be had showed as a full table.)
TEST(KeyTable, TheIndexIsAllocatedAndResidentWhenTheTableIsMade) {
  auto table = made<Table4>(1u << 20, 1000);
  Table4& t = *table;
  EXPECT_EQ(t.index_slots(), 2u << 20);
  // 2 Mi slots of 8 bytes; 256 chunks of 548 bytes of bookkeeping; two bitmaps of 4 words.
  EXPECT_EQ(t.index_bytes(), (2u << 20) * 8 + 256 * 548 + 2 * 4 * 8);
  EXPECT_EQ(Table4::index_bytes_for(1u << 20), t.index_bytes());
  EXPECT_EQ(t.entry_bytes(), 0u);
  EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes);  // the ready pool, filled by make()
  EXPECT_EQ(t.memory_bytes(), t.index_bytes() + 2 * kChunkBytes);
  EXPECT_EQ(pages_not_resident(t.index_address(), t.index_slots() * 8), 0u);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.sweep(5000, 100), 0u);
  EXPECT_EQ(walk_count(t), 0u);
  t.prefetch(t.hash(key_of<Table4>(1)));
  EXPECT_EQ(outcome_of(t, 1, 10), Outcome4::created);
  EXPECT_EQ(t.index_bytes(), Table4::index_bytes_for(1u << 20));
  EXPECT_EQ(t.entry_bytes(), kChunkBytes);
  EXPECT_EQ(t.spare_bytes(), kChunkBytes);  // one chunk taken from the pool
  EXPECT_TRUE(t.replenish());
  EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes);
  EXPECT_EQ(t.memory_bytes(), t.index_bytes() + 3 * kChunkBytes);
}

TEST(KeyTable, IndexBytesFollowTheFormula) {
  EXPECT_EQ(Table4::index_bytes_for(0), 8u * 8);  // the smallest index, no chunk
  EXPECT_EQ(Table4::index_bytes_for(1), 8u * 8 + 548 + 16);
  EXPECT_EQ(Table4::index_bytes_for(4096), 8192u * 8 + 548 + 16);
  EXPECT_EQ(Table4::index_bytes_for(4097), 16384u * 8 + 2 * 548 + 16);
  // 256 Mi: 512 Mi slots (4 GiB), 65536 chunks, two bitmaps of 1024 words.
  EXPECT_EQ(Table4::index_bytes_for(1u << 28), (std::size_t{1} << 32) + 65536u * 548 + 2 * 1024 * 8);
  EXPECT_EQ(Table6::index_bytes_for(1000), Table4::index_bytes_for(1000));
}

TEST(KeyTable, CapacityZeroAcceptsNothing) {
  auto table = made<Table4>(0, 1000);
  Table4& t = *table;
  EXPECT_EQ(outcome_of(t, 1, 10), Outcome4::full);
  EXPECT_EQ(t.starved(), 0u);  // full, not starved
  EXPECT_EQ(t.memory_bytes(), t.index_bytes());
  EXPECT_EQ(t.entry_bytes(), 0u);
  EXPECT_EQ(t.spare_bytes(), 0u);
  EXPECT_EQ(t.sweep(1'000'000, 10), 0u);
}

// After a round of the index that removed nothing, the sweep rests until a key can be idle (issue 23).
// What wakes it: the oldest key the round kept, and a key created or renewed since with an older clock
// (a stale timestamp), which the round never saw. The same floor tells the owner's metering that no
// key needs its renewal test (none_idle_at): never before a clean round, and never once a key can be
// idle.
TEST(KeyTableSweep, RestsAfterACleanRoundAndWakesForTheOldestKey) {
  auto table = made<Table4>(64, 1000);
  Table4& t = *table;
  for (std::uint32_t id = 1; id <= 10; ++id) EXPECT_EQ(outcome_of(t, id, 100), Outcome4::created);
  EXPECT_FALSE(t.none_idle_at(100));  // no round yet: no floor
  EXPECT_EQ(sweep_all(t, 500), 0u);  // a clean round: nothing can be idle before 1100
  EXPECT_TRUE(t.none_idle_at(1099));
  EXPECT_FALSE(t.none_idle_at(1100));
  EXPECT_EQ(outcome_of(t, 11, 50), Outcome4::created);  // a stale clock: idle from 1050
  EXPECT_TRUE(t.none_idle_at(1049));
  EXPECT_FALSE(t.none_idle_at(1050));
  EXPECT_EQ(sweep_all(t, 1060), 1u);
  EXPECT_FALSE(t.none_idle_at(1060));  // the round removed a key: no floor
  EXPECT_EQ(t.size(), 10u);
  EXPECT_EQ(sweep_all(t, 1099), 0u);
  EXPECT_EQ(sweep_all(t, 1100), 10u);
  EXPECT_EQ(t.size(), 0u);
  // A renewed key counts from its renewal; a key created after a clean round with a clock older than
  // that round's floor wakes the sweep at its own idle time.
  EXPECT_EQ(outcome_of(t, 1, 2000), Outcome4::created);
  EXPECT_EQ(outcome_of(t, 2, 3000), Outcome4::created);
  EXPECT_EQ(sweep_all(t, 2500), 0u);                       // floor 2000
  EXPECT_TRUE(t.none_idle_at(2999));
  EXPECT_FALSE(t.none_idle_at(3000));                      // key 1, idle since 2000
  EXPECT_EQ(outcome_of(t, 1, 3000), Outcome4::renewed);    // idle since 2000
  EXPECT_EQ(sweep_all(t, 3100), 0u);                       // a clean round: floor 3000
  EXPECT_EQ(outcome_of(t, 3, 1900), Outcome4::created);    // older than the floor
  EXPECT_TRUE(t.none_idle_at(2899));
  EXPECT_FALSE(t.none_idle_at(2900));                      // key 3
  EXPECT_EQ(sweep_all(t, 2900), 1u);                       // key 3 goes, 1 and 2 stay
  EXPECT_EQ(t.size(), 2u);
}

TEST(KeyTable, FoundKeyKeepsItsEntryAndCounters) {
  auto table = made<Table4>(100, 1000);
  Table4& t = *table;
  Outcome4 o;
  Table4::Entry* a = touch(t, key_of<Table4>(7), 10, o);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(o, Outcome4::created);
  EXPECT_EQ(a->live, 1u);
  EXPECT_EQ(a->version.load() % 2, 0u);
  for (std::uint64_t now = 11; now < 20; ++now) {
    EXPECT_EQ(touch(t, key_of<Table4>(7), now, o), a);
    EXPECT_EQ(o, Outcome4::found);
  }
  EXPECT_EQ(a->counters.packets[0], 10u);
  EXPECT_EQ(a->counters.bytes[0], 1000u);
  EXPECT_EQ(a->state.last, 19u);
  EXPECT_EQ(t.size(), 1u);
}

template <class Table>
void capacity_exactly(std::uint32_t capacity) {
  SCOPED_TRACE(capacity);
  auto table = made<Table>(capacity, 1000);
  Table& t = *table;
  for (std::uint64_t id = 0; id < capacity; ++id) ASSERT_EQ(outcome_of(t, id, 100), Outcome4::created) << id;
  EXPECT_EQ(t.size(), capacity);
  // The exact chunk bytes: the last chunk is cut to the capacity. A table holding all its chunks keeps
  // no spare.
  EXPECT_TRUE(t.replenish());
  EXPECT_EQ(t.entry_bytes(), std::size_t{capacity} * kEntryBytes);
  EXPECT_EQ(t.spare_bytes(), 0u);
  EXPECT_EQ(t.memory_bytes() - t.index_bytes(), std::size_t{capacity} * kEntryBytes);
  typename Table::Outcome o;
  EXPECT_EQ(touch(t, key_of<Table>(capacity), 100, o), nullptr);
  EXPECT_EQ(static_cast<Outcome4>(o), Outcome4::full);
  EXPECT_EQ(outcome_of(t, capacity + 1, 100), Outcome4::full);
  for (std::uint64_t id = 0; id < capacity; ++id) ASSERT_EQ(outcome_of(t, id, 200), Outcome4::found) << id;
  EXPECT_EQ(t.size(), capacity);
  EXPECT_EQ(walk_count(t), capacity);
  // Nothing is idle yet at 1199 (last = 200): still full.
  EXPECT_EQ(sweep_all(t, 1199), 0u);
  EXPECT_EQ(outcome_of(t, capacity, 1199), Outcome4::full);
  // All idle at 1200: the sweep removes every key and there is room again.
  EXPECT_EQ(sweep_all(t, 1200), capacity);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(walk_count(t), 0u);
  for (std::uint64_t id = 0; id < capacity; ++id)
    ASSERT_EQ(outcome_of(t, capacity + id, 1300), Outcome4::created) << id;
  EXPECT_EQ(outcome_of(t, 0, 1300), Outcome4::full);
}

// The worker looks a burst of IPv4 meter keys up comparing two words of each (KeyWords::two): sound
// because an IPv4 key's family is in its first word and its tail is zero (keys.hpp). Keys of both
// families in one table, each IPv6 key's first two words those of an IPv4 key but for the family byte,
// all given one hash, so that every look-up compares its key with every key stored before it: the
// two-word look-up (and the look-up by the two words alone, find_words) finds every IPv4 key's own
// entry, the one the whole-key look-up finds, and creates a new IPv4 key as the whole-key look-up would.
TEST(KeyTable, AnIpv4KeyComparedByTwoWordsFindsItsOwnEntry) {
  constexpr std::uint32_t kKeys = 200;
  constexpr std::uint64_t kOneHash = 0x1234'5678'0000'0042;  // one slot and one tag for every key
  auto table = made<Table6>(4 * kKeys, 0);
  Table6& t = *table;
  const KeyShape five{PerKey{.kind = KeyKind::five_tuple}};
  const auto keys_of = [&](std::uint32_t i, MeterKey& v4, MeterKey& v6) {
    Parsed p;
    p.l3 = L3::ipv4;
    p.protocol = ip_protocol::udp;
    p.src_port = static_cast<std::uint16_t>(1000 + i);
    p.dst_port = 53;
    const std::uint8_t src[4] = {10, 0, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i)};
    const std::uint8_t dst[4] = {192, 0, 2, 1};
    std::memcpy(p.src.data(), src, 4);
    std::memcpy(p.dst.data(), dst, 4);
    make_key(five, p, v4);
    p.l3 = L3::ipv6;  // source 10.0.i.i:192.0.2.1:..., so that its key's second word is the IPv4 key's
    std::memcpy(p.src.data() + 4, dst, 4);
    make_key(five, p, v6);
    ASSERT_EQ(std::memcmp(v4.data() + 1, v6.data() + 1, 15), 0);
    ASSERT_NE(v4, v6);
  };
  const auto fresh = [] { return fresh_at(1); };
  using Words = Table6::KeyWords;
  std::vector<Table6::Entry*> v4_entries, v6_entries;
  for (std::uint32_t i = 0; i < kKeys; ++i) {
    MeterKey v4, v6;
    keys_of(i, v4, v6);
    Table6::Outcome o;
    v6_entries.push_back(t.find_or_create(v6, kOneHash, fresh, o));
    ASSERT_EQ(o, Table6::Outcome::created);
    v4_entries.push_back(t.find_or_create<Words::two>(v4, kOneHash, fresh, o));  // created as a whole key would be
    ASSERT_EQ(o, Table6::Outcome::created) << i;
    ASSERT_NE(v4_entries.back(), v6_entries.back());
  }
  for (std::uint32_t i = 0; i < kKeys; ++i) {
    MeterKey v4, v6;
    keys_of(i, v4, v6);
    Table6::Outcome two, all;
    Table6::Entry* by_two = t.find_or_create<Words::two>(v4, kOneHash, fresh, two);
    ASSERT_EQ(two, Table6::Outcome::found) << i;
    ASSERT_EQ(by_two, v4_entries[i]) << i;
    ASSERT_EQ(by_two, t.find_or_create(v4, kOneHash, fresh, all)) << i;
    ASSERT_EQ(by_two->key, v4) << i;
    ASSERT_EQ(t.find(v6, kOneHash), v6_entries[i]) << i;
    // A plain burst's look-up, by the key's two words alone (find_words).
    std::uint64_t first, second;
    std::memcpy(&first, v4.data(), sizeof first);
    std::memcpy(&second, v4.data() + sizeof first, sizeof second);
    ASSERT_EQ(t.find_words(first, second, kOneHash), v4_entries[i]) << i;
    ASSERT_EQ(t.find_words(first, second ^ std::uint64_t{1} << 40, kOneHash), nullptr) << i;  // another destination
  }
  EXPECT_EQ(t.size(), 2 * kKeys);
}

TEST(KeyTable, CapacityExactlyHonoured) {
  for (std::uint32_t capacity : {1u, 2u, 7u, 100u, 4096u, 4097u, 10000u}) capacity_exactly<Table4>(capacity);
  for (std::uint32_t capacity : {1u, 100u, 4097u}) capacity_exactly<Table6>(capacity);
}

TEST(KeyTable, IdleKeyRenewedOnlyAtTheTimeout) {
  constexpr std::uint64_t kIdle = 1000;
  auto table = made<Table4>(10, kIdle);
  Table4& t = *table;
  Outcome4 o;
  const auto key = key_of<Table4>(3);
  Table4::Entry* e = touch(t, key, 5000, o);
  ASSERT_NE(e, nullptr);
  // Just under the timeout: found, counters kept.
  EXPECT_EQ(touch(t, key, 5000 + kIdle - 1, o), e);
  EXPECT_EQ(o, Outcome4::found);
  EXPECT_EQ(e->counters.packets[0], 2u);
  EXPECT_EQ(e->state.last, 5000 + kIdle - 1);
  // A stale clock (earlier than last) never makes a key idle.
  EXPECT_EQ(touch(t, key, 100, o), e);
  EXPECT_EQ(o, Outcome4::found);
  // Exactly idle_ticks later: renewed in place, fresh state and zero counters before the caller's write.
  const std::uint64_t later = 5000 + kIdle - 1 + kIdle;
  const policer::State fresh{{77, 88}, later};
  EXPECT_EQ(t.acquire(key, t.hash(key), later, fresh, o), e);
  EXPECT_EQ(o, Outcome4::renewed);
  EXPECT_EQ(e->state.level[0], 77u);
  EXPECT_EQ(e->state.level[1], 88u);
  EXPECT_EQ(e->state.last, later);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(e->counters.packets[c], 0u);
    EXPECT_EQ(e->counters.bytes[c], 0u);
  }
  EXPECT_EQ(e->version.load() % 2, 0u);
  EXPECT_EQ(t.size(), 1u);
}

TEST(KeyTable, SweepRemovesOnlyIdleKeys) {
  constexpr std::uint64_t kIdle = 1000;
  auto table = made<Table4>(1000, kIdle);
  Table4& t = *table;
  for (std::uint64_t id = 0; id < 500; ++id) ASSERT_EQ(outcome_of(t, id, 100 + id), Outcome4::created);
  // At 1300, keys with last <= 300 are idle: ids 0..200.
  EXPECT_EQ(sweep_all(t, 1300), 201u);
  EXPECT_EQ(t.size(), 299u);
  std::set<std::uint64_t> left;
  t.for_each([&](const Table4::Key& k, const policer::State& s, const KeyCounters&) {
    std::uint64_t id;
    std::memcpy(&id, k.data(), sizeof id);
    left.insert(id);
    EXPECT_GT(s.last + kIdle, 1300u);
  });
  EXPECT_EQ(left.size(), 299u);
  EXPECT_EQ(*left.begin(), 201u);
  // Every remaining key is still found after the backward shifts.
  for (std::uint64_t id = 201; id < 500; ++id) ASSERT_EQ(outcome_of(t, id, 1300), Outcome4::found) << id;
}

TEST(KeyTable, SweepBudgetAdvancesAClockHand) {
  auto table = made<Table4>(64, 10);  // 128 slots
  Table4& t = *table;
  for (std::uint64_t id = 0; id < 64; ++id) ASSERT_EQ(outcome_of(t, id, 0), Outcome4::created);
  std::size_t removed = 0, calls = 0;
  while (t.size() > 0 && calls < 1000) {
    removed += t.sweep(100, 3);
    ++calls;
  }
  EXPECT_EQ(removed, 64u);
  // 128 slots plus one look per removal, 3 per call: the hand went round once, no more.
  EXPECT_LE(calls, (128 + 64) / 3 + 2);
  EXPECT_GE(calls, 128 / 3);
}

TEST(KeyTable, IdleTicksZeroNeverExpires) {
  auto table = made<Table4>(10, 0);
  Table4& t = *table;
  Outcome4 o;
  const auto key = key_of<Table4>(1);
  touch(t, key, 0, o);
  EXPECT_TRUE(t.none_idle_at(~std::uint64_t{0}));  // with no round of the sweep
  EXPECT_EQ(sweep_all(t, ~std::uint64_t{0}), 0u);
  touch(t, key, ~std::uint64_t{0}, o);
  EXPECT_EQ(o, Outcome4::found);
  EXPECT_EQ(t.size(), 1u);
}

TEST(KeyTableMemory, ChunksReleasedWhenAllKeysExpire) {
  constexpr std::uint32_t kKeys = 20000;
  auto table = made<Table4>(kKeys, 1000);
  Table4& t = *table;
  for (std::uint64_t id = 0; id < kKeys; ++id) ASSERT_EQ(outcome_of(t, id, 10), Outcome4::created);
  EXPECT_EQ(t.entry_bytes(), kKeys * kEntryBytes);
  EXPECT_EQ(sweep_all(t, 5000), kKeys);
  EXPECT_EQ(t.deferred_chunks(), 0u);
  EXPECT_EQ(t.entry_bytes(), kKeys * kEntryBytes);  // handed back, not yet taken by the control side
  EXPECT_TRUE(t.replenish());
  EXPECT_EQ(t.entry_bytes(), 0u);
  // What stays: the index, two spare chunks, and the last chunk's own block (20000 = 4 x 4096 + 3616).
  EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes + (kKeys % kChunkEntries) * kEntryBytes);
  EXPECT_EQ(t.memory_bytes(), t.index_bytes() + t.spare_bytes());
  // And again: chunks come back on demand.
  for (std::uint64_t id = 0; id < 5000; ++id) ASSERT_EQ(outcome_of(t, kKeys + id, 6000), Outcome4::created);
  EXPECT_EQ(t.entry_bytes(), 2 * kChunkBytes);
}

TEST(KeyTableMemory, HighChunksDrainAfterAFlood) {
  constexpr std::uint32_t kCapacity = 5 * kChunkEntries;
  auto table = made<Table4>(kCapacity, 1000);
  Table4& t = *table;
  // A flood fills five chunks; the first 1000 keys stay busy.
  for (std::uint64_t id = 0; id < kCapacity; ++id) ASSERT_EQ(outcome_of(t, id, 0), Outcome4::created);
  for (std::uint64_t id = 0; id < 1000; ++id) ASSERT_EQ(outcome_of(t, id, 900), Outcome4::found);
  EXPECT_EQ(sweep_all(t, 1000), kCapacity - 1000);
  EXPECT_TRUE(t.replenish());
  EXPECT_EQ(t.entry_bytes(), kChunkBytes);
  EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes);  // the other two returned chunks went back to the source
  // New keys fill the holes of the lowest chunk before a new chunk is taken.
  for (std::uint64_t id = 0; id < kChunkEntries - 1000; ++id)
    ASSERT_EQ(outcome_of(t, kCapacity + id, 1000), Outcome4::created);
  EXPECT_EQ(t.entry_bytes(), kChunkBytes);
  EXPECT_EQ(outcome_of(t, 2 * kCapacity, 1000), Outcome4::created);
  EXPECT_EQ(t.entry_bytes(), 2 * kChunkBytes);
}

// A reader parked inside for_each() (its callback waits) while the owner releases every chunk.
TEST(KeyTableMemory, ChunksFreedOnlyOnceReadersAreGone) {
  constexpr std::uint32_t kKeys = 3 * kChunkEntries;
  auto table = made<Table4>(kKeys, 1000);
  Table4& t = *table;
  for (std::uint64_t id = 0; id < kKeys; ++id) ASSERT_EQ(outcome_of(t, id, 10), Outcome4::created);

  std::mutex m;
  std::condition_variable cv;
  bool inside = false, release = false;
  std::size_t seen = 0;
  std::thread reader([&] {
    t.for_each([&](const Table4::Key& k, const policer::State&, const KeyCounters& c) {
      if (seen++ == 0) {
        std::unique_lock lock(m);
        inside = true;
        cv.notify_all();
        cv.wait(lock, [&] { return release; });
      }
      std::uint64_t id, check;
      std::memcpy(&id, k.data(), sizeof id);
      std::memcpy(&check, k.data() + 8, sizeof check);
      EXPECT_EQ(check, ~id);
      EXPECT_EQ(c.bytes[0], 100 * c.packets[0]);
    });
  });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return inside; });
  }
  EXPECT_TRUE(t.replenish());
  const std::size_t full = t.entry_bytes();
  EXPECT_EQ(full, 3 * kChunkBytes);
  EXPECT_EQ(t.spare_bytes(), 0u);
  EXPECT_EQ(sweep_all(t, 5000), kKeys);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.deferred_chunks(), 3u);
  EXPECT_TRUE(t.replenish());
  EXPECT_EQ(t.entry_bytes(), full);  // nothing handed back under the reader
  EXPECT_EQ(t.spare_bytes(), 0u);
  // A new key takes back the lowest released chunk rather than a ready one.
  EXPECT_EQ(outcome_of(t, kKeys + 1, 5000), Outcome4::created);
  EXPECT_EQ(t.deferred_chunks(), 2u);
  EXPECT_EQ(t.entry_bytes(), full);
  EXPECT_EQ(t.sweep(5000, 1), 0u);
  EXPECT_TRUE(t.replenish());
  EXPECT_EQ(t.entry_bytes(), full);
  {
    std::lock_guard lock(m);
    release = true;
  }
  cv.notify_all();
  reader.join();
  EXPECT_GE(seen, 1u);  // the reader saw the keys of the chunks it held, or fewer: never freed memory
  t.sweep(5000, 1);  // the owner hands the chunks back once it sees no reader
  EXPECT_EQ(t.deferred_chunks(), 0u);
  EXPECT_TRUE(t.replenish());  // and the control side keeps them as its spares
  EXPECT_EQ(t.entry_bytes(), kChunkBytes);
  EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes);
}

// 1 Mi consecutive IPv4 addresses (the first 4 bytes of the key, network order): linear probing at
// load 1/2 stays short if the hash spreads them.
TEST(KeyTableHash, ConsecutiveAddressesSpreadOverTheIndex) {
  constexpr std::uint32_t kKeys = 1u << 20;
  auto table = made<Table4>(kKeys, 0);
  Table4& t = *table;
  for (std::uint32_t i = 0; i < kKeys; ++i) {
    Table4::Key key{};
    const std::uint32_t address = 0x0a000000u + i;  // 10.0.0.0 up
    key[0] = static_cast<std::uint8_t>(address >> 24);
    key[1] = static_cast<std::uint8_t>(address >> 16);
    key[2] = static_cast<std::uint8_t>(address >> 8);
    key[3] = static_cast<std::uint8_t>(address);
    key[12] = 6;
    Table4::Outcome o;
    if (i % 64 == 0) {
      ASSERT_TRUE(t.replenish());  // the control side, once a burst
    }
    ASSERT_NE(t.acquire(key, t.hash(key), 0, fresh_at(0), o), nullptr);
    ASSERT_EQ(o, Table4::Outcome::created);
  }
  const auto stats = t.probe_stats();
  // Random hashing at load 1/2: mean displacement 0.5; the maximum is 30..70 at this size.
  EXPECT_LT(stats.mean, 0.6);
  EXPECT_LE(stats.max, 128u);  // observed 30..70 over 60 secrets; a weak hash gives thousands
  std::printf("1 Mi consecutive IPv4 keys: mean displacement %.3f, max %zu\n", stats.mean, stats.max);
}

TEST(KeyTableHash, ConsecutiveIpv6AndPortsSpread) {
  constexpr std::uint32_t kKeys = 1u << 18;
  auto table = made<Table6>(kKeys, 0);
  Table6& t = *table;
  for (std::uint32_t i = 0; i < kKeys; ++i) {
    Table6::Key key{};
    key[0] = 0x20;
    key[1] = 0x01;
    key[14] = static_cast<std::uint8_t>(i >> 8);  // last bytes of the source address
    key[15] = static_cast<std::uint8_t>(i);
    key[32] = static_cast<std::uint8_t>(i >> 16);  // source port
    Table6::Outcome o;
    if (i % 64 == 0) {
      ASSERT_TRUE(t.replenish());  // the control side, once a burst
    }
    ASSERT_NE(t.acquire(key, t.hash(key), 0, fresh_at(0), o), nullptr);
  }
  const auto stats = t.probe_stats();
  EXPECT_LT(stats.mean, 0.6);
  EXPECT_LE(stats.max, 128u);  // observed 30..70 over 60 secrets; a weak hash gives thousands
  std::printf("256 Ki consecutive IPv6 keys: mean displacement %.3f, max %zu\n", stats.mean, stats.max);
}

TEST(KeyTableHash, EveryTableHasItsOwnSecret) {
  auto owned_a = made<Table4>(10, 0), owned_b = made<Table4>(10, 0);
  auto owned_c = made<Table6>(10, 0), owned_d = made<Table6>(10, 0);
  Table4 &a = *owned_a, &b = *owned_b;
  Table6 &c = *owned_c, &d = *owned_d;
  int same4 = 0, same6 = 0;
  for (std::uint64_t id = 0; id < 64; ++id) {
    same4 += a.hash(key_of<Table4>(id)) == b.hash(key_of<Table4>(id));
    same6 += c.hash(key_of<Table6>(id)) == d.hash(key_of<Table6>(id));
    EXPECT_EQ(a.hash(key_of<Table4>(id)), a.hash(key_of<Table4>(id)));
  }
  EXPECT_EQ(same4, 0);
  EXPECT_EQ(same6, 0);
}

// A key whose words past the first two are zero (an IPv4 meter key) is hashed from one multiplication
// and a constant: the same value as the whole key's NH, so the table cannot tell the two paths apart.
// (On x86-64 the short path's multiplications are inline assembly, of_words' portable C++: this holds
// the one to the other.)
TEST(KeyTableHash, AZeroTailHashesAsTheWholeKey) {
  SecretHash<40> hash;
  Rng r{23};
  for (int i = 0; i < 10000; ++i) {
    std::uint64_t words[5] = {r.next(), r.next(), 0, 0, 0};
    if (i % 2 == 1) words[2 + r.next() % 3] = std::uint64_t{1} << (r.next() % 64);  // a tail: the long path
    SecretHash<40>::Key key;
    std::memcpy(key.data(), words, sizeof words);
    ASSERT_EQ(hash(key), hash.of_words(words)) << i;
    if (i % 2 == 0) {  // from the words, as the worker hashes a key it has just made
      ASSERT_EQ(hash(key), hash.of_pair(words[0], words[1])) << i;
    }
  }
}

// Every bit of the key reaches the slot bits: flipping one key bit changes each of the low 16 hash
// bits about half the time.
TEST(KeyTableHash, AvalancheOnTheSlotBits) {
  auto table = made<Table6>(10, 0);
  Table6& t = *table;
  Rng r{17};
  constexpr int kTrials = 200;
  constexpr int kSlotBits = 16;
  for (std::size_t bit = 0; bit < 40 * 8; bit += 7) {
    int flips[kSlotBits] = {};
    for (int trial = 0; trial < kTrials; ++trial) {
      Table6::Key key;
      for (auto& byte : key) byte = static_cast<std::uint8_t>(r.next());
      const std::uint64_t h0 = t.hash(key);
      key[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      const std::uint64_t h1 = t.hash(key);
      for (int b = 0; b < kSlotBits; ++b) flips[b] += static_cast<int>(((h0 ^ h1) >> b) & 1);
    }
    for (int b = 0; b < kSlotBits; ++b) {
      EXPECT_GT(flips[b], kTrials / 4) << "key bit " << bit << " hash bit " << b;
      EXPECT_LT(flips[b], 3 * kTrials / 4) << "key bit " << bit << " hash bit " << b;
    }
  }
}

// 4 x capacity distinct keys, time advancing one tick per key. Without sweeps the table stays full
// (every key beyond capacity is refused); with a sweep of 8 slots per key, as a worker would run it,
// the hand goes round the 32 Ki slots every 4 Ki keys, so a key lives at most kIdle + 4 Ki ticks and
// none is refused. Either way the size never exceeds capacity, and after the timeout the table takes
// new keys again.
TEST(KeyTableFlood, SizeNeverExceedsCapacity) {
  constexpr std::uint32_t kCapacity = 10000;
  constexpr std::uint64_t kIdle = 5000;
  constexpr std::size_t kSweepPerKey = 8;
  for (const bool sweeping : {false, true}) {
    SCOPED_TRACE(sweeping);
    auto table = made<Table4>(kCapacity, kIdle);
    Table4& t = *table;
    std::size_t created = 0, full = 0, most = 0;
    std::uint64_t now = 0;
    for (std::uint64_t id = 0; id < 4 * kCapacity; ++id, ++now) {
      const Outcome4 o = outcome_of(t, id, now);
      created += o == Outcome4::created;
      full += o == Outcome4::full;
      ASSERT_TRUE(o == Outcome4::created || o == Outcome4::full);
      ASSERT_LE(t.size(), kCapacity);
      most = std::max(most, t.size());
      if (sweeping) t.sweep(now, kSweepPerKey);
    }
    EXPECT_EQ(created + full, 4 * kCapacity);
    if (!sweeping) {
      EXPECT_EQ(created, kCapacity);
      EXPECT_EQ(full, 3 * kCapacity);
    } else {
      EXPECT_EQ(full, 0u);
      EXPECT_LE(most, kIdle + t.index_slots() / kSweepPerKey + 1);
    }
    now += kIdle;
    sweep_all(t, now);
    EXPECT_EQ(t.size(), 0u);
    EXPECT_TRUE(t.replenish());
    EXPECT_EQ(t.entry_bytes(), 0u);
    EXPECT_EQ(t.memory_bytes(), t.index_bytes() + t.spare_bytes());
    for (std::uint64_t id = 0; id < kCapacity; ++id) ASSERT_EQ(outcome_of(t, 10 * kCapacity + id, now), Outcome4::created);
  }
}

}  // namespace
}  // namespace tricolor::dataplane
