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
//  - Releasing a chunk while readers walk it, the pool and the return queue between the owner and the
//    control side: key_chunks.hpp. The entry and its seqlock: key_entry.hpp.
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

#include "dataplane/engine/key_chunks.hpp"
#include "dataplane/engine/key_entry.hpp"
#include "dataplane/engine/memory_source.hpp"
#include "dataplane/engine/secret_hash.hpp"
#include "policer/meter.hpp"

namespace tricolor::dataplane {

namespace key_table_detail {

inline constexpr std::size_t kMinSlots = 8;       // one cache line of index
inline constexpr std::size_t kSweepAhead = 8;     // index slots ahead whose entry a sweep prefetches

}  // namespace key_table_detail

template <std::size_t KeySize>  // 16 (IPv4 keys) or 40 (IPv6 keys); a multiple of 8
class KeyTable {
 public:
  using Entry = KeyEntry<KeySize>;
  using Key = typename Entry::Key;

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
  bool make_resident() noexcept { return block_.source->commit(block_.address, block_.bytes); }

  // What make() allocates for a capacity (see the top of this file), in bytes.
  static constexpr std::size_t index_slots_for(std::uint32_t capacity) noexcept {
    return std::bit_ceil(std::max<std::size_t>(key_table_detail::kMinSlots, 2 * std::size_t{capacity}));
  }
  static constexpr std::size_t kBookkeepingBytesPerChunk = KeyChunks<Entry>::kBookkeepingBytesPerChunk;
  static constexpr std::size_t index_bytes_for(std::uint32_t capacity) noexcept {
    return index_slots_for(capacity) * sizeof(std::uint64_t) + KeyChunks<Entry>::bookkeeping_bytes(capacity);
  }

  // Every chunk, wherever it is (held, on its way back, ready), and the index go back to the source
  // (the chunks first: their bookkeeping is in the index's block). No reader may be inside for_each()
  // any more, and no control thread inside replenish().
  ~KeyTable() = default;
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  // ---- owner only ----

  // The key's hash under this table's own secret (key_table_detail::SecretHash): keys cannot be
  // chosen offline to collide.
  std::uint64_t hash(const Key& key) const noexcept { return hash_(key); }
  // The same of a key whose words past the first two are zero (an IPv4 meter key), from those two.
  [[gnu::always_inline]] std::uint64_t hash_of_pair(std::uint64_t first, std::uint64_t second) const noexcept {
    return hash_.of_pair(first, second);
  }

  // The index line acquire() reads first (the key's home slot and the rest of its cache line). Always
  // inlined: GCC (12) finds that a function whose only effects are prefetches has none (a prefetch
  // touches no memory as it models it), marks it const and deletes every call to it whose result is
  // unused, that is, every call (as it did to prefetch_entry(), the entries' prefetch pass that was
  // compiled away from 35a0b1e on: doc/benchmarks.md).
  [[gnu::always_inline]] void prefetch(std::uint64_t hash) const noexcept {
    __builtin_prefetch(slots_ + (hash & mask_), 0, 3);
  }

  // The key's entry. Absent: a fresh entry is created (state = fresh, counters zero) if fewer than
  // capacity keys are live, else nullptr and Outcome::full (also if the key needs a new chunk of
  // entries and the ready pool is empty: counted by starved()). Present but idle (now > state.last
  // and now - state.last >= idle_ticks): renewed in place (state = fresh, counters zero),
  // Outcome::renewed. Fresh entries are written under the
  // seqlock; the caller then updates the entry between begin_write and end_write.
  Entry* acquire(const Key& key, std::uint64_t hash, std::uint64_t now, const policer::State& fresh,
                 Outcome& outcome) noexcept {
    return acquire_with(key, hash, now, [&] { return fresh; }, outcome);
  }
  // The same, with the fresh state made by `make_fresh()` only when a key is created or renewed (not
  // for every packet of a key that is found).
  template <class MakeFresh>
  Entry* acquire_with(const Key& key, std::uint64_t hash, std::uint64_t now, MakeFresh&& make_fresh,
                      Outcome& outcome) noexcept {
    Entry* e = find_or_create(key, hash, make_fresh, outcome);
    if (outcome == Outcome::found && renew_if_idle(*e, now, make_fresh)) outcome = Outcome::renewed;
    return e;
  }

