#pragma once
// A worker: parse, classify, meter and act on bursts of packet views under the newest published rule
// set (rule_set.hpp). The daemon runs one per worker lcore; tricolor-replay runs one, on its own
// thread, whose clock is the capture.
//
// Per burst: the rule set is read once; every frame is parsed, the IP ones classified together
// (classifier.hpp; through this worker's flow cache if it has one, flow_cache.hpp), the packets of
// each rule metered together: by the rule's aggregate meter (one critical section per rule per
// burst), or by one meter per key in this worker's key table for the rule (no lock), then by the
// rule's parent meter if it has one; then each packet's action is applied by (input, output) color.
// No allocation, no lock but the shared meters' one critical section per rule per burst, no system
// call.
//
// What a worker writes is its own: its counters (per rule, per default reason) and its key tables,
// which other threads read without ever blocking it.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "dataplane/engine/flow_cache.hpp"
#include "dataplane/engine/rule_set.hpp"

namespace tricolor::dataplane {

class Rcu;

// Why a packet took the default action.
enum class DefaultReason : std::uint8_t { none, malformed, non_ip, no_match };

struct Verdict {
  std::uint32_t rule = kNoRule;       // index in the rule set's rules, or kNoRule (default action)
  Color in = Color::green;            // input color (color-aware rules)
  Color out = Color::green;           // the meter's color
  bool drop = false;
  bool dscp_set = false;              // a remark was applied
  bool pcp_set = false;
  std::uint8_t dscp = 0;
  std::uint8_t pcp = 0;
  DefaultReason reason = DefaultReason::none;
  ParseError error = ParseError::none;  // when reason == malformed
  std::uint32_t metered_length = 0;
  bool keyed = false;      // metered by its key's meter (per-key rule)
  bool table_full = false; // a new key that found the rule's key table full: the fallback applied
  // Its key is owned by another worker (placement.hpp): not metered nor acted on here; the caller
  // passes it to `owner` with the set's generation and `rule` (Handed).
  bool handoff = false;
  // A max-flows rule refused the packet's new flow (its key had max-flows open, or the worker's flow
  // table was full): not metered, out the rule's flow-excess color (red by default), that color's
  // action applied; it opened nothing.
  bool flow_refused = false;
  // A shaping rule's queue (queue N) was full and the packet would have waited: dropped, red, nothing
  // taken.
  bool queue_full = false;
  std::uint16_t owner = 0;
  // A shaping rule's held packet (Action::shape_max_delay_ns): it leaves `delay` ticks after its
  // arrival (out green, drop false); 0 for every other packet (forwarded now, or dropped).
  std::uint32_t delay = 0;
};
static_assert(sizeof(Verdict) == 32, "a burst's verdicts are copied from a fresh one per packet: keep them small");

// What the worker that received a packet passes with it to the key's owner: the rule it matched under
// the set of that generation, so that the owner, under the same set, needs neither classify it again
// nor ask who owns it. The generation's low 32 bits: no packet is in flight across 2^32 rule sets.
struct Handed {
  std::uint32_t generation = 0;
  std::uint32_t rule = kNoRule;
};

class Worker {
 public:
  static constexpr std::size_t kMaxBurst = Classifier::kMaxBurst;
  // A plain burst's IPv4 keys (worker.cpp), by place: their first words, then their second (the rest
  // of each is zero). One array: one register reaches both words of a key.
  using Ipv4KeyWords = std::array<std::array<std::uint64_t, kMaxBurst>, 2>;

  // Processes up to kMaxBurst packets (remarks are written into the frames) under the newest published
  // rule set, which it returns: the verdicts' rule numbers are its rules'. The set stays valid until
  // this worker's next quiescent(). Packets of per-key rules whose key another worker owns come back
  // marked `handoff`, untouched. `handed`: empty for packets this worker received, else one entry per
  // packet, for packets other workers passed it.
  // `read`: which verdicts the caller reads: every burst's, or only those of a burst that
  // whole_burst() says is mixed (the daemon's forwarder, which sends or frees a whole burst as it
  // came, and splits a `split` one by its mask). For the latter, a burst forwarded or dropped whole,
  // or split, may be left with its verdicts unwritten: the usual plain burst (worker.cpp) is, its
  // rule's counters summed from the meter's colors.
  enum class VerdictsRead : std::uint8_t { every, when_mixed };
  const RuleSet& process(std::span<PacketView> burst, std::span<Verdict> verdicts,
                         std::span<const Handed> handed = {}, VerdictsRead read = VerdictsRead::every) noexcept;

  // What became of the last burst as a whole, when one thing did: every packet metered here under one
  // rule and forwarded now (none dropped, held by shaping, handed over or given the default action),
  // or every one dropped. The verdicts say the same packet by packet; this is known from the burst's
  // counts, so that a caller sends or frees such a burst without reading its verdicts.
  // `split`, for a VerdictsRead::when_mixed caller only: every packet metered here under one rule and
  // either forwarded now or dropped, dropped_mask() saying which, the verdicts left unwritten (a
  // policed plain burst, a few packets green in each: a bit a packet instead of a verdict).
  enum class WholeBurst : std::uint8_t { mixed, forwarded, dropped, split };
  WholeBurst whole_burst() const noexcept { return whole_burst_; }
  // A split burst's drops: bit i set if its i-th packet is dropped (the rest forwarded now).
  std::uint64_t dropped_mask() const noexcept { return dropped_mask_; }
  static_assert(kMaxBurst <= 64, "a split burst's drops are one bit a packet of a 64-bit word");

