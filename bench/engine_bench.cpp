// tricolor-bench-engine: the whole per-packet path of a per-key rule (parse, classify, key lookup,
// meter, counters, actions) in bursts of 32, with 1, 4 Ki, 64 Ki, 1 Mi and 16 Mi live keys visited in
// random order; beside it the bare meter check (policer::check_blind on as many states, same order,
// same prefetch distance) from the foundation benchmark, so that the cost of everything around the
// meter shows; the memory floor (the lines a key table of as many keys touches a packet, reached in the
// same order, each line asked for a stage ahead, nothing else done), so that what is memory and what
// is work shows; and
// the key-flood rates: every packet a new key, into an empty table and into a full
// one (the fallback); and a policy change with 10 Ki rules, with and without a classifier build. As
// the daemon benchmark runs them: one aggregate rule, and the per-key rule at the default capacity.
//
// Packets are rewritten in place in a ring of 32 frame buffers before each burst (as a NIC reuses its
// receive buffers): writing the key fields is part of the measured time, about 1 ns per packet.
#include <benchmark/benchmark.h>

#include <rte_cycles.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <string>
#include <memory>
#include <vector>

#include "bench/huge_page_arena.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/engine/engine.hpp"
#include "dataplane/replay/splitmix64.hpp"
#include "policer/meter.hpp"

namespace {

using namespace tricolor;
using namespace tricolor::dataplane;

constexpr std::size_t kBurst = 32;
constexpr std::size_t kSequence = 1u << 22;  // random key ids cycled through
constexpr std::size_t kPrefetch = 16;

using tricolor::splitmix64;

const std::vector<std::uint32_t>& sequence(std::uint32_t keys) {
  static std::vector<std::uint32_t> seq;
  static std::uint32_t made_for = 0;
  if (made_for != keys) {
    std::uint64_t s = keys;
    seq.resize(kSequence);
    for (auto& id : seq) id = static_cast<std::uint32_t>(splitmix64(s) % keys);
    made_for = keys;
  }
  return seq;
}

// Ethernet + IPv4 + UDP, 64 bytes, to 10.200.0.1; the key (source address, source port) set per burst.
struct Frames {
  std::uint8_t bytes[kBurst][64];
  PacketView views[kBurst];
  Frames() {
    const std::uint8_t header[42] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00, 0x45, 0, 0, 50, 0, 0, 0x40, 0, 64, 17,
                                     0, 0, 11, 0, 0, 0, 10, 200, 0, 1, 0x10, 0, 0x00, 53, 0, 30, 0, 0};
    for (std::size_t k = 0; k < kBurst; ++k) {
      std::memcpy(bytes[k], header, sizeof header);
      std::memset(bytes[k] + sizeof header, 0, 64 - sizeof header);
      views[k] = PacketView{bytes[k], 64, 64, 0, 0, 0, false};
    }
  }
  void set(std::size_t k, std::uint32_t id, std::uint64_t now) {
    // 2^24 source addresses x 16 source ports: distinct 5-tuples for ids up to 2^28.
    bytes[k][27] = static_cast<std::uint8_t>(id >> 16), bytes[k][28] = static_cast<std::uint8_t>(id >> 8);
    bytes[k][29] = static_cast<std::uint8_t>(id);
    bytes[k][34] = static_cast<std::uint8_t>(0x10 | ((id >> 24) & 0x0f));
    views[k].arrival = now;
  }
};

Policy policy(std::uint32_t capacity) {
  Policy p;
  policer::Params params;
  params.algorithm = policer::Algorithm::trtcm;
  params.cir = 12'500'000, params.cbs = 65536, params.pir = 25'000'000, params.pbs = 131072;
  p.profiles.push_back({"flow", params});
  Rule r;
  r.name = "flows";
  r.profile = "flow";
  Prefix dst;
  dst.address = {10, 200, 0, 1};
  dst.length = 32;
  r.match.dst = dst;
  r.per_key.kind = KeyKind::five_tuple;
  r.per_key.capacity = capacity;
  r.per_key.idle_timeout_ns = 3600ull * 1'000'000'000;
  p.rules.push_back(r);
  return p;
}

std::unique_ptr<Engine> make_engine(std::uint32_t capacity) {
  auto e = Engine::create(policy(capacity), *policer::TickRate::make(rte_get_tsc_hz()));
  return e ? std::move(*e) : nullptr;
}

