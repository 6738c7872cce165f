#pragma once
// The table of per-key meters of one rule: fixed-size keys (the engine uses one 40-byte layout for
// both address families, dataplane/keys.hpp), each with its meter state and per-color counters.
//
// One thread owns a table (the worker: it looks keys up, inserts them and reclaims idle ones, per
// packet, with no lock, no syscall, no division and no allocation but one 512 KiB chunk per 4096
// inserts). Any other thread may walk the live entries at any time with for_each(), which never blocks
// the owner: it only reads, and retries an entry the owner was writing (a seqlock per entry).
//
// Memory. A table is made by make() (or allocate() then make_resident()), which allocates the index
// and the bookkeeping for its capacity and makes them resident at once, or fails if they cannot be
// had: a rule's fixed cost is known, paid and checked when the rule is installed, never at a packet.
// That fixed cost, index_bytes_for(capacity), is exactly
//     8 B x bit_ceil(max(8, 2 x capacity))        index slots (16 B per key of capacity at powers of two)
//   + 548 B x ceil(capacity / 4096)                per chunk: bitmap 512, summary 8, pointers 3 x 8, count 4
//   + 16 B x ceil(ceil(capacity / 4096) / 64)      chunks-with-room and released-chunk bitmaps
// (capacity 1 Mi: 16.1 MiB; 256 Mi: 4.03 GiB). Entries then follow the live keys: 128 B each, in
// chunks of 4096 (512 KiB) allocated as keys arrive and released when their keys have all gone.
//
// Layout.
//  - Index: open addressing with linear probing over 8-byte slots {32-bit tag, entry index + 1}, 0 =
//    empty, a power of two of at least 2 x capacity slots (load <= 0.5: a hit probes ~1.5 slots, a
//    miss ~2.5). A probe compares the tag first, so a slot that is not the key's costs no entry
//    access. Deletion shifts the rest of the cluster back (no tombstones: probe lengths do not
//    degrade with churn). Only the owner touches the index.
//  - Entries: 128 bytes each (two cache lines whatever the key size), in chunks of 4096 (512 KiB)
//    allocated when first needed, so their memory follows the live key count, not the capacity. A
//    new entry takes the lowest free entry of the table (a bitmap per chunk, a per-chunk word summary
//    and a bitmap of chunks with room), so that after a flood the high chunks drain as keys expire,
//    and a chunk left empty is released.
//  - Releasing a chunk while readers walk it: see release_chunk() and drain_deferred().
//
// The hash must not be predictable from outside, or a flood of keys chosen to share a probe sequence
// would turn every lookup into a scan of the whole cluster. See hash().
#include <sys/mman.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <utility>

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
inline constexpr std::size_t kHugePage = std::size_t{2} << 20;
inline constexpr std::size_t kSweepAhead = 8;  // index slots ahead whose entry a sweep prefetches

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

// Secret words from the kernel's CSPRNG; std::random_device if getrandom(2) is unavailable.
inline void secret_words(std::uint64_t* out, std::size_t n) {
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  const std::size_t want = n * sizeof(std::uint64_t);
  std::size_t got = 0;
  while (got < want) {
    const ssize_t r = getrandom(bytes + got, want - got, 0);
    if (r > 0) got += static_cast<std::size_t>(r);
    else if (r < 0 && errno == EINTR) continue;
    else break;
  }
  if (got == want) return;
  std::random_device device;
  for (std::size_t i = 0; i < n; ++i)
    out[i] = (std::uint64_t{device()} << 32) | device();
}

// Zeroed memory aligned to `align`; `raw` is what to free. calloc of a large block maps fresh zero
// pages, committed only as they are touched (chunks: see populate(); the index: see make_resident()).
inline void* zeroed(std::size_t bytes, std::size_t align, void*& raw) noexcept {
  raw = std::calloc(1, bytes + align);
  if (raw == nullptr) return nullptr;
  const auto p = (reinterpret_cast<std::uintptr_t>(raw) + align - 1) & ~(std::uintptr_t{align} - 1);
  return reinterpret_cast<void*>(p);
}