  // Once per poll loop, between bursts: this worker holds no rule set any more (RCU).
  void quiescent() noexcept;
  // While a worker polls it is online; offline (stopped, or about to block), nobody waits for it.
  void online() noexcept;
  void offline() noexcept;

  // The key tables the last burst took chunks from or gave chunks back to (new keys, the sweep): the
  // ones whose pools need the control side, for a control side on this worker's thread (tricolor-replay).
  std::span<KeyedMeters* const> tables_touched() const noexcept { return {touched_.data(), touched_count_}; }

  unsigned id() const noexcept { return id_; }
  // The generation of the rule set of the latest burst this worker metered (0 before its first): the
  // control side's way to see a change take effect. Written once per new set, by this worker only.
  std::uint64_t generation_seen() const noexcept { return seen_generation_.load(std::memory_order_relaxed); }
  const WorkerDefaultCounters& default_counters() const noexcept { return defaults_; }

  // The flow cache this worker classifies through (flow_cache.hpp); none: the classifier alone. Set by
  // the control side before the worker's first burst.
  void set_flow_cache(std::unique_ptr<FlowCache> cache) noexcept { flow_cache_ = std::move(cache); }
  const FlowCache* flow_cache() const noexcept { return flow_cache_.get(); }

  // Whether a burst under a set of one IPv4 entry may skip the Parsed (worker.cpp, the plain burst):
  // on unless a test turns it off, to compare the two packet for packet.
  void set_plain_bursts(bool on) noexcept { plain_bursts_ = on; }
  // Whether meter_keyed() may finish a group itself (Finished): on unless a test turns it off.
  void set_meter_finishes(bool on) noexcept { meter_finishes_ = on; }
  // Bursts that were plain, for tests (this worker's thread reads it).
  std::uint64_t plain_bursts_taken() const noexcept { return plain_taken_; }

  Worker(const std::atomic<const RuleSet*>& published, Rcu& rcu, unsigned id) noexcept
      : published_(published), rcu_(rcu), id_(id) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

 private:
  Color input_color(const CompiledRule& rule, const Parsed& parsed) const noexcept;
  // The rule of a set's only IPv4 entry if a burst of it may be plain: it reads nothing of a packet
  // but its addresses, protocol, ports and length (color-blind, no remark, keys metered where they
  // arrive, no flow limit); else nullptr.
  const CompiledRule* plain_rule(const RuleSet& set, std::uint32_t r) const noexcept;
  // A group that meter_keyed() finished itself: its verdicts written and its packets and bytes summed
  // by output color, for the rule's counters (process() asks for it, with `finish`, when the group is
  // the whole burst in order under a color-blind rule that neither shapes nor remarks a green packet
  // and has no parent or cluster meter; meter_keyed does it when no key of the burst found the table
  // full, has a flow limit or changes to catch up on: the usual burst).
  // `colors_only` (asked): no verdict written, each packet's color in `out` instead (the caller writes
  // the verdicts only if the burst turns out mixed); if the group is not finished, its verdicts are
  // written fresh for process() to finish.
  struct Finished {
    bool colors_only = false;
    bool done = false;
    std::uint64_t packets[3] = {};
    std::uint64_t bytes[3] = {};
  };
  // Returns how many of the packets found the table full (Verdict::table_full).
  // `words`, if given: the keys as words (`keys` not filled), the group the whole burst in order.
  std::size_t meter_keyed(const RuleSet& set, std::uint32_t r, std::span<const std::uint8_t> packets,
                          std::span<const MeterKey> keys, std::span<const PacketView> burst,
                          std::span<const std::uint64_t> times, std::span<const std::uint32_t> lengths,
                          std::span<const Color> in, std::span<Color> out, std::span<std::uint32_t> delays,
                          std::span<Verdict> verdicts, std::span<const Parsed> parsed,
                          const std::uint64_t* hashed = nullptr, bool ipv4_keys = false,
                          Finished* finish = nullptr, const Ipv4KeyWords* words = nullptr) noexcept;
  // A max-flows rule's packet on its key's entry (under the entry's seqlock): its flow found, opened,
  // closed or refused. Returns false if it is refused.
  struct FlowTally {  // a burst's flow events of one rule, added to its counters once
    std::uint64_t opened = 0, closed = 0, expired = 0, refused = 0, table_full = 0;
  };
  static bool track_flow(const CompiledRule& rule, FlowTable& flows, KeyedMeters& keys, KeyedMeters::Entry& key,
                         const Parsed& parsed, std::uint64_t now, FlowTally& tally) noexcept;
  // Shaping on the aggregate meter, under this worker's queue for the rule (WorkerRule::ledger) if it
  // has one.
  void shape_shared(policer::SharedMeter& meter, const CompiledRule& rule, const WorkerRule& mine,
                    std::span<const std::uint64_t> times, std::span<const std::uint32_t> lengths,
                    std::span<std::uint32_t> delays, std::span<Color> out) noexcept;
  void check_shared(policer::SharedMeter& meter, const policer::Profile& profile, std::uint64_t generation,
                    const ProfileHistory* history, std::span<const std::uint64_t> times,
                    std::span<const std::uint32_t> lengths, std::span<const Color> in, std::span<Color> out) noexcept;
  void sweep_keys(const RuleSet& set, std::uint64_t now) noexcept;
  // A forwarded packet's action: inline, the rewrites (rare) out of line.
  [[gnu::always_inline]] inline void apply(PacketView& view, const Parsed& parsed, const Action& action,
                                           Verdict& verdict) noexcept;
  [[gnu::noinline]] void rewrite(PacketView& view, const Parsed& parsed, const Action& action, Verdict& verdict) noexcept;
  void take_default(const RuleSet& set, PacketView& view, const Parsed& parsed, DefaultReason reason,
                    Verdict& verdict) noexcept;

