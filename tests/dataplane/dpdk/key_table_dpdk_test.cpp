// The key table on DPDK's heap (DpdkMemory, the daemon's source), under a memory-only EAL (--no-huge:
// DPDK's heap is then anonymous memory, committed as it is written). A table made from it works as
// from the heap: its index and chunks come from DPDK's heap on the given socket, resident and zeroed,
// and all of it goes back when the table goes.
#include <gtest/gtest.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_memory.h>

#include <cstdint>
#include <iostream>

#include "dataplane/dpdk/dpdk_memory.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/engine/key_table.hpp"
#include "tests/dataplane/engine/key_table_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using Table4 = KeyTable<16>;
using Outcome4 = Table4::Outcome;
using test_keys::key_of;
using test_keys::pages_not_resident;

constexpr std::size_t kChunkBytes = key_table_detail::kChunkEntries * sizeof(Table4::Entry);

// Bytes allocated from DPDK's heaps, all sockets.
std::size_t dpdk_heap_bytes() {
  std::size_t total = 0;
  for (unsigned i = 0; i < rte_socket_count(); ++i) {
    rte_malloc_socket_stats stats{};
    if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &stats) == 0) total += stats.heap_allocsz_bytes;
  }
  return total;
}

// Whether p lies in memory DPDK manages.
bool in_dpdk_memory(const void* p) { return rte_mem_virt2memseg_list(p) != nullptr; }

TEST(KeyTableDpdk, ATableOnDpdksHeapWorksAndGivesItAllBack) {
  DpdkMemory source(static_cast<int>(rte_socket_id()));
  const std::size_t before = dpdk_heap_bytes();
  constexpr std::uint32_t kCapacity = 5 * 4096 + 10;
  {
    auto table = Table4::make(kCapacity, 1000, source);
    ASSERT_NE(table, nullptr);
    Table4& t = *table;
    EXPECT_TRUE(in_dpdk_memory(t.index_address()));
    EXPECT_EQ(pages_not_resident(t.index_address(), t.index_slots() * 8), 0u) << "the index is committed";
    EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes + 10 * 128);
    // DPDK's element headers and alignment add a little to each block.
    EXPECT_GE(dpdk_heap_bytes() - before, t.memory_bytes());
    EXPECT_LE(dpdk_heap_bytes() - before, t.memory_bytes() + 4 * 4096);
    for (std::uint64_t id = 0; id < kCapacity; ++id) {
      if (id % 64 == 0) {
        ASSERT_TRUE(t.replenish());
      }
      const auto key = key_of<Table4>(id);
      Outcome4 o;
      Table4::Entry* e = t.acquire(key, t.hash(key), 10, policer::State{{id, 0}, 10}, o);
      ASSERT_NE(e, nullptr) << id;
      ASSERT_EQ(o, Outcome4::created);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(e) % 128, 0u);
      ASSERT_TRUE(in_dpdk_memory(e));
    }
    EXPECT_EQ(t.entry_bytes(), kCapacity * 128u);
    std::size_t walked = 0, wrong = 0;
    t.for_each([&](const Table4::Key& k, const policer::State& s, const KeyCounters& c) {
      std::uint64_t id;
      std::memcpy(&id, k.data(), sizeof id);
      wrong += k != key_of<Table4>(id) || s.level[0] != id || c.packets[0] != 0;
      ++walked;
    });
    EXPECT_EQ(walked, kCapacity);
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(t.sweep(10 + 1000, 2 * t.index_slots()), kCapacity);
    ASSERT_TRUE(t.replenish());
    EXPECT_EQ(t.entry_bytes(), 0u);
    EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes + 10 * 128);
    // Again, from the zeroed spares.
    for (std::uint64_t id = 0; id < 4096 + 10; ++id) {
      if (id % 64 == 0) {
        ASSERT_TRUE(t.replenish());
      }
      const auto key = key_of<Table4>(kCapacity + id);
      Outcome4 o;
      ASSERT_NE(t.acquire(key, t.hash(key), 20, policer::State{{id, 0}, 20}, o), nullptr);
    }
  }
  EXPECT_EQ(dpdk_heap_bytes(), before) << "every block went back to DPDK's heap";
}

// An index larger than DPDK's heap (the EAL here has 512 MiB): no table, nothing kept.
TEST(KeyTableDpdk, AnIndexLargerThanDpdksHeapIsRefused) {
  DpdkMemory source(SOCKET_ID_ANY);
  const std::size_t before = dpdk_heap_bytes();
  EXPECT_EQ(Table4::make(64u << 20, 1000, source), nullptr);  // 1 GiB of index
  EXPECT_EQ(dpdk_heap_bytes(), before);
}

}  // namespace
}  // namespace tricolor::dataplane

// One memory-only EAL for the whole process, as tests/dataplane/engine/eal_main.cpp; a small heap (512 MiB).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto eal = tricolor::dataplane::MemoryOnlyEal::init("tricolor-keytable-test", 512);
  if (!eal) {
    std::cerr << eal.error().message << "\n";
    return 1;
  }
  return RUN_ALL_TESTS();
}
