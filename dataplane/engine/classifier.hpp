#pragma once
// First-match-wins classification of a policy's rules, on DPDK's rte_acl: a multi-bit trie over the
// match fields whose lookup cost does not grow with the number of rules. One context for IPv4 and one
// for IPv6 (a rule without prefixes goes into both). A Classifier is immutable once built: a changed
// rule set is built aside and swapped in, so packet processing never waits for a build.
//
// A rule becomes trie entries: its match lists are merged (repeated, overlapping and adjacent port
// values and ranges joined; DSCP values packed into aligned value/mask blocks), then crossed: ingress
// port ranges x source port ranges x destination port ranges x DSCP blocks, once per address family
// the rule applies to. The counts are taken after merging, saturating (they cannot wrap), and checked
// before anything is expanded, so a hostile rule or rule set is refused without being built.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/policy.hpp"
#include "policer/expected.hpp"

struct rte_acl_ctx;

namespace tricolor::dataplane {

inline constexpr std::uint32_t kNoRule = UINT32_MAX;

// A rule may expand to at most this many entries per address family (its cross product after merging).
inline constexpr std::size_t kMaxEntriesPerRule = 65536;

// The trie entries of a whole rule set (both families), by default; an operator may raise it. rte_acl's
// build time and memory grow with the entries, and with their shape: the worst shape measured (as
// many disjoint source ports as a rule can have, crossed with DSCP blocks) takes about 5 KiB and
// 30 us per entry, so ~4 s and a 640 MiB peak at this many, 5 GiB at 1 Mi; 10 Ki operator-like rules
// are 12 790 entries (README, "Classifier limits"; bench/classify_bench.cpp, BM_build).
inline constexpr std::size_t kDefaultMaxClassifierEntries = 131072;

struct ClassifierLimits {
  std::size_t max_entries = kDefaultMaxClassifierEntries;  // trie entries of the rule set, both families
};

class Classifier {
 public:
  // Needs the EAL (rte_acl allocates its tables from DPDK's heap, its build scratch from the C heap).
  // Errors: a rule over kMaxEntriesPerRule (naming it and each factor), a rule set over
  // limits.max_entries (naming the total and the biggest rules), or memory that cannot be had (the
  // same figures and "out of memory"); never an exception, and nothing half-built is kept.
  static Expected<std::unique_ptr<Classifier>> build(std::span<const Rule> rules, const ClassifierLimits& limits = {});
  ~Classifier();
  Classifier(const Classifier&) = delete;
  Classifier& operator=(const Classifier&) = delete;

  // For each packet, the index of the first rule it matches, or kNoRule. Packets that are not IP or
  // failed to parse match nothing. At most kMaxBurst packets.
  void classify(std::span<const PacketView> views, std::span<const Parsed> parsed, std::span<std::uint32_t> rules) const;

  std::size_t entries() const noexcept { return entries_; }  // trie entries after merging, both families

  static constexpr std::size_t kMaxBurst = 64;

 private:
  Classifier() = default;
  rte_acl_ctx* ipv4_ = nullptr;
  rte_acl_ctx* ipv6_ = nullptr;
  std::size_t entries_ = 0;
};

}  // namespace tricolor::dataplane
