#pragma once
// The memory of a key table's entries (key_table.hpp): entries in chunks of 4096 (512 KiB of 128-byte
// entries; the last chunk cut to the capacity), taken when first needed, so that the entries' memory
// follows the live key count, not the capacity.
//
// Three sides, as for the table. The owner (the worker) takes the lowest free entry and frees entries,
// with no lock, no syscall and no allocation: a chunk comes from a ready pool, and a chunk whose
// entries have all gone is handed to a return queue once no reader can hold it. The control side
// (replenish()) keeps the pool at a few spare chunks (2 by default, fewer if the table could not use
// them) and drains the queue: a returned chunk is zeroed and kept as a spare, or given back to the
// source. A key that needs a chunk when the pool is empty is refused as by a full table, and counted
// (starved()). Any other thread walks the published chunks with for_each_entry().
//
// The bookkeeping (per chunk: the readers' and the owner's pointers, a slot of the return queue, the
// live count, the free bitmap and its summary word; two bitmaps of chunks) lives in the table's one
// block, at the place the table gives (place()): bookkeeping_bytes(capacity) bytes.

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "dataplane/engine/key_entry.hpp"
#include "dataplane/engine/memory_source.hpp"

namespace tricolor::dataplane {

namespace key_table_detail {

inline constexpr std::size_t kChunkShift = 12;
inline constexpr std::size_t kChunkEntries = std::size_t{1} << kChunkShift;  // 4096 entries, 512 KiB
inline constexpr std::size_t kWordBits = 64;
inline constexpr std::size_t kChunkWords = kChunkEntries / kWordBits;  // bitmap words per chunk
static_assert(kChunkWords == kWordBits, "one summary word per chunk covers its bitmap");
inline constexpr std::size_t kEntryAlign = 128;                     // both lines of an entry in one pair
inline constexpr std::size_t kCacheLine = 64;
// Spare chunks the control side keeps ready: enough for a burst (at most 64 packets, so at most one new
// chunk of 4096 entries) and the next, between two replenish() calls of tricolor-replay. A daemon whose
// control thread comes round less often than a key flood takes a chunk (14.88 Mpps of new keys take
// one every 275 us) asks for more in make().
inline constexpr std::size_t kDefaultSpareChunks = 2;
inline constexpr std::size_t kMaxSpareChunks = 64;  // the pool's ring; a power of two
static_assert(std::has_single_bit(kMaxSpareChunks));

}  // namespace key_table_detail

template <class Entry>
class KeyChunks {
  using ChunkBits = std::array<std::uint64_t, key_table_detail::kChunkWords>;
  static constexpr std::size_t kChunkShift = key_table_detail::kChunkShift;
  static constexpr std::size_t kChunkEntries = key_table_detail::kChunkEntries;
  static constexpr std::size_t kWordBits = key_table_detail::kWordBits;
  static constexpr std::size_t kMaxSpareChunks = key_table_detail::kMaxSpareChunks;

 public:
  static constexpr std::uint32_t kNoEntry = ~std::uint32_t{0};

  // Per chunk: the readers' pointer, the owner's pointer, a slot of the return queue, the live count,
  // the bitmap's summary word and the bitmap.
  static constexpr std::size_t kBookkeepingBytesPerChunk =
      sizeof(std::atomic<Entry*>) + sizeof(Entry*) + sizeof(Entry*) + sizeof(std::uint32_t) + sizeof(std::uint64_t) +
      sizeof(ChunkBits);
  static_assert(kBookkeepingBytesPerChunk == 548, "the figure the README and the engine's refusal give");
  static constexpr std::size_t chunks_for(std::uint32_t capacity) noexcept {
    return (std::size_t{capacity} + kChunkEntries - 1) >> kChunkShift;
  }
  // The bookkeeping, and the chunks-with-room and released-chunks bitmaps.
  static constexpr std::size_t bookkeeping_bytes(std::uint32_t capacity) noexcept {
    const std::size_t chunks = chunks_for(capacity);
    const std::size_t words = (chunks + kWordBits - 1) / kWordBits;
    return chunks * kBookkeepingBytesPerChunk + 2 * words * sizeof(std::uint64_t);
  }

  // spare_chunks: chunks the control side keeps ready (1 .. kMaxSpareChunks; clamped). Nothing is
  // allocated until place() and replenish().
  KeyChunks(std::uint32_t capacity, MemorySource& source, std::size_t spare_chunks) noexcept
      : capacity_(capacity),
        chunk_count_(chunks_for(capacity)),
        // The last chunk, if the capacity cuts it short, has a block of its own size.
        tail_chunk_(capacity % kChunkEntries != 0 ? chunk_count_ - 1 : chunk_count_),
        full_chunks_(tail_chunk_),
        full_block_bytes_(kChunkEntries * sizeof(Entry)),
        tail_block_bytes_(std::size_t{capacity % kChunkEntries} * sizeof(Entry)),
        source_(&source),
        spare_(std::clamp<std::size_t>(spare_chunks, 1, kMaxSpareChunks)) {}

  // Every chunk, wherever it is (held, on its way back, ready), goes back to the source; the
  // bookkeeping's block is the table's. No reader may be inside for_each_entry() any more, and no
  // control thread inside replenish().
  ~KeyChunks() {
    if (mem_ == nullptr) return;  // never placed
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
  }
  KeyChunks(const KeyChunks&) = delete;
  KeyChunks& operator=(const KeyChunks&) = delete;

