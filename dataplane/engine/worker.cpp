#include "dataplane/engine/worker.hpp"

#include <algorithm>
#include <cstddef>
#include <new>
#include <type_traits>

#include "dataplane/engine/actions.hpp"
#include "dataplane/engine/parse.hpp"
#include "dataplane/engine/plain_pass.hpp"
#include "dataplane/engine/rcu.hpp"
#include "dataplane/engine/worker_keys.hpp"

namespace tricolor::dataplane {

namespace {
using plain::kPrefetchAhead;                   // frames whose first line is fetched while parsing
// After a burst that was not plain (a frame not plain IPv4, or not the set's only entry's), the bursts
// parsed straight away: where every burst has such a frame, one in this many more tries the plain pass.
constexpr unsigned kPlainBackoff = 3;

// A rule's property in a loop's constant forms: known (a std::integral_constant), or read as it goes.
struct Varies {};
template <class Known, class T>
T known_or(Known, T value) noexcept {
  if constexpr (std::is_same_v<Known, Varies>) return value;
  else return Known::value;
}
template <class Base>
std::uint32_t length_of(Base, const PacketView& view, const Parsed& parsed, const MeteredLength& length) noexcept {
  if constexpr (std::is_same_v<Base, Varies>) return metered_length(view, parsed, length);
  else return metered_length<Base::value>(view, parsed, length.adjust);
}

// A new key that found its rule's table full and whose fallback is not the aggregate meter: no meter
// saw it, so it skips the parent and takes the default action or a drop.
bool unmetered(const Verdict& v, KeyFallback fallback) noexcept {
  return v.table_full && fallback != KeyFallback::aggregate;
}

// Whether any color's action rewrites a packet that came in green (the first row of actions: every
// packet of a color-blind rule), which reads the header's offsets from its Parsed.
bool rewrites_green(const CompiledRule& rule) noexcept {
  constexpr std::size_t kGreenIn = 0;
  for (std::size_t out = 0; out < 3; ++out)
    if ((rule.action_does[3 * kGreenIn + out] & action_does::rewrite) != 0) return true;
  return false;
}
}  // namespace

void Worker::quiescent() noexcept { rcu_.quiescent(id_); }
void Worker::online() noexcept { rcu_.online(id_); }
void Worker::offline() noexcept { rcu_.offline(id_); }

void Worker::apply(PacketView& view, const Parsed& parsed, const Action& action, Verdict& verdict) noexcept {
  if (action.drop) {
    verdict.drop = true;
    return;
  }
  if (action.dscp || action.pcp) [[unlikely]]
    rewrite(view, parsed, action, verdict);
}

void Worker::rewrite(PacketView& view, const Parsed& parsed, const Action& action, Verdict& verdict) noexcept {
  if (action.dscp && remark_dscp(view, parsed, *action.dscp)) {
    verdict.dscp_set = true;
    verdict.dscp = *action.dscp;
  }
  if (action.pcp && set_pcp(view, parsed, *action.pcp)) {
    verdict.pcp_set = true;
    verdict.pcp = *action.pcp;
  }
}

void Worker::take_default(const RuleSet& set, PacketView& view, const Parsed& parsed, DefaultReason reason,
                          Verdict& verdict) noexcept {
  verdict.reason = reason;
  verdict.error = parsed.error;
  WorkerDefaultCounters& c = defaults_;
  c.packets.add(1);
  c.bytes.add(l2_bytes(view));
  switch (reason) {
    case DefaultReason::malformed: c.malformed[static_cast<std::size_t>(parsed.error)].add(1); break;
    case DefaultReason::non_ip: c.non_ip.add(1); break;
    case DefaultReason::no_match: c.no_match.add(1); break;
    case DefaultReason::none: break;
  }
  apply(view, parsed, set.default_action, verdict);
  if (verdict.drop) {
    c.dropped_packets.add(1);
    c.dropped_bytes.add(l2_bytes(view));
  }
}

Color Worker::input_color(const CompiledRule& rule, const Parsed& parsed) const noexcept {
  switch (rule.input) {
    case InputColor::blind: return Color::green;
    case InputColor::dscp: return color_from_dscp(parsed.dscp);
    case InputColor::mapped:
      if (rule.has_pcp_map && parsed.has_vlan) return rule.pcp_map[parsed.pcp & 7];
      if (rule.has_dscp_map) return rule.dscp_map[parsed.dscp & 63];
      return rule.input_default;
  }
  return Color::green;
}

// One critical section for the burst: the meter is first brought through the profile changes it has
// not seen (catch_up_shared), then colors the packets.
void Worker::check_shared(policer::SharedMeter& meter, const policer::Profile& profile, std::uint64_t generation,
                          const ProfileHistory* history, std::span<const std::uint64_t> times,
                          std::span<const std::uint32_t> lengths, std::span<const Color> in,
                          std::span<Color> out) noexcept {
  const auto catch_up = [&](policer::AggregateMeter& m, std::uint64_t& applied) {
    catch_up_shared(m, applied, history, generation, profile, seen_, first_tick_);
  };
  // A burst read at one clock tick (the daemon's, always) brings the meter to that tick once.
  if (one_tick_) meter.check_burst_at_after(catch_up, times[0], lengths, in, out);
  else meter.check_burst_after(catch_up, times, lengths, in, out);
}

void Worker::shape_shared(policer::SharedMeter& meter, const CompiledRule& rule, const WorkerRule& mine,
                          std::span<const std::uint64_t> times, std::span<const std::uint32_t> lengths,
                          std::span<std::uint32_t> delays, std::span<Color> out) noexcept {
  const auto catch_up = [&](policer::AggregateMeter& m, std::uint64_t& applied) {
    catch_up_shared(m, applied, rule.history, rule.profile_generation, *rule.profile, seen_, first_tick_);
  };
  // The queue is this worker's alone: used inside the meter's critical section, but not shared by it.
  policer::ShapeQueue* queue = nullptr;
  if (mine.ledger != nullptr) {
    queue = &mine.ledger->queue();
    queue->set_limit(rule.shape_queue);  // N as this set says: a live change may have lowered it
  }
  meter.shape_burst_after(catch_up, times, lengths, rule.shape_max_delay, queue, delays, out);
}

const CompiledRule* Worker::plain_rule(const RuleSet& set, std::uint32_t r) const noexcept {
  const CompiledRule& rule = set.rules[r];
  if (rule.input != InputColor::blind) return nullptr;  // the input color: DSCP or PCP
  if (rewrites_green(rule)) return nullptr;  // the header's offsets
  if (rule.per_key.kind != KeyKind::none) {
    if (rule.placement == Placement::by_key_hash) return nullptr;  // keys handed over: the hand-off's own pass
    if (set.worker_rule(r, id_).flows != nullptr) return nullptr;  // max-flows: TCP flags
  }
  return &rule;
}

const RuleSet& Worker::process(std::span<PacketView> burst, std::span<Verdict> verdicts,
                               std::span<const Handed> handed, VerdictsRead read) noexcept {
  // The newest set, once per burst: it stays ours until our next quiescent point.
  const RuleSet& set = *published_.load(std::memory_order_acquire);
  const std::size_t n = std::min(burst.size(), kMaxBurst);
  touched_count_ = 0;
  whole_burst_ = WholeBurst::mixed;
  // Uninitialised: each is built in place below (zeroing 32 of them cost more than a small burst).
  alignas(Parsed) std::byte parsed_storage[sizeof(Parsed) * kMaxBurst];
  Parsed* const parsed = reinterpret_cast<Parsed*>(parsed_storage);
  // Each packet's arrival, metered length and input color, by its place in the burst (the last two
  // under its rule, for the packets metered here).
  // In one object with the arrays the passes below fill, so that the plain pass reaches them all from
  // one address (BurstArrays).
  plain::BurstArrays arrays;
  auto& times = arrays.times;
  auto& lengths = arrays.lengths;
  auto& in = arrays.in;
  std::uint64_t earliest = UINT64_MAX, latest = 0;
  // Packets handed over by the workers that received them under this very set keep the rule they
  // matched there; any other burst is classified.
  std::uint32_t rule[kMaxBurst];
  const auto generation = static_cast<std::uint32_t>(set.generation);
  const bool placed = !handed.empty() && std::all_of(handed.begin(), handed.begin() + static_cast<std::ptrdiff_t>(n),
                                                     [&](const Handed& h) { return h.generation == generation; });
  // A set of one IPv4 entry (Classifier::OnlyEntry) is matched as each packet is parsed, its fields
  // just stored, rather than by a pass of the classifier over the burst (a flow cache, which counts
  // its lookups, is not bypassed).
  const Classifier::OnlyEntry* const only = placed || flow_cache_ != nullptr ? nullptr : set.classifier->only_entry();
  const auto parse_all = [&](auto classify_constant) __attribute__((always_inline)) {
    constexpr bool classify = decltype(classify_constant)::value;
    // Copied: the parse's byte stores may alias anything, so the entry's fields would be loaded again
    // for every packet.
    const Classifier::OnlyEntry entry = classify ? *only : Classifier::OnlyEntry{};
    const auto take = [&](std::size_t i) __attribute__((always_inline)) {
      // Built in place (guaranteed elision): a returned temporary copied over stalled on store
      // forwarding, as the verdicts below did.
      ::new (static_cast<void*>(&parsed[i])) Parsed(parse(burst[i]));
      if constexpr (classify) rule[i] = entry.classify(parsed[i]);
      times[i] = burst[i].arrival;
      earliest = std::min(earliest, times[i]);
      latest = std::max(latest, times[i]);
    };
    // Two loops, so that the prefetch needs no bound test a packet.
    const std::size_t prefetching = n > kPrefetchAhead ? n - kPrefetchAhead : 0;
    for (std::size_t i = 0; i < prefetching; ++i) {
      __builtin_prefetch(burst[i + kPrefetchAhead].data);
      take(i);
    }
    for (std::size_t i = prefetching; i < n; ++i) take(i);
  };
  // What the passes below fill for the packets metered here: their place in the burst, grouped by rule,
  // and the keys of per-key rules' packets, with a uniform burst's hashes in the order metered (its
  // one group's).
  auto& order = arrays.order;
  auto& keys = arrays.keys;
  auto& key_hashes = arrays.key_hashes;
  static constexpr Verdict kFresh{};  // copied from memory: a temporary built field by field on the
                                      // stack and read back whole stalled every packet on store forwarding

  // A plain burst: under a set of one IPv4 entry whose rule reads nothing of a packet but its
  // addresses, protocol, ports and length (plain_rule()), a burst of frames that are all plain IPv4
  // (parse.hpp's PlainIpv4) and all match the entry is classified, keyed, hashed and measured in one
  // pass over the frames, and no Parsed is built: a parse, a pass over the burst and the loads of what
  // the parse had just stored saved (34 instructions a per-key packet, 52 an aggregate one: issue 23's
  // bench/instructions.py engine). Only a key table full
  // for a new key asks for the Parsed (below). A frame that is not plain, or not matched, ends the
  // pass, and the burst is parsed as any other, from the start: the next kPlainBackoff bursts too.
  const CompiledRule* plain_rule = nullptr;
  if (only != nullptr && plain_bursts_) {
    if (plain_backoff_ == 0)
      plain_rule = this->plain_rule(set, only->rule);
    else
      --plain_backoff_;
  }
  std::uint64_t plain_earliest = UINT64_MAX, plain_latest = 0;
  const auto plain_by_base = [&](auto keyed_constant) __attribute__((always_inline)) {
    constexpr bool keyed = decltype(keyed_constant)::value;
    const KeyedMeters* const table = keyed ? set.worker_rule(only->rule, id_).keys : nullptr;
    const std::span<const PacketView> frames(burst.data(), n);
    switch (plain_rule->length.base) {
      case LengthBase::l3: return plain::pass<keyed, LengthBase::l3>(*only, *plain_rule, table, frames, arrays,
                                                                 plain_earliest, plain_latest);
      case LengthBase::l2: return plain::pass<keyed, LengthBase::l2>(*only, *plain_rule, table, frames, arrays,
                                                                 plain_earliest, plain_latest);
      case LengthBase::l1: break;
    }
    return plain::pass<keyed, LengthBase::l1>(*only, *plain_rule, table, frames, arrays, plain_earliest,
                                             plain_latest);
  };
  bool plain = false;
  // A plain burst whose verdicts are left unwritten for a caller that reads only a mixed burst's
  // (VerdictsRead::when_mixed): its rule's meter is all that colors it (no shaping, parent or cluster
  // meter), and its counters are summed from the meter's colors (Finished::colors_only; the
  // aggregate's below). A burst forwarded or dropped whole costs no verdict (issue 23: the fresh
  // verdict and its fields, 11 instructions a packet of a per-key rule, the finishing loop of an
  // aggregate one), a burst split between the two a bit a packet (WholeBurst::split).
  bool unwritten = false;
  if (plain_rule != nullptr) {
    plain = plain_rule->per_key.kind != KeyKind::none ? plain_by_base(std::true_type{}) : plain_by_base(std::false_type{});
    if (plain) {
      earliest = plain_earliest;
      latest = plain_latest;
      ++plain_taken_;
      unwritten = read == VerdictsRead::when_mixed && plain_rule->shape_max_delay == 0 &&
                  plain_rule->parent == nullptr && plain_rule->cluster == nullptr &&
                  (plain_rule->per_key.kind == KeyKind::none || meter_finishes_);
      if (!unwritten) std::fill_n(verdicts.data(), n, kFresh);
    } else {
      plain_backoff_ = kPlainBackoff;
    }
  }
  // Built when first asked for: by the parse below, or in a plain burst by a key that found its table
  // full (the default action it may take reads the frame's fields).
  bool parsed_built = !plain;
  if (plain) {
    // Classified, keyed and hashed: every packet the entry's.
  } else if (only != nullptr) {
    parse_all(std::true_type{});
  } else {
    parse_all(std::false_type{});
  }
  if (n == 0) return set;
  // The first burst under a new set: the changes it brought take effect now, in this worker's clock.
  first_tick_ = earliest;
  one_tick_ = earliest == latest;
  if (set.generation != generation_) {
    seen_.record(set.generation, earliest);
    generation_ = set.generation;
    seen_generation_.store(set.generation, std::memory_order_relaxed);
    sweep_cursor_ = 0;
  }
  if (only != nullptr) {
    // Classified as parsed (or in the plain pass).
  } else if (placed) {
    for (std::size_t i = 0; i < n; ++i) rule[i] = handed[i].rule;
  } else if (flow_cache_ != nullptr) {
    flow_cache_->classify(*set.classifier, set.generation, burst.first(n), std::span<const Parsed>(parsed, n),
                          std::span<std::uint32_t>(rule, n));
  } else {
    set.classifier->classify(burst.first(n), std::span<const Parsed>(parsed, n), std::span<std::uint32_t>(rule, n));
  }

  // Default-action packets now; packets whose key another worker owns marked for it (a packet handed
  // over under this set was placed here by the same rule); the rest grouped by rule, in arrival order
  // within a rule.
  std::size_t metered = 0;
  // Whether every metered packet's rule is the first packet's, as bits that differ (two instructions a
  // packet; the first packet may not be metered here, then the test below settles it).
  std::uint32_t other_rules = 0;
  // A packet whose key another worker owns is marked for it; true if so.
  const auto hand_off = [&](std::size_t i) __attribute__((always_inline)) {
    const unsigned owner = set.owners->owner(keys[i]);
    if (owner == id_) return false;
    verdicts[i].handoff = true;
    verdicts[i].owner = static_cast<std::uint16_t>(owner);
    verdicts[i].rule = rule[i];
    return true;
  };
  // Every packet of the burst matched one rule (a set of one rule, or one flow's packets): the rule's
  // fields are read once, into locals, and no packet is tested for the default. Locals, because the
  // key is stored as bytes, which may alias anything: fields read through the rule would be loaded
  // again for every packet.
  std::uint32_t differ = 0;
  if (plain) {
    rule[0] = only->rule;  // the one rule: the passes below read no other packet's
  } else {
    for (std::size_t i = 1; i < n; ++i) differ |= rule[i] ^ rule[0];
  }
  const bool uniform = differ == 0 && rule[0] != kNoRule;
  bool ipv4_keys = true;  // whether a uniform burst's keys are all IPv4
  if (plain) {
    metered = n;  // every packet metered here, in order; a per-key rule's keys IPv4, hashed
  } else if (uniform) {
    const CompiledRule& cr = set.rules[rule[0]];
    const KeyShape shape = cr.key_shape;
    const MeteredLength length = cr.length;
    const bool keyed = cr.per_key.kind != KeyKind::none;
    const bool placing = keyed && cr.placement == Placement::by_key_hash && !placed;
    const bool blind = cr.input == InputColor::blind;
    // The key's table, whose index line is fetched as soon as the key is made: the hash of a key just
    // stored is worked out from the words still in registers (for an IPv4 key, with its zero tail
    // known), and the line has the rest of this pass to come.
    KeyedMeters* const table = keyed ? set.worker_rule(rule[0], id_).keys : nullptr;
    // The pass in constant forms for the usual burst, a per-key rule's packets all metered here
    // (`here`): the rule's color blindness and length base constants, so that no packet tests them,
    // nor whether the rule is keyed or its keys placed, and a packet's place in the burst its place in
    // the group. Any other uniform burst (a rule without keys, or keys placed by their hash) reads
    // them as it goes (Varies).
    const auto pass = [&](auto here_constant, auto blind_constant, auto base_constant) __attribute__((always_inline)) {
      constexpr bool here = decltype(here_constant)::value;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t at = here ? i : metered;  // the packet's place in the group
        verdicts[i] = kFresh;
        if (here || keyed) {
          std::uint64_t pair[2];
          const bool ipv4 = make_key(shape, parsed[i], keys[i], pair);
          ipv4_keys &= ipv4;
          if (!here && placing && hand_off(i)) continue;
          const std::uint64_t hash = ipv4 ? table->hash_of_pair(pair[0], pair[1]) : table->hash(keys[i]);
          key_hashes[at] = hash;
          table->prefetch(hash);
        }
        lengths[i] = length_of(base_constant, burst[i], parsed[i], length);
        in[i] = known_or(blind_constant, blind) ? Color::green : input_color(cr, parsed[i]);
        order[at] = static_cast<std::uint8_t>(i);
        if constexpr (!here) ++metered;
      }
      if constexpr (here) metered = n;
    };
    const auto by_base = [&](auto blind_constant) __attribute__((always_inline)) {
      switch (length.base) {
        case LengthBase::l3: pass(std::true_type{}, blind_constant, std::integral_constant<LengthBase, LengthBase::l3>{}); return;
        case LengthBase::l2: pass(std::true_type{}, blind_constant, std::integral_constant<LengthBase, LengthBase::l2>{}); return;
        case LengthBase::l1: pass(std::true_type{}, blind_constant, std::integral_constant<LengthBase, LengthBase::l1>{}); return;
      }
    };
    if (keyed && !placing) {
      if (blind) by_base(std::true_type{});
      else by_base(std::false_type{});
    } else {
      pass(std::false_type{}, Varies{}, Varies{});
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      verdicts[i] = kFresh;
      // The classifier (and the flow cache) gives kNoRule to every frame that is malformed or not IP, and
      // a handed packet has a rule: one test for the three default reasons.
      if (rule[i] == kNoRule) [[unlikely]] {
        const DefaultReason reason = parsed[i].error != ParseError::none ? DefaultReason::malformed
                                     : parsed[i].l3 == L3::none          ? DefaultReason::non_ip
                                                                         : DefaultReason::no_match;
        take_default(set, burst[i], parsed[i], reason, verdicts[i]);
        continue;
      }
      const CompiledRule& cr = set.rules[rule[i]];
      if (cr.per_key.kind != KeyKind::none) {
        make_key(cr.key_shape, parsed[i], keys[i]);
        if (cr.placement == Placement::by_key_hash && !placed && hand_off(i)) continue;
      }
      lengths[i] = metered_length(burst[i], parsed[i], cr.length);
      in[i] = cr.input == InputColor::blind ? Color::green : input_color(cr, parsed[i]);
      other_rules |= rule[i] ^ rule[0];
      order[metered++] = static_cast<std::uint8_t>(i);
    }
  }
  const bool one_rule =
      other_rules == 0 || std::all_of(order, order + metered, [&](std::uint8_t i) { return rule[i] == rule[order[0]]; });
  // Every packet metered here, under one rule: the burst's own arrays serve the meters as they are.
  const bool whole_burst = one_rule && metered == n;
  // A burst of one rule (the usual case: one rule, or one flow's packets) is in order already.
  if (!one_rule)
    std::sort(order, order + metered, [&](std::uint8_t a, std::uint8_t b) {
      return rule[a] != rule[b] ? rule[a] < rule[b] : a < b;
    });

