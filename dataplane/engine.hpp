#pragma once
// The policy engine: parse, classify, meter and act on bursts of packet views. The daemon's workers
// and tricolor-replay run this same code.
//
// Per burst: every frame is parsed, the IP ones are classified together (rte_acl), the packets of each
// rule are metered together: by the rule's aggregate meter (one critical section per rule per burst),
// or by one meter per key in the rule's key tables (owned by this engine: no lock), then by the rule's
// parent meter if it has one (hierarchy); then each packet's action is applied by (input, output)
// color. No allocation (but a key table's amortised chunk), no lock per packet.
//
// A policy change builds a new classifier, rule table and key tables aside and swaps them in: a change
// that cannot be made (a bad reference, a limit, memory that cannot be had) leaves the engine as it
// was. Meters and counters belong to rule names, not to a build: a rule that keeps its name keeps its
// meter's levels (moved to its new profile with policer's live change) and its counters.
//
// Memory of a per-key rule: its key table's index and bookkeeping are allocated and made resident
// when the rule is installed (KeyTable::index_bytes_for(capacity): 16 bytes per key of capacity and a
// little more), so that a policy whose indexes cannot be had is refused then, not at some packet;
// entries (128 bytes a key, in chunks of 4096) follow the live keys.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/classifier.hpp"
#include "dataplane/key_table.hpp"
#include "dataplane/keys.hpp"
#include "dataplane/packet.hpp"
#include "dataplane/policy.hpp"
#include "policer/expected.hpp"
#include "policer/profile.hpp"
#include "policer/shared_meter.hpp"

namespace tricolor::dataplane {

// Why a packet took the default action.
enum class DefaultReason : std::uint8_t { none, malformed, non_ip, no_match };

struct Verdict {
  std::uint32_t rule = kNoRule;       // index in the policy's rules, or kNoRule (default action)
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
};

// Counts, per rule and output color, of packets and bytes (L2 frame bytes, a stripped tag counted).
struct RuleCounters {
  std::array<std::uint64_t, 3> packets{};
  std::array<std::uint64_t, 3> bytes{};
  std::uint64_t dropped_packets = 0;  // dropped by the rule's action for their color
  std::uint64_t dropped_bytes = 0;
  // Per-key rules: keys created, keys renewed after idling past the timeout, packets of new keys that
  // found the table full (they took the rule's fallback).
  std::uint64_t keys_created = 0;
  std::uint64_t keys_renewed = 0;
  std::uint64_t table_full = 0;
};

struct DefaultCounters {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
  std::uint64_t non_ip = 0;
  std::uint64_t no_match = 0;
  std::array<std::uint64_t, kParseErrors> malformed{};  // by ParseError
  std::uint64_t dropped_packets = 0;
  std::uint64_t dropped_bytes = 0;
};

// What a policy may cost, checked at every create and update (tricolor-replay and the daemon let an
// operator raise it).
struct EngineLimits {
  std::size_t max_classifier_entries = kDefaultMaxClassifierEntries;  // see classifier.hpp
};

class Engine {
 public:
  static constexpr std::size_t kMaxBurst = Classifier::kMaxBurst;

  // Needs the EAL (the classifier). `now` is the tick at which the meters are created (full).
  static Expected<std::unique_ptr<Engine>> create(const Policy& policy, policer::TickRate tick_rate,
                                                  std::uint64_t now, const EngineLimits& limits = {});

  // Replaces the policy; on error (a bad reference, a rule name twice, the classifier's limits, a key
  // index or anything else that cannot be allocated) nothing changes. Rules keep their meter and
  // counters by name. The first form keeps the engine's limits; the second replaces them if it
  // succeeds. Linear in the rules, profiles and color maps (but the classifier's build).
  Expected<bool> update(const Policy& policy, std::uint64_t now);
  Expected<bool> update(const Policy& policy, std::uint64_t now, const EngineLimits& limits);
  const EngineLimits& limits() const noexcept { return limits_; }

