// Where a key table's memory comes from and when: the owner's path (acquire, sweep, a chunk taken and
// released) makes no allocation and no memory syscall; the control side's replenish() keeps a ready
// pool of spare chunks; a key that finds the pool empty is refused and counted as starved; every block
// goes back to its source; allocate() reserves and make_resident() commits.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "dataplane/engine/key_table.hpp"
#include "dataplane/engine/memory_source.hpp"
#include "tests/allocation_probe.hpp"
#include "tests/dataplane/engine/key_table_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using Table4 = KeyTable<16>;
using Outcome4 = Table4::Outcome;
using test::AllocationCalls;
using test::AllocationProbe;
using test_keys::CountingSource;
using test_keys::key_of;
using test_keys::made;
using test_keys::pages_not_resident;

constexpr std::size_t kChunkEntries = 4096;
constexpr std::size_t kChunkBytes = kChunkEntries * 128;
constexpr std::uint64_t kIdle = 1000;

// acquire() alone, as the owner calls it; no replenish() here.
Outcome4 acquire(Table4& t, std::uint64_t id, std::uint64_t now) {
  const auto key = key_of<Table4>(id);
  Outcome4 o;
  Table4::Entry* e = t.acquire(key, t.hash(key), now, policer::State{{1, 2}, now}, o);
  if (e != nullptr) {
    Table4::begin_write(*e);
    e->state.last = now;
    e->counters.packets[0] += 1;
    Table4::end_write(*e);
  }
  return o;
}

// After make() and one replenish(), the owner's work on a burst's worth of keys: insert them (one
// chunk taken from the pool), find them, renew them once idle, sweep them all (the chunk released and
// handed to the return queue), and insert again (a second chunk from the pool). No call to the
// allocator, mmap, munmap or madvise. Was: ensure_chunk() called calloc and madvise for each chunk,
// and the sweep's drain_deferred() called free.
TEST(KeyTableMemory, TheOwnersPathMakesNoAllocationNorMemorySyscall) {
  if (!AllocationProbe::usable()) GTEST_SKIP() << AllocationProbe::why_unusable();
  constexpr std::size_t kBurst = 64;
  auto table = made<Table4>(1u << 16, kIdle);
  Table4& t = *table;
  ASSERT_TRUE(t.replenish());
  std::vector<Outcome4> outcomes;  // room made before the probe: recording allocates nothing
  outcomes.reserve(5 * kBurst);
  std::size_t removed = 0;
  AllocationCalls calls;
  {
    const AllocationProbe probe;
    for (std::uint64_t id = 0; id < kBurst; ++id) outcomes.push_back(acquire(t, id, 10));
    for (std::uint64_t id = 0; id < kBurst; ++id) outcomes.push_back(acquire(t, id, 20));
    for (std::uint64_t id = 0; id < kBurst; ++id) outcomes.push_back(acquire(t, id, 20 + kIdle));
    removed = t.sweep(20 + 2 * kIdle, 2 * t.index_slots());
    for (std::uint64_t id = kBurst; id < 2 * kBurst; ++id) outcomes.push_back(acquire(t, id, 30 + 2 * kIdle));
    calls = probe.calls();
  }
  EXPECT_EQ(calls.total(), 0u) << calls.describe();
  ASSERT_EQ(outcomes.size(), 4 * kBurst);
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome4 expected = i < kBurst ? Outcome4::created
                              : i < 2 * kBurst ? Outcome4::found
                              : i < 3 * kBurst ? Outcome4::renewed
                                               : Outcome4::created;
    ASSERT_EQ(outcomes[i], expected) << i;
  }
  EXPECT_EQ(removed, kBurst);
  EXPECT_EQ(t.size(), kBurst);
  EXPECT_EQ(t.deferred_chunks(), 0u);
  EXPECT_EQ(t.entry_bytes(), 2 * kChunkBytes);  // one chunk in use, one returned, not yet drained
  EXPECT_EQ(t.spare_bytes(), 0u);
  EXPECT_EQ(t.starved(), 0u);
  // The control side then takes the returned chunk back as a spare and tops the pool up.
  ASSERT_TRUE(t.replenish());
  EXPECT_EQ(t.entry_bytes(), kChunkBytes);
  EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes);
}

