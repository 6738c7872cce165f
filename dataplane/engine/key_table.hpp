#pragma once
// The table of per-key meters of one rule: fixed-size keys (the engine uses one 40-byte layout for
// both address families, dataplane/engine/keys.hpp), each with its meter state and per-color counters.
//
// Three sides. One thread owns a table (the worker: it looks keys up, inserts them and reclaims idle
// ones, per packet, with no lock, no syscall, no division and no allocation). One control thread keeps
// its memory (replenish(): chunks of entries made ready for the owner, chunks the owner gave back taken
// in). Any other thread may walk the live entries at any time with for_each(), which never blocks the
// owner: it only reads, and retries an entry the owner was writing (a seqlock per entry).
//
// Memory, all from a MemorySource (dataplane/engine/memory_source.hpp: the heap for tricolor-replay and the
// tests, DPDK's heap on the worker's NUMA socket for the daemon), and all taken or given back on the
// control side, never on the packet path.
//  - The index and the bookkeeping: one block, allocated by make() (or allocate() then
//    make_resident()) and resident from then on, or the table is not made: a rule's fixed cost is
//    known, paid and checked when the rule is installed, never at a packet. That fixed cost,
//    index_bytes_for(capacity), is exactly
//     8 B x bit_ceil(max(8, 2 x capacity))        index slots (16 B per key of capacity at powers of two)
//   + 548 B x ceil(capacity / 4096)                per chunk: bitmap 512, summary 8, pointers 3 x 8, count 4
//   + 16 B x ceil(ceil(capacity / 4096) / 64)      chunks-with-room and released-chunk bitmaps
//    (capacity 1 Mi: 16.1 MiB; 256 Mi: 4.03 GiB).
//  - The entries: 128 B each, in chunks of 4096 (512 KiB; the last chunk cut to the capacity). The
//    owner takes a chunk from a ready pool when a key needs one, and hands a chunk whose keys have all
//    gone to a return queue once no reader can hold it. The control side (replenish()) keeps the pool
//    at a few spare chunks (2 by default, fewer if the table could not use them) and drains the queue:
//    a returned chunk is zeroed and kept as a spare, or given back to the source. A key that needs a
//    chunk when the pool is empty is refused as by a full table, and counted (starved()). make() fills
//    the pool, so a table takes its first keys before any replenish().
//    The figures: entry_bytes() counts the chunks that hold entries or are on their way back (awaiting
//    readers or the control side); spare_bytes() the chunks ready in the pool; memory_bytes() adds the
//    index: it is what the table holds from its source.
//
// Layout.
//  - Index: open addressing with linear probing over 8-byte slots {32-bit tag, entry index + 1}, 0 =
//    empty, a power of two of at least 2 x capacity slots (load <= 0.5: a hit probes ~1.5 slots, a
//    miss ~2.5). A probe compares the tag first, so a slot that is not the key's costs no entry
//    access. Deletion shifts the rest of the cluster back (no tombstones: probe lengths do not
//    degrade with churn). Only the owner touches the index.
//  - Entries: 128 bytes each (two cache lines whatever the key size), in chunks of 4096 (512 KiB)
//    taken when first needed, so their memory follows the live key count, not the capacity. A new
//    entry takes the lowest free entry of the table (a bitmap per chunk, a per-chunk word summary and
//    a bitmap of chunks with room), so that after a flood the high chunks drain as keys expire, and a
//    chunk left empty is released.
//  - Releasing a chunk while readers walk it: see release_chunk() and drain_deferred(); the pool and
//    the return queue between the owner and the control side: see replenish().
//
// The hash must not be predictable from outside, or a flood of keys chosen to share a probe sequence
// would turn every lookup into a scan of the whole cluster. See hash().

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "dataplane/engine/memory_source.hpp"
#include "dataplane/engine/secret_hash.hpp"
#include "policer/meter.hpp"

// ThreadSanitizer does not model fences (GCC rejects them under -fsanitize=thread with -Werror), and
// the seqlock's reads of an entry race by design with the owner's writes (the version check discards
// a torn copy). Under TSan, the fences and the payload copy live in functions it does not instrument;
// the version words, the reader count and the chunk pointers stay instrumented, so TSan still checks
// that no reader touches a chunk after it is freed.
#if defined(__SANITIZE_THREAD__)
#define TRICOLOR_KEY_TABLE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TRICOLOR_KEY_TABLE_TSAN 1
#endif
#endif
#ifdef TRICOLOR_KEY_TABLE_TSAN
#define TRICOLOR_KEY_TABLE_UNSEEN_BY_TSAN __attribute__((no_sanitize("thread"), noinline)) inline
#else
#define TRICOLOR_KEY_TABLE_UNSEEN_BY_TSAN inline
#endif