  // acquire_with() in two steps, for a caller that looks up a burst's keys first and meters their
  // packets after: find_or_create() finds the key or creates it (Outcome found, created or full, never
  // renewed), and renew_if_idle() renews it at each packet's own turn, so that a key's packet is idle
  // or not by the key's packet before it, also one earlier in the same burst. True if renewed.
  // `KeyWords::two`: the caller's promise that the key's words past its first two are zero, and so are
  // those of every key stored here whose first two words are the key's (an IPv4 meter key: its first
  // word holds its family, and every IPv4 key's tail is zero, keys.hpp); a stored key is then compared
  // by two words, not all of them.
  enum class KeyWords : std::uint8_t { all, two };
  template <KeyWords kCompared = KeyWords::all, class MakeFresh>
  Entry* find_or_create(const Key& key, std::uint64_t hash, MakeFresh&& make_fresh, Outcome& outcome) noexcept {
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    const std::size_t home = hash & mask_;
    // One slot at a time. Comparing a whole index line of tags at once (SSE2) was measured: it saves
    // the mispredicted loop exits of a new key (10 instead of 16 ns at 4 Ki keys) but costs hits more
    // (17 instead of 14 ns at 64 Ki keys, 44 instead of 33 at 1 Mi: longer dependency chains, fewer
    // lookups in flight), and hits are most packets.
    for (std::size_t pos = home;; pos = (pos + 1) & mask_) {
      const std::uint64_t s = slots_[pos];
      if (s == 0) return insert(key, hash, pos, make_fresh(), outcome);
      if (static_cast<std::uint32_t>(s >> 32) == tag) {
        Entry* e = entry_at(static_cast<std::uint32_t>(s) - 1);
        if (same_key<kCompared == KeyWords::two ? 2 : kKeyWords>(e->key, key)) [[likely]] {
          // The entry's second line (the state's `last`, the counters), which the caller's metering
          // reads a pass later: this key's first line has just been read, so its page is in the TLB
          // now (a prefetch that misses the TLB may be dropped).
          __builtin_prefetch(reinterpret_cast<const char*>(e) + key_table_detail::kCacheLine, 1, 3);
          outcome = Outcome::found;
          return e;
        }
      }
    }
  }
  template <class MakeFresh>
  bool renew_if_idle(Entry& e, std::uint64_t now, MakeFresh&& make_fresh) noexcept {
    if (!expired(e.state.last, now)) [[likely]] return false;
    renew(e, make_fresh());
    return true;
  }

  // The key's entry, or nullptr: a look-up that creates and renews nothing (a max-flows rule's sweep
  // closing a flow of that key; with `kFetchSecondLine`, a burst's look-up of its found keys before
  // it creates the others, which fetches a found entry's second line as find_or_create() does).
  template <KeyWords kCompared = KeyWords::all, bool kFetchSecondLine = false>
  Entry* find(const Key& key, std::uint64_t hash) const noexcept {
    return find_if<kFetchSecondLine>(
        hash, [&](const Key& stored) { return same_key<kCompared == KeyWords::two ? 2 : kKeyWords>(stored, key); });
  }
  // The same for a key given by its first two words, the rest zero (KeyWords::two's promise): a plain
  // burst's IPv4 keys, never stored whole (worker.cpp).
  template <bool kFetchSecondLine = false>
  Entry* find_words(std::uint64_t first, std::uint64_t second, std::uint64_t hash) const noexcept {
    return find_if<kFetchSecondLine>(hash, [&](const Key& stored) {
      return ((load_word(stored, 0) ^ first) | (load_word(stored, 1) ^ second)) == 0;
    });
  }

  // The entry's seqlock (key_entry.hpp): the owner writes an entry between these two.
  static void begin_write(Entry& e) noexcept { dataplane::begin_write(e); }
  static void end_write(Entry& e) noexcept { dataplane::end_write(e); }

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
    chunks_.drain_deferred();
    if (live() == 0 || idle_ticks() == 0) return 0;
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
    chunks_.drain_deferred();
    return removed;
  }