  // Processes up to kMaxBurst packets; remarks are written into the frames.
  void process(std::span<PacketView> burst, std::span<Verdict> verdicts) noexcept;

  const Policy& policy() const noexcept { return policy_; }
  // Counters of the current policy's rules, in rule order.
  const RuleCounters& counters(std::size_t rule) const noexcept { return *rules_[rule].counters; }
  const DefaultCounters& default_counters() const noexcept { return default_counters_; }
  std::size_t classifier_entries() const noexcept { return classifier_->entries(); }

  // Per-key rules: every live key's counters, as consistent copies (a reader: never blocks metering).
  using KeyVisitor = std::function<void(const MeterKey& key, const KeyCounters& counters)>;
  void for_each_key(std::size_t rule, const KeyVisitor& fn) const;
  std::size_t live_keys(std::size_t rule) const noexcept;
  // A per-key rule's key table: its index and bookkeeping (fixed from the rule's installation on),
  // its entries (following the live keys), and both. 0 for other rules.
  std::size_t key_index_bytes(std::size_t rule) const noexcept;
  std::size_t key_entry_bytes(std::size_t rule) const noexcept;
  std::size_t key_memory_bytes(std::size_t rule) const noexcept;

  ~Engine();

 private:
  struct RuleState;
  struct CompiledRule {
    RuleState* state = nullptr;
    RuleCounters* counters = nullptr;
    InputColor input = InputColor::blind;
    MeteredLength length;
    std::array<std::array<Action, 3>, 3> action{};  // [input][output]
    // Input colors (InputColor::mapped): the maps copied here, null when the rule has none.
    bool has_pcp_map = false, has_dscp_map = false;
    std::array<Color, 8> pcp_map{};
    std::array<Color, 64> dscp_map{};
    Color input_default = Color::green;
    // Per-key rules.
    PerKey per_key;
    const policer::Profile* key_profile = nullptr;       // every key's meter
    const policer::Profile* key_profile_before = nullptr;  // the keys' profile before the last change
    std::uint64_t key_profile_changed_at = 0;             // ... and when it changed
    policer::SharedMeter* parent = nullptr;               // hierarchy
  };

  struct Plan;
  Expected<bool> prepare(const Policy& policy, std::uint64_t now, const EngineLimits& limits, Plan& plan) const;
  void commit(Plan& plan, std::uint64_t now) noexcept;

  Color input_color(const CompiledRule& rule, const Parsed& parsed) const noexcept;
  void meter_keyed(CompiledRule& rule, std::span<const std::uint8_t> packets, std::span<const PacketView> burst,
                   std::span<const Parsed> parsed, std::span<const std::uint32_t> lengths, std::span<const Color> in,
                   std::span<Color> out, std::span<Verdict> verdicts) noexcept;
  void sweep_keys(std::uint64_t now) noexcept;

  explicit Engine(policer::TickRate tick_rate);
  void apply(PacketView& view, const Parsed& parsed, const Action& action, Verdict& verdict) noexcept;
  void take_default(PacketView& view, const Parsed& parsed, DefaultReason reason, Verdict& verdict) noexcept;

  policer::TickRate tick_rate_;
  EngineLimits limits_;
  Policy policy_;
  std::unique_ptr<Classifier> classifier_;
  std::vector<CompiledRule> rules_;
  // Owned across builds, keyed by name. Profiles replaced by a change stay alive until the engine
  // goes (a worker may still be reading them; the control issue retires them after a grace period).
  std::map<std::string, std::unique_ptr<policer::Profile>> profiles_;
  std::vector<std::unique_ptr<policer::Profile>> retired_profiles_;
  std::map<std::string, std::unique_ptr<RuleState>> rule_states_;
  std::vector<RuleState*> keyed_states_;  // rules with key tables, swept in turn
  std::size_t sweep_cursor_ = 0;
  DefaultCounters default_counters_;
};

// The metered length of a packet for a rule (see MeteredLength), floored at 0.
std::uint32_t metered_length(const PacketView& view, const Parsed& parsed, const MeteredLength& length) noexcept;

}  // namespace tricolor::dataplane
