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
//
// A rule set of a few entries (the common policer: one rule, or a handful) is not put in a trie: the
// same entries are kept flat, in rule order, and each packet is compared with them one by one. rte_acl
// costs 18 to 40 ns per packet however few the rules (its key build, its transitions, its call per
// family); a scan of a few entries costs a few. Both read the same entries, so both give the same
// first match (tests/dataplane/engine/classifier_test.cpp runs its random rule sets both ways).
//
// A bigger rule set whose entries of each family all share one shape (every address under the same
// mask, each port field and the ingress port a few values or any, the same VLAN/DSCP bits: a /32 per
// customer with a protocol and a port, say) is not put in a trie either: a hash of the packet's fields
// under that shape finds its rule (exact_match.hpp), the first that matches, as the trie would.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/policy.hpp"
#include "policer/expected.hpp"

struct rte_acl_ctx;

namespace tricolor::dataplane {

class ExactMatch;

inline constexpr std::uint32_t kNoRule = UINT32_MAX;

// A rule may expand to at most this many entries per address family (its cross product after merging).
inline constexpr std::size_t kMaxEntriesPerRule = 65536;

// The trie entries of a whole rule set (both families), by default; an operator may raise it. rte_acl's
// build time and memory grow with the entries, and with their shape: the worst shape measured (as
// many disjoint source ports as a rule can have, crossed with DSCP blocks) takes about 5 KiB and
// 30 us per entry, so ~4 s and a 640 MiB peak at this many, 5 GiB at 1 Mi; 10 Ki operator-like rules
// are 12 790 entries (doc/benchmarks.md, "Classifier limits"; bench/classify_bench.cpp, BM_build).
inline constexpr std::size_t kDefaultMaxClassifierEntries = 131072;

// Up to this many entries (both families), a rule set is scanned instead of put in a trie. Measured
// with bench/classify_bench.cpp (BM_scan_or_trie: operator-like rules, 90% of packets matching one at
// random): the scan is ahead of rte_acl's 18-38 ns at every size up to 38 entries (4 ns at 2, 25 at 19,
// 31 at 38); 16 leaves room for sets whose packets mostly match late or not at all (a scan of them all).
inline constexpr std::size_t kDefaultScanEntries = 16;
// An operator may set it from 0 (never scanned) to this: past it a scan is never the faster.
inline constexpr std::size_t kMaxScanEntries = 256;
// From this many entries in a family, a rule set of one shape is hashed rather than scanned (unless the
// hash is off). BM_hash_or_trie/<1 hash, 2 scan>/<rules> (/32 destinations, UDP, a port; 90% of the
// packets matching one at random), best of three: 1, 2, 4, 8, 16 rules scanned in 4.7, 9.6, 13.5, 20.0,
// 27.5 ns, hashed in 10.7, 10.7, 10.3, 12.7, 14.2.
inline constexpr std::size_t kHashAheadOfScanEntries = 4;

struct ClassifierLimits {
  std::size_t max_entries = kDefaultMaxClassifierEntries;  // trie entries of the rule set, both families
  std::size_t scan_entries = kDefaultScanEntries;          // at most this many: scanned, no trie (0: never)
  bool exact_hash = true;  // more, all of one shape: a hash lookup (exact_match.hpp), no trie (false: a trie)
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

  // A set of one IPv4 entry that tests addresses and protocol alone, and no IPv6 entry (a set of one
  // rule such as `dst 172.16.0.0/16 proto udp`): a test a caller can make on each packet as it parses
  // it, giving what classify() gives. Its values and masks in network byte order, as Parsed holds
  // the addresses.
  struct OnlyEntry {
    std::uint32_t src = 0, src_mask = 0, dst = 0, dst_mask = 0;
    std::uint8_t protocol = 0, protocol_mask = 0;
    std::uint32_t rule = 0;
    [[gnu::always_inline]] std::uint32_t classify(const Parsed& p) const noexcept {
      std::uint32_t s, d;
      std::memcpy(&s, p.src.data(), sizeof s);
      std::memcpy(&d, p.dst.data(), sizeof d);
      return error_and_l3(p) == kIpv4Parsed && matches(p.protocol, s, d) ? rule : kNoRule;
    }
    // An IPv4 packet's protocol and addresses (network order): whether the entry matches them.
    [[gnu::always_inline]] bool matches(std::uint8_t p, std::uint32_t s, std::uint32_t d) const noexcept {
      return matches_words(p, address_word(s, d), protocol, protocol_mask, address_word(src, dst),
                           address_word(src_mask, dst_mask));
    }
    // The same with both addresses as one word, source in the low half (as an IPv4 header holds them,
    // read on a little-endian machine), and the entry's fields given apart, where the caller's loop
    // keeps them (worker.cpp's plain pass).
    static std::uint64_t address_word(std::uint32_t s, std::uint32_t d) noexcept {
      return std::uint64_t{s} | std::uint64_t{d} << 32;
    }
    [[gnu::always_inline]] static bool matches_words(std::uint8_t p, std::uint64_t addresses, std::uint8_t protocol,
                                                     std::uint8_t protocol_mask, std::uint64_t wanted,
                                                     std::uint64_t mask) noexcept {
      return (p & protocol_mask) == protocol && (addresses & mask) == wanted;
    }
  };
  // The set's only entry, or nullptr if it has another form.
  const OnlyEntry* only_entry() const noexcept { return only_ ? &*only_ : nullptr; }

  std::size_t entries() const noexcept { return entries_; }  // entries after merging, both families
  bool scanned() const noexcept { return scanned_; }          // no trie: the entries are scanned in order
  bool hashed() const noexcept { return exact4_ != nullptr || exact6_ != nullptr; }  // no trie: one shape

  static constexpr std::size_t kMaxBurst = 64;

  // One entry as the scan reads it: the fields of an rte_acl entry, in host order, each a value under
  // a mask or a range. IPv4 uses the first word of each address.
  struct ScanEntry {
    std::uint32_t src[4], src_mask[4], dst[4], dst_mask[4];
    std::uint32_t ingress_first, ingress_last;
    std::uint32_t vlan_dscp, vlan_dscp_mask;
    std::uint16_t src_first, src_last, dst_first, dst_last;
    std::uint8_t protocol, protocol_mask;
    std::uint32_t rule;
  };
  static_assert(sizeof(ScanEntry) == 96);

 private:
  Classifier() = default;
  void scan(std::span<const PacketView> views, std::span<const Parsed> parsed, std::span<std::uint32_t> rules) const noexcept;
  void look_up(std::span<const PacketView> views, std::span<const Parsed> parsed, std::span<std::uint32_t> rules) const noexcept;

  rte_acl_ctx* ipv4_ = nullptr;
  rte_acl_ctx* ipv6_ = nullptr;
  std::size_t entries_ = 0;
  bool scanned_ = false;
  std::vector<ScanEntry> scan4_, scan6_;  // in rule order (the first that matches wins)
  // A family whose entries all leave ports, ingress port, VLAN and DSCP open (as `dst 10.0.0.0/8 proto
  // udp` does) is scanned on its addresses and protocol alone.
  bool addresses_only4_ = false, addresses_only6_ = false;
  std::optional<OnlyEntry> only_;  // scanned, one IPv4 entry of addresses and protocol, no IPv6 one
  std::unique_ptr<ExactMatch> exact4_, exact6_;  // one shape: a hash table per family (none: no entry)
};

}  // namespace tricolor::dataplane
