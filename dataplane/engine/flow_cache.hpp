#pragma once
// A worker's exact-match flow cache in front of the classifier, in the manner of Open vSwitch's EMC:
// the fields any rule can match (family, addresses, protocol, ports, ingress port, VLAN, DSCP) → the
// rule they matched (or kNoRule) under the rule set of one generation. A hit skips the classifier
// (rte_acl: 37-60 ns a packet on the project's VM, bench/classify_bench.cpp); a miss classifies as
// before and may insert.
//
// Never stale: an entry holds the generation of the set it was classified under, and a lookup under
// any other set misses (a new set is the only way a packet's rule changes). What follows the rule (the
// key, its owner, its entry in the key table) is worked out from the packet as without the cache, so
// key expiry, renewal and moves between workers never meet a cached value.
//
// Layout: a power of two of 64-byte entries (the worker's memory source), each holding the 48 bytes
// of fields, the generation's low 32 bits and the rule. A flow has two candidate entries, at two
// positions taken from one hash under the cache's own secret (flows cannot be chosen offline to
// collide). Insertion resists thrashing: a miss takes a candidate that is empty or of an older set; if
// both are live, it replaces one only with probability 1/kInsertInverseProbability, so that a flood of
// new flows (more than the cache holds) leaves most established flows cached and costs a write on few
// of its misses.
//
// Measured (tricolor-bench-engine BM_engine_acl_rules, 1 Ki rules in rte_acl's trie, issue 23): on the
// project's 2-core VM, at 4 Ki flows (99% hits) a packet costs 0-9% less than without the cache, at 1
// Mi flows (nearly all misses: two probes of a cold cache) up to 37% more; on a 16-core Xeon, where
// rte_acl is slower, one run gave 109 -> 65 ns at 4 Ki flows. So it is off unless asked for
// (EngineLimits::flow_cache_entries; --flow-cache-entries in tricolord and tricolor-replay). Caching
// the key entry as well would not add much: the key table is itself an exact-match hash of the per-key
// rule's fields, so its probe would only be traded for this one.
//
// Owned by one worker: no lock, no atomic but the counters others read.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "dataplane/engine/classifier.hpp"
#include "dataplane/engine/memory_source.hpp"
#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/secret_hash.hpp"

namespace tricolor::dataplane {

inline constexpr std::size_t kMaxFlowCacheEntries = std::size_t{1} << 24;
inline constexpr std::size_t kSuggestedFlowCacheEntries = 8192;  // 512 KiB a worker; twice 4 Ki flows

struct FlowCacheCounters {  // per worker; written by it once per burst, read by anyone
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> misses{0};    // classified by the classifier
  std::atomic<std::uint64_t> inserts{0};   // misses written into the cache
};

class FlowCache {
 public:
  static constexpr std::size_t kMaxBurst = Classifier::kMaxBurst;
  static constexpr std::uint32_t kInsertInverseProbability = 32;  // a power of two

  // What a rule can match, as the classifier sees it, in six words built from the parsed packet: the
  // source and destination addresses (IPv4: the first 4 bytes of each, the rest zero), then
  // src_port | dst_port << 16 | ingress << 32 | vlan << 48 (vlan: kTagged | id, 0 untagged), then
  // protocol | dscp << 8 | family << 16 (family 4 or 6; 0 only in an empty entry, which no packet's
  // fields equal).
  static constexpr std::size_t kFieldWords = 6;
  using Fields = std::uint64_t[kFieldWords];
  static constexpr std::uint64_t kTagged = 0x8000;

  struct alignas(64) Entry {
    std::uint64_t fields[kFieldWords];
    std::uint32_t generation;  // the set's generation, low 32 bits
    std::uint32_t rule;
    std::uint64_t unused;
  };
  static_assert(sizeof(Entry) == 64);

  // entries: a power of two (2 .. kMaxFlowCacheEntries), from `source` (the worker's: DPDK's heap on
  // its socket in the daemon), which must outlive the cache; nullptr if it is not or cannot be had.
  static std::unique_ptr<FlowCache> make(std::size_t entries, MemorySource& source = heap_memory());

  // rules[i] for each packet, as classifier.classify() would give them under the set of `generation`:
  // from the cache where it holds the packet's fields under that generation, else from the classifier
  // (the misses in one call), which may insert them. Packets that did not parse as IP: kNoRule.
  void classify(const Classifier& classifier, std::uint64_t generation, std::span<const PacketView> views,
                std::span<const Parsed> parsed, std::span<std::uint32_t> rules) noexcept;

  std::size_t entries() const noexcept { return mask_ + 1; }
  std::size_t memory_bytes() const noexcept { return entries() * sizeof(Entry); }
  const FlowCacheCounters& counters() const noexcept { return counters_; }

  static void fields_of(const PacketView& view, const Parsed& parsed, Fields& out) noexcept;

  ~FlowCache();
  FlowCache(const FlowCache&) = delete;
  FlowCache& operator=(const FlowCache&) = delete;

 private:
  FlowCache(Entry* entries, std::size_t count, MemorySource& source) noexcept;
  static bool same(const Fields& a, const Fields& b) noexcept;
  void insert(const Fields& fields, std::uint64_t hash, std::uint32_t generation, std::uint32_t rule) noexcept;
  std::size_t first_slot(std::uint64_t hash) const noexcept { return hash & mask_; }
  std::size_t second_slot(std::uint64_t hash) const noexcept { return (hash >> 32) & mask_; }
  std::uint64_t next_random() noexcept;

  Entry* entries_;
  std::size_t mask_;
  MemorySource* source_;
  SecretHash<kFieldWords * 8> hash_;
  std::uint64_t random_;  // xorshift64 state, seeded from the kernel's random source
  FlowCacheCounters counters_;
};

}  // namespace tricolor::dataplane