// The probe sees what it should: each kind of call on this thread inside its scope, none outside it,
// none from another thread.
TEST(AllocationProbe, CountsThisThreadsCallsInsideItsScope) {
  if (!AllocationProbe::usable()) GTEST_SKIP() << AllocationProbe::why_unusable();
  // Through volatile pointers, so that the compiler cannot pair and remove the calls.
  void* (*volatile do_malloc)(std::size_t) = &std::malloc;
  void* (*volatile do_calloc)(std::size_t, std::size_t) = &std::calloc;
  void (*volatile do_free)(void*) = &std::free;
  std::free(do_malloc(16));  // before the probe: not counted
  AllocationCalls calls;
  AllocationCalls other_thread_calls;
  std::atomic<int> step{0};
  std::thread other([&] {  // allocates while this thread's probe is active: its calls are its own
    while (step.load() != 1) std::this_thread::yield();
    do_free(do_malloc(10));
    {
      const AllocationProbe its_probe;
      do_free(do_malloc(10));
      other_thread_calls = its_probe.calls();
    }
    step.store(2);
  });
  {
    const AllocationProbe probe;
    do_free(do_malloc(100));
    do_free(do_calloc(1, 1u << 20));
    void* aligned = nullptr;
    EXPECT_EQ(posix_memalign(&aligned, 64, 256), 0);
    do_free(aligned);
    std::uint64_t* volatile one = new std::uint64_t(7);  // volatile: the pair cannot be elided
    delete one;
    std::uint64_t* volatile three = new std::uint64_t[3];
    delete[] three;
    void* mapped = mmap(nullptr, 1u << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mapped, MAP_FAILED);
    EXPECT_EQ(madvise(mapped, 1u << 16, MADV_DONTNEED), 0);
    EXPECT_EQ(munmap(mapped, 1u << 16), 0);
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();
    calls = probe.calls();
  }
  other.join();
  std::free(do_malloc(16));  // after: not counted
  EXPECT_EQ(calls.malloc, 1u) << calls.describe();
  EXPECT_EQ(calls.calloc, 1u) << calls.describe();
  EXPECT_EQ(calls.aligned, 1u) << calls.describe();
  EXPECT_EQ(calls.free, 3u) << calls.describe();
  EXPECT_EQ(calls.new_, 2u) << calls.describe();
  EXPECT_EQ(calls.delete_, 2u) << calls.describe();
  EXPECT_EQ(calls.mmap, 1u) << calls.describe();
  EXPECT_EQ(calls.madvise, 1u) << calls.describe();
  EXPECT_EQ(calls.munmap, 1u) << calls.describe();
  EXPECT_EQ(calls.total(), 13u) << calls.describe();
  EXPECT_EQ(other_thread_calls.malloc, 1u) << other_thread_calls.describe();
  EXPECT_EQ(other_thread_calls.free, 1u) << other_thread_calls.describe();
  EXPECT_EQ(other_thread_calls.total(), 2u) << other_thread_calls.describe();
}

// With no replenish(), an owner gets the spare chunks that make() readied and no more: the keys that
// need a further chunk are refused as by a full table, and counted as starved, not as full. Once the
// control side replenishes, they are taken again.
TEST(KeyTableMemory, AKeyThatFindsNoReadyChunkIsRefusedAndCountedAsStarved) {
  constexpr std::uint32_t kCapacity = 10 * kChunkEntries;
  auto table = made<Table4>(kCapacity, kIdle);
  Table4& t = *table;
  EXPECT_EQ(t.spare_chunks(), 2u);
  EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes);
  std::size_t created = 0, refused = 0;
  for (std::uint64_t id = 0; id < 3 * kChunkEntries; ++id) {
    const Outcome4 o = acquire(t, id, 10);
    created += o == Outcome4::created;
    refused += o == Outcome4::full;
  }
  EXPECT_EQ(created, 2 * kChunkEntries);
  EXPECT_EQ(refused, kChunkEntries);
  EXPECT_EQ(t.starved(), kChunkEntries);
  EXPECT_EQ(t.size(), 2 * kChunkEntries);
  EXPECT_EQ(t.spare_bytes(), 0u);
  // Keys that have their entry are unaffected.
  EXPECT_EQ(acquire(t, 0, 11), Outcome4::found);
  ASSERT_TRUE(t.replenish());
  EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes);
  for (std::uint64_t id = 2 * kChunkEntries; id < 3 * kChunkEntries; ++id)
    ASSERT_EQ(acquire(t, id, 12), Outcome4::created);
  EXPECT_EQ(t.starved(), kChunkEntries);  // no more
  // A table that is full refuses without starving.
  auto small = made<Table4>(10, kIdle);
  for (std::uint64_t id = 0; id < 10; ++id) ASSERT_EQ(acquire(*small, id, 10), Outcome4::created);
  EXPECT_EQ(acquire(*small, 10, 10), Outcome4::full);
  EXPECT_EQ(small->starved(), 0u);
}