  for (std::size_t start = 0; start < metered;) {
    const std::uint32_t r = rule[order[start]];
    std::size_t end = one_rule ? metered : start;
    while (end < metered && rule[order[end]] == r) ++end;
    const std::size_t count = end - start;
    const std::span<const std::uint8_t> group(order + start, count);
    const CompiledRule& cr = set.rules[r];
    const WorkerRule& mine = set.worker_rule(r, id_);
    const bool blind = cr.input == InputColor::blind;

    // The group's arrivals, lengths and input colors in its order: the burst's own, or gathered.
    const std::uint64_t* times_of = times;
    const std::uint32_t* lengths_of = lengths;
    const Color* in_of = in;
    std::uint64_t group_times[kMaxBurst];
    std::uint32_t group_lengths[kMaxBurst];
    Color group_in[kMaxBurst];
    if (!whole_burst) {
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = group[k];
        group_times[k] = times[i];
        group_lengths[k] = lengths[i];
        group_in[k] = in[i];
      }
      times_of = group_times;
      lengths_of = group_lengths;
      in_of = group_in;
    }
    const std::span<const std::uint64_t> times_k(times_of, count);
    const std::span<const std::uint32_t> lengths_k(lengths_of, count);
    const std::span<const Color> in_k(in_of, count);
    Color out[kMaxBurst];
    // A shaping rule's packets: green with the ticks each waits, or late (red). Written only for them.
    std::uint32_t delays[kMaxBurst];
    const bool shaping = cr.shape_max_delay != 0;
    std::size_t table_full = 0;  // new keys of a per-key rule that found its table full
    Finished finished;           // the group's verdicts, if meter_keyed wrote them
    finished.colors_only = unwritten;
    if (cr.per_key.kind == KeyKind::none) {
      if (shaping) [[unlikely]]
        shape_shared(*mine.aggregate, cr, mine, times_k, lengths_k, {delays, count}, {out, count});
      else
        check_shared(*mine.aggregate, *cr.profile, cr.profile_generation, cr.history, times_k, lengths_k,
                     blind ? std::span<const Color>() : in_k, {out, count});
    } else {
      // The group finished by meter_keyed if it can be (Finished): the whole burst in order, nothing
      // after the key's meter that reads its color, no remark of a green packet (the input green).
      const bool direct = meter_finishes_ && whole_burst && blind && !shaping && cr.parent == nullptr &&
                          cr.cluster == nullptr && !rewrites_green(cr);
      table_full = meter_keyed(set, r, group, std::span<const MeterKey>(keys, n), burst.first(n), times_k, lengths_k,
                               in_k, {out, count}, {delays, shaping ? count : 0}, verdicts, {parsed, n},
                               uniform ? key_hashes : nullptr, uniform && ipv4_keys, direct ? &finished : nullptr,
                               plain ? &arrays.key_words : nullptr);
      if (table_full != 0 && !parsed_built) {  // a plain burst's: the fallback's default action reads the Parsed
        for (std::size_t i = 0; i < n; ++i) ::new (static_cast<void*>(&parsed[i])) Parsed(parse(burst[i]));
        parsed_built = true;
      }
    }

