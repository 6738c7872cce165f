#pragma once
// A worker's per-key rules (worker.hpp): a group of a burst metered on its rule's key table
// (meter_keyed: look-up, renewal, the meter's check, and the verdicts where it finishes the group),
// a max-flows rule's flows (track_flow), and the sweep of idle keys and flows (sweep_keys).
// Included by worker.cpp only, whose Worker::process calls them: in its translation unit, where GCC
// specializes meter_keyed for process()'s calls (as a .cpp of its own, 9 to 12 instructions a packet
// more: bench/instructions.py engine, issue 23).
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "dataplane/engine/worker.hpp"

namespace tricolor::dataplane {

namespace worker_keys {
inline constexpr std::size_t kSweepBudget = 64;  // key-table index slots examined per burst

// Closes a max-flows rule's flows that flow_table.expire_due() finds idle: each is subtracted from its
// key's count if that key is still in the life the flow opened in (a look-up, no creation); a key that
// expired took its count with it. `writing`: the entry the caller holds under its seqlock, if any.
struct SubtractExpired {
  KeyedMeters& keys;
  const PerKey& per;
  KeyedMeters::Entry* writing = nullptr;
  void operator()(const FlowTable::Flow& flow) const noexcept {
    MeterKey key;
    key_of_flow(per, flow.key, key);
    KeyedMeters::Entry* e = keys.find(key, keys.hash(key));
    if (e == nullptr || e->counters.incarnation != flow.incarnation) return;
    if (e == writing) {  // a second begin_write would make its version even mid-write
      --e->counters.open_flows;
      return;
    }
    KeyedMeters::begin_write(*e);
    --e->counters.open_flows;
    KeyedMeters::end_write(*e);
  }
};
}  // namespace worker_keys

inline std::size_t Worker::meter_keyed(const RuleSet& set, std::uint32_t r, std::span<const std::uint8_t> packets,
                                       std::span<const MeterKey> keys, std::span<const PacketView> burst,
                                       std::span<const std::uint64_t> times, std::span<const std::uint32_t> lengths,
                                       std::span<const Color> in, std::span<Color> out, std::span<std::uint32_t> delays,
                                       std::span<Verdict> verdicts, std::span<const Parsed> parsed,
                                       const std::uint64_t* hashed, bool ipv4_keys, Finished* finish,
                                       const Ipv4KeyWords* words) noexcept {
  const CompiledRule& rule = set.rules[r];
  const WorkerRule& mine = set.worker_rule(r, id_);
  KeyedMeters& table = *mine.keys;
  WorkerRuleCounters& counters = *mine.counters;
  const policer::Profile& profile = *rule.profile;
  const bool blind = rule.input == InputColor::blind;
  const std::size_t n = packets.size();
  // A key last checked before the newest profile change this worker saw has changes to catch up on
  // (rule_set.hpp); any other key, which is nearly all of them, costs one comparison.
  std::uint64_t changed_at = 0;
  if (rule.history != nullptr) changed_at = seen_.tick_of(rule.history->newest()).value_or(seen_.oldest_tick());
  // A pipeline over the burst: hash every key (made by process()) and prefetch its index line; then
  // look each key up (creating its meter), prefetching a found key's second line; then meter each
  // packet on its own meter, renewing it first if idle at that packet (by the key's packet before,
  // which may be earlier in this burst). Memory is waited for once a stage, not a key.
  // `hashed`: the keys' hashes in the group's order, their index lines prefetched (process() does
  // both as it makes the keys of a burst all of this rule). `ipv4_keys`: every key is IPv4, so that a
  // stored key is told from it by its first two words (KeyTable::KeyWords::two). A pass prefetching
  // the entries between hashing and look-up paid in the engine benchmark at 64 Ki and 1 Mi keys but
  // not in the daemon (doc/benchmarks.md): there is none.
  std::uint64_t own_hashes[kMaxBurst];
  KeyedMeters::Entry* entries[kMaxBurst];
  if (hashed == nullptr) {
    for (std::size_t k = 0; k < n; ++k) {
      own_hashes[k] = table.hash(keys[packets[k]]);
      table.prefetch(own_hashes[k]);
    }
  }
  const std::uint64_t* const hashes = hashed != nullptr ? hashed : own_hashes;
  std::uint64_t created = 0, renewed = 0, full = 0;
  // The keys found, in a loop that only reads the table (its index, mask and chunks stay in
  // registers; issue 23), up to the first that is not; from that one on, each found or created, in
  // order. Only a burst's first new key is probed twice: a flood of new keys costs a probe a burst
  // more, not one a packet (BM_key_flood: bench/instructions.py engine).
  // A group finished here (Finished) is the whole burst in order: its k-th key the burst's k-th, read
  // without its place (in the found keys' loop: 4 instructions a packet, a register GCC spilled).
  // A plain burst's keys (`words`) are its packets' in order too, as two words each.
  const bool in_order = finish != nullptr;
  const auto look_up = [&](auto compared_constant) __attribute__((always_inline)) {
    constexpr auto kCompared = decltype(compared_constant)::value;
    const KeyedMeters& found_in = table;
    std::size_t k = 0;
    if (words != nullptr) {
      const Ipv4KeyWords& word = *words;
      for (; k < n; ++k) {
        entries[k] = found_in.find_words<true>(word[0][k], word[1][k], hashes[k]);
        if (entries[k] == nullptr) [[unlikely]] break;
      }
    } else if (in_order) {
      const MeterKey* const key_at = keys.data();
      for (; k < n; ++k) {
        entries[k] = found_in.find<kCompared, true>(key_at[k], hashes[k]);
        if (entries[k] == nullptr) [[unlikely]] break;
      }
    } else {
      for (; k < n; ++k) {
        entries[k] = found_in.find<kCompared, true>(keys[packets[k]], hashes[k]);
        if (entries[k] == nullptr) [[unlikely]] break;
      }
    }
    for (; k < n; ++k) {
      MeterKey made;  // a plain burst's key, whole
      if (words != nullptr) store_ipv4_words((*words)[0][k], (*words)[1][k], made);
      const MeterKey& key = words != nullptr ? made : keys[packets[k]];
      KeyedMeters::Outcome outcome;
      const std::uint64_t now = times[k];
      entries[k] = table.find_or_create<kCompared>(key, hashes[k], [&] { return policer::full_state(profile, now); },
                                                   outcome);
      created += outcome == KeyedMeters::Outcome::created;
      full += outcome == KeyedMeters::Outcome::full;
    }
  };
  using KeyWords = KeyedMeters::KeyWords;
  if (ipv4_keys) look_up(std::integral_constant<KeyWords, KeyWords::two>{});
  else look_up(std::integral_constant<KeyWords, KeyWords::all>{});
  if (created != 0) {
    counters.keys_created.add(created);
    touched_[touched_count_++] = &table;
  }
  // A key behind a change catches up, out of line: the ticks of the rule's history are worked out at
  // the burst's first such key and serve the others.
  ticks_.reset();
  const auto catch_up = [&](policer::State& state, std::uint64_t now) __attribute__((noinline)) {
    if (!ticks_) ticks_.emplace(*rule.history, seen_);
    if (!catch_up_key(state, *rule.history, *ticks_, profile))
      state = policer::full_state(profile, std::max(state.last, now));  // missed a forgotten change
  };
  // No key idle at the group's latest arrival (KeyTable::none_idle_at): none renewed, none tested.
  const std::uint64_t latest =
      n == 0 ? 0 : one_tick_ ? times[0] : *std::max_element(times.begin(), times.end());
  const bool none_idle = table.none_idle_at(latest);
  const std::uint64_t max_delay = rule.shape_max_delay;
  FlowTable* const flows = mine.flows;  // max-flows rules only
  FlowTally tally;
  if (flows != nullptr) [[unlikely]] {
    // The buckets of flow deadlines gone by before the group's first packet (one comparison when none).
    const std::uint64_t first = *std::min_element(times.begin(), times.end());
    tally.expired +=
        flows->expire_due(first, FlowTable::Expiry::whole_buckets, worker_keys::SubtractExpired{table, rule.per_key});
  }
  // Asked for colors only, a group that will not be finished here has its verdicts written fresh now
  // (a flow refused, a table full mark them), for process() to finish (Finished).
  const bool finishing = full == 0 && flows == nullptr && changed_at == 0 && blind;
  if (finish != nullptr && finish->colors_only && !finishing) std::fill_n(verdicts.data(), n, Verdict{});
  policer::with_algorithm(profile.algorithm(), [&](auto algo) {
    using Algo = decltype(algo);
    // This body is a function of its own (one for each algorithm) that reaches meter_keyed's spans and
    // arrays through its closure, and each packet's seqlock fence made it load them through it again,
    // two loads a use: the loops below use its own copies of their pointers.
    const std::size_t count = n;
    KeyedMeters::Entry* const* const entry_at = entries;
    const std::uint64_t* const tick_at = times.data();
    const std::uint32_t* const length_at = lengths.data();
    const Color* const in_at = in.data();
    Color* const out_at = out.data();
    const std::uint8_t* const place_at = packets.data();
    const PacketView* const view_at = burst.data();
    // The loop over the burst's keys, given how a key's meter decides: policing's check, or shaping's
    // (two copies of the loop, so that policing's carries no test of shaping per packet).
    // `plain`: every key has its meter, no flows are counted and no key has changes to catch up on
    // (the usual burst), so that none of the three is tested per packet.
    // `then`: what a packet's color is for, once its meter is written: its place in `out`, or (a
    // group finished here) its verdict.
    // `in_order`: the group is the whole burst in its order, its k-th packet the burst's k-th.
    const auto each_of = [&](auto plain_constant, auto in_order_constant, auto&& decide, auto&& then)
                             __attribute__((always_inline)) {
      constexpr bool plain = decltype(plain_constant)::value;
      constexpr bool in_order = decltype(in_order_constant)::value;
      for (std::size_t k = 0; k < count; ++k) {
        KeyedMeters::Entry* e = entry_at[k];
        if constexpr (!plain) {
          if (e == nullptr) continue;
        }
        // Read before the seqlock's fence (a compiler barrier), which would have them loaded again.
        const std::uint64_t now = tick_at[k];
        const std::uint32_t length = length_at[k];
        if (!none_idle && table.renew_if_idle(*e, now, [&] { return policer::full_state(profile, now); })) [[unlikely]]
          ++renewed;
        KeyedMeters::begin_write(*e);
        if (!plain && flows != nullptr) [[unlikely]] {
          if (!track_flow(rule, *flows, table, *e, parsed[place_at[k]], now, tally)) {
            // A refused flow's packet: the rule's flow-excess color (red by default), unmetered (its
            // key's meter is not charged for it).
            const auto excess = static_cast<std::size_t>(rule.per_key.flow_excess);
            ++e->counters.packets[excess];
            e->counters.bytes[excess] += l2_bytes(view_at[place_at[k]]);
            KeyedMeters::end_write(*e);
            out_at[k] = rule.per_key.flow_excess;
            verdicts[place_at[k]].flow_refused = true;
            continue;
          }
        }
        if (!plain && e->state.last < changed_at) [[unlikely]]
          catch_up(e->state, now);
        const Color color = decide(e->state, k, now, length);
        const auto c = static_cast<std::size_t>(color);
        const std::uint32_t bytes = l2_bytes(view_at[in_order ? k : place_at[k]]);
        ++e->counters.packets[c];
        e->counters.bytes[c] += bytes;
        KeyedMeters::end_write(*e);
        then(k, color, bytes, length);
      }
    };
    const auto to_out = [&](std::size_t k, Color color, std::uint32_t, std::uint32_t) __attribute__((always_inline)) {
      out_at[k] = color;
    };
    const auto each = [&](auto&& decide) __attribute__((always_inline)) {
      each_of(std::false_type{}, std::false_type{}, decide, to_out);
    };
    if constexpr (policer::kShapes<Algo>) {
      if (max_delay != 0) [[unlikely]] {  // a shaping rule: green now or later, or late (red)
        if (mine.ledger != nullptr) {  // queue N: bounded on this worker, whichever key a packet is of
          policer::ShapeQueue& queue = mine.ledger->queue();
          queue.set_limit(rule.shape_queue);  // N as this set says: a live change may have lowered it
          each([&](policer::State& state, std::size_t k, std::uint64_t now, std::uint32_t length)
                   __attribute__((always_inline)) {
            policer::ShapeDrop drop;
            const auto wait = policer::shape<Algo>(state, profile, now, length, max_delay, queue, drop);
            delays[k] = wait ? static_cast<std::uint32_t>(*wait)
                             : drop == policer::ShapeDrop::queue_full ? policer::kQueueFullMark : 0;
            return wait ? Color::green : Color::red;
          });
          return;
        }
        each([&](policer::State& state, std::size_t k, std::uint64_t now, std::uint32_t length)
                 __attribute__((always_inline)) {
          const auto wait = policer::shape<Algo>(state, profile, now, length, max_delay);
          delays[k] = static_cast<std::uint32_t>(wait.value_or(0));
          return wait ? Color::green : Color::red;
        });
        return;
      }
    }
    const auto police = [&](policer::State& state, std::size_t k, std::uint64_t now, std::uint32_t length)
                            __attribute__((always_inline)) {
      return blind ? policer::check_blind<Algo>(state, profile, now, length)
                   : policer::check_aware<Algo>(state, profile, now, length, in_at[k]);
    };
    // A key's state is never older than 0, so a changed_at of 0 asks nothing of any key. The usual
    // burst's loop for a color-blind rule checks blind without testing the rule per packet.
    if (full == 0 && flows == nullptr && changed_at == 0) {
      if (blind) {  // finishing
        const auto check = [&](policer::State& state, std::size_t, std::uint64_t now, std::uint32_t length)
                               __attribute__((always_inline)) {
          return policer::check_blind<Algo>(state, profile, now, length);
        };
        if (finish != nullptr && finish->colors_only) {
          // The group finished here with its colors (Finished): the rule's counters summed by color,
          // on the stack (reached from its pointer: no register of the loop's for them).
          std::uint64_t packets_by[3] = {}, bytes_by[3] = {};
          each_of(std::true_type{}, std::true_type{}, check, [&](std::size_t k, Color color, std::uint32_t bytes,
                                                                  std::uint32_t) __attribute__((always_inline)) {
            const auto c = static_cast<std::size_t>(color);
            out_at[k] = color;
            ++packets_by[c];
            bytes_by[c] += bytes;
          });
          std::copy_n(packets_by, 3, finish->packets);
          std::copy_n(bytes_by, 3, finish->bytes);
          finish->done = true;
        } else if (finish != nullptr) {
          // The group finished here (Finished): the verdict written as process()'s finish would, fresh
          // but for these fields (the input green, the rule color-blind), the packet's k-th of the
          // burst; the rule's counters summed by color (its drops follow from them). One loop less
          // over the burst, and no colors stored to be read back (issue 23).
          Verdict* const verdict_at = verdicts.data();
          const std::uint32_t rule_index = r;
          const std::uint8_t* const does = rule.action_does.data();  // row 0: the input green
          std::uint64_t* const packets_by = finish->packets;
          std::uint64_t* const bytes_by = finish->bytes;
          each_of(std::true_type{}, std::true_type{}, check, [&](std::size_t k, Color color, std::uint32_t bytes,
                                                                  std::uint32_t length) __attribute__((always_inline)) {
            const auto c = static_cast<std::size_t>(color);
            Verdict& v = verdict_at[k];
            v.rule = rule_index;
            v.out = color;
            v.drop = (does[c] & action_does::drop) != 0;
            v.metered_length = length;
            v.keyed = true;
            ++packets_by[c];
            bytes_by[c] += bytes;
          });
          finish->done = true;
        } else {
          each_of(std::true_type{}, std::false_type{}, check, to_out);
        }
      } else {
        each_of(std::true_type{}, std::false_type{}, police, to_out);
      }
    } else {
      each_of(std::false_type{}, std::false_type{}, police, to_out);
    }
  });
  if (renewed != 0) counters.keys_renewed.add(renewed);
  if (flows != nullptr) [[unlikely]] {
    if (tally.opened != 0) counters.flows_opened.add(tally.opened);
    if (tally.closed != 0) counters.flows_closed.add(tally.closed);
    if (tally.expired != 0) counters.flows_expired.add(tally.expired);
    if (tally.refused != 0) counters.flows_refused.add(tally.refused);
    if (tally.table_full != 0) counters.flow_table_full.add(tally.table_full);
  }
  // New keys that found the table full take the rule's fallback: with `aggregate`, metered together by
  // the rule's aggregate meter; otherwise they are marked and handled with the actions.
  if (full == 0) return 0;
  std::uint64_t fb_times[kMaxBurst];
  std::uint32_t fb_lengths[kMaxBurst];
  Color fb_in[kMaxBurst], fb_out[kMaxBurst];
  std::size_t fb_slot[kMaxBurst], fallbacks = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (entries[k] != nullptr) continue;
    verdicts[packets[k]].table_full = true;
    out[k] = Color::red;
    fb_times[fallbacks] = times[k];
    fb_lengths[fallbacks] = lengths[k];
    fb_in[fallbacks] = in[k];
    fb_slot[fallbacks++] = k;
  }
  counters.table_full.add(fallbacks);
  if (rule.per_key.fallback == KeyFallback::aggregate) {
    if (max_delay != 0) {
      std::uint32_t fb_delays[kMaxBurst];
      shape_shared(*mine.aggregate, rule, mine, {fb_times, fallbacks}, {fb_lengths, fallbacks}, {fb_delays, fallbacks},
                   {fb_out, fallbacks});
      for (std::size_t j = 0; j < fallbacks; ++j) delays[fb_slot[j]] = fb_delays[j];
    } else {
      check_shared(*mine.aggregate, profile, rule.profile_generation, rule.history, {fb_times, fallbacks},
                   {fb_lengths, fallbacks}, blind ? std::span<const Color>() : std::span<const Color>(fb_in, fallbacks),
                   {fb_out, fallbacks});
    }
    for (std::size_t j = 0; j < fallbacks; ++j) out[fb_slot[j]] = fb_out[j];
  }
  return fallbacks;
}