// Commits the pages of a new chunk in one call (Linux 5.14+) rather than one page fault per 4 KiB
// page as the owner first writes each entry: a fault costs microseconds in a virtual machine, and
// 128 of them per chunk would be the bulk of the cost of a key flood. Advisory: where unsupported,
// the pages fault in as before.
inline void populate(void* p, std::size_t bytes) noexcept {
#ifdef MADV_POPULATE_WRITE
  constexpr std::uintptr_t kPage = 4096;
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kPage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
#endif
}

// Commits every page of [p, p + bytes) now, or says it could not: the index of a table, whose memory
// must be had when the table is made, not at some later packet. Idempotent. MADV_POPULATE_WRITE
// (Linux 5.14+) faults the pages in as if written and reports ENOMEM; where it is not supported
// (EINVAL), each page is written instead (the memory is ours and zero: a zero is written back).
inline bool make_resident(void* p, std::size_t bytes) noexcept {
  if (bytes == 0) return true;
  constexpr std::uintptr_t kPage = 4096;
#ifdef MADV_POPULATE_WRITE
  // Whole pages: the partial ones at the ends are ours in part, and populating does not write.
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~(kPage - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes + kPage - 1) & ~(kPage - 1);
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return true;
  if (errno != EINVAL) return false;
#endif
  auto* bytes_of = static_cast<volatile unsigned char*>(p);
  for (std::size_t offset = 0; offset < bytes; offset += kPage) bytes_of[offset] = 0;
  bytes_of[bytes - 1] = 0;
  return true;
}