    // Hierarchy: the packets the child did not mark red go on to the parent, color-aware with the
    // child's color as input; the parent's color is the packet's. Red ones skip it; nothing is refunded.
    if (cr.parent != nullptr) {
      std::uint64_t p_times[kMaxBurst];
      std::uint32_t p_lengths[kMaxBurst];
      Color p_in[kMaxBurst], p_out[kMaxBurst];
      std::size_t p_slot[kMaxBurst], forwarded = 0;
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = group[k];
        if (out[k] == Color::red || unmetered(verdicts[i], cr.per_key.fallback) || verdicts[i].flow_refused) continue;
        p_times[forwarded] = times_k[k];
        p_lengths[forwarded] = lengths_k[k];
        p_in[forwarded] = out[k];
        p_slot[forwarded++] = k;
      }
      if (forwarded != 0) {
        check_shared(*mine.parent, *cr.parent_profile, cr.parent_generation, cr.parent_history, {p_times, forwarded},
                     {p_lengths, forwarded}, {p_in, forwarded}, {p_out, forwarded});
        for (std::size_t j = 0; j < forwarded; ++j) out[p_slot[j]] = p_out[j];
      }
    }

    // A cluster meter last: the packets still green keep green only on the cluster's leased tokens
    // (one critical section for the burst). Unmetered packets are not the cluster's.
    if (cr.cluster != nullptr) {
      std::uint64_t c_times[kMaxBurst];
      std::uint32_t c_lengths[kMaxBurst];
      Color c_out[kMaxBurst];
      std::size_t c_slot[kMaxBurst], green = 0;
      for (std::size_t k = 0; k < count; ++k) {
        if (out[k] != Color::green || unmetered(verdicts[group[k]], cr.per_key.fallback) || verdicts[group[k]].flow_refused)
          continue;
        c_times[green] = times_k[k];
        c_lengths[green] = lengths_k[k];
        c_out[green] = Color::green;
        c_slot[green++] = k;
      }
      if (green != 0) {
        cr.cluster->gate(*cr.cluster_share, cr.cluster_share_generation, {c_times, green}, {c_lengths, green}, {c_out, green});
        for (std::size_t j = 0; j < green; ++j) out[c_slot[j]] = c_out[j];
      }
    }

    // The rule's counters summed here and added once per burst: an atomic word each (readers on other
    // threads), which the compiler may not merge across packets.
    WorkerRuleCounters& counters = *mine.counters;
    const bool keyed = cr.per_key.kind != KeyKind::none;
    std::uint64_t packets[3] = {}, bytes_by_color[3] = {}, dropped = 0, dropped_bytes = 0, held = 0, overflow = 0;
    std::size_t skipped = 0;  // unmetered packets (fallen back, not to the aggregate meter)
    // The loop in forms: `usual`, no packet of the group found its key table full and the rule does
    // not shape, so that neither is tested per packet, and of those `green_in`, a color-blind rule's
    // (every input color green, known, not read), and `in_order`, a group that is the whole burst in
    // its order (its k-th packet the burst's k-th, not looked up); any other group.
    const auto finish = [&](auto usual_constant, auto green_in_constant, auto in_order_constant)
                            __attribute__((always_inline)) {
      constexpr bool usual = decltype(usual_constant)::value;
      constexpr bool green_in = decltype(green_in_constant)::value;
      constexpr bool in_order = decltype(in_order_constant)::value;
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = in_order ? k : group[k];
        Verdict& v = verdicts[i];
        v.rule = r;
        const Color input = green_in ? Color::green : in_k[k];
        v.in = input;
        v.metered_length = lengths_k[k];
        // Read only where a packet of the group found the table full (no load per packet otherwise).
        const bool fell_back = !usual && table_full != 0 && v.table_full;
        v.keyed = keyed && !fell_back;  // a key's meter (or its flow limit) decided it
        if (fell_back && unmetered(v, cr.per_key.fallback)) [[unlikely]] {
          // Unmetered: the policy's default action, or a drop.
          if (cr.per_key.fallback == KeyFallback::drop) v.drop = true;
          else apply(burst[i], parsed[i], set.default_action, v);
          v.out = Color::red;  // reported, not counted per color: the packet was not metered
          if (v.drop) {
            ++dropped;
            dropped_bytes += l2_bytes(burst[i]);
          }
          ++skipped;
          continue;
        }
        v.out = out[k];
        const std::size_t color = static_cast<std::size_t>(out[k]);
        const std::uint32_t bytes = l2_bytes(burst[i]);
        ++packets[color];
        bytes_by_color[color] += bytes;
        const std::size_t in = static_cast<std::size_t>(input);
        // apply(), from the pair's bits: the Action itself read only to rewrite.
        const std::uint8_t does = cr.action_does[3 * in + color];
        if (does & action_does::rewrite) [[unlikely]]
          rewrite(burst[i], parsed[i], cr.action[in][color], v);
        v.drop = (does & action_does::drop) != 0;
        if (v.drop) {
          ++dropped;
          dropped_bytes += bytes;
          if (!usual && shaping && out[k] == Color::red && delays[k] == policer::kQueueFullMark) [[unlikely]] {
            v.queue_full = true;
            ++overflow;
          }
        } else if (!usual && shaping && delays[k] != 0) [[unlikely]] {
          v.delay = delays[k];
          ++held;
        }
      }
    };
    // A plain burst's verdicts not written yet (`unwritten`): an aggregate rule's, or a per-key rule's
    // that meter_keyed finished with its colors only; it left any other fresh.
    const bool pending = unwritten && (!keyed || finished.done);
    if (pending && !keyed) {
      for (std::size_t k = 0; k < count; ++k) {  // the whole burst, in order
        const auto c = static_cast<std::size_t>(out[k]);
        ++finished.packets[c];
        finished.bytes[c] += l2_bytes(burst[k]);
      }
      finished.done = true;
    }
    std::uint64_t dropping_colors = 0;  // bit c: color c's action drops (the input green)
    if (finished.done) {
      for (std::size_t c = 0; c < 3; ++c) {
        packets[c] = finished.packets[c];
        bytes_by_color[c] = finished.bytes[c];
        if ((cr.action_does[c] & action_does::drop) != 0) {
          dropped += packets[c];
          dropped_bytes += bytes_by_color[c];
          dropping_colors |= std::uint64_t{1} << c;
        }
      }
    }
    if (finished.done) {
      // Written by meter_keyed, or not needed (a burst left unwritten: whole, or split by its mask below).
    } else if (table_full == 0 && !shaping) {
      const auto usual = [&](auto green_in_constant) __attribute__((always_inline)) {
        if (whole_burst) finish(std::true_type{}, green_in_constant, std::true_type{});
        else finish(std::true_type{}, green_in_constant, std::false_type{});
      };
      if (blind) usual(std::true_type{});
      else usual(std::false_type{});
    } else {
      finish(std::false_type{}, std::false_type{}, std::false_type{});
    }
    for (std::size_t c = 0; c < 3; ++c) {
      if (packets[c] == 0) continue;
      counters.packets[c].add(packets[c]);
      counters.bytes[c].add(bytes_by_color[c]);
    }
    if (dropped != 0) {
      counters.dropped_packets.add(dropped);
      counters.dropped_bytes.add(dropped_bytes);
    }
    if (held != 0) counters.shaped_packets.add(held);
    // The whole burst, every packet metered here: each dropped one was counted, each held one too.
    if (whole_burst) {
      whole_burst_ = dropped == 0 && held == 0 ? WholeBurst::forwarded
                     : dropped == count        ? WholeBurst::dropped
                                               : WholeBurst::mixed;
      // Mixed, its verdicts left unwritten: every packet forwarded now or dropped by its color's action
      // (the input green, no remark: plain_rule()), which ones a bit each says (WholeBurst::split). A
      // burst policed well above its rate is mixed nearly always (a few packets green a burst): a bit a
      // packet instead of a verdict written (a fresh one and five fields) and read again (issue 23).
      if (pending && whole_burst_ == WholeBurst::mixed) {
        std::uint64_t mask = 0;
        for (std::size_t k = 0; k < count; ++k)  // the whole burst, in order
          mask |= (dropping_colors >> static_cast<unsigned>(out[k]) & 1) << k;
        dropped_mask_ = mask;
        whole_burst_ = WholeBurst::split;
      }
    }
    if (overflow != 0) [[unlikely]] counters.queue_overflow_packets.add(overflow);
    // The ticks of the group's first and last metered packets: the burst's own when it is all of them.
    if (whole_burst && skipped == 0) {
      counters.note_metered(earliest, latest);
    } else if (skipped != count) {
      std::uint64_t first_metered = UINT64_MAX, last_metered = 0;
      for (std::size_t k = 0; k < count; ++k) {
        if (skipped != 0 && unmetered(verdicts[group[k]], cr.per_key.fallback)) continue;
        first_metered = std::min(first_metered, times_k[k]);
        last_metered = std::max(last_metered, times_k[k]);
      }
      counters.note_metered(first_metered, last_metered);
    }
    start = end;
  }
  sweep_keys(set, latest);
  return set;
}

}  // namespace tricolor::dataplane