// Every key inserted once (untimed), then bursts of 32 packets of keys in random order; ns_per_packet.
// `arp_at`: the place in every timed burst of a frame that is not IP (an ARP frame), or -1 for none.
// `read`: the verdicts the caller reads (Worker::VerdictsRead): every burst's, or a mixed burst's only,
// as the daemon's forwarder does.
void run_engine(benchmark::State& state, Engine& engine, std::uint32_t keys, int arp_at = -1,
                Worker::VerdictsRead read = Worker::VerdictsRead::every) {
  Frames frames;
  Verdict verdicts[kBurst];
  for (std::uint32_t id = 0; id < keys; id += kBurst) {
    const std::size_t n = std::min<std::size_t>(kBurst, keys - id);
    const std::uint64_t now = rte_rdtsc();
    for (std::size_t k = 0; k < n; ++k) frames.set(k, id + static_cast<std::uint32_t>(k), now);
    engine.process(std::span(frames.views, n), verdicts);
  }
  if (arp_at >= 0) frames.bytes[arp_at][12] = 0x08, frames.bytes[arp_at][13] = 0x06;
  const auto& seq = sequence(keys);
  std::size_t pos = 0;
  for (auto _ : state) {
    const std::uint64_t now = rte_rdtsc();
    for (std::size_t k = 0; k < kBurst; ++k) frames.set(k, seq[pos + k], now);
    engine.process(frames.views, verdicts, read);
    pos = (pos + kBurst) % kSequence;
  }
  benchmark::DoNotOptimize(verdicts);
  state.counters["ns_per_packet"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBurst), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_engine_per_key(benchmark::State& state) {
  const auto keys = static_cast<std::uint32_t>(state.range(0));
  auto engine = make_engine(std::max<std::uint32_t>(keys, 1024));
  if (engine == nullptr) return state.SkipWithError("could not make the engine");
  run_engine(state, *engine, keys);
  state.counters["live_keys"] = static_cast<double>(engine->live_keys(0));
  state.counters["bytes_per_key"] = static_cast<double>(engine->key_memory_bytes(0)) / std::max<std::size_t>(1, engine->live_keys(0));
}

// BM_engine_per_key/<keys> with one frame of every burst not IP (ARP, the default action), at the
// burst's first place (0) or its last (31), with plain bursts (third argument 1: worker.cpp; none is
// plain, the pass given up at that frame, and the 3 bursts after it parsed straight away) or without
// them (0: EngineOptions::plain_bursts off, every burst parsed, as before plain bursts): what plain
// bursts cost traffic that is not all plain.
void BM_engine_per_key_not_plain(benchmark::State& state) {
  const auto keys = static_cast<std::uint32_t>(state.range(0));
  EngineOptions options;
  options.plain_bursts = state.range(2) != 0;
  auto engine = Engine::create(policy(std::max<std::uint32_t>(keys, 1024)), *policer::TickRate::make(rte_get_tsc_hz()),
                               options);
  if (!engine) return state.SkipWithError("could not make the engine");
  run_engine(state, **engine, keys, static_cast<int>(state.range(1)));
}

// BM_engine_per_key with the key table on 2 MiB pages, as the daemon's is (huge_page_arena.hpp):
// BM_engine_per_key's tables take their 512 KiB chunks of entries from the heap, on 4 KiB pages.
// huge_page_share: the share of the table's memory the kernel put on huge pages (0 where THP is off:
// then the figure is BM_engine_per_key's).
void BM_engine_per_key_huge_pages(benchmark::State& state) {
  const auto keys = static_cast<std::uint32_t>(state.range(0));
  const std::uint32_t capacity = std::max<std::uint32_t>(keys, 1024);
  // The index, every chunk a full table holds, the spares, and a huge page of slack for alignment.
  constexpr std::size_t kChunk = key_table_detail::kChunkEntries;
  const std::size_t chunks = capacity / kChunk + 1 + KeyedMeters::kMaxSpareChunks;
  bench::HugePageArena arena(KeyedMeters::index_bytes_for(capacity) + chunks * kChunk * sizeof(KeyedMeters::Entry) +
                             bench::HugePageArena::kHugePage);
  if (!arena.ok()) return state.SkipWithError("could not map the arena");
  EngineOptions options;
  options.memory = {&arena};
  auto engine = Engine::create(policy(capacity), *policer::TickRate::make(rte_get_tsc_hz()), options);
  if (!engine) return state.SkipWithError(("could not make the engine: " + engine.error().message).c_str());
  run_engine(state, **engine, keys);
  state.counters["live_keys"] = static_cast<double>((*engine)->live_keys(0));
  state.counters["huge_page_share"] = arena.huge_page_share();
}

// As the daemon benchmark's policies run (bench/daemon/*.policy): BM_engine_aggregate, one aggregate
// trTCM rule (every packet through one meter); BM_engine_per_key_daemon_index/<keys>, the per-key rule
// at the language's default capacity (1 Mi keys: an index of 16 MiB, whatever the live keys).
void BM_engine_aggregate(benchmark::State& state) {
  Policy p = policy(1);
  p.rules[0].per_key = PerKey{};  // no key: the rule's one meter
  auto engine = Engine::create(p, *policer::TickRate::make(rte_get_tsc_hz()));
  if (!engine) return state.SkipWithError("could not make the engine");
  run_engine(state, **engine, static_cast<std::uint32_t>(state.range(0)));
}

// Shaping (issue 27): BM_engine_per_key's rule, or BM_engine_aggregate's (keys 0), with `red shape
// max-delay 1ms`. Second argument 0: its rates (a key's packets all conform when they come: the
// decision is conforming_at's, then the check); 1: 64 kB/s per key (nearly every packet would wait
// longer than 1 ms: late); 2: the same with `queue 64` (the worker's queue for the rule full nearly
// always: most would-be-held packets overflow). The aggregate at its rates is late for nearly every
// packet too. Beside BM_engine_per_key/<keys> and BM_engine_aggregate, the same rule policing.
void BM_engine_shaping(benchmark::State& state) {
  const auto keys = static_cast<std::uint32_t>(state.range(0));
  Policy p = policy(std::max<std::uint32_t>(keys, 1024));
  if (keys == 0) p.rules[0].per_key = PerKey{};
  p.rules[0].on_color[2] = Action{true, std::nullopt, std::nullopt, 1'000'000};
  if (state.range(1) == 2) p.rules[0].on_color[2].shape_queue = 64;
  if (state.range(1) != 0) {
    policer::Params& slow = p.profiles[0].params;
    slow.cir = 64'000, slow.cbs = 128, slow.pir = 128'000, slow.pbs = 256;
  }
  auto engine = Engine::create(p, *policer::TickRate::make(rte_get_tsc_hz()));
  if (!engine) return state.SkipWithError(("could not make the engine: " + engine.error().message).c_str());
  run_engine(state, **engine, std::max<std::uint32_t>(keys, 1));
  const RuleCounters c = (*engine)->counters(0);
  const double total = static_cast<double>(c.packets[0] + c.packets[1] + c.packets[2]);
  state.counters["held"] = static_cast<double>(c.shaped_packets) / total;
  state.counters["late"] = static_cast<double>(c.packets[2] - c.queue_overflow_packets) / total;
  state.counters["overflow"] = static_cast<double>(c.queue_overflow_packets) / total;
}

// Flows per key (issue 27): a rule per source address (every packet's key is a source of its own, one
// flow each, so every packet looks its flow up in the worker's flow table), with `max-flows 100`
// (second argument 1) or without (0): the flow table's cost per packet.
void BM_engine_flows(benchmark::State& state) {
  const auto keys = static_cast<std::uint32_t>(state.range(0));
  Policy p = policy(std::max<std::uint32_t>(keys, 1024));
  p.rules[0].per_key.kind = KeyKind::src;
  if (state.range(1) == 1) {
    p.rules[0].per_key.max_flows = 100;
    p.rules[0].per_key.flow_capacity = std::max<std::uint32_t>(keys, 1024);
    p.rules[0].per_key.flow_timeout_ns = 3600ull * 1'000'000'000;
  }
  auto engine = Engine::create(p, *policer::TickRate::make(rte_get_tsc_hz()));
  if (!engine) return state.SkipWithError(("could not make the engine: " + engine.error().message).c_str());
  run_engine(state, **engine, keys);
  state.counters["flows_opened"] = static_cast<double>((*engine)->counters(0).flows_opened);
}

void BM_engine_per_key_daemon_index(benchmark::State& state) {
  auto engine = make_engine(PerKey{}.capacity);
  if (engine == nullptr) return state.SkipWithError("could not make the engine");
  run_engine(state, *engine, static_cast<std::uint32_t>(state.range(0)));
}

// BM_engine_per_key (per key, 1: the daemon's capacity) or BM_engine_aggregate (0) with the daemon's
// caller, which reads a burst's verdicts only when it is mixed (Worker::VerdictsRead::when_mixed): a
// burst forwarded whole has none written.
void BM_engine_sent_whole(benchmark::State& state) {
  const auto keys = static_cast<std::uint32_t>(state.range(0));
  Policy p = policy(PerKey{}.capacity);
  if (state.range(1) == 0) p.rules[0].per_key = PerKey{};
  auto engine = Engine::create(p, *policer::TickRate::make(rte_get_tsc_hz()));
  if (!engine) return state.SkipWithError("could not make the engine");
  run_engine(state, **engine, keys, -1, Worker::VerdictsRead::when_mixed);
}

// An operator-like set of 1 Ki rules (classified by rte_acl), the benchmark's per-key rule the last.
// Args: the classifier: rte_acl's trie (0), the trie behind the workers' flow cache (1,
// flow_cache.hpp), or the hash of a rule set of one shape where the rules have one (2, exact_match.hpp);
// the other rules /32 destinations, UDP, port 53 (0: one shape) or source prefixes and port ranges (1:
// the trie whatever arg 0 says); live keys: 4 Ki (nearly every packet a cache hit) or 1 Mi (nearly
// every packet a cache miss, more flows than the cache holds).
void BM_engine_acl_rules(benchmark::State& state) {
  Policy p = policy(1u << 20);
  const Rule flows = p.rules[0];
  p.rules.clear();
  const bool ranges = state.range(1) != 0;
  for (std::uint32_t i = 0; i < 1023; ++i) {
    Rule r;
    r.name = "r" + std::to_string(i);
    r.profile = "flow";
    Prefix dst;
    dst.address = {10, 100, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i)};
    dst.length = 32;
    r.match.dst = dst;
    r.match.protocol = 17;
    r.match.dst_ports = {{53, 53}};
    if (ranges) {  // source prefixes of every length and source port ranges: a deeper trie
      Prefix src;
      src.address = {static_cast<std::uint8_t>(i * 7), static_cast<std::uint8_t>(i * 13), 0, 0};
      src.length = static_cast<std::uint8_t>(8 + i % 17);
      r.match.src = src;
      r.match.dst = std::nullopt;
      r.match.src_ports = {{static_cast<std::uint16_t>(i * 61), static_cast<std::uint16_t>(i * 61 + 1000)}};
    }
    p.rules.push_back(r);
  }
  p.rules.push_back(flows);
  if (!ranges) {  // the per-key rule of the others' shape too (the benchmark's packets are UDP to port 53)
    p.rules.back().match.protocol = 17;
    p.rules.back().match.dst_ports = {{53, 53}};
  }
  EngineOptions options;
  options.limits.flow_cache_entries = state.range(0) == 1 ? kSuggestedFlowCacheEntries : 0;
  options.limits.classifier_exact_hash = state.range(0) == 2;
  auto engine = Engine::create(p, *policer::TickRate::make(rte_get_tsc_hz()), options);
  if (!engine) return state.SkipWithError(engine.error().message.c_str());
  run_engine(state, **engine, static_cast<std::uint32_t>(state.range(2)));
  if (const FlowCache* cache = (*engine)->worker(0).flow_cache()) {
    const double hits = static_cast<double>(cache->counters().hits.load());
    state.counters["cache_hit_share"] = hits / (hits + static_cast<double>(cache->counters().misses.load()));
  }
}

