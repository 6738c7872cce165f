// tricolor-bench-keytable: the per-key meter table (dataplane/engine/key_table.hpp) beside DPDK 22.11's
// rte_hash doing the same work in the same binary.
//
//   BM_hit_v4/<impl>/<keys>   ns per packet: a lookup that hits, then a trTCM check (color-blind, one
//                             shared profile) on the key's state and the packet counted under the
//                             entry's seqlock. 1, 4 Ki, 64 Ki, 1 Mi and 16 Mi live IPv4 keys (16 bytes),
//                             visited in random order, bursts of 32, one TSC read per burst.
//   BM_hit_v6/<impl>/1048576  the same with 1 Mi IPv6 keys (40 bytes).
//   BM_insert/<impl>/<keys>   ns per new key inserted into an empty table until it holds <keys>. Ours:
//                             the control side's replenish() after every burst, timed with the
//                             inserts (one thread does both, as tricolor-replay): its chunks of
//                             entries are taken from the heap (mmap, pages committed) as they fill.
//   BM_insert/ours_owner/<keys>  the same inserts with the control side's work untimed (as when a
//                             control thread of the daemon takes and commits the chunks): the owner's
//                             cost alone. The ready pool holds 64 chunks; it is topped up, untimed,
//                             every 64 chunks' worth of keys.
//   BM_full/ours/<keys>       ns per packet of a new key offered to a full table (all refused).
//
// <impl>:
//   ours         hash all 32 and prefetch their index lines; acquire() all 32 and prefetch their
//                entries; then the meter check and count for all 32.
//   rte_hash     rte_hash_create() with RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF (readers concurrent
//                with the writer, as ours) and rte_hash_crc; rte_hash_lookup_bulk_data() per burst
//                (its own bucket and key prefetching); its data is a pointer to one of our 128-byte
//                entries in an array; prefetch the 32 entries, then the same meter check and count.
//
// Counters: ns_per_packet (or ns_per_insert); bytes_per_meter: ours memory_bytes() / size() (index,
// bookkeeping and entry chunks; a full table keeps no spare chunk); rte_hash: the DPDK heap taken by rte_hash_create() (buckets, key
// store, free-slot ring: measured with rte_malloc_get_socket_stats) plus the 128-byte entry each key
// points to, per key.
//
// Both tables are sized for the keys they hold: ours with capacity = keys (index 2 x keys slots,
// rounded up to a power of two); rte_hash with entries = keys (at least 8). Its cuckoo insertion
// places only ~99.6% of that many random keys, so it is created again with keys + keys/32 entries
// (its buckets double: rounded up to a power of two), then 2 x keys; the counter rte_entries says
// which was used.
//
// Own option: --thp=off disables transparent huge pages for the process (prctl), to see what the huge
// pages of our index are worth (DPDK's memory here is --no-huge). Every other option is Google
// Benchmark's. Smoke run (a few seconds):
//   tricolor-bench-keytable --benchmark_min_time=0.001 --benchmark_filter='/(1|4096)(/manual_time)?$'
// Table of medians (about 2 minutes, ~5 GiB of memory at 16 Mi keys):
//   tricolor-bench-keytable --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/dpdk/eal.hpp"
#include "dataplane/engine/key_table.hpp"
#include "dataplane/replay/splitmix64.hpp"
#include "policer/meter.hpp"
#include "policer/profile.hpp"