  // Whether no live key can be idle at `now` or before: the floor the sweep's last clean round left
  // (sweep()) is not idle_ticks behind it, or keys never idle. The owner's metering then tests no key
  // for renewal (renew_if_idle), one comparison a burst instead of one a packet (issue 23).
  bool none_idle_at(std::uint64_t now) const noexcept {
    if (idle_ticks() == 0) return true;
    return floor_known_ && !expired(std::min(floor_, created_floor_), now);
  }

  std::size_t size() const noexcept { return live(); }  // live keys; any thread may ask
  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t index_slots() const noexcept { return mask_ + 1; }
  // The index's memory, for tests that check it is resident.
  const void* index_address() const noexcept { return slots_; }
  // Released chunks not yet handed back because a reader may still hold them.
  std::size_t deferred_chunks() const noexcept { return chunks_.deferred_chunks(); }
  std::uint64_t idle_ticks() const noexcept { return idle_less_one_ + 1; }  // wraps back to 0 (never)

  // ---- the control side: one thread at a time (the owner may be that thread) ----

  // Keeps the entries' memory (key_chunks.hpp): chunks the owner gave back taken in, the ready pool
  // topped up. False if the source had no memory for a chunk (keys that need one are then refused,
  // see starved()). Not for the owner's packet path; cheap when there is nothing to do, so
  // tricolor-replay calls it after every burst and a daemon's control thread periodically.
  bool replenish() noexcept { return chunks_.replenish(); }

  // ---- any thread ----

  // New keys refused because they needed a chunk and none was ready: the control side did not keep up
  // (or its source had no memory). Such keys are also reported as Outcome::full.
  std::uint64_t starved() const noexcept { return chunks_.starved(); }
  std::size_t spare_chunks() const noexcept { return chunks_.spare_chunks(); }

  // Memory, in bytes (exact when no thread is changing the table; otherwise a recent value):
  // The fixed part, allocated and resident from make() on: the index, the per-chunk bitmaps and
  // pointers (index_bytes_for(capacity())).
  std::size_t index_bytes() const noexcept { return block_.bytes; }
  // The part that follows the live keys: chunks that hold entries, and released chunks on their way
  // back (awaiting their last reader, or the control side's replenish()).
  std::size_t entry_bytes() const noexcept { return chunks_.entry_bytes(); }
  // The chunks ready in the pool: spare_chunks() of them while the table could use them, and the last
  // chunk's own block when the owner does not hold it.
  std::size_t spare_bytes() const noexcept { return chunks_.spare_bytes(); }
  // All of it: what the table holds from its source.
  std::size_t memory_bytes() const noexcept { return index_bytes() + entry_bytes() + spare_bytes(); }

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

  // fn(const Key&, const policer::State&, const KeyCounters&) for each live entry, each a consistent
  // copy (seqlock retry). Never blocks the owner (key_chunks.hpp, for_each_entry()). Entries added or
  // removed during the walk may or may not be seen. Safe against a concurrent sweep() or acquire(),
  // including chunk release. A slow fn only delays the return of released chunks.
  template <class Fn>
  void for_each(Fn&& fn) const {
    KeySnapshot<KeySize> copy{};
    chunks_.for_each_entry([&](const Entry& e) {
      read_entry(e, copy);
      if (copy.live != 0) fn(std::as_const(copy.key), std::as_const(copy.state), std::as_const(copy.counters));
    });
  }

 private:
  KeyTable(std::uint32_t capacity, std::uint64_t idle_ticks, MemorySource& source, std::size_t spare_chunks)
      : idle_less_one_(idle_ticks - 1), capacity_(capacity), block_{&source}, chunks_(capacity, source, spare_chunks) {}
  static constexpr std::size_t kKeyWords = KeySize / 8;

  static std::uint64_t load_word(const Key& key, std::size_t i) noexcept {
    std::uint64_t w;
    std::memcpy(&w, key.data() + 8 * i, sizeof w);
    return w;
  }

  void renew(Entry& e, const policer::State& fresh) noexcept {
    write_fresh(e, fresh);
    created_floor_ = std::min(created_floor_, fresh.last);
  }

