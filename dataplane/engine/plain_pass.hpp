#pragma once
// A worker's plain burst (worker.cpp, Worker::process; doc/engine.md, *Classify*): the one pass over a
// burst of plain IPv4 frames under a set of one IPv4 entry, which classifies, keys, hashes and measures
// each packet from its frame and builds no Parsed. Included by worker.cpp only.
#include <algorithm>
#include <array>
#include <cstdint>
#include <new>
#include <span>

#include "dataplane/engine/classifier.hpp"
#include "dataplane/engine/keys.hpp"
#include "dataplane/engine/parse.hpp"
#include "dataplane/engine/rule_set.hpp"
#include "dataplane/engine/worker.hpp"

namespace tricolor::dataplane::plain {

inline constexpr std::size_t kPrefetchAhead = 4;  // frames whose first line is fetched while reading them

// What process() fills for a burst, by each packet's place in it: its arrival, metered length and
// input color; the packets metered here, grouped by rule (their places); the keys of per-key rules'
// packets (a plain burst's as their two words only: Worker::Ipv4KeyWords), and a uniform burst's
// hashes of them in the order metered (its one group's).
struct BurstArrays {
  std::uint64_t times[Worker::kMaxBurst];
  std::uint32_t lengths[Worker::kMaxBurst];
  Color in[Worker::kMaxBurst];
  std::uint8_t order[Worker::kMaxBurst];
  MeterKey keys[Worker::kMaxBurst];
  std::uint64_t key_hashes[Worker::kMaxBurst];
  Worker::Ipv4KeyWords key_words;
};

// Every place in a burst, in order: a plain burst's group.
inline constexpr auto kInOrder = [] {
  std::array<std::uint8_t, Worker::kMaxBurst> places{};
  for (std::size_t i = 0; i < Worker::kMaxBurst; ++i) places[i] = static_cast<std::uint8_t>(i);
  return places;
}();

// A plain burst's one pass (Worker::process says when): true if every frame is plain IPv4 and matched
// by the set's only entry, with its key's words made, hashed and its index line fetched,
// its length, input color (green: the rule is blind), place and arrival in `arrays`, and the earliest
// and latest arrival. False at the first frame that is not, what it wrote before then to be written
// again by the parse. The verdicts are process()'s to write (it may leave a whole burst's unwritten).
// Apart from process(), and hot: inlined there, GCC took it for a cold path and compiled its stores of
// zeros (a fresh verdict, a key's zero tail) as `rep stos`, a microcoded string store, and spilled;
// the arrays in one object: one register for all of them.
template <bool kKeyed, LengthBase kBase>
[[gnu::noinline, gnu::hot]] bool pass(const Classifier::OnlyEntry& only, const CompiledRule& rule,
                                            const KeyedMeters* table, std::span<const PacketView> burst,
                                            BurstArrays& arrays, std::uint64_t& earliest_out,
                                            std::uint64_t& latest_out) noexcept {
  // The entry's words (in a local read through a laundered reference, which GCC does not see through)
  // and the rule's fields read through references: loaded again for every packet (the key's byte
  // stores may alias them), each an operand of the one instruction that uses it. As locals of their
  // own they took registers the loop has too few of, and GCC 12 spilled others: 6 instructions more a
  // packet (bench/instructions.py engine, issue 23).
  struct Invariants {
    std::uint64_t addresses_wanted, addresses_mask;
    std::uint8_t protocol, protocol_mask;
  };
  const Invariants invariants{Classifier::OnlyEntry::address_word(only.src, only.dst),
                              Classifier::OnlyEntry::address_word(only.src_mask, only.dst_mask), only.protocol,
                              only.protocol_mask};
  const Invariants& entry = *std::launder(&invariants);
  const KeyShape& shape = rule.key_shape;
  const std::int32_t& adjust = rule.length.adjust;
  const PacketView* const views = burst.data();
  const std::size_t n = burst.size();
  const auto take = [&](std::size_t i) __attribute__((always_inline)) {
    const PacketView& view = views[i];
    PlainIpv4 frame;
    if (!plain_ipv4(view, frame)) [[unlikely]] return false;
    // First what needs the frame's length: its value is dead by the hash below (GCC spilled it).
    arrays.lengths[i] = metered_length<kBase>(view, static_cast<std::uint16_t>(frame.total_length), adjust);
    arrays.times[i] = view.arrival;
    const std::uint64_t addresses = frame.addresses();
    if (!Classifier::OnlyEntry::matches_words(frame.protocol, addresses, entry.protocol, entry.protocol_mask,
                                              entry.addresses_wanted, entry.addresses_mask)) [[unlikely]]
      return false;
    if constexpr (kKeyed) {
      // The key's two words alone (no 40-byte key stored with its zero tail: 3 stores, and a pointer
      // of its own for its stride, which GCC spilled others for).
      std::uint64_t pair[2];
      ipv4_key_words(shape, frame.protocol, frame.raw_ports(), addresses, pair);
      arrays.key_words[0][i] = pair[0];
      arrays.key_words[1][i] = pair[1];
      const std::uint64_t hash = table->hash_of_pair(pair[0], pair[1]);
      arrays.key_hashes[i] = hash;
      table->prefetch(hash);
    }
    return true;
  };
  // Two loops, so that the prefetch needs no bound test a packet.
  const std::size_t prefetching = n > kPrefetchAhead ? n - kPrefetchAhead : 0;
  for (std::size_t i = 0; i < prefetching; ++i) {
    __builtin_prefetch(views[i + kPrefetchAhead].data);
    if (!take(i)) [[unlikely]] return false;
  }
  for (std::size_t i = prefetching; i < n; ++i)
    if (!take(i)) [[unlikely]] return false;
  // The earliest and latest arrival and the rest apart: fewer values live in the loop
  // above, whose registers GCC spills already. In the daemon every packet of a burst arrives at its one
  // clock read: a test of that (an OR of differences, 1.5 instructions a packet) instead of the minimum
  // and maximum (9; issue 23's bench/instructions.py engine), which only bursts of a capture need.
  std::uint64_t earliest = UINT64_MAX, latest = 0;
  if (n != 0) {
    const std::uint64_t first = arrays.times[0];
    std::uint64_t differ = 0;
    for (std::size_t i = 1; i < n; ++i) differ |= arrays.times[i] ^ first;
    earliest = latest = first;
    if (differ != 0) [[unlikely]] {
      for (std::size_t i = 1; i < n; ++i) {
        earliest = std::min(earliest, arrays.times[i]);
        latest = std::max(latest, arrays.times[i]);
      }
    }
  }
  std::fill_n(arrays.in, n, Color::green);
  std::copy_n(kInOrder.begin(), n, arrays.order);
  earliest_out = earliest;
  latest_out = latest;
  return true;
}

}  // namespace tricolor::dataplane::plain
