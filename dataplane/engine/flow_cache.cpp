#include "dataplane/engine/flow_cache.hpp"

#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tricolor::dataplane {

std::unique_ptr<FlowCache> FlowCache::make(std::size_t entries, MemorySource& source) {
  if (entries < 2 || entries > kMaxFlowCacheEntries || !std::has_single_bit(entries)) return nullptr;
  // Zeroed: family 0, an empty entry, equal to no packet's fields.
  void* memory = source.allocate(entries * sizeof(Entry), alignof(Entry));
  if (memory == nullptr) return nullptr;
  std::unique_ptr<FlowCache> cache(new (std::nothrow) FlowCache(static_cast<Entry*>(memory), entries, source));
  if (cache == nullptr) source.release(memory, entries * sizeof(Entry));
  return cache;
}

FlowCache::FlowCache(Entry* entries, std::size_t count, MemorySource& source) noexcept
    : entries_(entries), mask_(count - 1), source_(&source) {
  secret_words(&random_, 1);
  random_ |= 1;  // xorshift's state is never zero
}

FlowCache::~FlowCache() { source_->release(entries_, memory_bytes()); }

void FlowCache::fields_of(const PacketView& view, const Parsed& parsed, Fields& out) noexcept {
  const bool ipv6 = parsed.l3 == L3::ipv6;
  if (ipv6) {
    std::memcpy(&out[0], parsed.src.data(), 16);
    std::memcpy(&out[2], parsed.dst.data(), 16);
  } else {
    std::uint32_t src, dst;
    std::memcpy(&src, parsed.src.data(), 4);
    std::memcpy(&dst, parsed.dst.data(), 4);
    out[0] = src, out[1] = 0, out[2] = dst, out[3] = 0;
  }
  const std::uint64_t vlan = parsed.has_vlan ? (kTagged | parsed.vlan_id) : 0;
  out[4] = std::uint64_t{parsed.src_port} | std::uint64_t{parsed.dst_port} << 16 | std::uint64_t{view.port} << 32 |
           vlan << 48;
  out[5] = std::uint64_t{parsed.protocol} | std::uint64_t{parsed.dscp} << 8 | std::uint64_t{ipv6 ? 6u : 4u} << 16;
}

bool FlowCache::same(const Fields& a, const Fields& b) noexcept {
  std::uint64_t differ = 0;
  for (std::size_t i = 0; i < kFieldWords; ++i) differ |= a[i] ^ b[i];
  return differ == 0;
}

std::uint64_t FlowCache::next_random() noexcept {
  random_ ^= random_ << 13;
  random_ ^= random_ >> 7;
  random_ ^= random_ << 17;
  return random_;
}

void FlowCache::insert(const Fields& fields, std::uint64_t hash, std::uint32_t generation, std::uint32_t rule) noexcept {
  Entry* first = &entries_[first_slot(hash)];
  Entry* second = &entries_[second_slot(hash)];
  // The same flow twice in one burst: its first miss inserted it.
  if ((first->generation == generation && same(first->fields, fields)) ||
      (second->generation == generation && same(second->fields, fields)))
    return;
  Entry* victim = nullptr;
  if (first->generation != generation || first->fields[5] == 0) victim = first;
  else if (second->generation != generation || second->fields[5] == 0) victim = second;
  else {
    const std::uint64_t r = next_random();
    if ((r & (kInsertInverseProbability - 1)) != 0) return;
    victim = (r & kInsertInverseProbability) != 0 ? first : second;
  }
  std::memcpy(victim->fields, fields, sizeof(Fields));
  victim->generation = generation;
  victim->rule = rule;
  counters_.inserts.store(counters_.inserts.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void FlowCache::classify(const Classifier& classifier, std::uint64_t set_generation, std::span<const PacketView> views,
                         std::span<const Parsed> parsed, std::span<std::uint32_t> rules) noexcept {
  const std::size_t n = std::min(views.size(), kMaxBurst);
  const auto generation = static_cast<std::uint32_t>(set_generation);
  Fields fields[kMaxBurst];
  std::uint64_t hashes[kMaxBurst];
  bool ip[kMaxBurst];
  // Fields and hash of each IP packet, both candidate entries prefetched; then each looked up as its
  // lines arrive.
  for (std::size_t i = 0; i < n; ++i) {
    ip[i] = parsed[i].error == ParseError::none && parsed[i].l3 != L3::none;
    rules[i] = kNoRule;
    if (!ip[i]) continue;
    fields_of(views[i], parsed[i], fields[i]);
    hashes[i] = hash_.of_words(fields[i]);
    __builtin_prefetch(&entries_[first_slot(hashes[i])]);
    __builtin_prefetch(&entries_[second_slot(hashes[i])]);
  }
  PacketView miss_views[kMaxBurst];
  alignas(Parsed) std::byte miss_storage[sizeof(Parsed) * kMaxBurst];
  Parsed* const miss_parsed = reinterpret_cast<Parsed*>(miss_storage);
  std::uint8_t miss_slot[kMaxBurst];
  std::size_t misses = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!ip[i]) continue;
    const Entry& first = entries_[first_slot(hashes[i])];
    if (first.generation == generation && same(first.fields, fields[i])) {
      rules[i] = first.rule;
      continue;
    }
    const Entry& second = entries_[second_slot(hashes[i])];
    if (second.generation == generation && same(second.fields, fields[i])) {
      rules[i] = second.rule;
      continue;
    }
    miss_views[misses] = views[i];
    ::new (static_cast<void*>(&miss_parsed[misses])) Parsed(parsed[i]);
    miss_slot[misses++] = static_cast<std::uint8_t>(i);
  }
  std::size_t hits = 0;
  for (std::size_t i = 0; i < n; ++i) hits += ip[i];
  hits -= misses;
  if (hits != 0) counters_.hits.store(counters_.hits.load(std::memory_order_relaxed) + hits, std::memory_order_relaxed);
  if (misses == 0) return;
  counters_.misses.store(counters_.misses.load(std::memory_order_relaxed) + misses, std::memory_order_relaxed);
  std::uint32_t miss_rules[kMaxBurst];
  classifier.classify(std::span<const PacketView>(miss_views, misses), std::span<const Parsed>(miss_parsed, misses),
                      std::span<std::uint32_t>(miss_rules, misses));
  for (std::size_t j = 0; j < misses; ++j) {
    const std::size_t i = miss_slot[j];
    rules[i] = miss_rules[j];
    insert(fields[i], hashes[i], generation, miss_rules[j]);
  }
}

}  // namespace tricolor::dataplane
