// Color maps, per-key meters, hierarchy (parent) and mapped input colors: what the commands make of
// the policy model, and what uses a profile or a color map.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "control/language/language.hpp"
#include "language_test_support.hpp"

namespace tricolor::control {
namespace {

using dataplane::Action;
using dataplane::ColorMap;
using dataplane::ColorMapKind;
using dataplane::InputColor;
using dataplane::KeyFallback;
using dataplane::KeyKind;
using dataplane::PerKey;
using dataplane::Policy;
using dataplane::Rule;
using policer::Color;
using testing::kBaseConfig;
using testing::kMapConfig;
using testing::must_load;
using testing::must_run;
using testing::rule_names;

using Names = std::vector<std::string>;

Policy map_policy() { return must_load(kMapConfig, must_load(kBaseConfig)); }

// The colors of a map's used entries, one letter each: g, y, r.
std::string colors_of(const ColorMap& map) {
  std::string text;
  const std::size_t size = map.kind == ColorMapKind::dscp ? 64 : 8;
  for (std::size_t i = 0; i < size; ++i) text += "gyr"[static_cast<std::size_t>(map.colors[i])];
  return text;
}

// ---- color maps ----

TEST(LanguageColorMap, AddMapsValuesToColors) {
  Policy policy;
  must_run(policy, {"color-map add af dscp yellow af12,af22,af32,af42 red af13,af23,af33,af43",
                    "color-map add ranges dscp red 0-3,60-63 yellow 10,cs1,9 green 4-7",
                    "color-map add prio pcp yellow 1-3 red 0,7", "color-map add all pcp green 0-7"});
  ASSERT_EQ(policy.color_maps.size(), 4u);
  const ColorMap& af = policy.color_maps[0];
  EXPECT_EQ(af.name, "af");
  EXPECT_EQ(af.kind, ColorMapKind::dscp);
  for (std::size_t dscp = 0; dscp < 64; ++dscp)  // the RFC 2597 map of `input dscp`
    EXPECT_EQ(af.colors[dscp], dataplane::color_from_dscp(static_cast<std::uint8_t>(dscp))) << dscp;
  EXPECT_EQ(colors_of(policy.color_maps[1]), "rrrrggggyyy" + std::string(49, 'g') + "rrrr");
  const ColorMap& prio = policy.color_maps[2];
  EXPECT_EQ(prio.kind, ColorMapKind::pcp);
  EXPECT_EQ(colors_of(prio), "ryyygggr");
  for (std::size_t i = 8; i < 64; ++i) EXPECT_EQ(prio.colors[i], Color::green);  // unused entries
  EXPECT_EQ(policy.color_maps[3].colors, ColorMap{}.colors);
}

TEST(LanguageColorMap, DuplicatesUnderOneColorAreHarmless) {
  Policy policy;
  must_run(policy, {"color-map add a dscp yellow 12,af12,10-14,11 red 20", "color-map add b dscp yellow 10-14 red 20"});
  EXPECT_EQ(policy.color_maps[0].colors, policy.color_maps[1].colors);
}

TEST(LanguageColorMap, OwnNamespace) {
  Policy policy = must_load(kBaseConfig);
  // A color map may share its name with a profile and a rule.
  must_run(policy, {"color-map add gold dscp red 1", "color-map add web pcp red 1", "color-map add Red pcp red 2",
                    "rule add r profile gold input map dscp-map gold pcp-map web"});
  EXPECT_EQ(policy.color_maps.size(), 3u);
  EXPECT_EQ(policy.rules[1].dscp_map, "gold");
  EXPECT_EQ(policy.rules[1].pcp_map, "web");
  EXPECT_EQ(policy.rules[1].profile, "gold");
}

TEST(LanguageColorMap, ChangeReplacesTheWholeMapInPlace) {
  Policy policy = map_policy();
  must_run(policy, {"color-map change af dscp red 1-2"});
  ASSERT_EQ(policy.color_maps.size(), 3u);
  EXPECT_EQ(policy.color_maps[0].name, "af");  // keeps its place
  EXPECT_EQ(colors_of(policy.color_maps[0]), "grr" + std::string(61, 'g'));
  // The kind may change while no rule uses the map.
  must_run(policy, {"color-map change spare pcp yellow 5"});
  EXPECT_EQ(policy.color_maps[2].kind, ColorMapKind::pcp);
  EXPECT_EQ(colors_of(policy.color_maps[2]), "gggggygg");
  for (std::size_t i = 8; i < 64; ++i) EXPECT_EQ(policy.color_maps[2].colors[i], Color::green);
  must_run(policy, {"color-map change spare dscp yellow 63"});
  EXPECT_EQ(colors_of(policy.color_maps[2]), std::string(63, 'g') + "y");
  // A used map keeps its kind, with new values.
  must_run(policy, {"color-map change prio pcp red 0-7"});
  EXPECT_EQ(colors_of(policy.color_maps[1]), "rrrrrrrr");
  // Once the rule is gone, its maps may change kind.
  must_run(policy, {"rule delete cust", "color-map change prio dscp red 7", "color-map change af pcp yellow 7"});
  EXPECT_EQ(policy.color_maps[1].kind, ColorMapKind::dscp);
  EXPECT_EQ(policy.color_maps[0].kind, ColorMapKind::pcp);
}

TEST(LanguageColorMap, DeleteOnceNoRuleUsesIt) {
  Policy policy = map_policy();
  must_run(policy, {"color-map delete spare"});
  ASSERT_EQ(policy.color_maps.size(), 2u);
  EXPECT_FALSE(execute(policy, "color-map delete af").ok());
  must_run(policy, {"rule change cust profile dns input map pcp-map prio", "color-map delete af"});
  EXPECT_FALSE(execute(policy, "color-map delete prio").ok());
  must_run(policy, {"rule change cust profile dns input dscp", "color-map delete prio"});
  EXPECT_TRUE(policy.color_maps.empty());
}

TEST(LanguageColorMap, InUseNamesTheFirstRuleAndCountsTheOthers) {
  Policy policy = map_policy();
  must_run(policy, {"rule add a first profile gold input map dscp-map af",
                    "rule add b profile gold input map "
                    "dscp-map af pcp-map prio"});
  auto result = execute(policy, "color-map delete af");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message,
            "'af': color map af is used by rule a as its dscp-map and 2 other rules; change or delete those rules "
            "first");
  result = execute(policy, "color-map delete prio");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message,
            "'prio': color map prio is used by rule cust as its pcp-map and 1 other rule; change or delete those "
            "rules first");
  result = execute(policy, "color-map change af pcp red 1");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message,
            "'pcp': color map af is used by rule a as its dscp-map, which needs a dscp map; change or delete that "
            "rule first");
}