namespace tricolor::dataplane {

struct KeyCounters {  // per key, per output color
  std::array<std::uint64_t, 3> packets{};
  std::array<std::uint64_t, 3> bytes{};
  // Max-flows rules (flow_table.hpp): the key's open flows, and which life of the key's entry this is
  // (the table's count of keys created or renewed when it began), so that a flow opened in an earlier
  // life is not subtracted from this one. Filling the entry's last 8 bytes.
  std::uint32_t open_flows = 0;
  std::uint32_t incarnation = 0;
};

namespace key_table_detail {

__extension__ typedef unsigned __int128 U128;
// Word views of an entry's key and fields, for the readers' relaxed atomic loads (the key is bytes).
typedef std::uint64_t __attribute__((may_alias)) AliasU64;
typedef std::uint32_t __attribute__((may_alias)) AliasU32;

inline constexpr std::size_t kChunkShift = 12;
inline constexpr std::size_t kChunkEntries = std::size_t{1} << kChunkShift;  // 4096 entries, 512 KiB
inline constexpr std::size_t kWordBits = 64;
inline constexpr std::size_t kChunkWords = kChunkEntries / kWordBits;  // bitmap words per chunk
static_assert(kChunkWords == kWordBits, "one summary word per chunk covers its bitmap");
inline constexpr std::size_t kMinSlots = 8;                         // one cache line of index
inline constexpr std::size_t kEntryAlign = 128;                     // both lines of an entry in one pair
inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::size_t kSweepAhead = 8;  // index slots ahead whose entry a sweep prefetches
inline constexpr std::size_t kPrefetchProbe = 4;  // slots prefetch_entry() looks at (the mean probe is 0.5)
// Spare chunks the control side keeps ready: enough for a burst (at most 64 packets, so at most one new
// chunk of 4096 entries) and the next, between two replenish() calls of tricolor-replay. A daemon whose
// control thread comes round less often than a key flood takes a chunk (14.88 Mpps of new keys take
// one every 275 us) asks for more in make().
inline constexpr std::size_t kDefaultSpareChunks = 2;
inline constexpr std::size_t kMaxSpareChunks = 64;  // the pool's ring; a power of two
static_assert(std::has_single_bit(kMaxSpareChunks));

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

TRICOLOR_KEY_TABLE_UNSEEN_BY_TSAN void release_fence() noexcept {
  std::atomic_thread_fence(std::memory_order_release);
}
TRICOLOR_KEY_TABLE_UNSEEN_BY_TSAN void seq_cst_fence() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace key_table_detail

template <std::size_t KeySize>  // 16 (IPv4 keys) or 40 (IPv6 keys); a multiple of 8
class KeyTable {
  static_assert(KeySize > 0 && KeySize % 8 == 0, "keys are whole 64-bit words");
  static_assert(KeySize <= 48, "an entry is two cache lines");

 public:
  using Key = std::array<std::uint8_t, KeySize>;
  struct alignas(64) Entry {
    std::atomic<std::uint32_t> version;  // seqlock: odd while the owner writes this entry
    std::uint32_t live;                  // nonzero while the entry holds a key (written under the seqlock)
    Key key;
    policer::State state;                // levels and last-check tick (24 bytes)
    KeyCounters counters;
  };
  static_assert(sizeof(Entry) == 128);  // two cache lines, whatever the key size
  static_assert(sizeof(policer::State) % 8 == 0 && sizeof(KeyCounters) % 8 == 0);

  enum class Outcome : std::uint8_t { found, created, renewed, full };

  static constexpr std::size_t kDefaultSpareChunks = key_table_detail::kDefaultSpareChunks;
  static constexpr std::size_t kMaxSpareChunks = key_table_detail::kMaxSpareChunks;

  // capacity: most live keys; idle_ticks: a key whose state.last is at least this far behind `now` is
  // idle (expired); 0 = never. source: where the table's memory comes from; it must outlive the table.
  // spare_chunks: chunks of entries the control side keeps ready (1 .. kMaxSpareChunks; clamped). The
  // index and the bookkeeping are allocated from `source` and made resident here
  // (index_bytes_for(capacity) bytes), and the ready pool is filled; nullptr if any of it cannot be had.
  static std::unique_ptr<KeyTable> make(std::uint32_t capacity, std::uint64_t idle_ticks,
                                        MemorySource& source = heap_memory(),
                                        std::size_t spare_chunks = kDefaultSpareChunks) {
    auto table = allocate(capacity, idle_ticks, source, spare_chunks);
    if (table == nullptr || !table->make_resident()) return nullptr;
    return table;
  }

  // make() in two steps, for a caller that makes several tables at once: it learns that one cannot be
  // allocated before it has committed the memory of any (committing a large index takes a while).
  // allocate(): the index and the bookkeeping reserved (the index not yet resident) and the ready pool
  // filled; nullptr if they cannot be had. make_resident(): the index's pages committed now; false if
  // they cannot be (the table still works, its pages then fault in as probes reach them). Idempotent.
  static std::unique_ptr<KeyTable> allocate(std::uint32_t capacity, std::uint64_t idle_ticks,
                                            MemorySource& source = heap_memory(),
                                            std::size_t spare_chunks = kDefaultSpareChunks) {
    std::unique_ptr<KeyTable> table(new (std::nothrow) KeyTable(capacity, idle_ticks, source, spare_chunks));
    if (table == nullptr || !table->allocate_memory() || !table->replenish()) return nullptr;
    return table;
  }
  bool make_resident() noexcept { return source_->commit(block_, index_bytes_); }

  // What make() allocates for a capacity (see the top of this file), in bytes.
  static constexpr std::size_t index_slots_for(std::uint32_t capacity) noexcept {
    return std::bit_ceil(std::max<std::size_t>(key_table_detail::kMinSlots, 2 * std::size_t{capacity}));
  }
  // Per chunk: the readers' pointer, the owner's pointer, a slot of the return queue, the live count,
  // the bitmap's summary word and the bitmap.
  static constexpr std::size_t kBookkeepingBytesPerChunk =
      sizeof(std::atomic<Entry*>) + sizeof(Entry*) + sizeof(Entry*) + sizeof(std::uint32_t) + sizeof(std::uint64_t) +
      sizeof(std::array<std::uint64_t, key_table_detail::kChunkWords>);
  static_assert(kBookkeepingBytesPerChunk == 548, "the figure the README and the engine's refusal give");
  static constexpr std::size_t index_bytes_for(std::uint32_t capacity) noexcept {
    const std::size_t chunks = (std::size_t{capacity} + kChunkEntries - 1) >> kChunkShift;
    const std::size_t words = (chunks + kWordBits - 1) / kWordBits;
    return index_slots_for(capacity) * sizeof(std::uint64_t) + chunks * kBookkeepingBytesPerChunk +
           2 * words * sizeof(std::uint64_t);
  }

  // Every chunk, wherever it is (held, on its way back, ready), and the index go back to the source.
  // No reader may be inside for_each() any more, and no control thread inside replenish().
  ~KeyTable() {
    if (block_ == nullptr) return;
    for (std::size_t c = 0; c < chunk_count_; ++c)
      if (mem_[c] != nullptr) source_->release(mem_[c], chunk_block_bytes(c));
    const std::size_t given = pool_given_.load(std::memory_order_relaxed);
    for (std::size_t i = pool_taken_.load(std::memory_order_relaxed); i != given; ++i)
      source_->release(pool_[i & (kMaxSpareChunks - 1)], full_block_bytes_);
    if (Entry* tail = tail_ready_.load(std::memory_order_relaxed)) source_->release(tail, tail_block_bytes_);
    std::size_t pos = returned_read_;
    for (std::size_t i = returned_drained_.load(std::memory_order_relaxed);
         i != returned_pushed_.load(std::memory_order_relaxed); ++i) {
      Entry* block = returned_[pos];
      source_->release(block, block == tail_block_ ? tail_block_bytes_ : full_block_bytes_);
      if (++pos == chunk_count_) pos = 0;
    }
    source_->release(block_, index_bytes_);
  }
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  // ---- owner only ----

