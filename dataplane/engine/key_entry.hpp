#pragma once
// One key's entry in a key table (key_table.hpp): the key, its meter state and its per-color counters,
// two cache lines, and the seqlock by which any thread reads it while its owner writes it.
//
// The owner writes an entry between begin_write() and end_write(); a reader takes a consistent copy
// with read_entry(), retrying while a write is in progress or happened meanwhile. The owner never
// waits for a reader.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

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

template <std::size_t KeySize>  // 16 (IPv4 keys) or 40 (IPv6 keys); a multiple of 8
struct alignas(64) KeyEntry {
  static_assert(KeySize > 0 && KeySize % 8 == 0, "keys are whole 64-bit words");
  static_assert(KeySize <= 48, "an entry is two cache lines");
  using Key = std::array<std::uint8_t, KeySize>;

  std::atomic<std::uint32_t> version;  // seqlock: odd while the owner writes this entry
  std::uint32_t live;                  // nonzero while the entry holds a key (written under the seqlock)
  Key key;
  policer::State state;                // levels and last-check tick (24 bytes)
  KeyCounters counters;
};
static_assert(sizeof(KeyEntry<40>) == 128 && sizeof(KeyEntry<16>) == 128, "two cache lines, whatever the key size");
static_assert(sizeof(policer::State) % 8 == 0 && sizeof(KeyCounters) % 8 == 0);

namespace key_table_detail {

__extension__ typedef unsigned __int128 U128;
// Word views of an entry's key and fields, for the readers' relaxed atomic loads (the key is bytes).
typedef std::uint64_t __attribute__((may_alias)) AliasU64;
typedef std::uint32_t __attribute__((may_alias)) AliasU32;

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

// Version odd, then a release fence: the field stores that follow cannot become visible before the
// odd version (x86: a compiler barrier, stores stay in order; arm64: dmb ish).
template <std::size_t KeySize>
inline void begin_write(KeyEntry<KeySize>& e) noexcept {
  e.version.store(e.version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  key_table_detail::release_fence();
}
// Release store of the next even version: a reader that sees it sees every field stored before it.
template <std::size_t KeySize>
inline void end_write(KeyEntry<KeySize>& e) noexcept {
  e.version.store(e.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// A reader's copy of an entry.
template <std::size_t KeySize>
struct KeySnapshot {
  std::uint32_t live;
  typename KeyEntry<KeySize>::Key key;
  policer::State state;
  KeyCounters counters;
};

namespace key_table_detail {

template <std::size_t KeySize>
TRICOLOR_KEY_TABLE_UNSEEN_BY_TSAN void copy_fields(const KeyEntry<KeySize>& e, KeySnapshot<KeySize>& out) noexcept {
  constexpr std::size_t kKeyWords = KeySize / 8;
  constexpr std::size_t kStateWords = sizeof(policer::State) / 8;
  constexpr std::size_t kCounterWords = sizeof(KeyCounters) / 8;
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

}  // namespace key_table_detail

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
template <std::size_t KeySize>
inline void read_entry(const KeyEntry<KeySize>& e, KeySnapshot<KeySize>& out) noexcept {
  for (;;) {
    const std::uint32_t v0 = e.version.load(std::memory_order_acquire);
    if ((v0 & 1) == 0) {
      key_table_detail::copy_fields(e, out);
      if (e.version.load(std::memory_order_relaxed) == v0) return;
    }
    key_table_detail::cpu_relax();
  }
}

}  // namespace tricolor::dataplane

#undef TRICOLOR_KEY_TABLE_UNSEEN_BY_TSAN
