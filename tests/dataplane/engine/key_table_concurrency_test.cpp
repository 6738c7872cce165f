// One owner thread acquires, writes and sweeps while two readers walk the table with for_each(): each
// copy a reader gets must be self-consistent, never a mix of two writes, and no reader may touch a
// chunk after it is zeroed or freed (the owner floods, lets everything expire and sweeps, so chunks are
// released and taken again all the time). The control side runs either in the owner's thread (as in
// tricolor-replay) or in a thread of its own calling replenish() in a loop (as in the daemon): then no
// chunk may be lost or given to two chunks at once (the owner checks every key it finds against its own
// record, and the source's account matches the table's figures at the end). Runs under ASan/UBSan and
// TSan too (./dev test).
//
// The owner keeps an invariant in every entry that a torn copy would break:
//   key = {id, ~id};  state.level[0] = 3 * id + 1;  state.level[1] = 7 * packets[0];
//   bytes[0] = 100 * packets[0];  packets[1] = packets[0] / 2;  bytes[2] = id * packets[0].
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dataplane/engine/key_table.hpp"
#include "tests/dataplane/engine/key_table_test_support.hpp"
#include "tests/policer/meter_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using test::Rng;
using test_keys::key_of;

template <class Table>
void write_packet(typename Table::Entry& e, std::uint64_t id, std::uint64_t now) {
  Table::begin_write(e);
  e.state.last = std::max(e.state.last, now);
  const std::uint64_t packets = e.counters.packets[0] + 1;
  e.counters.packets[0] = packets;
  e.state.level[1] = 7 * packets;
  e.counters.bytes[0] = 100 * packets;
  e.counters.packets[1] = packets / 2;
  e.counters.bytes[2] = id * packets;
  Table::end_write(e);
}

struct ReaderStats {
  std::uint64_t walks = 0;
  std::uint64_t entries = 0;
  std::uint64_t bad = 0;
};

