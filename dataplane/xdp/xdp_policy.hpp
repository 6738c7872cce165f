#pragma once
// A policy translated into the XDP program's map contents (xdp_maps.h), or refused, naming the rule
// and the reason, before anything is loaded or attached. The profiles are the engine's: each is
// policer::Profile::make(params, 1e9 ticks/s), the very object the engine meters with at that tick
// rate, copied field by field.
#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/policy.hpp"
#include "dataplane/xdp/xdp_maps.h"
#include "policer/expected.hpp"
#include "policer/profile.hpp"
#include "policer/state.hpp"

namespace tricolor::dataplane::xdp {

// The program's clock is bpf_ktime_get_ns: nanoseconds.
inline constexpr std::uint64_t kHz = 1'000'000'000;
inline constexpr std::size_t kMaxRules = TXDP_MAX_RULES;
inline constexpr std::size_t kMaxPortRanges = TXDP_MAX_PORT_RANGES;

static_assert(sizeof(txdp_profile) == 88);
static_assert(sizeof(txdp_action) == 4);
static_assert(sizeof(txdp_rule) % 8 == 0);
static_assert(sizeof(txdp_state) == sizeof(policer::State), "the meters' state is policer::State, word for word");
static_assert(sizeof(txdp_meter) == 40);
static_assert(sizeof(txdp_key) == 44);
static_assert(TXDP_KEY_SIZE == 40);
static_assert(TXDP_PARSE_ERRORS == kParseErrors && TXDP_PARSE_ERRORS <= TXDP_MALFORMED_SLOTS);
static_assert(TXDP_ONE_RATE_TWO_COLOR == static_cast<int>(policer::Algorithm::one_rate_two_color) &&
              TXDP_SRTCM == static_cast<int>(policer::Algorithm::srtcm) &&
              TXDP_TRTCM == static_cast<int>(policer::Algorithm::trtcm) &&
              TXDP_TRTCM_4115 == static_cast<int>(policer::Algorithm::trtcm_4115) &&
              TXDP_FIXED_WINDOW == static_cast<int>(policer::Algorithm::fixed_window) &&
              TXDP_GCRA == static_cast<int>(policer::Algorithm::gcra));

// What one half of the double-buffered rule set holds.
struct RuleSetImage {
  txdp_set set{};
  std::vector<txdp_rule> rules;   // first-match order
  std::vector<std::string> names; // the rules' names, in the same order
  // The slot of the rule at `position`: its meters, keys and counters.
  std::uint32_t slot_of(std::size_t position) const noexcept { return rules[position].slot; }
};

// Translates `policy`. `previous` (the image now live, or null) and `change_tick` make a live change:
// a rule of the same name keeps its slot, so its meters, keys and counters, wherever it moves in the
// first-match order; a new rule takes the lowest slot the previous image did not use (a slot freed by
// this change is reused from the next change on, when no packet can still read it under the old set).
// A kept rule whose profile (or parent's) changed gets the next profile version, with the old profile
// kept as prev_profile and `change_tick` as the tick the change takes effect; its meters catch up at
// their next check (policer::change_profile), as the engine's do.
Expected<RuleSetImage> translate(const Policy& policy, const RuleSetImage* previous = nullptr,
                                 std::uint64_t change_tick = 0);

// The program's form of a translated profile.
txdp_profile to_xdp(const policer::Profile& profile) noexcept;

}  // namespace tricolor::dataplane::xdp