// Transparent huge pages for the 2 MiB-aligned interior of a large index: a random probe then costs
// no page walk (as DPDK's tables in huge pages). Advisory: ignored where THP is off. Given before the
// index is made resident, so that it is faulted in as huge pages (no extra memory: it is all resident
// anyway).
inline void advise_huge(void* p, std::size_t bytes) noexcept {
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kHugePage - 1) & ~(std::uintptr_t{kHugePage} - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(std::uintptr_t{kHugePage} - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
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

  // capacity: most live keys; idle_ticks: a key whose state.last is at least this far behind `now` is
  // idle (expired); 0 = never. The index and the bookkeeping are allocated and made resident here
  // (index_bytes_for(capacity) bytes); nullptr if they cannot be had. Entries come as keys arrive.
  static std::unique_ptr<KeyTable> make(std::uint32_t capacity, std::uint64_t idle_ticks) {
    auto table = allocate(capacity, idle_ticks);
    if (table == nullptr || !table->make_resident()) return nullptr;
    return table;
  }

  // make() in two steps, for a caller that makes several tables at once: it learns that one cannot be
  // allocated before it has committed the memory of any (committing a large index takes a while).
  // allocate(): the index and the bookkeeping allocated, the index not yet resident; nullptr if they
  // cannot be had. make_resident(): the index's pages committed now; false if they cannot be (the
  // table still works, its pages then fault in as probes reach them). Idempotent.
  static std::unique_ptr<KeyTable> allocate(std::uint32_t capacity, std::uint64_t idle_ticks) {
    std::unique_ptr<KeyTable> table(new (std::nothrow) KeyTable(capacity, idle_ticks));
    if (table == nullptr || !table->allocate_memory()) return nullptr;
    return table;
  }
  bool make_resident() noexcept {
    return key_table_detail::make_resident(slots_, index_slots() * sizeof(std::uint64_t));
  }

  // What make() allocates for a capacity (see the top of this file), in bytes.
  static constexpr std::size_t index_slots_for(std::uint32_t capacity) noexcept {
    return std::bit_ceil(std::max<std::size_t>(key_table_detail::kMinSlots, 2 * std::size_t{capacity}));
  }
  static constexpr std::size_t kBookkeepingBytesPerChunk =
      sizeof(std::atomic<Entry*>) + sizeof(Entry*) + sizeof(void*) + sizeof(std::uint32_t) + sizeof(std::uint64_t) +
      sizeof(std::array<std::uint64_t, key_table_detail::kChunkWords>);
  static_assert(kBookkeepingBytesPerChunk == 548, "the figure the README and the engine's refusal give");
  static constexpr std::size_t index_bytes_for(std::uint32_t capacity) noexcept {
    const std::size_t chunks = (std::size_t{capacity} + kChunkEntries - 1) >> kChunkShift;
    const std::size_t words = (chunks + kWordBits - 1) / kWordBits;
    return index_slots_for(capacity) * sizeof(std::uint64_t) + chunks * kBookkeepingBytesPerChunk +
           2 * words * sizeof(std::uint64_t);
  }

  // No reader may be inside for_each() any more.
  ~KeyTable() {
    for (std::size_t c = 0; raw_ && c < chunk_count_; ++c) std::free(raw_[c]);
    std::free(index_raw_);
  }
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  // ---- owner only ----

  // NH, the universal hash of UMAC and VHASH: the sum over word pairs of (x_i + k_i) * (x_i+1 + k_i+1)
  // as 128-bit products, with k a secret of this table (getrandom). For two distinct keys the 128-bit
  // sums collide with probability at most 2^-64 over the secret, so keys cannot be chosen offline to
  // collide. The sum is folded (hi ^ lo) and mixed by a 64 x 64 -> 128 multiplication with a secret
  // odd constant (hi ^ lo again), so that every output bit depends on every key bit: the low bits pick
  // the slot, the high 32 bits are the tag. One multiplication per 16 bytes plus one: ~1.5 ns for an
  // IPv4 key, ~2 ns for an IPv6 key.
  // Why not CRC32 with a seed (DPDK's rte_hash_crc): CRC is affine over GF(2), crc(s, x) ^ crc(s, y)
  // = crc(0, x ^ y) for equal lengths, so whether two keys collide does not depend on the seed at all;
  // anyone can compute a colliding flood offline.
  std::uint64_t hash(const Key& key) const noexcept {
    using key_table_detail::U128;
    U128 sum = 0;
    for (std::size_t i = 0; i < kKeyWords; i += 2) {
      const std::uint64_t a = load_word(key, i) + secret_[i];
      const std::uint64_t b = (i + 1 < kKeyWords ? load_word(key, i + 1) : 0) + secret_[i + 1];  // zero pad
      sum += static_cast<U128>(a) * b;
    }
    const std::uint64_t fold = static_cast<std::uint64_t>(sum >> 64) ^ static_cast<std::uint64_t>(sum);
    const U128 mixed = static_cast<U128>(fold) * multiplier_;
    return static_cast<std::uint64_t>(mixed >> 64) ^ static_cast<std::uint64_t>(mixed);
  }

  // The index line acquire() reads first (the key's home slot and the rest of its cache line).
  void prefetch(std::uint64_t hash) const noexcept { __builtin_prefetch(slots_ + (hash & mask_), 0, 3); }

  // The key's entry. Absent: a fresh entry is created (state = fresh, counters zero) if fewer than
  // capacity keys are live, else nullptr and Outcome::full (also if memory for a new chunk of entries
  // cannot be had). Present but idle (now > state.last and now - state.last >= idle_ticks): renewed in
  // place (state = fresh, counters zero), Outcome::renewed. Fresh entries are written under the
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
  // Also frees released chunks once no reader can hold them.
  std::size_t sweep(std::uint64_t now, std::size_t budget) noexcept {
    drain_deferred();
    if (size_ == 0 || idle_ == 0) return 0;
    std::size_t removed = 0;
    std::size_t pos = hand_;
    for (; budget > 0; --budget) {
      const std::uint64_t ahead = slots_[(pos + key_table_detail::kSweepAhead) & mask_];
      if (ahead != 0) __builtin_prefetch(entry_at(static_cast<std::uint32_t>(ahead) - 1), 1, 3);
      const std::uint64_t s = slots_[pos];
      if (s != 0) {
        const auto index = static_cast<std::uint32_t>(s) - 1;
        if (expired(entry_at(index)->state.last, now)) {
          remove_at(pos, index);
          ++removed;
          if (size_ == 0) break;
          continue;  // the slot now holds the next entry of the cluster, or nothing
        }
      }
      pos = (pos + 1) & mask_;
    }
    hand_ = pos;
    drain_deferred();
    return removed;
  }

  std::size_t size() const noexcept { return size_; }  // live keys
  std::size_t capacity() const noexcept { return capacity_; }
  // Index + bookkeeping + entry chunks allocated now (released chunks still awaiting their last
  // reader included).
  std::size_t memory_bytes() const noexcept { return index_bytes_ + chunk_bytes_; }
  // The fixed part, allocated and resident from make() on: the index, the per-chunk bitmaps and
  // pointers (index_bytes_for(capacity())).
  std::size_t index_bytes() const noexcept { return index_bytes_; }
  // The part that follows the live keys: the chunks of entries allocated now.
  std::size_t entry_bytes() const noexcept { return chunk_bytes_; }
  std::size_t index_slots() const noexcept { return mask_ + 1; }
  // The index's memory, for tests that check it is resident.
  const void* index_address() const noexcept { return slots_; }
  // Released chunks not yet freed because a reader may still hold them.
  std::size_t deferred_chunks() const noexcept { return deferred_count_; }
  std::uint64_t idle_ticks() const noexcept { return idle_; }

  struct ProbeStats {
    std::size_t max = 0;      // longest distance of a key from its home slot (0 = at home)
    double mean = 0;          // mean distance over the live keys
  };
  // Walks the whole index (tests, diagnostics).
  ProbeStats probe_stats() const noexcept {
    ProbeStats stats;
    if (size_ == 0) return stats;
    std::size_t total = 0;
    for (std::size_t pos = 0; pos <= mask_; ++pos) {
      const std::uint64_t s = slots_[pos];
      if (s == 0) continue;
      const std::size_t distance = (pos - home(s)) & mask_;
      stats.max = std::max(stats.max, distance);
      total += distance;
    }
    stats.mean = static_cast<double>(total) / static_cast<double>(size_);
    return stats;
  }

  // ---- any thread ----

  // fn(const Key&, const policer::State&, const KeyCounters&) for each live entry, each a consistent
  // copy (seqlock retry). Never blocks the owner: it only reads entries (and the chunk pointers), and
  // counts itself in `readers_`, a line the owner reads only while a released chunk awaits freeing.
  // Entries added or removed during the walk may or may not be seen. Safe against a concurrent sweep()
  // or acquire(), including chunk release. A slow fn only delays the freeing of released chunks.
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

  KeyTable(std::uint32_t capacity, std::uint64_t idle_ticks)
      : idle_(idle_ticks),
        capacity_(capacity),
        chunk_count_((std::size_t{capacity} + kChunkEntries - 1) >> kChunkShift) {
    std::uint64_t words[kSecretWords + 1];
    key_table_detail::secret_words(words, kSecretWords + 1);
    std::copy_n(words, kSecretWords, secret_.begin());
    multiplier_ = words[kSecretWords] | 1;  // odd: the product's low half is a bijection of the fold
  }
  static constexpr std::size_t kChunkShift = key_table_detail::kChunkShift;
  static constexpr std::size_t kChunkEntries = key_table_detail::kChunkEntries;
  static constexpr std::size_t kWordBits = key_table_detail::kWordBits;
  static constexpr std::size_t kKeyWords = KeySize / 8;
  static constexpr std::size_t kSecretWords = (kKeyWords + 1) & ~std::size_t{1};  // whole pairs
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

  static void write_fresh(Entry& e, const policer::State& fresh) noexcept {
    begin_write(e);
    e.state = fresh;
    e.counters = KeyCounters{};
    end_write(e);
  }

  [[gnu::noinline]] Entry* insert(const Key& key, std::uint64_t hash, std::size_t pos, const policer::State& fresh,
                                  Outcome& outcome) noexcept {
    outcome = Outcome::full;
    if (size_ >= capacity_) return nullptr;
    const std::uint32_t index = allocate_entry();  // may take back a released chunk not yet freed
    if (index == kNoEntry) return nullptr;
    drain_deferred();
    Entry& e = *entry_at(index);
    begin_write(e);
    e.live = 1;
    e.key = key;
    e.state = fresh;
    e.counters = KeyCounters{};
    end_write(e);
    slots_[pos] = (hash >> 32 << 32) | (std::uint64_t{index} + 1);
    ++size_;
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
    --size_;
    free_entry(index);
  }

  // ---- the index and the bookkeeping, by make() ----

  // All or nothing: on failure the table holds nothing (the destructor frees what is set). The
  // bookkeeping is written here (resident); the index is zero pages until make_resident().
  bool allocate_memory() noexcept {
    const std::size_t slots = index_slots_for(capacity_);
    const std::size_t slot_bytes = slots * sizeof(std::uint64_t);
    const std::size_t words = (chunk_count_ + kWordBits - 1) / kWordBits;
    chunks_.reset(new (std::nothrow) std::atomic<Entry*>[chunk_count_]());
    mem_.reset(new (std::nothrow) Entry*[chunk_count_]());
    raw_.reset(new (std::nothrow) void*[chunk_count_]());
    used_.reset(new (std::nothrow) std::uint32_t[chunk_count_]());
    any_free_.reset(new (std::nothrow) std::uint64_t[chunk_count_]);
    free_bits_.reset(new (std::nothrow) ChunkBits[chunk_count_]);
    has_room_.reset(new (std::nothrow) std::uint64_t[words]());
    deferred_.reset(new (std::nothrow) std::uint64_t[words]());
    if (!chunks_ || !mem_ || !raw_ || !used_ || !any_free_ || !free_bits_ || !has_room_ || !deferred_) return false;
    auto* slots_memory =
        static_cast<std::uint64_t*>(key_table_detail::zeroed(slot_bytes, key_table_detail::kCacheLine, index_raw_));
    if (slots_memory == nullptr) return false;
    key_table_detail::advise_huge(slots_memory, slot_bytes);
    for (std::size_t c = 0; c < chunk_count_; ++c) {  // writes every bookkeeping line: resident too
      any_free_[c] = ~std::uint64_t{0};
      free_bits_[c].fill(~std::uint64_t{0});
      has_room_[c / kWordBits] |= std::uint64_t{1} << (c % kWordBits);
    }
    slots_ = slots_memory;
    mask_ = slots - 1;
    index_bytes_ = index_bytes_for(capacity_);
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

  // Chunk c's memory: kept if released but not yet freed (readers of the old publication see entries
  // that are not live, under the same seqlock), else fresh zeroed memory (version 0, not live).
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
    const std::size_t bytes = chunk_entries(c) * sizeof(Entry);
    void* raw = nullptr;
    // Zeroed memory holds not-live entries at version 0: aggregates of implicit-lifetime members.
    auto* memory = static_cast<Entry*>(key_table_detail::zeroed(bytes, key_table_detail::kEntryAlign, raw));
    if (memory == nullptr) return false;
    key_table_detail::populate(memory, bytes);
    raw_[c] = raw;
    mem_[c] = memory;
    chunk_bytes_ += bytes;
    chunks_[c].store(memory, std::memory_order_release);  // the zeroes happen before a reader's use
    return true;
  }

  // An empty chunk leaves the readers' table now and is freed by drain_deferred() once no reader can
  // still hold it.
  void release_chunk(std::size_t c) noexcept {
    chunks_[c].store(nullptr, std::memory_order_seq_cst);
    deferred_[c / kWordBits] |= std::uint64_t{1} << (c % kWordBits);
    ++deferred_count_;
  }

  // Frees the released chunks if no reader is registered. Why a reader cannot still use one:
  //  - A reader registered before this load and not yet gone makes it nonzero: nothing is freed.
  //  - A reader that has gone decremented with release semantics after its last read of the chunk, and
  //    this seq_cst load (acquire) reads that decrement or a later value: its reads happen before the
  //    free.
  //  - A reader whose increment comes after this load in the modification order of readers_: this
  //    load reads a value before the increment, so it precedes the increment in the single total order
  //    S of seq_cst operations; the chunk's nulling store (seq_cst, sequenced before this load) precedes
  //    it too. The reader's seq_cst fence follows its increment, so it follows the nulling store in S,
  //    and its later acquire load of the chunk pointer cannot read a value older than the null (C++20
  //    [atomics.order] p4: a load that read the older pointer would be coherence-ordered before the
  //    null store, putting the fence before that store in S). It sees null or a later re-publication.
  // Never blocks: if readers are always present, the chunks simply wait (memory_bytes() counts them).
  void drain_deferred() noexcept {
    if (deferred_count_ == 0) [[likely]] return;
    if (readers_.load(std::memory_order_seq_cst) != 0) return;
    const std::size_t words = (chunk_count_ + kWordBits - 1) / kWordBits;
    for (std::size_t w = 0; w < words; ++w) {
      for (std::uint64_t bits = deferred_[w]; bits != 0; bits &= bits - 1) {
        const std::size_t c = w * kWordBits + static_cast<std::size_t>(std::countr_zero(bits));
        std::free(raw_[c]);
        raw_[c] = nullptr;
        mem_[c] = nullptr;
        chunk_bytes_ -= chunk_entries(c) * sizeof(Entry);
      }
      deferred_[w] = 0;
    }
    deferred_count_ = 0;
  }

  // ---- owner's hot fields first ----
  std::uint64_t* slots_ = nullptr;
  std::size_t mask_ = 0;
  std::unique_ptr<Entry*[]> mem_;     // per chunk: its entries (owner's copy; kept while deferred)
  std::uint64_t idle_;
  std::uint64_t multiplier_;
  std::array<std::uint64_t, kSecretWords> secret_;
  std::size_t size_ = 0;
  std::uint32_t capacity_;
  std::size_t chunk_count_;
  std::size_t hand_ = 0;       // the sweep's clock hand
  std::size_t room_hint_ = 0;  // has_room_ words below this are zero
  std::size_t deferred_count_ = 0;
  std::size_t index_bytes_ = 0;
  std::size_t chunk_bytes_ = 0;
  void* index_raw_ = nullptr;
  std::unique_ptr<void*[]> raw_;                // per chunk: the allocation to free
  std::unique_ptr<std::uint32_t[]> used_;       // per chunk: live entries
  std::unique_ptr<std::uint64_t[]> any_free_;   // per chunk: bit w set if free_bits_[c][w] != 0
  std::unique_ptr<ChunkBits[]> free_bits_;      // per chunk: bit set = entry free
  std::unique_ptr<std::uint64_t[]> has_room_;   // bit c set if chunk c has a free entry
  std::unique_ptr<std::uint64_t[]> deferred_;   // bit c set if chunk c is released, awaiting its free
  std::unique_ptr<std::atomic<Entry*>[]> chunks_;  // the readers' view: published chunks

  // Readers inside for_each(), on a line of its own: their increments do not disturb the owner's line.
  alignas(64) mutable std::atomic<std::size_t> readers_{0};
  char pad_[64 - sizeof(std::atomic<std::size_t>)] = {};
};

}  // namespace tricolor::dataplane

#undef TRICOLOR_KEY_TABLE_UNSEEN_BY_TSAN