  // The key's hash under this table's own secret (key_table_detail::SecretHash): keys cannot be
  // chosen offline to collide.
  std::uint64_t hash(const Key& key) const noexcept { return hash_(key); }

  // The index line acquire() reads first (the key's home slot and the rest of its cache line).
  void prefetch(std::uint64_t hash) const noexcept { __builtin_prefetch(slots_ + (hash & mask_), 0, 3); }

  // The entry acquire() will most likely find, once its index line has come (prefetch() a few keys
  // earlier): the first slot of the probe whose tag matches, looked for within kPrefetchProbe slots,
  // its entry's two lines fetched for writing. No key is compared; a wrong guess costs a fetch.
  void prefetch_entry(std::uint64_t hash) const noexcept {
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    for (std::size_t pos = hash & mask_, left = key_table_detail::kPrefetchProbe; left > 0; --left, pos = (pos + 1) & mask_) {
      const std::uint64_t s = slots_[pos];
      if (s == 0) return;
      if (static_cast<std::uint32_t>(s >> 32) == tag) {
        const auto* e = reinterpret_cast<const char*>(entry_at(static_cast<std::uint32_t>(s) - 1));
        __builtin_prefetch(e, 1, 3);
        __builtin_prefetch(e + key_table_detail::kCacheLine, 1, 3);
        return;
      }
    }
  }

  // The key's entry. Absent: a fresh entry is created (state = fresh, counters zero) if fewer than
  // capacity keys are live, else nullptr and Outcome::full (also if the key needs a new chunk of
  // entries and the ready pool is empty: counted by starved()). Present but idle (now > state.last
  // and now - state.last >= idle_ticks): renewed in place (state = fresh, counters zero),
  // Outcome::renewed. Fresh entries are written under the
  // seqlock; the caller then updates the entry between begin_write and end_write.
  Entry* acquire(const Key& key, std::uint64_t hash, std::uint64_t now, const policer::State& fresh,
                 Outcome& outcome) noexcept {
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    const std::size_t home = hash & mask_;
    // One slot at a time. Comparing a whole index line of tags at once (SSE2) was measured: it saves
    // the mispredicted loop exits of a new key (10 instead of 16 ns at 4 Ki keys) but costs hits more
    // (17 instead of 14 ns at 64 Ki keys, 44 instead of 33 at 1 Mi: longer dependency chains, fewer
    // lookups in flight), and hits are most packets.
    for (std::size_t pos = home;; pos = (pos + 1) & mask_) {
      const std::uint64_t s = slots_[pos];
      if (s == 0) return insert(key, hash, pos, fresh, outcome);
      if (static_cast<std::uint32_t>(s >> 32) == tag) {
        Entry* e = entry_at(static_cast<std::uint32_t>(s) - 1);
        if (same_key(e->key, key)) [[likely]] return found(*e, now, fresh, outcome);
      }
    }
  }

  // The key's entry, or nullptr: a look-up that creates and renews nothing (a max-flows rule's sweep
  // closing a flow of that key).
  Entry* find(const Key& key, std::uint64_t hash) const noexcept {
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    for (std::size_t pos = hash & mask_;; pos = (pos + 1) & mask_) {
      const std::uint64_t s = slots_[pos];
      if (s == 0) return nullptr;
      if (static_cast<std::uint32_t>(s >> 32) == tag) {
        Entry* e = entry_at(static_cast<std::uint32_t>(s) - 1);
        if (same_key(e->key, key)) return e;
      }
    }
  }