namespace {

namespace policer = tricolor::policer;
using tricolor::dataplane::KeyTable;

constexpr std::size_t kBurst = 32;
constexpr std::size_t kSequence = std::size_t{1} << 20;  // packets in the visit sequence (power of two)
static_assert(kSequence % kBurst == 0);
constexpr std::size_t kMinRteEntries = 8;  // rte_hash refuses fewer than one bucket
constexpr std::size_t kRteSlack = 32;      // entries = keys + keys/32 when keys alone do not all fit
constexpr std::size_t kEalMemoryMb = 6144;  // rte_hash at 16 Mi keys takes ~0.8-1.6 GiB of DPDK heap
constexpr std::uint64_t kIdleSeconds = 3600;  // no key expires during a run
constexpr std::size_t kHitSizes[] = {1, 4096, 65536, std::size_t{1} << 20, std::size_t{1} << 24};
constexpr std::size_t kInsertSizes[] = {4096, 65536, std::size_t{1} << 20, std::size_t{1} << 24};
constexpr std::size_t kV6Size = std::size_t{1} << 20;

// Simple IMIX: 7 x 64, 4 x 576, 1 x 1500 bytes.
constexpr std::uint32_t kLengths[12] = {64, 64, 64, 64, 64, 64, 64, 576, 576, 576, 576, 1500};

constexpr auto mix = tricolor::splitmix64_mix;  // a bijection

// Key number i: addresses from a bijection of i (so keys are distinct), ports and protocol after.
template <std::size_t K>
std::array<std::uint8_t, K> key_number(std::uint64_t i) {
  std::array<std::uint8_t, K> key{};
  const std::uint64_t addresses = mix(i + 0x9e3779b97f4a7c15ULL);
  std::memcpy(key.data(), &addresses, sizeof addresses);
  for (std::size_t w = 1; w + 1 < K / 8; ++w) {
    const std::uint64_t more = mix(i * 31 + w);
    std::memcpy(key.data() + 8 * w, &more, sizeof more);
  }
  const std::uint64_t ports = mix(~i) & 0xffffffffULL;
  std::memcpy(key.data() + K - 8, &ports, sizeof ports);
  key[K - 4] = (i & 1) ? 6 : 17;  // protocol
  return key;
}

template <std::size_t K>
struct Keys {
  std::vector<std::array<std::uint8_t, K>> live;      // the keys in the table
  std::vector<std::array<std::uint8_t, K>> sequence;  // packets: live keys in random order
  std::vector<std::array<std::uint8_t, K>> fresh;     // keys never inserted (full-table packets)
};

template <std::size_t K>
const Keys<K>& keys(std::size_t n) {
  static std::size_t made_for = 0;
  static Keys<K> k;
  if (made_for != n) {
    k = {};
    k.live.resize(n);
    for (std::size_t i = 0; i < n; ++i) k.live[i] = key_number<K>(i);
    k.sequence.resize(kSequence);
    std::uint64_t r = n;
    for (std::size_t i = 0; i < kSequence; ++i) k.sequence[i] = k.live[mix(++r) % n];
    k.fresh.resize(kSequence);
    for (std::size_t i = 0; i < kSequence; ++i) k.fresh[i] = key_number<K>(n + i);
    made_for = n;
  }
  return k;
}

policer::Profile make_profile() {
  auto tick_rate = policer::TickRate::make(rte_get_tsc_hz());
  policer::Params p;
  p.algorithm = policer::Algorithm::trtcm;
  p.cir = 1'000'000;  // bytes/s
  p.cbs = 64 * 1024;
  p.pir = 2'000'000;
  p.pbs = 128 * 1024;
  return *policer::Profile::make(p, *tick_rate);
}

// The meter work per packet, the same for both tables: a color-blind trTCM check on the key's state
// and the packet counted by color, under the entry's seqlock.
template <class Entry>
[[gnu::always_inline]] inline void meter(Entry& e, const policer::Profile& profile, std::uint64_t now,
                                         std::uint32_t length) noexcept {
  using Table = KeyTable<sizeof(e.key)>;
  Table::begin_write(e);
  const auto c = static_cast<std::size_t>(policer::check_blind<policer::TrTcm>(e.state, profile, now, length));
  e.counters.packets[c] += 1;
  e.counters.bytes[c] += length;
  Table::end_write(e);
}

template <class T>
[[gnu::always_inline]] inline void prefetch_lines(const T* p) noexcept {
  __builtin_prefetch(p, 1, 3);
  __builtin_prefetch(reinterpret_cast<const char*>(p) + 64, 1, 3);
}

// Google Benchmark calls a benchmark function several times; the structure built for the latest
// benchmark is kept between those calls (building 16 Mi keys takes seconds) and freed before another
// benchmark builds its own. Benchmarks that share a tag share the structure.
struct Kept {
  const void* tag = nullptr;
  std::size_t n = 0;
  std::shared_ptr<void> data;
};
Kept g_kept;

template <class T, class Make>
T* keep(const void* tag, std::size_t n, Make&& make) {
  if (g_kept.data && g_kept.tag == tag && g_kept.n == n) return static_cast<T*>(g_kept.data.get());
  g_kept = {};
  std::shared_ptr<T> made = make();
  if (made) g_kept = {tag, n, made};
  return made.get();
}

void per_item(benchmark::State& state, double items, const char* name) {
  state.counters[name] = benchmark::Counter(items, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<std::int64_t>(items));
}

std::uint64_t idle_ticks() { return kIdleSeconds * rte_get_tsc_hz(); }

// ---------------------------------------------------------------------------------------------------
// Ours

template <std::size_t K>
struct Ours {
  std::unique_ptr<KeyTable<K>> owned;  // its index allocated and resident from the start
  KeyTable<K>& table;
  policer::Profile profile;
  explicit Ours(std::unique_ptr<KeyTable<K>> made) : owned(std::move(made)), table(*owned), profile(make_profile()) {}
  // A table for n keys, or nullptr if its index cannot be had.
  static std::shared_ptr<Ours> make(std::size_t n, std::size_t spare_chunks = KeyTable<K>::kDefaultSpareChunks) {
    auto table = KeyTable<K>::make(static_cast<std::uint32_t>(n), idle_ticks(),
                                   tricolor::dataplane::heap_memory(), spare_chunks);
    return table ? std::make_shared<Ours>(std::move(table)) : nullptr;
  }
};

// Hashes a burst and prefetches the home index lines.
template <std::size_t K>
[[gnu::always_inline]] inline void hash_burst(const KeyTable<K>& t, const std::array<std::uint8_t, K>* keys,
                                              std::uint64_t* h) noexcept {
  for (std::size_t k = 0; k < kBurst; ++k) {
    h[k] = t.hash(keys[k]);
    t.prefetch(h[k]);
  }
}

// The table of n live keys (shared by the hit and full benchmarks of the same size).
template <std::size_t K>
Ours<K>* ours_with_keys(std::size_t n) {
  static const char tag = 0;
  return keep<Ours<K>>(&tag, n, [n]() -> std::shared_ptr<Ours<K>> {
    auto made = Ours<K>::make(n);
    if (made == nullptr) return nullptr;
    const auto& live = keys<K>(n).live;
    const std::uint64_t now = rte_rdtsc();
    const policer::State fresh = policer::full_state(made->profile, now);
    for (std::size_t i = 0; i < live.size(); ++i) {
      if (i % kBurst == 0 && !made->table.replenish()) return nullptr;
      typename KeyTable<K>::Outcome o;
      if (made->table.acquire(live[i], made->table.hash(live[i]), now, fresh, o) == nullptr) return nullptr;
    }
    return made;
  });
}

// Per burst: hash all 32 and prefetch their index lines; acquire all 32 (the probes overlap, each
// reading its entry's first line) and prefetch the entries' lines; then meter and count all 32.
// Tried and dropped: metering right after each acquire() (2x slower at 1 Mi keys: the longer loop
// body leaves fewer lookups in flight), and prefetching each entry from its guessed index slot before
// acquire() (it cost more than it saved: 20 instead of 17 ns at 4 Ki keys, 47 instead of 42 at 1 Mi).
template <std::size_t K>
void bm_hit_ours(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Ours<K>* ours = ours_with_keys<K>(n);
  if (ours == nullptr) return state.SkipWithError("could not allocate the table or insert every key");
  KeyTable<K>& t = ours->table;
  const policer::Profile& profile = ours->profile;
  const auto* sequence = keys<K>(n).sequence.data();

  auto burst = [&](std::size_t pos) {
    const std::uint64_t now = rte_rdtsc();
    const policer::State fresh = policer::full_state(profile, now);
    const auto* key = sequence + pos;
    std::uint64_t h[kBurst];
    hash_burst(t, key, h);
    typename KeyTable<K>::Entry* e[kBurst];
    for (std::size_t k = 0; k < kBurst; ++k) {
      typename KeyTable<K>::Outcome o;
      e[k] = t.acquire(key[k], h[k], now, fresh, o);
      prefetch_lines(e[k]);
    }
    for (std::size_t k = 0; k < kBurst; ++k)
      if (e[k] != nullptr) [[likely]] meter(*e[k], profile, now, kLengths[(pos + k) % 12]);
  };

  for (std::size_t pos = 0; pos < kSequence; pos += kBurst) burst(pos);  // untimed warm-up pass
  std::size_t pos = 0;
  for (auto _ : state) {
    burst(pos);
    pos = (pos + kBurst) & (kSequence - 1);
  }
  per_item(state, static_cast<double>(state.iterations() * kBurst), "ns_per_packet");
  state.counters["bytes_per_meter"] = static_cast<double>(t.memory_bytes()) / static_cast<double>(t.size());
}

// New keys offered to a full table: hash, probe to the first empty slot, refuse.
void bm_full_ours(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Ours<16>* ours = ours_with_keys<16>(n);
  if (ours == nullptr) return state.SkipWithError("could not allocate the table or insert every key");
  KeyTable<16>& t = ours->table;
  const auto* fresh_keys = keys<16>(n).fresh.data();
  std::size_t refused = 0, pos = 0;
  for (auto _ : state) {
    const std::uint64_t now = rte_rdtsc();
    const policer::State fresh = policer::full_state(ours->profile, now);
    const auto* key = fresh_keys + pos;
    std::uint64_t h[kBurst];
    hash_burst(t, key, h);
    for (std::size_t k = 0; k < kBurst; ++k) {
      KeyTable<16>::Outcome o;
      refused += t.acquire(key[k], h[k], now, fresh, o) == nullptr;
    }
    pos = (pos + kBurst) & (kSequence - 1);
  }
  if (refused != state.iterations() * kBurst) state.SkipWithError("a new key was accepted by a full table");
  per_item(state, static_cast<double>(state.iterations() * kBurst), "ns_per_packet");
}

// Inserts into an empty table up to capacity (manual time: only the inserts are timed, and with
// `control_timed` the control side's replenish() after each burst); the table is then emptied (all
// keys idle, swept, chunks taken back by the control side: two kept as spares, the rest given back to
// the heap) for the next iteration, as after a flood.
template <bool control_timed>
void bm_insert_ours(benchmark::State& state) {
  constexpr std::size_t kOwnerSpares = KeyTable<16>::kMaxSpareChunks;
  constexpr std::size_t kSegment = kOwnerSpares * tricolor::dataplane::key_table_detail::kChunkEntries;
  const auto n = static_cast<std::size_t>(state.range(0));
  static const char tag = 0;
  Ours<16>* ours = keep<Ours<16>>(&tag, n, [n] {
    return Ours<16>::make(n, control_timed ? KeyTable<16>::kDefaultSpareChunks : kOwnerSpares);
  });
  if (ours == nullptr) return state.SkipWithError("could not allocate the table");
  KeyTable<16>& t = ours->table;
  const auto* live = keys<16>(n).live.data();
  std::size_t created = 0;
  bool replenished = true;
  auto fill = [&] {
    double seconds = 0;
    auto start = std::chrono::steady_clock::now();
    for (std::size_t pos = 0; pos < n; pos += kBurst) {
      if constexpr (control_timed) {
        replenished &= t.replenish();
      } else if (pos % kSegment == 0) {  // the control thread's work, untimed
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        replenished &= t.replenish();
        start = std::chrono::steady_clock::now();
      }
      const std::uint64_t now = rte_rdtsc();
      const policer::State fresh = policer::full_state(ours->profile, now);
      std::uint64_t h[kBurst];
      hash_burst(t, live + pos, h);
      for (std::size_t k = 0; k < kBurst; ++k) {
        KeyTable<16>::Outcome o;
        created += t.acquire(live[pos + k], h[k], now, fresh, o) != nullptr;
      }
    }
    return seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto empty = [&] {
    t.sweep(rte_rdtsc() + idle_ticks(), 2 * t.index_slots());
    replenished &= t.replenish();
  };
  std::size_t bytes = 0;
  for (auto _ : state) {
    state.SetIterationTime(fill());
    bytes = t.memory_bytes();
    empty();
  }
  if (!replenished) state.SkipWithError("the heap had no memory for a chunk");
  if (created != state.iterations() * n) state.SkipWithError("a key was refused below capacity");
  per_item(state, static_cast<double>(state.iterations() * n), "ns_per_insert");
  state.counters["bytes_per_meter"] = static_cast<double>(bytes) / static_cast<double>(n);
}

// ---------------------------------------------------------------------------------------------------
// rte_hash

template <std::size_t K>
struct Rte {
  using Entry = typename KeyTable<K>::Entry;
  rte_hash* hash = nullptr;
  std::unique_ptr<Entry[]> entries;  // what each key's data points to
  policer::Profile profile = make_profile();
  std::size_t heap_bytes = 0;        // DPDK heap taken by rte_hash_create()
  std::size_t rte_entries = 0;
  ~Rte() { rte_hash_free(hash); }
};

std::size_t dpdk_heap_bytes() {
  rte_malloc_socket_stats stats{};
  rte_malloc_get_socket_stats(static_cast<int>(rte_socket_id()), &stats);
  return stats.heap_allocsz_bytes;
}

// An rte_hash for n keys, lock-free concurrent readers, CRC32 hash (DPDK's usual choice, the fastest).
// With `insert`, every key is added; entries double until all fit.
template <std::size_t K>
std::shared_ptr<Rte<K>> make_rte(std::size_t n, bool insert) {
  static unsigned serial = 0;
  const auto& live = keys<K>(n).live;
  const std::size_t base = std::max(n, kMinRteEntries);
  for (const std::size_t entries : {base, base + base / kRteSlack, 2 * base}) {
    auto made = std::make_shared<Rte<K>>();
    const std::string name = "kt" + std::to_string(serial++);
    rte_hash_parameters params{};
    params.name = name.c_str();
    params.entries = static_cast<std::uint32_t>(entries);
    params.key_len = K;
    params.hash_func = rte_hash_crc;
    params.hash_func_init_val = 0;
    params.socket_id = static_cast<int>(rte_socket_id());
    params.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF;
    const std::size_t before = dpdk_heap_bytes();
    made->hash = rte_hash_create(&params);
    if (made->hash == nullptr) {
      std::fprintf(stderr, "rte_hash_create(%zu): %s\n", entries, rte_strerror(rte_errno));
      return nullptr;
    }
    made->heap_bytes = dpdk_heap_bytes() - before;
    made->rte_entries = entries;
    made->entries.reset(new typename Rte<K>::Entry[n]());
    const std::uint64_t now = rte_rdtsc();
    bool all = true;
    for (std::size_t i = 0; i < n; ++i) {
      auto& e = made->entries[i];
      e.live = 1;
      e.key = live[i];
      e.state = policer::full_state(made->profile, now);
      if (insert && rte_hash_add_key_data(made->hash, live[i].data(), &e) != 0) {
        all = false;
        break;
      }
    }
    if (all) return made;
  }
  return nullptr;
}

template <std::size_t K>
void bm_hit_rte(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  static const char tag = 0;
  Rte<K>* rte = keep<Rte<K>>(&tag, n, [n] { return make_rte<K>(n, true); });
  if (rte == nullptr) return state.SkipWithError("rte_hash could not take every key");
  const auto* sequence = keys<K>(n).sequence.data();
  const policer::Profile& profile = rte->profile;

  std::size_t misses = 0;
  auto burst = [&](std::size_t pos) {
    const std::uint64_t now = rte_rdtsc();
    const void* key[kBurst];
    for (std::size_t k = 0; k < kBurst; ++k) key[k] = sequence[pos + k].data();
    void* data[kBurst];
    std::uint64_t hits = 0;
    misses += kBurst - static_cast<std::size_t>(rte_hash_lookup_bulk_data(rte->hash, key, kBurst, &hits, data));
    for (std::size_t k = 0; k < kBurst; ++k) prefetch_lines(static_cast<const typename Rte<K>::Entry*>(data[k]));
    for (std::size_t k = 0; k < kBurst; ++k)
      meter(*static_cast<typename Rte<K>::Entry*>(data[k]), profile, now, kLengths[(pos + k) % 12]);
  };

  for (std::size_t pos = 0; pos < kSequence; pos += kBurst) burst(pos);  // untimed warm-up pass
  std::size_t pos = 0;
  for (auto _ : state) {
    burst(pos);
    pos = (pos + kBurst) & (kSequence - 1);
  }
  if (misses != 0) state.SkipWithError("rte_hash missed a live key");
  per_item(state, static_cast<double>(state.iterations() * kBurst), "ns_per_packet");
  state.counters["bytes_per_meter"] =
      static_cast<double>(rte->heap_bytes + n * sizeof(typename Rte<K>::Entry)) / static_cast<double>(n);
  state.counters["rte_entries"] = static_cast<double>(rte->rte_entries);
}

// rte_hash_add_key_data per key into an empty table (rte_hash_reset between iterations, untimed).
void bm_insert_rte(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  static const char tag = 0;
  Rte<16>* rte = keep<Rte<16>>(&tag, n, [n] { return make_rte<16>(n, true); });  // sized so that all fit
  if (rte == nullptr) return state.SkipWithError("rte_hash could not take every key");
  const auto* live = keys<16>(n).live.data();
  std::size_t failed = 0;
  rte_hash_reset(rte->hash);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < n; ++i) failed += rte_hash_add_key_data(rte->hash, live[i].data(), &rte->entries[i]) != 0;
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    rte_hash_reset(rte->hash);
  }
  if (failed != 0) state.SkipWithError("rte_hash refused a key below its size");
  per_item(state, static_cast<double>(state.iterations() * n), "ns_per_insert");
  state.counters["bytes_per_meter"] =
      static_cast<double>(rte->heap_bytes + n * sizeof(Rte<16>::Entry)) / static_cast<double>(n);
  state.counters["rte_entries"] = static_cast<double>(rte->rte_entries);
}