  // find()'s probe: the entry whose stored key `matches`, or nullptr.
  template <bool kFetchSecondLine, class Matches>
  [[gnu::always_inline]] Entry* find_if(std::uint64_t hash, Matches&& matches) const noexcept {
    const auto tag = static_cast<std::uint32_t>(hash >> 32);
    for (std::size_t pos = hash & mask_;; pos = (pos + 1) & mask_) {
      const std::uint64_t s = slots_[pos];
      if (s == 0) return nullptr;
      if (static_cast<std::uint32_t>(s >> 32) == tag) {
        Entry* e = entry_at(static_cast<std::uint32_t>(s) - 1);
        if (matches(e->key)) [[likely]] {
          if constexpr (kFetchSecondLine)
            __builtin_prefetch(reinterpret_cast<const char*>(e) + key_table_detail::kCacheLine, 1, 3);
          return e;
        }
      }
    }
  }

  template <std::size_t kWords = kKeyWords>
  static bool same_key(const Key& a, const Key& b) noexcept {
    static_assert(kWords <= kKeyWords);
    std::uint64_t differ = 0;
    for (std::size_t i = 0; i < kWords; ++i) differ |= load_word(a, i) ^ load_word(b, i);
    return differ == 0;
  }

  // Idle: strictly behind `now` by at least idle_ticks (0 = never: idle_less_one_ is then UINT64_MAX,
  // which no difference exceeds, so the "never" needs no test of its own). A subtraction, no division.
  bool expired(std::uint64_t last, std::uint64_t now) const noexcept {
    return now > last && now - last > idle_less_one_;
  }

  Entry* entry_at(std::uint32_t index) const noexcept {
    return mem_[index >> key_table_detail::kChunkShift] + (index & (key_table_detail::kChunkEntries - 1));
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
    const std::uint32_t index = chunks_.allocate_entry();  // may take back a released chunk not yet freed
    if (index == KeyChunks<Entry>::kNoEntry) return nullptr;
    chunks_.drain_deferred();
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
    chunks_.free_entry(index);
  }

  // One block from the source: the index slots, then the chunks' bookkeeping (key_chunks.hpp). The
  // bookkeeping is written here (resident); the index is zero pages until make_resident(). All or
  // nothing: on failure the destructor releases the block.
  bool allocate_memory() noexcept {
    const std::size_t slots = index_slots_for(capacity_);
    block_.bytes = index_bytes_for(capacity_);
    block_.address = block_.source->reserve(block_.bytes, key_table_detail::kCacheLine);
    if (block_.address == nullptr) return false;
    auto* bytes = static_cast<unsigned char*>(block_.address);
    slots_ = reinterpret_cast<std::uint64_t*>(bytes);
    chunks_.place(bytes + slots * sizeof(std::uint64_t));
    mem_ = chunks_.entries();
    mask_ = slots - 1;
    round_left_ = slots;
    return true;
  }

  // The index's block, given back after the chunks (declared before them) have gone.
  struct Block {
    MemorySource* source;
    void* address = nullptr;
    std::size_t bytes = 0;
    ~Block() {
      if (address != nullptr) source->release(address, bytes);
    }
  };

  // ---- owner's hot fields first ----
  std::uint64_t* slots_ = nullptr;
  std::size_t mask_ = 0;
  Entry* const* mem_ = nullptr;  // per chunk: its entries (the chunks' own array, fixed once placed)
  std::uint64_t idle_less_one_;  // idle_ticks - 1, wrapped: UINT64_MAX when keys never expire
  SecretHash<KeySize> hash_;
  std::uint32_t incarnations_ = 0;  // keys created or renewed (wrapping: a flow 2^32 lives old is long closed)
  // Live keys: written by the owner alone (a relaxed load and store, no read-modify-write: the cost
  // of a plain increment), read by any thread.
  std::atomic<std::size_t> size_{0};
  std::size_t live() const noexcept { return size_.load(std::memory_order_relaxed); }
  void set_live(std::size_t n) noexcept { size_.store(n, std::memory_order_relaxed); }
  std::uint32_t capacity_;
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
  Block block_;
  KeyChunks<Entry> chunks_;  // after block_: destroyed first
};

}  // namespace tricolor::dataplane
