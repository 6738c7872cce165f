#include "dataplane/engine/exact_match.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace tricolor::dataplane {
namespace {
constexpr std::uint32_t kAnyIngressFirst = 0, kAnyIngressLast = UINT32_MAX;
constexpr std::uint16_t kAnyPortFirst = 0, kAnyPortLast = 65535;
constexpr std::size_t kMinSlots = 8;
// An entry's port and ingress ranges are put in the table value by value (the language's lists of
// single ports become ranges where values are adjacent: 80,81 is 80-81): at most this many keys an
// entry, or the set takes the trie.
constexpr std::uint64_t kMaxKeysPerEntry = 64;

// A field that is a few values (one, or a short range), or any; anything else has no exact shape.
enum class Exactness { values, any, range };
template <typename T>
Exactness exactness(T first, T last, T any_first, T any_last) noexcept {
  if (first == any_first && last == any_last) return Exactness::any;
  if (std::uint64_t{last} - first < kMaxKeysPerEntry) return Exactness::values;
  return Exactness::range;
}
}  // namespace

std::optional<ExactMatch::Shape> ExactMatch::shape_of(const Classifier::ScanEntry& e, bool ipv6) noexcept {
  Shape s{};
  const unsigned words = ipv6 ? 4 : 1;
  for (unsigned w = 0; w < words; ++w) s.src_mask[w] = e.src_mask[w], s.dst_mask[w] = e.dst_mask[w];
  s.vlan_dscp_mask = e.vlan_dscp_mask;
  s.protocol_mask = e.protocol_mask;
  const Exactness ingress = exactness(e.ingress_first, e.ingress_last, kAnyIngressFirst, kAnyIngressLast);
  const Exactness src_port = exactness(e.src_first, e.src_last, kAnyPortFirst, kAnyPortLast);
  const Exactness dst_port = exactness(e.dst_first, e.dst_last, kAnyPortFirst, kAnyPortLast);
  if (ingress == Exactness::range || src_port == Exactness::range || dst_port == Exactness::range) return std::nullopt;
  s.ingress_exact = ingress == Exactness::values;
  s.src_port_exact = src_port == Exactness::values;
  s.dst_port_exact = dst_port == Exactness::values;
  // The keys the entry puts in the table: one per combination of its values.
  const auto count = [](bool exact, std::uint64_t first, std::uint64_t last) { return exact ? last - first + 1 : 1; };
  const std::uint64_t keys = count(s.ingress_exact, e.ingress_first, e.ingress_last) *
                             count(s.src_port_exact, e.src_first, e.src_last) *
                             count(s.dst_port_exact, e.dst_first, e.dst_last);
  if (keys > kMaxKeysPerEntry) return std::nullopt;
  return s;
}

bool ExactMatch::same_shape(const Shape& a, const Shape& b) noexcept {
  return std::equal(a.src_mask, a.src_mask + 4, b.src_mask) && std::equal(a.dst_mask, a.dst_mask + 4, b.dst_mask) &&
         a.vlan_dscp_mask == b.vlan_dscp_mask && a.protocol_mask == b.protocol_mask &&
         a.ingress_exact == b.ingress_exact && a.src_port_exact == b.src_port_exact && a.dst_port_exact == b.dst_port_exact;
}

std::unique_ptr<ExactMatch> ExactMatch::build(std::span<const Classifier::ScanEntry> entries, bool ipv6) {
  if (entries.empty()) return nullptr;
  std::unique_ptr<ExactMatch> table(new ExactMatch());
  const auto first = shape_of(entries[0], ipv6);
  if (!first) return nullptr;
  table->shape_ = *first;
  for (const Classifier::ScanEntry& e : entries) {
    const auto shape = shape_of(e, ipv6);
    if (!shape || !same_shape(*shape, table->shape_)) return nullptr;
  }
  const Shape& shape = table->shape_;
  std::size_t keys = 0;
  for (const Classifier::ScanEntry& e : entries) {
    keys += (shape.ingress_exact ? e.ingress_last - e.ingress_first + 1 : 1) *
            (shape.src_port_exact ? e.src_last - e.src_first + 1u : 1u) *
            (shape.dst_port_exact ? e.dst_last - e.dst_first + 1u : 1u);
  }
  table->slots_.resize(std::bit_ceil(std::max(kMinSlots, 2 * keys)));
  for (Slot& slot : table->slots_) slot.rule = kNoRule;
  table->mask_ = table->slots_.size() - 1;
  for (const Classifier::ScanEntry& e : entries) {
    // Each combination of the entry's values is a packet that matches it exactly, keyed as one.
    Parsed p;
    p.l3 = ipv6 ? L3::ipv6 : L3::ipv4;
    for (unsigned w = 0; w < (ipv6 ? 4u : 1u); ++w) {
      const std::uint32_t src = __builtin_bswap32(e.src[w]), dst = __builtin_bswap32(e.dst[w]);
      std::memcpy(p.src.data() + 4 * w, &src, 4);
      std::memcpy(p.dst.data() + 4 * w, &dst, 4);
    }
    p.protocol = e.protocol;
    const std::uint32_t ingress_last = shape.ingress_exact ? e.ingress_last : e.ingress_first;
    const std::uint32_t src_last = shape.src_port_exact ? e.src_last : e.src_first;
    const std::uint32_t dst_last = shape.dst_port_exact ? e.dst_last : e.dst_first;
    for (std::uint64_t ingress = e.ingress_first; ingress <= ingress_last; ++ingress)
      for (std::uint32_t src = e.src_first; src <= src_last; ++src)
        for (std::uint32_t dst = e.dst_first; dst <= dst_last; ++dst) {
          p.src_port = static_cast<std::uint16_t>(src);
          p.dst_port = static_cast<std::uint16_t>(dst);
          table->insert(p, static_cast<std::uint32_t>(ingress), e.vlan_dscp, e.rule);
        }
  }
  return table;
}

// The first entry of a key keeps it: the first rule that matches.
void ExactMatch::insert(const Parsed& p, std::uint32_t ingress, std::uint32_t vlan_dscp, std::uint32_t rule) noexcept {
  std::uint64_t key[kKeyWords];
  const std::uint64_t h = hash(p, ingress, vlan_dscp, key);
  for (std::size_t pos = h & mask_;; pos = (pos + 1) & mask_) {
    Slot& slot = slots_[pos];
    if (slot.rule == kNoRule) {
      std::copy(key, key + kKeyWords, slot.key);
      slot.rule = rule;
      return;
    }
    if (std::equal(key, key + kKeyWords, slot.key)) return;
  }
}

}  // namespace tricolor::dataplane