void BM_bare_meter(benchmark::State& state) {
  const auto keys = static_cast<std::uint32_t>(state.range(0));
  policer::Params params = policy(1).profiles[0].params;
  const auto profile = *policer::Profile::make(params, *policer::TickRate::make(rte_get_tsc_hz()));
  std::vector<policer::State> states(keys, policer::full_state(profile, rte_rdtsc()));
  const auto& seq = sequence(keys);
  std::size_t pos = 0;
  unsigned colors = 0;
  for (auto _ : state) {
    const std::uint64_t now = rte_rdtsc();
    for (std::size_t k = 0; k < kBurst; ++k) {
      __builtin_prefetch(&states[seq[(pos + k + kPrefetch) % kSequence]], 1);
      colors += static_cast<unsigned>(policer::check_blind<policer::TrTcm>(states[seq[pos + k]], profile, now, 64));
    }
    pos = (pos + kBurst) % kSequence;
  }
  benchmark::DoNotOptimize(colors);
  state.counters["ns_per_packet"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBurst), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// What this machine's memory allows a per-key packet at <keys> keys, with nothing else to do: the
// memory a key table of that many keys touches (an index of 2 x keys 8-byte slots, 128-byte entries,
// both on the huge-page arena), in BM_engine_per_key's random key order: per burst of 32, each key's
// index line prefetched, then the entry its slot names (both lines), then the entry's first line read
// (the key compared) and its second written (the meter and the counters). Every line is asked for a
// stage ahead, which the engine does not do for the entries (doc/benchmarks.md: that pass paid here
// but not in the daemon). No hash, parse or meter: the floor under BM_engine_per_key_huge_pages/<keys>.
void BM_memory_floor(benchmark::State& state) {
  const auto keys = static_cast<std::uint32_t>(state.range(0));
  const std::size_t slots = std::bit_ceil(std::max<std::size_t>(8, 2 * std::size_t{keys}));
  using Entry = KeyedMeters::Entry;
  bench::HugePageArena arena(slots * sizeof(std::uint64_t) + std::size_t{keys} * sizeof(Entry) + 2 * bench::HugePageArena::kHugePage);
  constexpr std::size_t kLine = key_table_detail::kCacheLine;
  auto* index = static_cast<std::uint64_t*>(arena.reserve(slots * sizeof(std::uint64_t), kLine));
  auto* entries = static_cast<Entry*>(arena.reserve(std::size_t{keys} * sizeof(Entry), kLine));
  if (index == nullptr || entries == nullptr) return state.SkipWithError("could not map the arena");
  const auto slot_of = [&](std::uint32_t id) { return (std::uint64_t{id} * 0x9e3779b97f4a7c15ull >> 20) & (slots - 1); };
  for (std::uint32_t id = 0; id < keys; ++id) {  // each key in its home slot or the next free one, as the table's probing
    std::size_t at = slot_of(id);
    while (index[at] != 0) at = (at + 1) & (slots - 1);
    index[at] = std::uint64_t{id} + 1;
    entries[id].key[0] = static_cast<std::uint8_t>(id);
  }
  const auto& seq = sequence(keys);
  std::size_t pos = 0;
  std::uint64_t seen = 0;
  for (auto _ : state) {
    std::size_t at[kBurst];
    Entry* e[kBurst];
    for (std::size_t k = 0; k < kBurst; ++k) {
      at[k] = slot_of(seq[pos + k]);
      __builtin_prefetch(&index[at[k]], 0, 3);
    }
    for (std::size_t k = 0; k < kBurst; ++k) {
      std::size_t p = at[k];
      while (index[p] != std::uint64_t{seq[pos + k]} + 1) p = (p + 1) & (slots - 1);
      e[k] = &entries[index[p] - 1];
      __builtin_prefetch(e[k], 1, 3);
      __builtin_prefetch(reinterpret_cast<const char*>(e[k]) + kLine, 1, 3);
    }
    for (std::size_t k = 0; k < kBurst; ++k) seen += e[k]->key[0];
    for (std::size_t k = 0; k < kBurst; ++k) {
      ++e[k]->state.last;
      ++e[k]->counters.packets[k % 3];
    }
    pos = (pos + kBurst) % kSequence;
  }
  benchmark::DoNotOptimize(seen);
  state.counters["huge_page_share"] = arena.huge_page_share();
  state.counters["ns_per_packet"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBurst), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Every packet a new key. Arg 0: into a table with room (capacity 16 Mi, started empty and refilled
// from empty whenever it fills); Arg 1: into a full table (capacity 1 Ki): every packet takes the
// fallback (the rule's aggregate meter).
void BM_key_flood(benchmark::State& state) {
  const bool into_full = state.range(0) == 1;
  const std::uint32_t capacity = into_full ? 1024 : (1u << 24);
  auto engine = make_engine(capacity);
  if (engine == nullptr) return state.SkipWithError("could not make the engine");
  Frames frames;
  Verdict verdicts[kBurst];
  std::uint32_t next = 0;
  std::uint64_t full = 0;
  for (auto _ : state) {
    if (!into_full && next + kBurst > capacity) {
      state.PauseTiming();
      engine = make_engine(capacity);
      next = 0;
      state.ResumeTiming();
      if (engine == nullptr) {
        state.SkipWithError("could not make the engine");
        break;
      }
    }
    const std::uint64_t now = rte_rdtsc();
    for (std::size_t k = 0; k < kBurst; ++k) frames.set(k, next++ % (1u << 28), now);
    engine->process(frames.views, verdicts);
    for (const Verdict& v : verdicts) full += v.table_full;
  }
  state.counters["ns_per_packet"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBurst), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["table_full_share"] = static_cast<double>(full) / static_cast<double>(state.iterations() * kBurst);
}

// A policy change on the control side with 10 Ki operator-like rules (a /32 destination each, UDP,
// a port): new rates only (arg 0: the classifier is kept) or one rule's port changed (arg 1: the
// classifier is built again). Each iteration publishes one change (alternately there and back) and
// reclaims the set it replaced.
Policy many_rules(std::uint64_t cir, std::uint16_t first_port) {
  Policy p;
  p.profiles.push_back({"p", policer::Params{policer::Algorithm::one_rate_two_color, policer::Unit::bytes, cir, 65536,
                                             0, 0, 0, 0}});
  for (std::uint32_t i = 0; i < 10240; ++i) {
    Rule r;
    r.name = "r" + std::to_string(i);
    r.profile = "p";
    Prefix dst;
    dst.address = {10, static_cast<std::uint8_t>(i >> 16), static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i)};
    dst.length = 32;
    r.match.dst = dst;
    r.match.protocol = 17;
    const auto port = static_cast<std::uint16_t>(i == 0 ? first_port : 53);
    r.match.dst_ports = {{port, port}};
    p.rules.push_back(r);
  }
  return p;
}

void BM_policy_update(benchmark::State& state) {
  const bool match_changes = state.range(0) != 0;
  const Policy a = many_rules(1'000'000, 53);
  const Policy b = match_changes ? many_rules(1'000'000, 54) : many_rules(2'000'000, 53);
  auto made = Engine::create(a, *policer::TickRate::make(rte_get_tsc_hz()));
  if (!made) return state.SkipWithError(made.error().message.c_str());
  Engine& engine = **made;
  const std::uint64_t builds = engine.classifier_builds();
  bool to_b = true;
  for (auto _ : state) {  // one update per iteration, alternating between the two policies
    if (!engine.update(to_b ? b : a)) return state.SkipWithError("update refused");
    engine.reclaim();
    to_b = !to_b;
  }
  state.counters["classifier_builds_per_update"] =
      static_cast<double>(engine.classifier_builds() - builds) / static_cast<double>(state.iterations());
}

BENCHMARK(BM_engine_per_key)->Arg(1)->Arg(4096)->Arg(65536)->Arg(1 << 20)->Arg(1 << 24)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_engine_per_key_huge_pages)->Arg(4096)->Arg(65536)->Arg(1 << 20)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_engine_per_key_not_plain)->ArgsProduct({{4096}, {0, kBurst - 1}, {0, 1}})->Unit(benchmark::kNanosecond);
BENCHMARK(BM_engine_aggregate)->Arg(4096)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_engine_flows)->ArgsProduct({{4096, 1 << 20}, {0, 1}})->Unit(benchmark::kNanosecond);
BENCHMARK(BM_engine_shaping)->ArgsProduct({{0, 4096, 1 << 20}, {0, 1, 2}})->Unit(benchmark::kNanosecond);
BENCHMARK(BM_engine_per_key_daemon_index)->Arg(4096)->Arg(1 << 20)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_engine_sent_whole)->Args({4096, 0})->Args({4096, 1})->Args({1 << 20, 1})->Unit(benchmark::kNanosecond);
BENCHMARK(BM_engine_acl_rules)->ArgsProduct({{0, 1, 2}, {0, 1}, {4096, 1 << 20}})->Unit(benchmark::kNanosecond);
BENCHMARK(BM_memory_floor)->Arg(4096)->Arg(65536)->Arg(1 << 20)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_bare_meter)->Arg(1)->Arg(4096)->Arg(65536)->Arg(1 << 20)->Arg(1 << 24)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_key_flood)->Arg(0)->Arg(1)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_policy_update)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  auto eal = MemoryOnlyEal::init("tricolor-bench-engine");
  if (!eal) {
    std::fprintf(stderr, "tricolor-bench-engine: %s\n", eal.error().message.c_str());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