// Flows per key (doc/engine.md "Flows per key"). A flow is its 5-tuple; a TCP one opens at a SYN
// (without FIN or RST) and closes at a FIN or RST, any other at its first packet; every flow closes
// when idle for flow-timeout. A packet that opens nothing (a TCP packet of no open flow that is not
// a SYN) is metered as usual. A flow of the key entry's earlier life (the key expired and came back)
// is closed without touching this life's count. A refusal is exact: before it, every flow idle at
// `now` (any key's: the flow table is shared) is closed.
inline bool Worker::track_flow(const CompiledRule& rule, FlowTable& flows, KeyedMeters& keys, KeyedMeters::Entry& key,
                               const Parsed& parsed, std::uint64_t now, FlowTally& tally) noexcept {
  MeterKey five;
  static constexpr KeyShape kFlowShape(kFlowKey);
  make_key(kFlowShape, parsed, five);
  const std::uint64_t hash = flows.hash(five);
  KeyCounters& count = key.counters;
  FlowTable::Flow* flow = flows.find(five, hash);
  if (flow != nullptr && (flow->incarnation != count.incarnation || flows.idle(*flow, now))) [[unlikely]] {
    if (flow->incarnation == count.incarnation) {  // idle past flow-timeout before the sweep came
      --count.open_flows;
      ++tally.expired;
    }
    flows.close(*flow);
    flow = nullptr;
  }
  const bool tcp = parsed.protocol == ip_protocol::tcp;
  const bool ends = tcp && (parsed.tcp_flags & (tcp_flag::fin | tcp_flag::rst)) != 0;
  if (flow != nullptr) {
    FlowTable::touch(*flow, now);
    if (ends) {
      --count.open_flows;
      ++tally.closed;
      flows.close(*flow);
    }
    return true;
  }
  const bool opens = !tcp || ((parsed.tcp_flags & tcp_flag::syn) != 0 && !ends);
  if (!opens) return true;
  if (count.open_flows >= rule.per_key.max_flows || flows.size() >= flows.capacity()) [[unlikely]]
    tally.expired +=
        flows.expire_due(now, FlowTable::Expiry::exact, worker_keys::SubtractExpired{keys, rule.per_key, &key});
  if (count.open_flows >= rule.per_key.max_flows) {
    ++tally.refused;
    return false;
  }
  if (flows.open(five, hash, now, count.incarnation) == nullptr) {
    ++tally.refused;
    ++tally.table_full;
    return false;
  }
  ++count.open_flows;
  ++tally.opened;
  return true;
}

// Once a burst: a function of its own, not inlined in process() (engine-prefetches finds its prefetch).
[[gnu::noinline]] inline void Worker::sweep_keys(const RuleSet& set, std::uint64_t now) noexcept {
  if (set.keyed.empty()) return;
  if (sweep_cursor_ >= set.keyed.size()) sweep_cursor_ = 0;  // a wrap, not a division per burst
  const std::uint32_t r = set.keyed[sweep_cursor_++];
  const WorkerRule& mine = set.worker_rule(r, id_);
  KeyedMeters& table = *mine.keys;
  // Flows past their deadlines first, so that a rule without packets still closes its idle flows
  // (one comparison when none is due).
  if (mine.flows != nullptr) {
    const std::size_t expired = mine.flows->expire_due(now, FlowTable::Expiry::whole_buckets,
                                                       worker_keys::SubtractExpired{table, set.rules[r].per_key});
    if (expired != 0) mine.counters->flows_expired.add(expired);
  }
  if (table.sweep(now, worker_keys::kSweepBudget) != 0) touched_[touched_count_++] = &table;
}

}  // namespace tricolor::dataplane