  // The bookkeeping at `area` (bookkeeping_bytes(capacity) bytes, 8-aligned, zero), in this order
  // (every part a multiple of 8 bytes but the last):
  //   readers' chunk pointers | owner's chunk pointers | return queue | summary words | bitmaps |
  //   chunks-with-room bitmap | released-chunks bitmap | live counts
  // Every line of it is written here: resident.
  void place(void* area) noexcept {
    const std::size_t n = chunk_count_;
    const std::size_t words = (n + kWordBits - 1) / kWordBits;
    auto* bytes = static_cast<unsigned char*>(area);
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
    static_assert(alignof(std::atomic<Entry*>) <= 8 && alignof(ChunkBits) <= 8);
    for (std::size_t c = 0; c < n; ++c) {
      any_free_[c] = ~std::uint64_t{0};
      free_bits_[c].fill(~std::uint64_t{0});
      has_room_[c / kWordBits] |= std::uint64_t{1} << (c % kWordBits);
    }
  }

  // ---- owner only ----

  // Per chunk, its entries (the owner's pointers: fixed once placed, so a table may keep this).
  Entry* const* entries() const noexcept { return mem_; }
  Entry* entry_at(std::uint32_t index) const noexcept {
    return mem_[index >> kChunkShift] + (index & (kChunkEntries - 1));
  }

  // The lowest free entry of the table, or kNoEntry if it needs a chunk and none is ready (counted by
  // starved()). The caller holds fewer than capacity entries, so the search ends inside the table;
  // has_room_ words below room_hint_ are all zero. After a flood the high chunks drain as keys expire,
  // and a chunk left empty is released.
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

  // The entry, no longer live for readers, is free again.
  void free_entry(std::uint32_t index) noexcept {
    const std::size_t c = index >> kChunkShift;
    const std::size_t word = (index & (kChunkEntries - 1)) / kWordBits;
    free_bits_[c][word] |= std::uint64_t{1} << (index % kWordBits);
    any_free_[c] |= std::uint64_t{1} << word;
    has_room_[c / kWordBits] |= std::uint64_t{1} << (c % kWordBits);
    room_hint_ = std::min(room_hint_, c / kWordBits);
    if (--used_[c] == 0) release_chunk(c);
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

  // Released chunks not yet handed back because a reader may still hold them.
  std::size_t deferred_chunks() const noexcept { return deferred_count_; }

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
  // (or its source had no memory). Such keys are also reported as full by the table.
  std::uint64_t starved() const noexcept { return starved_.load(std::memory_order_relaxed); }
  std::size_t spare_chunks() const noexcept { return spare_; }

  // Chunks that hold entries, and released chunks on their way back (awaiting their last reader, or
  // the control side's replenish()), in bytes: a recent value while a thread changes the table.
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

  // fn(const Entry&) for each entry of each published chunk, live or not (the caller reads each under
  // its seqlock). Never blocks the owner: the walk counts itself in `readers_`, a line the owner reads
  // only while a released chunk awaits freeing, so no chunk it may still read is handed back. A slow
  // fn only delays the return of released chunks.
  template <class Fn>
  void for_each_entry(Fn&& fn) const {
    struct Registration {
      const KeyChunks& chunks;
      explicit Registration(const KeyChunks& c) : chunks(c) {
        chunks.readers_.fetch_add(1, std::memory_order_seq_cst);
        // Orders the chunk pointer loads below after the increment in the single order of seq_cst
        // operations (see drain_deferred()); an mfence on x86 (once per walk), dmb ish on arm64.
        key_table_detail::seq_cst_fence();
      }
      ~Registration() { chunks.readers_.fetch_sub(1, std::memory_order_seq_cst); }
      Registration(const Registration&) = delete;
      Registration& operator=(const Registration&) = delete;
    };
    const Registration registration(*this);
    (void)registration;
    for (std::size_t c = 0; c < chunk_count_; ++c) {
      const Entry* chunk = chunks_[c].load(std::memory_order_acquire);
      if (chunk == nullptr) continue;
      const std::size_t n = std::min(kChunkEntries, std::size_t{capacity_} - (c << kChunkShift));
      for (std::size_t i = 0; i < n; ++i) fn(chunk[i]);
    }
  }

 private:
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

  // ---- the owner's ----
  Entry** mem_ = nullptr;      // per chunk: its entries (owner's copy; kept while deferred)
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
  // Fixed from construction on, read by every side.
  std::uint32_t capacity_;
  std::size_t chunk_count_;
  std::size_t tail_chunk_;        // the last chunk if the capacity cuts it short, else chunk_count_
  std::size_t full_chunks_;       // chunks of kChunkEntries entries
  std::size_t full_block_bytes_;  // their blocks
  std::size_t tail_block_bytes_;  // the cut last chunk's block, 0 if none
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

  // Readers inside for_each_entry(), on a line of its own: their increments do not disturb the owner's line.
  alignas(64) mutable std::atomic<std::size_t> readers_{0};
  char pad_[64 - sizeof(std::atomic<std::size_t>)] = {};
};

}  // namespace tricolor::dataplane