  const std::atomic<const RuleSet*>& published_;
  Rcu& rcu_;
  const unsigned id_;
  std::uint64_t generation_ = 0;  // of the set of the previous burst
  std::atomic<std::uint64_t> seen_generation_{0};  // the same, for readers on other threads
  std::uint64_t first_tick_ = 0;  // of the current burst: the tick of changes it is the first to see
  bool one_tick_ = false;         // every packet of the current burst arrived at one tick
  WholeBurst whole_burst_ = WholeBurst::mixed;  // whole_burst()
  std::uint64_t dropped_mask_ = 0;              // dropped_mask(), of a split burst
  SeenGenerations seen_;
  std::size_t sweep_cursor_ = 0;  // into the set's per-key rules
  std::array<KeyedMeters*, kMaxBurst + 1> touched_{};  // a burst's rules' tables, and the one swept
  std::size_t touched_count_ = 0;
  WorkerDefaultCounters defaults_;
  std::unique_ptr<FlowCache> flow_cache_;
  bool plain_bursts_ = true;
  bool meter_finishes_ = true;
  unsigned plain_backoff_ = 0;  // bursts still to parse straight away after one that was not plain
  std::uint64_t plain_taken_ = 0;
  // meter_keyed()'s ticks of its rule's history, worked out at a burst's first key behind a change.
  // A member, not a local: a local optional of 152 bytes was zeroed every burst (rep stos, issue 23).
  std::optional<HistoryTicks> ticks_;
};

// The frame's length at layer 2: a NIC-stripped VLAN tag counted.
[[gnu::always_inline]] inline std::uint32_t l2_bytes(const PacketView& view) noexcept {
  constexpr std::uint32_t kStrippedTagBytes = 4;
  return view.wire_length + (view.has_stripped_vlan ? kStrippedTagBytes : 0);
}

// The metered length of a packet for a rule (see MeteredLength), floored at 0. Inline: it runs for
// every metered packet (a call cost 1.5 ns a packet, issue 23). With the base a constant, for a loop
// over a burst of one rule (no test of the base per packet).
// `l3_length`: the packet's Parsed::l3_length (a plain burst reads it off the frame).
template <LengthBase kBase>
[[gnu::always_inline]] inline std::uint32_t metered_length(const PacketView& view, std::uint16_t l3_length,
                                                           std::int32_t adjust) noexcept {
  // An L3 length (16 bits) plus a 32-bit adjustment cannot pass UINT32_MAX: only the floor is tested.
  static_assert(std::int64_t{UINT16_MAX} + INT32_MAX <= std::int64_t{UINT32_MAX});
  if constexpr (kBase == LengthBase::l3) {
    return static_cast<std::uint32_t>(std::max<std::int64_t>(std::int64_t{l3_length} + adjust, 0));
  } else {
    constexpr std::int64_t kOverheadBytes = kBase == LengthBase::l1 ? 24 : 0;  // preamble and SFD 8, gap 12, FCS 4
    return static_cast<std::uint32_t>(
        std::clamp<std::int64_t>(std::int64_t{l2_bytes(view)} + kOverheadBytes + adjust, 0, UINT32_MAX));
  }
}
template <LengthBase kBase>
[[gnu::always_inline]] inline std::uint32_t metered_length(const PacketView& view, const Parsed& parsed,
                                                           std::int32_t adjust) noexcept {
  return metered_length<kBase>(view, parsed.l3_length, adjust);
}
inline std::uint32_t metered_length(const PacketView& view, const Parsed& parsed, const MeteredLength& length) noexcept {
  switch (length.base) {
    case LengthBase::l3: return metered_length<LengthBase::l3>(view, parsed, length.adjust);
    case LengthBase::l2: return metered_length<LengthBase::l2>(view, parsed, length.adjust);
    case LengthBase::l1: break;
  }
  return metered_length<LengthBase::l1>(view, parsed, length.adjust);
}

}  // namespace tricolor::dataplane
