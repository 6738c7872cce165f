#pragma once
// First-match-wins classification of a policy's rules, on DPDK's rte_acl: a multi-bit trie over the
// match fields whose lookup cost does not grow with the number of rules. One context for IPv4 and one
// for IPv6 (a rule without prefixes goes into both). A Classifier is immutable once built: a changed
// rule set is built aside and swapped in, so packet processing never waits for a build.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "dataplane/packet.hpp"
#include "dataplane/policy.hpp"
#include "policer/expected.hpp"

struct rte_acl_ctx;

namespace tricolor::dataplane {

inline constexpr std::uint32_t kNoRule = UINT32_MAX;

// A rule's match lists (ports, port ranges, DSCP values) are expanded into their cross product of trie
// entries; a rule may expand to at most this many.
inline constexpr std::size_t kMaxEntriesPerRule = 65536;

class Classifier {
 public:
  // Needs the EAL (rte_acl allocates from DPDK's heap). Errors name the rule at fault.
  static Expected<std::unique_ptr<Classifier>> build(std::span<const Rule> rules);
  ~Classifier();
  Classifier(const Classifier&) = delete;
  Classifier& operator=(const Classifier&) = delete;

  // For each packet, the index of the first rule it matches, or kNoRule. Packets that are not IP or
  // failed to parse match nothing. At most kMaxBurst packets.
  void classify(std::span<const PacketView> views, std::span<const Parsed> parsed, std::span<std::uint32_t> rules) const;

  std::size_t entries() const noexcept { return entries_; }  // trie entries after expansion

  static constexpr std::size_t kMaxBurst = 64;

 private:
  Classifier() = default;
  rte_acl_ctx* ipv4_ = nullptr;
  rte_acl_ctx* ipv6_ = nullptr;
  std::size_t entries_ = 0;
};

}  // namespace tricolor::dataplane