  // Version odd, then a release fence: the field stores that follow cannot become visible before the
  // odd version (x86: a compiler barrier, stores stay in order; arm64: dmb ish).
  static void begin_write(Entry& e) noexcept {
    e.version.store(e.version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    key_table_detail::release_fence();
  }
  // Release store of the next even version: a reader that sees it sees every field stored before it.
  static void end_write(Entry& e) noexcept {
    e.version.store(e.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // Reclaims idle entries: examines at most `budget` index slots, continuing from where the previous
  // call stopped (a clock hand over the index), and removes those whose keys are idle at `now`.
  // Returns how many. A removal shifts the rest of its cluster back, so the hand examines its slot
  // again; an entry that wraps from the start of the index to its end may wait for the next round.
  // Also hands released chunks to the control side once no reader can hold them.
  //
  // A round of the whole index that removed nothing leaves a floor under every live key's `last` (the
  // oldest it saw, and the oldest key created or renewed since, which `last` never moves back from).
  // Until `now` is idle_ticks past that floor no key can be idle, and the sweep examines nothing: with
  // a long timeout it costs the packet path nothing between rounds, instead of an entry read per
  // packet (issue 23). A round that removed something moved entries, so it sets no floor.
  std::size_t sweep(std::uint64_t now, std::size_t budget) noexcept {
    drain_deferred();
    if (live() == 0 || idle_ == 0) return 0;
    if (floor_known_) {
      const std::uint64_t floor = std::min(floor_, created_floor_);
      if (!expired(floor, now)) return 0;
      floor_known_ = false;
    }
    std::size_t removed = 0;
    std::size_t pos = hand_;
    for (; budget > 0; --budget) {
      const std::uint64_t ahead = slots_[(pos + key_table_detail::kSweepAhead) & mask_];
      if (ahead != 0) __builtin_prefetch(entry_at(static_cast<std::uint32_t>(ahead) - 1), 1, 3);
      const std::uint64_t s = slots_[pos];
      if (s != 0) {
        const auto index = static_cast<std::uint32_t>(s) - 1;
        const std::uint64_t last = entry_at(index)->state.last;
        if (expired(last, now)) {
          remove_at(pos, index);
          ++removed;
          round_removed_ = true;
          if (live() == 0) break;
          continue;  // the slot now holds the next entry of the cluster, or nothing
        }
        round_floor_ = std::min(round_floor_, last);
      }
      pos = (pos + 1) & mask_;
      if (--round_left_ == 0) {  // a whole round of the index since the last one ended
        if (!round_removed_) {
          floor_ = std::min(round_floor_, created_floor_);
          floor_known_ = true;
        }
        round_left_ = mask_ + 1;
        round_floor_ = UINT64_MAX;
        created_floor_ = UINT64_MAX;
        round_removed_ = false;
        if (floor_known_ && !expired(floor_, now)) break;
      }
    }
    hand_ = pos;
    drain_deferred();
    return removed;
  }

  std::size_t size() const noexcept { return live(); }  // live keys; any thread may ask
  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t index_slots() const noexcept { return mask_ + 1; }
  // The index's memory, for tests that check it is resident.
  const void* index_address() const noexcept { return slots_; }
  // Released chunks not yet handed back because a reader may still hold them.
  std::size_t deferred_chunks() const noexcept { return deferred_count_; }
  std::uint64_t idle_ticks() const noexcept { return idle_; }

  // ---- the control side: one thread at a time (the owner may be that thread) ----

  // Drains the return queue, then tops the ready pool up. A returned chunk is zeroed and kept ready if
  // the pool wants it, else given back to the source; the pool is then filled with fresh chunks from
  // the source up to spare_chunks() (fewer if the table holds so many chunks that it could use no
  // more: a full table holds no spare). The last chunk of a capacity that is not a multiple of 4096
  // has its own block, cut to size, which is always kept: ready, or held by the owner. Returns false
  // if the source had no memory for a chunk (keys that need one are then refused, see starved()).
  // Not for the owner's packet path: it allocates, zeroes and frees. Cheap when there is nothing to
  // do (a few loads), so tricolor-replay calls it after every burst and a daemon's control thread
  // periodically.
  //
  // The pool and the queue are single-producer single-consumer rings between the owner and this
  // thread. Pool: this side writes a slot, then publishes it by a release store of pool_given_; the
  // owner reads pool_given_ (acquire), then the slot, then frees it by a release store of pool_taken_,
  // which this side reads (acquire) before writing the slot again. The queue is the same the other way
  // (returned_pushed_, returned_drained_). So a chunk's zeroes happen before the owner's use, and the
  // readers' last reads of a returned chunk (ordered before the owner's push, see drain_deferred())
  // happen before this side zeroes or frees it. Neither ring can overflow: the pool holds at most
  // kMaxSpareChunks and this side pushes only below that; the queue has a slot per chunk of the
  // table, and the owner keeps a chunk among its deferred ones while the queue is full.
  bool replenish() noexcept {
    const std::size_t pushed = returned_pushed_.load(std::memory_order_acquire);
    for (std::size_t drained = returned_drained_.load(std::memory_order_relaxed); drained != pushed;) {
      Entry* block = returned_[returned_read_];
      if (++returned_read_ == chunk_count_) returned_read_ = 0;
      returned_drained_.store(++drained, std::memory_order_release);  // its slot is free again
      if (block == tail_block_) {
        std::memset(static_cast<void*>(block), 0, tail_block_bytes_);
        tail_ready_.store(block, std::memory_order_release);
        continue;
      }
      full_drained_.store(full_drained_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
      if (pool_wants_more()) {
        std::memset(static_cast<void*>(block), 0, full_block_bytes_);
        give_ready(block);
      } else {
        source_->release(block, full_block_bytes_);
      }
    }
    if (tail_block_ == nullptr && tail_block_bytes_ != 0) {  // the first call: the tail's own block
      tail_block_ = static_cast<Entry*>(source_->allocate(tail_block_bytes_, key_table_detail::kEntryAlign));
      if (tail_block_ == nullptr) return false;
      tail_ready_.store(tail_block_, std::memory_order_release);
    }
    while (pool_wants_more()) {
      auto* block = static_cast<Entry*>(source_->allocate(full_block_bytes_, key_table_detail::kEntryAlign));
      if (block == nullptr) return false;
      give_ready(block);
    }
    return true;
  }

  // ---- any thread ----

  // New keys refused because they needed a chunk and none was ready: the control side did not keep up
  // (or its source had no memory). Such keys are also reported as Outcome::full.
  std::uint64_t starved() const noexcept { return starved_.load(std::memory_order_relaxed); }
  std::size_t spare_chunks() const noexcept { return spare_; }

  // Memory, in bytes (exact when no thread is changing the table; otherwise a recent value):
  // The fixed part, allocated and resident from make() on: the index, the per-chunk bitmaps and
  // pointers (index_bytes_for(capacity())).
  std::size_t index_bytes() const noexcept { return index_bytes_; }
  // The part that follows the live keys: chunks that hold entries, and released chunks on their way
  // back (awaiting their last reader, or the control side's replenish()).
  std::size_t entry_bytes() const noexcept {
    // drained before taken, taken before given (acquire): each count at least the one read before it.
    const std::size_t drained = full_drained_.load(std::memory_order_acquire);
    const std::size_t taken = pool_taken_.load(std::memory_order_acquire);
    const bool tail_out = tail_block_bytes_ != 0 && tail_ready_.load(std::memory_order_acquire) == nullptr;
    return (taken - drained) * full_block_bytes_ + (tail_out ? tail_block_bytes_ : 0);
  }
  // The chunks ready in the pool: spare_chunks() of them while the table could use them, and the last
  // chunk's own block when the owner does not hold it.
  std::size_t spare_bytes() const noexcept {
    const std::size_t taken = pool_taken_.load(std::memory_order_acquire);
    const std::size_t given = pool_given_.load(std::memory_order_acquire);
    const bool tail_ready = tail_ready_.load(std::memory_order_acquire) != nullptr;
    return (given - taken) * full_block_bytes_ + (tail_ready ? tail_block_bytes_ : 0);
  }
  // All of it: what the table holds from its source.
  std::size_t memory_bytes() const noexcept { return index_bytes_ + entry_bytes() + spare_bytes(); }

  struct ProbeStats {
    std::size_t max = 0;      // longest distance of a key from its home slot (0 = at home)
    double mean = 0;          // mean distance over the live keys
  };
  // Walks the whole index (tests, diagnostics).
  ProbeStats probe_stats() const noexcept {
    ProbeStats stats;
    if (live() == 0) return stats;
    std::size_t total = 0;
    for (std::size_t pos = 0; pos <= mask_; ++pos) {
      const std::uint64_t s = slots_[pos];
      if (s == 0) continue;
      const std::size_t distance = (pos - home(s)) & mask_;
      stats.max = std::max(stats.max, distance);
      total += distance;
    }
    stats.mean = static_cast<double>(total) / static_cast<double>(live());
    return stats;
  }

  // ---- any thread ----

  // fn(const Key&, const policer::State&, const KeyCounters&) for each live entry, each a consistent
  // copy (seqlock retry). Never blocks the owner: it only reads entries (and the chunk pointers), and
  // counts itself in `readers_`, a line the owner reads only while a released chunk awaits freeing.
  // Entries added or removed during the walk may or may not be seen. Safe against a concurrent sweep()
  // or acquire(), including chunk release. A slow fn only delays the return of released chunks.
  template <class Fn>
  void for_each(Fn&& fn) const {
    struct Registration {
      const KeyTable& table;
      explicit Registration(const KeyTable& t) : table(t) {
        table.readers_.fetch_add(1, std::memory_order_seq_cst);
        // Orders the chunk pointer loads below after the increment in the single order of seq_cst
        // operations (see drain_deferred()); an mfence on x86 (once per walk), dmb ish on arm64.
        key_table_detail::seq_cst_fence();
      }
      ~Registration() { table.readers_.fetch_sub(1, std::memory_order_seq_cst); }
      Registration(const Registration&) = delete;
      Registration& operator=(const Registration&) = delete;
    };
    const Registration registration(*this);
    (void)registration;
    Snapshot copy{};
    for (std::size_t c = 0; c < chunk_count_; ++c) {
      const Entry* chunk = chunks_[c].load(std::memory_order_acquire);
      if (chunk == nullptr) continue;
      const std::size_t n = chunk_entries(c);
      for (std::size_t i = 0; i < n; ++i) {
        read_entry(chunk[i], copy);
        if (copy.live != 0) fn(std::as_const(copy.key), std::as_const(copy.state), std::as_const(copy.counters));
      }
    }
  }

 private:
  using ChunkBits = std::array<std::uint64_t, key_table_detail::kChunkWords>;

  KeyTable(std::uint32_t capacity, std::uint64_t idle_ticks, MemorySource& source, std::size_t spare_chunks)
      : idle_(idle_ticks),
        capacity_(capacity),
        chunk_count_((std::size_t{capacity} + kChunkEntries - 1) >> kChunkShift),
        // The last chunk, if the capacity cuts it short, has a block of its own size.
        tail_chunk_(capacity % kChunkEntries != 0 ? chunk_count_ - 1 : chunk_count_),
        full_chunks_(tail_chunk_),
        full_block_bytes_(kChunkEntries * sizeof(Entry)),
        tail_block_bytes_(std::size_t{capacity % kChunkEntries} * sizeof(Entry)),
        source_(&source),
        spare_(std::clamp<std::size_t>(spare_chunks, 1, kMaxSpareChunks)) {}
  static constexpr std::size_t kChunkShift = key_table_detail::kChunkShift;
  static constexpr std::size_t kChunkEntries = key_table_detail::kChunkEntries;
  static constexpr std::size_t kWordBits = key_table_detail::kWordBits;
  static constexpr std::size_t kKeyWords = KeySize / 8;
  static constexpr std::size_t kStateWords = sizeof(policer::State) / 8;
  static constexpr std::size_t kCounterWords = sizeof(KeyCounters) / 8;

  struct Snapshot {
    std::uint32_t live;
    Key key;
    policer::State state;
    KeyCounters counters;
  };

  static std::uint64_t load_word(const Key& key, std::size_t i) noexcept {
    std::uint64_t w;
    std::memcpy(&w, key.data() + 8 * i, sizeof w);
    return w;
  }

  Entry* found(Entry& e, std::uint64_t now, const policer::State& fresh, Outcome& outcome) noexcept {
    if (expired(e.state.last, now)) [[unlikely]] {
      write_fresh(e, fresh);
      created_floor_ = std::min(created_floor_, fresh.last);
      outcome = Outcome::renewed;
    } else {
      outcome = Outcome::found;
    }
    return &e;
  }

  static bool same_key(const Key& a, const Key& b) noexcept {
    std::uint64_t differ = 0;
    for (std::size_t i = 0; i < kKeyWords; ++i) differ |= load_word(a, i) ^ load_word(b, i);
    return differ == 0;
  }

  // A consistent copy of one entry: an even version, the fields, the same version again.
  //   reader: v0 = version (acquire); fields (relaxed); acquire fence; v1 = version (relaxed)
  //   owner:  version odd (relaxed); release fence; fields; version even (release)
  // If v0 is the even version a write ended with, the release/acquire pair makes every field of that
  // write visible. If any field load sees a store of a later write, that store follows the later
  // write's release fence, so that fence synchronizes with the reader's acquire fence and the odd
  // version happens before the v1 load: v1 != v0 and the copy is retried. x86: every fence here is a
  // compiler barrier only (loads are not reordered with loads, stores not with stores); arm64: ldapr or
  // ldar, dmb ishld, dmb ish, stlr. The fields are read as relaxed 64-bit atomic loads; the owner writes
  // them with plain stores, as any seqlock does (a torn read is discarded by the version check).
  static void read_entry(const Entry& e, Snapshot& out) noexcept {
    for (;;) {
      const std::uint32_t v0 = e.version.load(std::memory_order_acquire);
      if ((v0 & 1) == 0) {
        copy_fields(e, out);
        if (e.version.load(std::memory_order_relaxed) == v0) return;
      }
      key_table_detail::cpu_relax();
    }
  }

  TRICOLOR_KEY_TABLE_UNSEEN_BY_TSAN static void copy_fields(const Entry& e, Snapshot& out) noexcept {
    using key_table_detail::AliasU32;
    using key_table_detail::AliasU64;
    std::uint64_t key[kKeyWords], state[kStateWords], counters[kCounterWords];
    out.live = __atomic_load_n(reinterpret_cast<const AliasU32*>(&e.live), __ATOMIC_RELAXED);
    const auto* k = reinterpret_cast<const AliasU64*>(e.key.data());
    for (std::size_t i = 0; i < kKeyWords; ++i) key[i] = __atomic_load_n(k + i, __ATOMIC_RELAXED);
    const auto* s = reinterpret_cast<const AliasU64*>(&e.state);
    for (std::size_t i = 0; i < kStateWords; ++i) state[i] = __atomic_load_n(s + i, __ATOMIC_RELAXED);
    const auto* n = reinterpret_cast<const AliasU64*>(&e.counters);
    for (std::size_t i = 0; i < kCounterWords; ++i) counters[i] = __atomic_load_n(n + i, __ATOMIC_RELAXED);
    std::atomic_thread_fence(std::memory_order_acquire);
    std::memcpy(out.key.data(), key, sizeof key);
    std::memcpy(&out.state, state, sizeof state);
    std::memcpy(&out.counters, counters, sizeof counters);
  }

  // Idle: strictly behind `now` by at least idle_ticks (0 = never). A subtraction, no division.
  bool expired(std::uint64_t last, std::uint64_t now) const noexcept {
    return idle_ != 0 && now > last && now - last >= idle_;
  }

  Entry* entry_at(std::uint32_t index) const noexcept {
    return mem_[index >> kChunkShift] + (index & (kChunkEntries - 1));
  }

  std::size_t chunk_entries(std::size_t c) const noexcept {
    return std::min(kChunkEntries, std::size_t{capacity_} - (c << kChunkShift));
  }

  // Home slot of an occupied slot: the key's hash is recomputed (deletion and diagnostics only; the
  // slot keeps only 32 bits of it, the tag).
  std::size_t home(std::uint64_t slot) const noexcept {
    return hash(entry_at(static_cast<std::uint32_t>(slot) - 1)->key) & mask_;
  }

  void write_fresh(Entry& e, const policer::State& fresh) noexcept {
    begin_write(e);
    e.state = fresh;
    e.counters = KeyCounters{};
    e.counters.incarnation = ++incarnations_;
    end_write(e);
  }

  [[gnu::noinline]] Entry* insert(const Key& key, std::uint64_t hash, std::size_t pos, const policer::State& fresh,
                                  Outcome& outcome) noexcept {
    outcome = Outcome::full;
    if (live() >= capacity_) return nullptr;
    const std::uint32_t index = allocate_entry();  // may take back a released chunk not yet freed
    if (index == kNoEntry) return nullptr;
    drain_deferred();
    Entry& e = *entry_at(index);
    begin_write(e);
    e.live = 1;
    e.key = key;
    e.state = fresh;
    e.counters = KeyCounters{};
    e.counters.incarnation = ++incarnations_;
    end_write(e);
    slots_[pos] = (hash >> 32 << 32) | (std::uint64_t{index} + 1);
    set_live(live() + 1);
    created_floor_ = std::min(created_floor_, fresh.last);
    outcome = Outcome::created;
    return &e;
  }

  // Removes the key of slot `pos` (entry `index`): the entry stops being live for readers, then the
  // following entries of the cluster move back over the hole wherever their home allows it.
  void remove_at(std::size_t pos, std::uint32_t index) noexcept {
    Entry& e = *entry_at(index);
    begin_write(e);
    e.live = 0;
    end_write(e);
    std::size_t hole = pos;
    for (std::size_t next = (pos + 1) & mask_;; next = (next + 1) & mask_) {
      const std::uint64_t s = slots_[next];
      if (s == 0) break;
      // The entry at `next` may fill the hole if its home is not cyclically in (hole, next].
      if (((next - home(s)) & mask_) >= ((next - hole) & mask_)) {
        slots_[hole] = s;
        hole = next;
      }
    }
    slots_[hole] = 0;
    set_live(live() - 1);
    free_entry(index);
  }

  // ---- the index and the bookkeeping, by make() ----

  // One block from the source, in this order (every part a multiple of 8 bytes but the last):
  //   index slots | readers' chunk pointers | owner's chunk pointers | return queue | summary words |
  //   bitmaps | chunks-with-room bitmap | released-chunks bitmap | live counts
  // The bookkeeping is written here (resident); the index is zero pages until make_resident(). All or
  // nothing: on failure the destructor releases the block.
  bool allocate_memory() noexcept {
    const std::size_t slots = index_slots_for(capacity_);
    const std::size_t n = chunk_count_;
    const std::size_t words = (n + kWordBits - 1) / kWordBits;
    index_bytes_ = index_bytes_for(capacity_);
    block_ = source_->reserve(index_bytes_, key_table_detail::kCacheLine);
    if (block_ == nullptr) return false;
    auto* bytes = static_cast<unsigned char*>(block_);
    slots_ = reinterpret_cast<std::uint64_t*>(bytes);
    bytes += slots * sizeof(std::uint64_t);
    chunks_ = reinterpret_cast<std::atomic<Entry*>*>(bytes);
    for (std::size_t c = 0; c < n; ++c) new (&chunks_[c]) std::atomic<Entry*>(nullptr);
    bytes += n * sizeof(std::atomic<Entry*>);
    mem_ = reinterpret_cast<Entry**>(bytes);
    bytes += n * sizeof(Entry*);
    returned_ = reinterpret_cast<Entry**>(bytes);
    bytes += n * sizeof(Entry*);
    any_free_ = reinterpret_cast<std::uint64_t*>(bytes);
    bytes += n * sizeof(std::uint64_t);
    free_bits_ = reinterpret_cast<ChunkBits*>(bytes);
    bytes += n * sizeof(ChunkBits);
    has_room_ = reinterpret_cast<std::uint64_t*>(bytes);
    bytes += words * sizeof(std::uint64_t);
    deferred_ = reinterpret_cast<std::uint64_t*>(bytes);
    bytes += words * sizeof(std::uint64_t);
    used_ = reinterpret_cast<std::uint32_t*>(bytes);
    bytes += n * sizeof(std::uint32_t);
    static_assert(alignof(std::atomic<Entry*>) <= 8 && alignof(ChunkBits) <= 8);
    for (std::size_t c = 0; c < n; ++c) {  // writes every bookkeeping line: resident too
      any_free_[c] = ~std::uint64_t{0};
      free_bits_[c].fill(~std::uint64_t{0});
      has_room_[c / kWordBits] |= std::uint64_t{1} << (c % kWordBits);
    }
    mask_ = slots - 1;
    round_left_ = slots;
    return true;
  }

  // ---- entries: the lowest free one, chunks on demand ----

  static constexpr std::uint32_t kNoEntry = ~std::uint32_t{0};

  // The lowest free entry of the table. It is below size_ < capacity, so the search ends inside the
  // table; has_room_ words below room_hint_ are all zero.
  std::uint32_t allocate_entry() noexcept {
    std::size_t w = room_hint_;
    while (has_room_[w] == 0) ++w;
    room_hint_ = w;
    const std::size_t c = w * kWordBits + static_cast<std::size_t>(std::countr_zero(has_room_[w]));
    if (!ensure_chunk(c)) return kNoEntry;
    const auto word = static_cast<std::size_t>(std::countr_zero(any_free_[c]));
    std::uint64_t& bits = free_bits_[c][word];
    const auto bit = static_cast<std::size_t>(std::countr_zero(bits));
    bits &= bits - 1;
    if (bits == 0) {
      any_free_[c] &= ~(std::uint64_t{1} << word);
      if (any_free_[c] == 0) has_room_[w] &= ~(std::uint64_t{1} << (c % kWordBits));
    }
    ++used_[c];
    return static_cast<std::uint32_t>((c << kChunkShift) + word * kWordBits + bit);
  }

  void free_entry(std::uint32_t index) noexcept {
    const std::size_t c = index >> kChunkShift;
    const std::size_t word = (index & (kChunkEntries - 1)) / kWordBits;
    free_bits_[c][word] |= std::uint64_t{1} << (index % kWordBits);
    any_free_[c] |= std::uint64_t{1} << word;
    has_room_[c / kWordBits] |= std::uint64_t{1} << (c % kWordBits);
    room_hint_ = std::min(room_hint_, c / kWordBits);
    if (--used_[c] == 0) release_chunk(c);
  }

  // Chunk c's memory: kept if released but not yet handed back (readers of the old publication see
  // entries that are not live, under the same seqlock), else a ready block from the control side
  // (zeroed: not-live entries at version 0, aggregates of implicit-lifetime members). None ready: the
  // key is refused, and counted. No allocation, no syscall: the owner's path.
  bool ensure_chunk(std::size_t c) noexcept {
    const std::uint64_t bit = std::uint64_t{1} << (c % kWordBits);
    if (mem_[c] != nullptr) {
      if (deferred_[c / kWordBits] & bit) {
        deferred_[c / kWordBits] &= ~bit;
        --deferred_count_;
        chunks_[c].store(mem_[c], std::memory_order_release);
      }
      return true;
    }
    Entry* block = c == tail_chunk_ ? take_tail() : take_ready();
    if (block == nullptr) [[unlikely]] {
      starved_.store(starved_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return false;
    }
    mem_[c] = block;
    chunks_[c].store(block, std::memory_order_release);  // the zeroes happen before a reader's use
    return true;
  }

  // The ready pool's next block, or nullptr (see replenish()).
  Entry* take_ready() noexcept {
    const std::size_t taken = pool_taken_.load(std::memory_order_relaxed);
    if (taken == pool_given_.load(std::memory_order_acquire)) return nullptr;
    Entry* block = pool_[taken & (kMaxSpareChunks - 1)];
    pool_taken_.store(taken + 1, std::memory_order_release);
    return block;
  }
  Entry* take_tail() noexcept {
    Entry* block = tail_ready_.load(std::memory_order_acquire);
    if (block != nullptr) tail_ready_.store(nullptr, std::memory_order_relaxed);  // back only via the queue
    return block;
  }

  // An empty chunk leaves the readers' table now and is handed back by drain_deferred() once no reader
  // can still hold it.
  void release_chunk(std::size_t c) noexcept {
    chunks_[c].store(nullptr, std::memory_order_seq_cst);
    deferred_[c / kWordBits] |= std::uint64_t{1} << (c % kWordBits);
    ++deferred_count_;
  }

  // Hands the released chunks to the return queue if no reader is registered. Why a reader cannot still
  // use one:
  //  - A reader registered before this load and not yet gone makes it nonzero: nothing is handed back.
  //  - A reader that has gone decremented with release semantics after its last read of the chunk, and
  //    this seq_cst load (acquire) reads that decrement or a later value: its reads happen before the
  //    push to the queue (a release), so before the control side zeroes or frees the chunk.
  //  - A reader whose increment comes after this load in the modification order of readers_: this
  //    load reads a value before the increment, so it precedes the increment in the single total order
  //    S of seq_cst operations; the chunk's nulling store (seq_cst, sequenced before this load) precedes
  //    it too. The reader's seq_cst fence follows its increment, so it follows the nulling store in S,
  //    and its later acquire load of the chunk pointer cannot read a value older than the null (C++20
  //    [atomics.order] p4: a load that read the older pointer would be coherence-ordered before the
  //    null store, putting the fence before that store in S). It sees null or a later re-publication.
  // Never blocks: if readers are always present, the chunks simply wait (entry_bytes() counts them);
  // so does a chunk that finds the queue full (the control side has not drained it).
  void drain_deferred() noexcept {
    if (deferred_count_ == 0) [[likely]] return;
    if (readers_.load(std::memory_order_seq_cst) != 0) return;
    const std::size_t words = (chunk_count_ + kWordBits - 1) / kWordBits;
    std::size_t pushed = returned_pushed_.load(std::memory_order_relaxed);
    const std::size_t room = chunk_count_ - (pushed - returned_drained_.load(std::memory_order_acquire));
    const std::size_t first = pushed;
    for (std::size_t w = 0; w < words && deferred_count_ > 0; ++w) {
      for (std::uint64_t bits = deferred_[w]; bits != 0 && pushed - first < room; bits &= bits - 1) {
        const std::size_t c = w * kWordBits + static_cast<std::size_t>(std::countr_zero(bits));
        returned_[returned_write_] = mem_[c];
        if (++returned_write_ == chunk_count_) returned_write_ = 0;
        ++pushed;
        mem_[c] = nullptr;
        deferred_[w] &= ~(std::uint64_t{1} << (c % kWordBits));
        --deferred_count_;
      }
    }
    returned_pushed_.store(pushed, std::memory_order_release);  // the slots, and the readers' reads before
  }

  // Bytes of the block that chunk c holds.
  std::size_t chunk_block_bytes(std::size_t c) const noexcept {
    return c == tail_chunk_ ? tail_block_bytes_ : full_block_bytes_;
  }

  // The control side: does the pool want another block? Below spare_ ready, and below the chunks that
  // the table could still take (a table holding all its chunks needs no spare).
  bool pool_wants_more() const noexcept {
    const std::size_t given = pool_given_.load(std::memory_order_relaxed);
    const std::size_t ready = given - pool_taken_.load(std::memory_order_acquire);  // its slots are free
    const std::size_t held = given - full_drained_.load(std::memory_order_relaxed) - ready;
    return ready < spare_ && ready + held < full_chunks_;
  }
  void give_ready(Entry* block) noexcept {
    const std::size_t given = pool_given_.load(std::memory_order_relaxed);
    pool_[given & (kMaxSpareChunks - 1)] = block;
    pool_given_.store(given + 1, std::memory_order_release);
  }

  // ---- owner's hot fields first ----
  std::uint64_t* slots_ = nullptr;
  std::size_t mask_ = 0;
  Entry** mem_ = nullptr;      // per chunk: its entries (owner's copy; kept while deferred)
  std::uint64_t idle_;
  SecretHash<KeySize> hash_;
  std::uint32_t incarnations_ = 0;  // keys created or renewed (wrapping: a flow 2^32 lives old is long closed)
  // Live keys: written by the owner alone (a relaxed load and store, no read-modify-write: the cost
  // of a plain increment), read by any thread.
  std::atomic<std::size_t> size_{0};
  std::size_t live() const noexcept { return size_.load(std::memory_order_relaxed); }
  void set_live(std::size_t n) noexcept { size_.store(n, std::memory_order_relaxed); }
  std::uint32_t capacity_;
  std::size_t chunk_count_;
  std::size_t hand_ = 0;       // the sweep's clock hand
  // The sweep's rounds (sweep() says how they let it rest): slots left in this round, the oldest
  // `last` it kept, whether it removed a key; the oldest key created or renewed since the round began;
  // the floor the last clean round left.
  std::size_t round_left_ = 0;
  std::uint64_t round_floor_ = UINT64_MAX;
  bool round_removed_ = false;
  bool floor_known_ = false;
  std::uint64_t created_floor_ = UINT64_MAX;
  std::uint64_t floor_ = 0;
  std::size_t room_hint_ = 0;  // has_room_ words below this are zero
  std::size_t deferred_count_ = 0;
  std::uint32_t* used_ = nullptr;           // per chunk: live entries
  std::uint64_t* any_free_ = nullptr;       // per chunk: bit w set if free_bits_[c][w] != 0
  ChunkBits* free_bits_ = nullptr;          // per chunk: bit set = entry free
  std::uint64_t* has_room_ = nullptr;       // bit c set if chunk c has a free entry
  std::uint64_t* deferred_ = nullptr;       // bit c set if chunk c is released, awaiting its return
  std::atomic<Entry*>* chunks_ = nullptr;   // the readers' view: published chunks
  Entry** returned_ = nullptr;              // the return queue's ring, a slot per chunk
  std::size_t returned_write_ = 0;          // the owner's next slot in it
  // Fixed from make() on, read by every side.
  std::size_t tail_chunk_;        // the last chunk if the capacity cuts it short, else chunk_count_
  std::size_t full_chunks_;       // chunks of kChunkEntries entries
  std::size_t full_block_bytes_;  // their blocks
  std::size_t tail_block_bytes_;  // the cut last chunk's block, 0 if none
  std::size_t index_bytes_ = 0;
  void* block_ = nullptr;         // index and bookkeeping
  MemorySource* source_;
  std::size_t spare_;

  // Written by the owner, read by the control side and by any thread (figures, starved()): a line of
  // its own, so that those reads do not take the owner's hot line away.
  alignas(64) std::atomic<std::size_t> pool_taken_{0};   // blocks taken from the pool, ever
  std::atomic<std::size_t> returned_pushed_{0};          // blocks pushed to the return queue, ever
  std::atomic<std::uint64_t> starved_{0};

  // Written by the control side.
  alignas(64) std::atomic<std::size_t> pool_given_{0};   // blocks given to the pool, ever
  std::atomic<std::size_t> returned_drained_{0};         // blocks drained from the return queue, ever
  std::atomic<std::size_t> full_drained_{0};             // of which full-size blocks
  std::atomic<Entry*> tail_ready_{nullptr};              // the cut last chunk's block, when ready
  std::size_t returned_read_ = 0;                        // the control side's next slot in the queue
  Entry* tail_block_ = nullptr;                          // the cut last chunk's block, wherever it is
  std::array<Entry*, kMaxSpareChunks> pool_{};           // the ready pool's ring

  // Readers inside for_each(), on a line of its own: their increments do not disturb the owner's line.
  alignas(64) mutable std::atomic<std::size_t> readers_{0};
  char pad_[64 - sizeof(std::atomic<std::size_t>)] = {};
};

}  // namespace tricolor::dataplane

#undef TRICOLOR_KEY_TABLE_UNSEEN_BY_TSAN