TEST(LanguageColorMap, ListPrintsTheAddCommands) {
  Policy policy;
  EXPECT_EQ(must_run(policy, {"color-map list"}), "");
  policy = map_policy();
  EXPECT_EQ(must_run(policy, {"color-map list"}),
            "color-map add af dscp yellow af12,af22 red af13,af23\n"
            "color-map add prio pcp yellow 1-3 red 0\n"
            "color-map add spare dscp red 1\n");
}

// ---- per-key meters ----

TEST(LanguagePerKey, KindsAndMasks) {
  struct Case {
    std::string text;
    KeyKind kind;
    int ipv4, ipv6;
  };
  for (const Case& c : std::vector<Case>{{"src", KeyKind::src, 32, 128},
                                         {"dst", KeyKind::dst, 32, 128},
                                         {"src+dport", KeyKind::src_dport, 32, 128},
                                         {"5-tuple", KeyKind::five_tuple, 32, 128},
                                         {"src/24", KeyKind::src, 24, 128},
                                         {"dst/0", KeyKind::dst, 0, 128},
                                         {"src/24,64", KeyKind::src, 24, 64},
                                         {"src+dport/32,48", KeyKind::src_dport, 32, 48},
                                         {"5-tuple/16,0", KeyKind::five_tuple, 16, 0},
                                         {"dst/032,0128", KeyKind::dst, 32, 128}}) {
    Policy policy = must_load(kBaseConfig);
    must_run(policy, {"rule add r profile gold per " + c.text});
    PerKey expected;
    expected.kind = c.kind;
    expected.ipv4_prefix = static_cast<std::uint8_t>(c.ipv4);
    expected.ipv6_prefix = static_cast<std::uint8_t>(c.ipv6);
    EXPECT_EQ(policy.rules[1].per_key, expected) << c.text;
  }
}

