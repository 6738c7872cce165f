#pragma once
// The classifier for a rule set of one shape (classifier.hpp): when every entry of a family matches
// the same fields the same way (each address under the same mask, each port field and the ingress
// port either a few values or any, the same VLAN/DSCP bits, the protocol or not), a packet's rule is a
// hash lookup of its fields under that shape: one probe instead of rte_acl's trie walk. The usual
// operator policy is of this shape: a /32 (or a /24, or a /128) per customer, a protocol, a port.
//
// Built on the control side from the entries in rule order, each combination of an entry's values one
// key (at most 64 keys an entry: a list of ports such as 80,81 arrives merged into 80-81); the first
// entry of a key keeps it, so the lookup gives the first rule that matches, as the trie and the scan
// do. Open addressing over 64-byte slots, at least twice as many as keys, under a secret hash (keys
// cannot be chosen to collide).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "dataplane/engine/classifier.hpp"
#include "dataplane/engine/secret_hash.hpp"

namespace tricolor::dataplane {

class ExactMatch {
 public:
  static constexpr std::size_t kKeyWords = 6;

  // The table for one family's entries (Classifier::ScanEntry, in rule order), or nullptr if they do
  // not share one shape. Throws std::bad_alloc.
  static std::unique_ptr<ExactMatch> build(std::span<const Classifier::ScanEntry> entries, bool ipv6);

  // The packet path, inline (the build keys the entries with it too): a parsed IP packet's key under
  // the shape (masked addresses and bits, exact ports and ingress, zero for "any"; vlan_dscp packed as
  // the classifier packs it), its hash, its slot fetched, its rule.
  std::uint64_t hash(const Parsed& p, std::uint32_t ingress, std::uint32_t vlan_dscp,
                     std::uint64_t (&key)[kKeyWords]) const noexcept {
    const Shape& s = shape_;
    std::uint32_t src[4] = {}, dst[4] = {};
    const unsigned words = p.l3 == L3::ipv6 ? 4 : 1;
    for (unsigned w = 0; w < words; ++w) {
      std::memcpy(&src[w], p.src.data() + 4 * w, 4);
      std::memcpy(&dst[w], p.dst.data() + 4 * w, 4);
    }
    const auto pair = [](std::uint32_t hi, std::uint32_t lo) { return std::uint64_t{hi} << 32 | lo; };
    key[0] = pair(__builtin_bswap32(src[0]) & s.src_mask[0], __builtin_bswap32(src[1]) & s.src_mask[1]);
    key[1] = pair(__builtin_bswap32(src[2]) & s.src_mask[2], __builtin_bswap32(src[3]) & s.src_mask[3]);
    key[2] = pair(__builtin_bswap32(dst[0]) & s.dst_mask[0], __builtin_bswap32(dst[1]) & s.dst_mask[1]);
    key[3] = pair(__builtin_bswap32(dst[2]) & s.dst_mask[2], __builtin_bswap32(dst[3]) & s.dst_mask[3]);
    key[4] = pair(s.ingress_exact ? ingress : 0, vlan_dscp & s.vlan_dscp_mask);
    key[5] = std::uint64_t{s.src_port_exact ? p.src_port : 0u} << 32 |
             std::uint64_t{s.dst_port_exact ? p.dst_port : 0u} << 16 | (p.protocol & s.protocol_mask);
    return hash_.of_words(key);
  }
  // Always inlined, or GCC deletes its calls (key_table.hpp, KeyTable::prefetch, says why).
  [[gnu::always_inline]] void prefetch(std::uint64_t hash) const noexcept { __builtin_prefetch(&slots_[hash & mask_]); }
  std::uint32_t lookup(const std::uint64_t (&key)[kKeyWords], std::uint64_t hash) const noexcept {
    for (std::size_t pos = hash & mask_;; pos = (pos + 1) & mask_) {
      const Slot& slot = slots_[pos];
      if (slot.rule == kNoRule) return kNoRule;
      std::uint64_t differ = 0;
      for (std::size_t w = 0; w < kKeyWords; ++w) differ |= slot.key[w] ^ key[w];
      if (differ == 0) return slot.rule;
    }
  }


 private:
  struct Shape {
    std::uint32_t src_mask[4], dst_mask[4];
    std::uint32_t vlan_dscp_mask;
    std::uint8_t protocol_mask;
    bool ingress_exact, src_port_exact, dst_port_exact;
  };
  struct alignas(64) Slot {
    std::uint64_t key[kKeyWords];
    std::uint32_t rule;  // kNoRule: empty
  };
  static_assert(sizeof(Slot) == 64);

  static std::optional<Shape> shape_of(const Classifier::ScanEntry& e, bool ipv6) noexcept;
  static bool same_shape(const Shape& a, const Shape& b) noexcept;
  void insert(const Parsed& p, std::uint32_t ingress, std::uint32_t vlan_dscp, std::uint32_t rule) noexcept;

  Shape shape_{};
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  SecretHash<kKeyWords * 8> hash_;
};

}  // namespace tricolor::dataplane