// The last chunk of a capacity that is not a multiple of 4096 has its own block, cut to size: ready
// from make(), taken when the table reaches it, and ready again once its keys have gone.
TEST(KeyTableMemory, TheLastChunkHasItsOwnBlock) {
  constexpr std::uint32_t kCapacity = kChunkEntries + 100;
  auto table = made<Table4>(kCapacity, kIdle);
  Table4& t = *table;
  EXPECT_EQ(t.spare_bytes(), kChunkBytes + 100 * 128);  // one full spare: the table has one full chunk
  for (std::uint64_t id = 0; id < kCapacity; ++id) ASSERT_EQ(acquire(t, id, 10), Outcome4::created) << id;
  EXPECT_EQ(t.entry_bytes(), kCapacity * 128u);
  EXPECT_EQ(t.spare_bytes(), 0u);
  EXPECT_EQ(t.sweep(10 + kIdle, 2 * t.index_slots()), kCapacity);
  ASSERT_TRUE(t.replenish());
  EXPECT_EQ(t.entry_bytes(), 0u);
  EXPECT_EQ(t.spare_bytes(), kChunkBytes + 100 * 128);
}

// More spares on request, up to kMaxSpareChunks; at least one.
TEST(KeyTableMemory, SpareChunksAreAParameter) {
  auto five = made<Table4>(100 * kChunkEntries, kIdle, heap_memory(), 5);
  EXPECT_EQ(five->spare_chunks(), 5u);
  EXPECT_EQ(five->spare_bytes(), 5 * kChunkBytes);
  for (std::uint64_t id = 0; id < 5 * kChunkEntries; ++id) ASSERT_EQ(acquire(*five, id, 10), Outcome4::created) << id;
  EXPECT_EQ(acquire(*five, 5 * kChunkEntries, 10), Outcome4::full);
  EXPECT_EQ(five->starved(), 1u);
  EXPECT_EQ(made<Table4>(100 * kChunkEntries, kIdle, heap_memory(), 0)->spare_chunks(), 1u);
  EXPECT_EQ(made<Table4>(100 * kChunkEntries, kIdle, heap_memory(), 1000)->spare_chunks(), Table4::kMaxSpareChunks);
  // No more spares than the table has chunks.
  EXPECT_EQ(made<Table4>(3 * kChunkEntries, kIdle, heap_memory(), 5)->spare_bytes(), 3 * kChunkBytes);
}