TEST(LanguagePerKey, DefaultsAreThoseOfTheModel) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule add r profile gold per src timeout 60s capacity 1m fallback aggregate"});
  PerKey expected;
  expected.kind = KeyKind::src;
  EXPECT_EQ(policy.rules[1].per_key, expected);
  EXPECT_EQ(expected.idle_timeout_ns, 60'000'000'000u);
  EXPECT_EQ(expected.capacity, 1u << 20);
  EXPECT_EQ(expected.fallback, KeyFallback::aggregate);
  EXPECT_EQ(print(policy).find("timeout"), std::string::npos);
}

TEST(LanguagePerKey, Timeouts) {
  const std::vector<std::pair<std::string, std::uint64_t>> cases{
      {"1ms", 1'000'000},
      {"1000us", 1'000'000},
      {"1000000ns", 1'000'000},
      {"500ms", 500'000'000},
      {"30s", 30'000'000'000},
      {"2m", 120'000'000'000},
      {"1.5s", 1'500'000'000},
      {"0.5m", 30'000'000'000},
      {"1.000s", 1'000'000'000},
      {"0.001s", 1'000'000},
      {"1.5h", 5'400'000'000'000},
      {"24h", 86'400'000'000'000},
      {"1440m", 86'400'000'000'000},
      {"86400000000000ns", 86'400'000'000'000},
      {"1234567890ns", 1'234'567'890},
      {"007s", 7'000'000'000},
      {"30S", 30'000'000'000},  // units in any case, as those of rates and bursts
      {"500MS", 500'000'000},
      {"2M", 120'000'000'000},
  };
  for (const auto& [text, ns] : cases) {
    Policy policy = must_load(kBaseConfig);
    must_run(policy, {"rule add r profile gold per dst timeout " + text});
    EXPECT_EQ(policy.rules[1].per_key.idle_timeout_ns, ns) << text;
  }
}

TEST(LanguagePerKey, Capacities) {
  const std::vector<std::pair<std::string, std::uint32_t>> cases{
      {"1", 1},           {"1000", 1000},     {"64k", 65536},          {"1m", 1u << 20},      {"1.5k", 1536},
      {"0.5m", 1u << 19}, {"256m", 1u << 28}, {"268435456", 1u << 28}, {"262144k", 1u << 28}, {"0.25k", 256},
      {"64K", 65536},     {"1M", 1u << 20},   {"4096", 4096}};
  for (const auto& [text, keys] : cases) {
    Policy policy = must_load(kBaseConfig);
    must_run(policy, {"rule add r profile gold per dst capacity " + text});
    EXPECT_EQ(policy.rules[1].per_key.capacity, keys) << text;
  }
}

TEST(LanguagePerKey, Fallbacks) {
  const std::vector<std::pair<std::string, KeyFallback>> cases{
      {"aggregate", KeyFallback::aggregate}, {"default", KeyFallback::default_action}, {"drop", KeyFallback::drop}};
  for (const auto& [text, fallback] : cases) {
    Policy policy = must_load(kBaseConfig);
    must_run(policy, {"rule add r profile gold per 5-tuple fallback " + text});
    EXPECT_EQ(policy.rules[1].per_key.fallback, fallback) << text;
  }
}

TEST(LanguagePerKey, ClausesInAnyOrderMeanTheSame) {
  Policy a = must_load(kBaseConfig), b = must_load(kBaseConfig);
  must_run(a, {"rule add r proto udp profile gold per src/24,56 timeout 10s capacity 64k fallback drop parent dns"});
  must_run(b, {"rule add r fallback drop capacity 65536 timeout 10000ms parent dns per src/24,56 profile gold "
               "proto 17"});
  EXPECT_EQ(a, b);
  PerKey expected{KeyKind::src, 24, 56, 10'000'000'000, 65536, KeyFallback::drop};
  EXPECT_EQ(a.rules[1].per_key, expected);
}

TEST(LanguagePerKey, RuleChangeReplacesPerKeyToo) {
  Policy policy = map_policy();
  must_run(policy, {"rule change cust profile dns"});
  Rule expected;
  expected.name = "cust";
  expected.profile = "dns";
  EXPECT_EQ(policy.rules[1], expected);
}

// ---- hierarchy ----

TEST(LanguageParent, MapsToTheModel) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule add r profile dns parent gold", "rule add s profile gold parent gold per src"});
  EXPECT_EQ(policy.rules[1].parent, "gold");
  EXPECT_EQ(policy.rules[1].per_key.kind, KeyKind::none);  // a parent above an aggregate meter
  EXPECT_EQ(policy.rules[2].parent, "gold");               // the same profile as the rule's own
  EXPECT_FALSE(policy.rules[0].parent);
}

TEST(LanguageParent, AParentProfileIsInUse) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"profile add top srtcm cir 10mbit cbs 64k", "rule add a profile dns parent top",
                    "rule add b profile top", "rule add c profile gold parent top"});
  auto result = execute(policy, "profile delete top");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message,
            "'top': profile top is used by rule a as its parent and 2 other rules; change or delete those rules "
            "first");
  must_run(policy, {"rule delete a"});
  result = execute(policy, "profile delete top");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message,
            "'top': profile top is used by rule b and 1 other rule; change or delete those rules first");
  must_run(policy, {"rule delete b", "rule change c profile gold"});
  must_run(policy, {"profile delete top"});
  EXPECT_EQ(policy.profiles.size(), 2u);
  // A profile that is both the rule's and its parent is named once.
  must_run(policy, {"rule add d profile dns parent dns"});
  result = execute(policy, "profile delete dns");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message, "'dns': profile dns is used by rule d; change or delete that rule first");
}

TEST(LanguageParent, ProfileChangeKeepsTheParent) {
  Policy policy = map_policy();
  must_run(policy, {"profile change silver trtcm cir 1kpps cbs 10pkt pir 2kpps pbs 20pkt"});
  EXPECT_EQ(policy.rules[1].parent, "silver");
}

// ---- mapped input colors ----

TEST(LanguageInputMap, MapsToTheModel) {
  const Policy policy = map_policy();
  const Rule& r = policy.rules[1];
  EXPECT_EQ(r.name, "cust");
  EXPECT_EQ(r.input, InputColor::mapped);
  EXPECT_EQ(r.pcp_map, "prio");
  EXPECT_EQ(r.dscp_map, "af");
  EXPECT_EQ(r.input_default, Color::yellow);
  EXPECT_EQ(r.parent, "silver");
  EXPECT_EQ(r.per_key.kind, KeyKind::src);
  EXPECT_EQ(r.per_key.ipv4_prefix, 24);
}

TEST(LanguageInputMap, EitherMapOrBothInAnyOrder) {
  Policy policy = map_policy();
  must_run(policy,
           {"rule add a profile gold input map pcp-map prio", "rule add b profile gold input map dscp-map spare",
            "rule add c profile gold input map unmapped red dscp-map af pcp-map prio",
            "rule add d profile gold input map pcp-map prio dscp-map af unmapped red",
            "rule add e profile gold input map dscp-map af unmapped green"});
  const auto& rules = policy.rules;
  EXPECT_EQ(rules[2].pcp_map, "prio");
  EXPECT_FALSE(rules[2].dscp_map);
  EXPECT_EQ(rules[2].input_default, Color::green);
  EXPECT_FALSE(rules[3].pcp_map);
  EXPECT_EQ(rules[3].dscp_map, "spare");
  Rule c = rules[4], d = rules[5];
  c.name = d.name = "";
  EXPECT_EQ(c, d);
  EXPECT_EQ(c.input_default, Color::red);
  EXPECT_EQ(rules[6].input_default, Color::green);
}

TEST(LanguageInputMap, PairActionsWithMappedInput) {
  Policy policy = map_policy();
  must_run(policy, {"rule add r profile gold input map dscp-map af green>yellow remark af12 yellow>red drop"});
  Action remark;
  remark.dscp = 12;
  EXPECT_EQ(policy.rules[2].on_pair[0][1], remark);
  EXPECT_EQ(policy.rules[2].on_pair[1][2], (Action{true, std::nullopt, std::nullopt}));
}

TEST(LanguageInputMap, OtherInputsLeaveTheMapFieldsAlone) {
  Policy policy = map_policy();
  must_run(policy, {"rule change cust profile dns input dscp"});
  EXPECT_EQ(policy.rules[1].input, InputColor::dscp);
  EXPECT_FALSE(policy.rules[1].pcp_map);
  EXPECT_FALSE(policy.rules[1].dscp_map);
  EXPECT_EQ(policy.rules[1].input_default, Color::green);
}

TEST(LanguageInputMap, RulePositionsStillWork) {
  Policy policy = map_policy();
  must_run(policy, {"rule add a before cust profile gold input map pcp-map prio per dst"});
  EXPECT_EQ(rule_names(policy), (Names{"web", "a", "cust"}));
}

}  // namespace
}  // namespace tricolor::control
