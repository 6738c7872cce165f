#pragma once
// Shared by the command language tests.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "control/language/language.hpp"

namespace tricolor::control::testing {

// Two profiles and one rule that most tests start from.
inline constexpr std::string_view kBaseConfig =
    "profile add gold trtcm cir 100mbit cbs 64k pir 200mbit pbs 128k\n"
    "profile add dns srtcm cir 10kpps cbs 64pkt ebs 128pkt\n"
    "rule add web dst 10.1.0.0/16 proto tcp dport 80,443 profile gold yellow remark af12 red drop\n";

// Added to kBaseConfig by the tests of color maps, per-key meters and hierarchy: a profile used only as a
// parent, three color maps (one unused) and a per-key rule that uses them.
inline constexpr std::string_view kMapConfig =
    "profile add silver srtcm cir 1mbit cbs 1k\n"
    "color-map add af dscp yellow af12,af22 red af13,af23\n"
    "color-map add prio pcp yellow 1-3 red 0\n"
    "color-map add spare dscp red 1\n"
    "rule add cust src 10.2.0.0/16 profile dns per src/24 parent silver input map pcp-map prio dscp-map af "
    "unmapped yellow\n";

// Loads a config that must be valid.
inline dataplane::Policy must_load(std::string_view text, const dataplane::Policy& base = {}) {
  auto loaded = load(text, base);
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.error().message);
  return loaded.ok() ? *loaded : dataplane::Policy{};
}

// Runs commands that must succeed; returns the output of the last one.
inline std::string must_run(dataplane::Policy& policy, const std::vector<std::string_view>& lines) {
  std::string output;
  for (const auto line : lines) {
    auto result = execute(policy, line);
    EXPECT_TRUE(result.ok()) << line << ": " << (result.ok() ? "" : result.error().message);
    output = result.ok() ? *result : std::string();
  }
  return output;
}

inline std::vector<std::string> rule_names(const dataplane::Policy& policy) {
  std::vector<std::string> names;
  for (const auto& rule : policy.rules) names.push_back(rule.name);
  return names;
}

}  // namespace tricolor::control::testing