// Every block comes from the table's source and goes back to it: the source's account equals the
// table's figures at each step, and is empty once the table is gone. Chunks beyond the spares go back
// to the source when their keys have gone.
TEST(KeyTableMemory, EveryBlockComesFromTheSourceAndGoesBackToIt) {
  CountingSource source;
  constexpr std::uint32_t kCapacity = 8 * kChunkEntries + 1000;
  {
    auto table = made<Table4>(kCapacity, kIdle, source);
    Table4& t = *table;
    EXPECT_EQ(source.bytes(), t.memory_bytes());
    EXPECT_EQ(t.memory_bytes(), Table4::index_bytes_for(kCapacity) + 2 * kChunkBytes + 1000 * 128);
    for (std::uint64_t id = 0; id < kCapacity; ++id) {
      if (id % 64 == 0) {
        ASSERT_TRUE(t.replenish());
      }
      ASSERT_EQ(acquire(t, id, 10), Outcome4::created) << id;
    }
    ASSERT_TRUE(t.replenish());
    EXPECT_EQ(t.entry_bytes(), kCapacity * 128u);
    EXPECT_EQ(t.spare_bytes(), 0u);
    EXPECT_EQ(source.bytes(), t.memory_bytes());
    const std::size_t handed_out = source.reserved();
    EXPECT_EQ(t.sweep(10 + kIdle, 2 * t.index_slots()), kCapacity);
    EXPECT_EQ(source.bytes(), t.memory_bytes());  // on their way back
    ASSERT_TRUE(t.replenish());
    EXPECT_EQ(t.entry_bytes(), 0u);
    EXPECT_EQ(t.spare_bytes(), 2 * kChunkBytes + 1000 * 128);
    EXPECT_EQ(source.bytes(), t.memory_bytes());
    EXPECT_EQ(source.blocks(), 1u + 2 + 1);  // index, two spares, the last chunk's block
    // A second flood reuses the spares before asking the source.
    for (std::uint64_t id = 0; id < 2 * kChunkEntries; ++id)
      ASSERT_EQ(acquire(t, kCapacity + id, 20), Outcome4::created);
    EXPECT_EQ(source.reserved(), handed_out);
    EXPECT_EQ(source.bad_releases(), 0u);
  }
  EXPECT_EQ(source.bytes(), 0u);
  EXPECT_EQ(source.blocks(), 0u);
  EXPECT_EQ(source.bad_releases(), 0u);
}

// A source with no memory: no table (and nothing kept from the attempt); a source that runs dry later:
// replenish() says so, keys starve, and all is well again once it has memory.
TEST(KeyTableMemory, ASourceWithoutMemory) {
  CountingSource source;
  source.refuse(true);
  EXPECT_EQ(Table4::make(1000, kIdle, source), nullptr);
  source.refuse(false);
  auto table = made<Table4>(10 * kChunkEntries, kIdle, source);
  Table4& t = *table;
  source.refuse(true);
  for (std::uint64_t id = 0; id < 2 * kChunkEntries; ++id) ASSERT_EQ(acquire(t, id, 10), Outcome4::created);
  EXPECT_FALSE(t.replenish());
  EXPECT_EQ(acquire(t, 2 * kChunkEntries, 10), Outcome4::full);
  EXPECT_EQ(t.starved(), 1u);
  source.refuse(false);
  EXPECT_TRUE(t.replenish());
  EXPECT_EQ(acquire(t, 2 * kChunkEntries, 10), Outcome4::created);
  table.reset();
  EXPECT_EQ(source.bytes(), 0u);
  // make() fails if its spare chunks cannot be had, and gives back the index.
  source.refuse_after(1);
  EXPECT_EQ(Table4::make(10 * kChunkEntries, kIdle, source), nullptr);
  EXPECT_EQ(source.reserved(), 1u + 4 + 1);  // the earlier table's index and four chunks; this index
  EXPECT_EQ(source.bytes(), 0u);
  EXPECT_EQ(source.bad_releases(), 0u);
}

// allocate() reserves the index without committing it (a caller learns that every table of a policy
// fits before it pays for any); make_resident() commits it.
TEST(KeyTableMemory, AllocateReservesAndMakeResidentCommits) {
  auto table = Table4::allocate(1u << 20, kIdle);
  ASSERT_NE(table, nullptr);
  const std::size_t pages = table->index_slots() * 8 / 4096;
  EXPECT_GT(pages_not_resident(table->index_address(), table->index_slots() * 8), pages / 2);
  EXPECT_EQ(table->spare_bytes(), 2 * kChunkBytes);  // the pool is filled by allocate()
  ASSERT_TRUE(table->make_resident());
  EXPECT_EQ(pages_not_resident(table->index_address(), table->index_slots() * 8), 0u);
}

}  // namespace
}  // namespace tricolor::dataplane