template <class Table>
void reader_loop(const Table& table, const std::atomic<bool>& stop, ReaderStats& stats, unsigned pause_us) {
  while (!stop.load(std::memory_order_relaxed)) {
    table.for_each([&](const typename Table::Key& k, const policer::State& s, const KeyCounters& c) {
      std::uint64_t id, check;
      std::memcpy(&id, k.data(), sizeof id);
      std::memcpy(&check, k.data() + k.size() - sizeof check, sizeof check);
      const std::uint64_t p = c.packets[0];
      const bool ok = check == ~id && s.level[0] == 3 * id + 1 && s.level[1] == 7 * p && c.bytes[0] == 100 * p &&
                      c.packets[1] == p / 2 && c.bytes[2] == id * p && c.packets[2] == 0 && c.bytes[1] == 0;
      ++stats.entries;
      stats.bad += !ok;
    });
    ++stats.walks;
    // Gaps between walks let the owner see no reader and free its released chunks.
    if (pause_us != 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
}

enum class Control { in_owner, own_thread };

template <class Table>
void hammer(std::uint64_t seed, std::chrono::milliseconds duration, Control control) {
  constexpr std::uint32_t kCapacity = 3 * 4096 + 100;  // four chunks, the last of 100 entries
  constexpr std::uint64_t kIdle = 2000;
  constexpr std::size_t kSpareBytes = 2 * 4096 * 128 + 100 * 128;  // two spares, the last chunk's block
  test_keys::CountingSource source;
  auto owned = test_keys::made<Table>(kCapacity, kIdle, source);
  Table& table = *owned;
  std::atomic<bool> stop{false}, control_stop{false};
  ReaderStats stats[2];
  std::thread readers[2] = {
      std::thread(reader_loop<Table>, std::cref(table), std::cref(stop), std::ref(stats[0]), 10u),
      std::thread(reader_loop<Table>, std::cref(table), std::cref(stop), std::ref(stats[1]), 50u),
  };
  std::uint64_t replenishes = 0, replenish_failures = 0;
  std::thread controller;
  if (control == Control::own_thread) {
    controller = std::thread([&] {
      while (!control_stop.load(std::memory_order_relaxed)) {
        replenish_failures += !table.replenish();
        ++replenishes;
        std::this_thread::yield();
      }
    });
  }
  const auto owner_replenishes = [&] {
    if (control == Control::in_owner) {
      replenish_failures += !table.replenish();
      ++replenishes;
    }
  };

  // The owner's record of its live keys: packets counted since the key was created or renewed.
  std::unordered_map<std::uint64_t, std::uint64_t> record;
  std::uint64_t mismatches = 0, walk_mismatches = 0;
  Rng r{seed};
  std::uint64_t now = 0, rounds = 0, created = 0, full = 0, removed = 0;
  std::size_t peak_bytes = 0, min_bytes = ~std::size_t{0};
  const auto deadline = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < deadline || rounds < 2) {
    // A round: a flood of new keys up to (and past) capacity with hits on a hot set, then quiet time
    // past the timeout with small sweeps until the table is empty (chunks released).
    const std::uint64_t base = rounds * 1'000'000;
    const std::size_t flood = kCapacity + r.below(kCapacity);
    for (std::size_t i = 0; i < flood; ++i) {
      ++now;
      const std::uint64_t id = r.chance(30) ? base + r.below(64) : base + 64 + i;
      const auto key = key_of<Table>(id);
      typename Table::Outcome o;
      const policer::State fresh{{3 * id + 1, 0}, now};
      const std::uint64_t h = table.hash(key);
      table.prefetch(h);
      typename Table::Entry* e = table.acquire(key, h, now, fresh, o);
      if (e == nullptr) {
        ++full;
      } else {
        if (o == Table::Outcome::found) {
          const auto it = record.find(id);
          mismatches += it == record.end() || e->key != key || e->counters.packets[0] != it->second;
        } else {
          created += o == Table::Outcome::created;
          record[id] = 0;  // new, or created again after the sweep took it, or renewed
        }
        write_packet<Table>(*e, id, now);
        ++record[id];
      }
      if (i % 16 == 0) {
        removed += table.sweep(now, 8);
        owner_replenishes();
      }
    }
    // Every live entry is a distinct key of the record (two chunks sharing memory would lose some).
    std::size_t walked = 0;
    table.for_each([&](const typename Table::Key& k, const policer::State&, const KeyCounters& c) {
      std::uint64_t id;
      std::memcpy(&id, k.data(), sizeof id);
      const auto it = record.find(id);
      walk_mismatches += it == record.end() || c.packets[0] != it->second;
      ++walked;
    });
    walk_mismatches += walked != table.size();
    peak_bytes = std::max(peak_bytes, table.entry_bytes());
    now += kIdle;
    while (table.size() > 0) removed += table.sweep(now, 64);
    record.clear();
    // Up to 40 ms for the readers to leave the released chunks and the control side to take them back.
    for (int i = 0; i < 2000 && (table.deferred_chunks() > 0 || table.entry_bytes() > 0); ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      table.sweep(now, 1);
      owner_replenishes();
    }
    min_bytes = std::min(min_bytes, table.entry_bytes());
    ++rounds;
  }
  stop = true;
  for (auto& t : readers) t.join();
  control_stop = true;
  if (controller.joinable()) controller.join();
  table.sweep(now, 1);
  EXPECT_TRUE(table.replenish());  // this thread is the control side now

  EXPECT_EQ(stats[0].bad + stats[1].bad, 0u);
  EXPECT_GT(stats[0].walks, 0u);
  EXPECT_GT(stats[1].walks, 0u);
  EXPECT_GT(stats[0].entries + stats[1].entries, 0u);
  EXPECT_EQ(mismatches, 0u) << "a key found with another key's entry or counters";
  EXPECT_EQ(walk_mismatches, 0u) << "the live entries are not the owner's keys";
  EXPECT_EQ(removed, created);
  EXPECT_GT(full, 0u);
  EXPECT_EQ(replenish_failures, 0u);
  EXPECT_GT(replenishes, 0u);
  EXPECT_GT(peak_bytes, 0u);
  EXPECT_EQ(min_bytes, 0u) << "chunks were never handed back while readers ran";
  EXPECT_EQ(table.entry_bytes(), 0u);
  EXPECT_EQ(table.spare_bytes(), kSpareBytes);
  // No chunk lost, none released twice: what the source handed out is what the table says it holds.
  EXPECT_EQ(source.bytes(), table.memory_bytes());
  EXPECT_EQ(source.bad_releases(), 0u);
  const std::uint64_t starved = table.starved();
  owned.reset();
  EXPECT_EQ(source.bytes(), 0u);
  EXPECT_EQ(source.blocks(), 0u);
  EXPECT_EQ(source.bad_releases(), 0u);
  std::printf("%zu-byte keys, control %s: %llu rounds, %llu created, %llu full (%llu starved), %llu replenish calls; "
              "readers: %llu walks, %llu entries copied\n",
              sizeof(typename Table::Key), control == Control::in_owner ? "in the owner" : "in its own thread",
              static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(created),
              static_cast<unsigned long long>(full), static_cast<unsigned long long>(starved),
              static_cast<unsigned long long>(replenishes),
              static_cast<unsigned long long>(stats[0].walks + stats[1].walks),
              static_cast<unsigned long long>(stats[0].entries + stats[1].entries));
}

TEST(KeyTableConcurrency, ReadersSeeConsistentEntriesWhileChunksComeAndGo) {
  hammer<KeyTable<16>>(1, std::chrono::milliseconds(1500), Control::in_owner);
}

TEST(KeyTableConcurrency, Ipv6ReadersSeeConsistentEntries) {
  hammer<KeyTable<40>>(2, std::chrono::milliseconds(1000), Control::in_owner);
}

// The daemon's arrangement: a control thread replenishes in a loop while the owner floods past the
// ready pool many times over and sweeps, and readers walk. Keys refused for want of a ready chunk (the
// control thread descheduled) count as full here; the checks above hold whatever the timing.
TEST(KeyTableConcurrency, AControlThreadKeepsThePoolWhileTheOwnerFloodsAndReadersWalk) {
  hammer<KeyTable<16>>(3, std::chrono::milliseconds(1500), Control::own_thread);
}

TEST(KeyTableConcurrency, Ipv6KeysWithAControlThread) {
  hammer<KeyTable<40>>(4, std::chrono::milliseconds(1000), Control::own_thread);
}

// Many readers at once, each a short walk, against constant rewrites of the same few entries: the
// seqlock retries must end (the owner writes in short windows) and copies stay consistent.
TEST(KeyTableConcurrency, HotEntriesUnderConstantWrites) {
  using Table = KeyTable<16>;
  auto owned = test_keys::made<Table>(64, 0);
  Table& table = *owned;
  for (std::uint64_t id = 0; id < 8; ++id) {
    typename Table::Outcome o;
    const auto key = key_of<Table>(id);
    Table::Entry* e = table.acquire(key, table.hash(key), 1, policer::State{{3 * id + 1, 0}, 1}, o);
    ASSERT_NE(e, nullptr);
  }
  std::atomic<bool> stop{false};
  ReaderStats stats[2];
  std::thread readers[2] = {
      std::thread(reader_loop<Table>, std::cref(table), std::cref(stop), std::ref(stats[0]), 0u),
      std::thread(reader_loop<Table>, std::cref(table), std::cref(stop), std::ref(stats[1]), 0u),
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  std::uint64_t now = 1;
  while (std::chrono::steady_clock::now() < deadline) {
    for (int burst = 0; burst < 256; ++burst) {
      const std::uint64_t id = static_cast<std::uint64_t>(burst) % 8;
      const auto key = key_of<Table>(id);
      typename Table::Outcome o;
      ++now;
      Table::Entry* e = table.acquire(key, table.hash(key), now, policer::State{{3 * id + 1, 0}, now}, o);
      write_packet<Table>(*e, id, now);
    }
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(stats[0].bad + stats[1].bad, 0u);
  EXPECT_GT(stats[0].walks + stats[1].walks, 0u);
  std::printf("hot entries: %llu walks\n", static_cast<unsigned long long>(stats[0].walks + stats[1].walks));
}

}  // namespace
}  // namespace tricolor::dataplane