// ---------------------------------------------------------------------------------------------------

void register_benchmarks() {
  // Interleaved per size, so that both sides of a comparison run close in time (and share the keys).
  for (std::size_t n : kHitSizes) {
    const auto arg = static_cast<std::int64_t>(n);
    benchmark::RegisterBenchmark("BM_hit_v4/ours", bm_hit_ours<16>)->Arg(arg);
    if (n > 1) benchmark::RegisterBenchmark("BM_full/ours", bm_full_ours)->Arg(arg);
    benchmark::RegisterBenchmark("BM_hit_v4/rte_hash", bm_hit_rte<16>)->Arg(arg);
    if (n == kV6Size) {
      benchmark::RegisterBenchmark("BM_hit_v6/ours", bm_hit_ours<40>)->Arg(arg);
      benchmark::RegisterBenchmark("BM_hit_v6/rte_hash", bm_hit_rte<40>)->Arg(arg);
    }
  }
  for (std::size_t n : kInsertSizes) {
    const auto arg = static_cast<std::int64_t>(n);
    benchmark::RegisterBenchmark("BM_insert/ours", bm_insert_ours<true>)->Arg(arg)->UseManualTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_insert/ours_owner", bm_insert_ours<false>)
        ->Arg(arg)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_insert/rte_hash", bm_insert_rte)->Arg(arg)->UseManualTime()->Unit(benchmark::kMillisecond);
  }
}

// Takes our own option out of argv: --thp=off.
bool parse_thp(int& argc, char** argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--thp=off") {
      if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
        std::perror("tricolor-bench-keytable: prctl(PR_SET_THP_DISABLE)");
        return false;
      }
    } else if (a == "--thp=on") {
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!parse_thp(argc, argv)) return 1;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  auto eal = tricolor::dataplane::MemoryOnlyEal::init("tricolor-bench-keytable", kEalMemoryMb);
  if (!eal) {
    std::fprintf(stderr, "tricolor-bench-keytable: %s\n", eal.error().message.c_str());
    return 1;
  }
  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_kept = {};  // rte_hash_free before the EAL goes
  return 0;
}
