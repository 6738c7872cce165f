// The commands of the language and what they make of the policy model.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "control/language/language.hpp"
#include "control/language/words.hpp"
#include "language_test_support.hpp"

namespace tricolor::control {
namespace {

using dataplane::Action;
using dataplane::InputColor;
using dataplane::LengthBase;
using dataplane::Policy;
using dataplane::PortRange;
using dataplane::Prefix;
using dataplane::Rule;
using policer::Algorithm;
using policer::Params;
using policer::Unit;
using testing::kBaseConfig;
using testing::must_load;
using testing::must_run;
using testing::rule_names;

using Names = std::vector<std::string>;

Action drop() {
  Action a;
  a.drop = true;
  return a;
}
Action remark(std::uint8_t dscp) {
  Action a;
  a.dscp = dscp;
  return a;
}

Prefix ipv4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d, std::uint8_t length) {
  Prefix p;
  p.address[0] = a, p.address[1] = b, p.address[2] = c, p.address[3] = d;
  p.length = length;
  return p;
}

// ---- profiles ----

TEST(LanguageProfile, AddMapsEveryAlgorithmToParams) {
  Policy policy;
  must_run(policy, {
                       "profile add gold trtcm cir 100mbit cbs 64k pir 200mbit pbs 128k",
                       "profile add dns srtcm cir 10kpps cbs 64pkt ebs 128pkt",
                       "profile add one 1r2c cir 8bit cbs 1500",
                       "profile add ex trtcm4115 cir 1.5gbit cbs 1.5k eir 2.4kbit ebs 1m",
                       "profile add ex0 trtcm4115 eir 1kpps ebs 3pkt",
                   });
  ASSERT_EQ(policy.profiles.size(), 5u);
  EXPECT_EQ(policy.profiles[0].name, "gold");
  EXPECT_EQ(policy.profiles[0].params, (Params{.algorithm = Algorithm::trtcm,
                                               .unit = Unit::bytes,
                                               .cir = 12'500'000,
                                               .cbs = 65536,
                                               .eir = 0,
                                               .ebs = 0,
                                               .pir = 25'000'000,
                                               .pbs = 131072}));
  EXPECT_EQ(policy.profiles[1].params, (Params{.algorithm = Algorithm::srtcm,
                                               .unit = Unit::packets,
                                               .cir = 10'000,
                                               .cbs = 64,
                                               .eir = 0,
                                               .ebs = 128,
                                               .pir = 0,
                                               .pbs = 0}));
  EXPECT_EQ(policy.profiles[2].params, (Params{.algorithm = Algorithm::one_rate_two_color,
                                               .unit = Unit::bytes,
                                               .cir = 1,
                                               .cbs = 1500,
                                               .eir = 0,
                                               .ebs = 0,
                                               .pir = 0,
                                               .pbs = 0}));
  EXPECT_EQ(policy.profiles[3].params, (Params{.algorithm = Algorithm::trtcm_4115,
                                               .unit = Unit::bytes,
                                               .cir = 187'500'000,
                                               .cbs = 1536,
                                               .eir = 300,
                                               .ebs = 1 << 20,
                                               .pir = 0,
                                               .pbs = 0}));
  EXPECT_EQ(policy.profiles[4].params, (Params{.algorithm = Algorithm::trtcm_4115,
                                               .unit = Unit::packets,
                                               .cir = 0,
                                               .cbs = 0,
                                               .eir = 1000,
                                               .ebs = 3,
                                               .pir = 0,
                                               .pbs = 0}));
}

TEST(LanguageProfile, ParametersInAnyOrderAndZeroWithAUnit) {
  Policy policy;
  must_run(policy, {"profile add p trtcm pbs 2k pir 2mbit cbs 1k cir 1mbit",
                    "profile add q srtcm cir 1kpps cbs 0pkt ebs 5pkt"});
  EXPECT_EQ(policy.profiles[0].params.pbs, 2048u);
  EXPECT_EQ(policy.profiles[0].params.cir, 125'000u);
  EXPECT_EQ(policy.profiles[1].params.cbs, 0u);
  EXPECT_EQ(policy.profiles[1].params.unit, Unit::packets);
}

TEST(LanguageProfile, ChangeReplacesAllParametersInPlace) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"profile change gold srtcm cir 1kpps ebs 5pkt"});
  ASSERT_EQ(policy.profiles.size(), 2u);
  EXPECT_EQ(policy.profiles[0].name, "gold");  // keeps its place
  EXPECT_EQ(policy.profiles[0].params, (Params{.algorithm = Algorithm::srtcm,
                                               .unit = Unit::packets,
                                               .cir = 1000,
                                               .cbs = 0,
                                               .eir = 0,
                                               .ebs = 5,
                                               .pir = 0,
                                               .pbs = 0}));
  EXPECT_EQ(policy.rules[0].profile, "gold");  // rules still use it
}

TEST(LanguageProfile, DeleteOnceNoRuleUsesIt) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"profile delete dns"});
  ASSERT_EQ(policy.profiles.size(), 1u);
  EXPECT_FALSE(execute(policy, "profile delete gold").ok());
  must_run(policy, {"rule delete web", "profile delete gold"});
  EXPECT_TRUE(policy.profiles.empty());
}

TEST(LanguageProfile, InUseNamesTheFirstRuleAndCountsTheOthers) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule add a profile gold", "rule add b profile gold"});
  const auto result = execute(policy, "profile delete gold");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message,
            "'gold': profile gold is used by rule web and 2 other rules; change or delete those rules first");
  must_run(policy, {"rule delete a"});
  EXPECT_EQ(execute(policy, "profile delete gold").error().message,
            "'gold': profile gold is used by rule web and 1 other rule; change or delete those rules first");
}

TEST(LanguageProfile, ListPrintsTheAddCommands) {
  Policy policy;
  EXPECT_EQ(must_run(policy, {"profile list"}), "");
  must_run(policy, {"profile add b 1r2c cbs 1500b cir 0.1gbit", "profile add a trtcm4115 eir 1kpps ebs 1pkt"});
  EXPECT_EQ(must_run(policy, {"profile list"}),
            "profile add b 1r2c cir 100mbit cbs 1500\n"
            "profile add a trtcm4115 eir 1kpps ebs 1pkt\n");
}

TEST(LanguageNames, SyntaxLengthCaseAndSeparateNamespaces) {
  Policy policy;
  const std::string longest = "a" + std::string(63, 'z');
  must_run(policy, {
                       "profile add web srtcm cir 1mbit cbs 1k",
                       "profile add " + longest + " srtcm cir 1mbit cbs 1k",
                       "profile add Drop srtcm cir 1mbit cbs 1k",  // keywords are lower-case: Drop is a name
                       "rule add web profile web",                 // rules and profiles have separate names
                       "rule add a.b-c_9 profile " + longest,
                       "rule add TCP profile Drop",
                   });
  EXPECT_EQ(rule_names(policy), (Names{"web", "a.b-c_9", "TCP"}));
  EXPECT_EQ(policy.rules[1].profile, longest);
}

// ---- rules ----

TEST(LanguageRule, EveryClauseMapsToTheModel) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule add r port 3,1,65535 vlan 4095 src 192.168.0.0/24 dst 10.0.0.1 proto udp "
                    "sport 53,1024-65535 dport 0-1023 dscp be,cs1,af41,ef,va,63 profile dns input dscp "
                    "length l1-4 green pcp 7 yellow remark af12 pcp 0 red forward green>yellow drop "
                    "yellow>red pcp 2 remark cs7 green>green remark 1"});
  ASSERT_EQ(policy.rules.size(), 2u);
  const Rule& r = policy.rules[1];
  EXPECT_EQ(r.name, "r");
  EXPECT_EQ(r.match.ports, (std::vector<std::uint16_t>{3, 1, 65535}));
  EXPECT_EQ(r.match.vlan, 4095);
  EXPECT_EQ(r.match.src, ipv4(192, 168, 0, 0, 24));
  EXPECT_EQ(r.match.dst, ipv4(10, 0, 0, 1, 32));
  EXPECT_EQ(r.match.protocol, 17);
  EXPECT_EQ(r.match.src_ports, (std::vector<PortRange>{{53, 53}, {1024, 65535}}));
  EXPECT_EQ(r.match.dst_ports, (std::vector<PortRange>{{0, 1023}}));
  EXPECT_EQ(r.match.dscp, (std::vector<std::uint8_t>{0, 8, 34, 46, 44, 63}));
  EXPECT_EQ(r.profile, "dns");
  EXPECT_EQ(r.input, InputColor::dscp);
  EXPECT_EQ(r.length.base, LengthBase::l1);
  EXPECT_EQ(r.length.adjust, -4);
  Action pcp7;
  pcp7.pcp = 7;
  Action af12_pcp0 = remark(12);
  af12_pcp0.pcp = 0;
  Action cs7_pcp2 = remark(56);
  cs7_pcp2.pcp = 2;
  EXPECT_EQ(r.on_color[0], pcp7);
  EXPECT_EQ(r.on_color[1], af12_pcp0);
  EXPECT_EQ(r.on_color[2], Action{});
  EXPECT_EQ(r.on_pair[0][1], drop());
  EXPECT_EQ(r.on_pair[1][2], cs7_pcp2);
  EXPECT_EQ(r.on_pair[0][0], remark(1));
  EXPECT_FALSE(r.on_pair[0][2]);
  EXPECT_FALSE(r.on_pair[1][1]);
  EXPECT_FALSE(r.on_pair[2][2]);
}

TEST(LanguageRule, DefaultsAreThoseOfTheModel) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule add r profile gold"});
  Rule expected;
  expected.name = "r";
  expected.profile = "gold";
  EXPECT_EQ(policy.rules[1], expected);
  EXPECT_EQ(expected.on_color[2], drop());
  EXPECT_EQ(expected.length.base, LengthBase::l2);
}

TEST(LanguageRule, ClausesInAnyOrderMeanTheSame) {
  Policy a = must_load(kBaseConfig), b = must_load(kBaseConfig);
  must_run(a, {"rule add r dst 10.0.0.0/8 proto tcp dport 80 profile gold input dscp length l3 red remark 0 "
               "green>red drop"});
  must_run(b, {"rule add r green>red drop red remark be length l3 input dscp profile gold dport 80 proto 6 "
               "dst 10.0.0.0/8"});
  EXPECT_EQ(a, b);
}

TEST(LanguageRule, ProtocolsByNameAndNumber) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule add a proto tcp profile gold", "rule add b proto udp profile gold",
                    "rule add c proto sctp sport 1 profile gold", "rule add d proto icmp profile gold",
                    "rule add e proto icmpv6 profile gold", "rule add f proto 0 profile gold",
                    "rule add g proto 255 profile gold", "rule add h sport 7 profile gold"});
  std::vector<int> protocols;
  for (std::size_t i = 1; i < policy.rules.size(); ++i)
    protocols.push_back(policy.rules[i].match.protocol ? *policy.rules[i].match.protocol : -1);
  EXPECT_EQ(protocols, (std::vector<int>{6, 17, 132, 1, 58, 0, 255, -1}));
}

TEST(LanguageRule, DscpNames) {
  const std::vector<std::pair<std::string, int>> names{
      {"be", 0},    {"df", 0},    {"cs0", 0},   {"cs1", 8},   {"cs2", 16},  {"cs3", 24},  {"cs4", 32},
      {"cs5", 40},  {"cs6", 48},  {"cs7", 56},  {"af11", 10}, {"af12", 12}, {"af13", 14}, {"af21", 18},
      {"af22", 20}, {"af23", 22}, {"af31", 26}, {"af32", 28}, {"af33", 30}, {"af41", 34}, {"af42", 36},
      {"af43", 38}, {"ef", 46},   {"va", 44},   {"0", 0},     {"63", 63},   {"007", 7}};
  for (const auto& [name, value] : names) {
    Policy policy = must_load(kBaseConfig);
    must_run(policy, {"rule add r dscp " + name + " profile gold red remark " + name});
    EXPECT_EQ(policy.rules[1].match.dscp, (std::vector<std::uint8_t>{static_cast<std::uint8_t>(value)})) << name;
    EXPECT_EQ(policy.rules[1].on_color[2], remark(static_cast<std::uint8_t>(value))) << name;
  }
}

TEST(LanguageRule, LengthForms) {
  const std::vector<std::tuple<std::string, LengthBase, int>> forms{{"l1", LengthBase::l1, 0},
                                                                    {"l2", LengthBase::l2, 0},
                                                                    {"l3", LengthBase::l3, 0},
                                                                    {"l3+20", LengthBase::l3, 20},
                                                                    {"l2-4", LengthBase::l2, -4},
                                                                    {"l1+0", LengthBase::l1, 0},
                                                                    {"l2-100000", LengthBase::l2, -100000},
                                                                    {"l3+100000", LengthBase::l3, 100000}};
  for (const auto& [text, base, adjust] : forms) {
    Policy policy = must_load(kBaseConfig);
    must_run(policy, {"rule add r profile gold length " + text});
    EXPECT_EQ(policy.rules[1].length.base, base) << text;
    EXPECT_EQ(policy.rules[1].length.adjust, adjust) << text;
  }
}

TEST(LanguageRule, Ipv6Prefixes) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule add r src 2001:DB8:0:0:0:0:0:0/32 dst ::ffff:10.1.2.0/120 profile gold"});
  const Rule& r = policy.rules[1];
  ASSERT_TRUE(r.match.src && r.match.dst);
  EXPECT_TRUE(r.match.src->ipv6);
  EXPECT_EQ(r.match.src->length, 32);
  EXPECT_EQ(r.match.src->address[0], 0x20);
  EXPECT_EQ(r.match.src->address[3], 0xb8);
  EXPECT_EQ(r.match.dst->address[10], 0xff);
  EXPECT_EQ(r.match.dst->address[12], 10);
  EXPECT_EQ(r.match.dst->address[14], 2);
  EXPECT_EQ(r.match.dst->length, 120);
}

TEST(LanguageRule, PositionsFirstLastBeforeAfter) {
  Policy policy = must_load(kBaseConfig);         // web
  must_run(policy, {"rule add a profile gold"});  // default: last
  must_run(policy, {"rule add b first profile gold"});
  must_run(policy, {"rule add c last profile gold"});
  must_run(policy, {"rule add d before web profile gold"});
  must_run(policy, {"rule add e after web profile gold"});
  must_run(policy, {"rule add f after c profile gold"});   // after the last one
  must_run(policy, {"rule add g before b profile gold"});  // before the first one
  EXPECT_EQ(rule_names(policy), (Names{"g", "b", "d", "web", "e", "a", "c", "f"}));
}

TEST(LanguageRule, ChangeKeepsThePositionUnlessOneIsGiven) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule add a profile gold", "rule add b profile gold", "rule add c profile gold"});
  must_run(policy, {"rule change a vlan 7 profile dns"});
  EXPECT_EQ(rule_names(policy), (Names{"web", "a", "b", "c"}));
  EXPECT_EQ(policy.rules[1].match.vlan, 7);
  EXPECT_EQ(policy.rules[1].profile, "dns");

  must_run(policy, {"rule change a last profile dns"});
  EXPECT_EQ(rule_names(policy), (Names{"web", "b", "c", "a"}));
  must_run(policy, {"rule change a first profile dns"});
  EXPECT_EQ(rule_names(policy), (Names{"a", "web", "b", "c"}));
  must_run(policy, {"rule change a after c profile dns"});
  EXPECT_EQ(rule_names(policy), (Names{"web", "b", "c", "a"}));
  must_run(policy, {"rule change a before web profile dns"});
  EXPECT_EQ(rule_names(policy), (Names{"a", "web", "b", "c"}));
  must_run(policy, {"rule change c before b profile dns"});
  EXPECT_EQ(rule_names(policy), (Names{"a", "web", "c", "b"}));
  must_run(policy, {"rule change web after b profile gold"});
  EXPECT_EQ(rule_names(policy), (Names{"a", "c", "b", "web"}));
}

TEST(LanguageRule, ChangeReplacesTheWholeBody) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule change web vlan 3 profile dns"});
  Rule expected;
  expected.name = "web";
  expected.match.vlan = 3;
  expected.profile = "dns";
  EXPECT_EQ(policy.rules[0], expected);  // dst, proto, dport and actions are gone
}

TEST(LanguageRule, DeleteAndList) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"rule add a vlan 1 profile gold", "rule add b first profile dns red forward"});
  EXPECT_EQ(must_run(policy, {"rule list"}),
            "rule add b profile dns red forward\n"
            "rule add web dst 10.1.0.0/16 proto tcp dport 80,443 profile gold yellow remark af12\n"
            "rule add a vlan 1 profile gold\n");
  must_run(policy, {"rule delete web"});
  EXPECT_EQ(rule_names(policy), (Names{"b", "a"}));
  must_run(policy, {"rule delete b", "rule delete a"});
  EXPECT_EQ(must_run(policy, {"rule list"}), "");
}

// ---- default, show, comments ----

TEST(LanguageDefault, EveryActionForm) {
  Policy policy;
  must_run(policy, {"default drop"});
  EXPECT_EQ(policy.default_action, drop());
  must_run(policy, {"default remark af21"});
  EXPECT_EQ(policy.default_action, remark(18));
  must_run(policy, {"default pcp 5"});
  Action pcp5;
  pcp5.pcp = 5;
  EXPECT_EQ(policy.default_action, pcp5);
  must_run(policy, {"default pcp 5 remark 3"});
  Action both = remark(3);
  both.pcp = 5;
  EXPECT_EQ(policy.default_action, both);
  must_run(policy, {"default remark 3 pcp 5"});
  EXPECT_EQ(policy.default_action, both);
  must_run(policy, {"default forward"});
  EXPECT_EQ(policy.default_action, Action{});
}

TEST(LanguageShow, ShowIsPrint) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"default drop"});
  EXPECT_EQ(must_run(policy, {"show"}), print(policy));
  Policy empty;
  EXPECT_EQ(must_run(empty, {"show"}), "");
}

TEST(LanguageComments, BlankLinesAndCommentsDoNothing) {
  Policy policy = must_load(kBaseConfig);
  const Policy before = policy;
  for (const std::string_view line :
       {"", "   ", "\t", "# a comment", "   # indented", "#profile delete dns", "\r", " \t\r\n"}) {
    const auto result = execute(policy, line);
    ASSERT_TRUE(result.ok()) << line;
    EXPECT_EQ(*result, "");
  }
  EXPECT_EQ(policy, before);
  must_run(policy, {"profile delete dns # it is unused", "\trule   add\ta  profile gold#no space needed",
                    "rule add b profile gold\r"});
  EXPECT_EQ(policy.profiles.size(), 1u);
  EXPECT_EQ(rule_names(policy), (Names{"web", "a", "b"}));
}

TEST(LanguageCommands, OutputOnlyFromListAndShow) {
  Policy policy;
  EXPECT_EQ(must_run(policy, {"profile add p srtcm cir 1mbit cbs 1k"}), "");
  EXPECT_EQ(must_run(policy, {"rule add r profile p"}), "");
  EXPECT_EQ(must_run(policy, {"default drop"}), "");
  EXPECT_EQ(must_run(policy, {"rule change r profile p"}), "");
}

// ---- load ----

TEST(LanguageLoad, RunsEveryLineOnACopyOfTheBase) {
  Policy base;
  must_run(base, {"profile add gold srtcm cir 1mbit cbs 1k"});
  const Policy base_before = base;
  const auto loaded = load("# config\n\nrule add r profile gold\r\ndefault drop\n", base);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->profiles, base.profiles);
  EXPECT_EQ(rule_names(*loaded), (Names{"r"}));
  EXPECT_EQ(loaded->default_action, drop());
  EXPECT_EQ(base, base_before);
}

TEST(LanguageLoad, FirstErrorAbortsNamingTheLine) {
  Policy policy = must_load(kBaseConfig);
  const Policy before = policy;
  const auto loaded = load(
      "rule add a profile gold\n"
      "# two\n"
      "\n"
      "rule add b proto tcpx profile gold\n"
      "rule add c profile nope\n",
      policy);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().subject, "tcpx");
  EXPECT_EQ(loaded.error().message,
            "line 4: 'tcpx': expected a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255");
  EXPECT_EQ(policy, before);  // rule a is not loaded anywhere

  const auto last_line = load("profile add p srtcm cir 1mbit cbs 1k\nrule add r profile", policy);
  ASSERT_FALSE(last_line.ok());
  EXPECT_EQ(last_line.error().subject, "");
  EXPECT_EQ(last_line.error().message, "line 2: after 'profile': expected a profile name");
}

TEST(LanguageLoad, EmptyTextIsTheBase) {
  const Policy base = must_load(kBaseConfig);
  EXPECT_EQ(must_load("", base), base);
  EXPECT_EQ(must_load("\n\n# nothing\n", base), base);
}

TEST(LanguageLoad, AlreadyExistingNamesInTheBaseAreErrors) {
  const Policy base = must_load(kBaseConfig);
  const auto loaded = load(kBaseConfig, base);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().message, "line 1: 'gold': a profile named gold already exists");
}

// ---- one vocabulary: the language, the shell's completion and doc/language.md ------------------------

// Every verb of every object command runs (the shell completes each of them from the same list), and
// doc/language.md's grammar lists each.
TEST(LanguageVocabulary, EveryObjectVerbRunsAndTheReadmeListsIt) {
  Policy policy = must_load("profile add p srtcm cir 1mbit cbs 1k\n");
  // A line for each object and verb that succeeds on `policy` as the previous ones left it.
  const auto line_for = [](std::string_view object, std::string_view verb) -> std::string {
    const std::string name = object == "profile" ? "q" : object == "rule" ? "r" : "m";
    const std::string head = std::string(object) + " " + std::string(verb);
    if (verb == "list") return head;
    if (verb == "show" || verb == "delete") return head + " " + name;
    if (object == "profile") return head + " " + name + " trtcm cir 1mbit cbs 1k pir 2mbit pbs 2k";
    if (object == "color-map") return head + " " + name + " dscp yellow af12";
    return head + " " + name + " dst 10.0.0.0/8 profile p";
  };
  std::string readme;
  {
    std::ifstream file(std::string(TRICOLOR_SOURCE_ROOT) + "/doc/language.md");
    readme.assign(std::istreambuf_iterator<char>(file), {});
  }
  const std::size_t grammar = readme.find("# Command language");
  ASSERT_NE(grammar, std::string::npos);
  const std::string block = readme.substr(grammar, readme.find("**Names**", grammar) - grammar);
  for (std::string_view object : detail::kObjectCommands) {
    for (std::string_view verb : {"add", "change", "list", "show", "delete"}) {
      ASSERT_NE(std::find(detail::kObjectVerbs.begin(), detail::kObjectVerbs.end(), verb), detail::kObjectVerbs.end());
      const std::string line = line_for(object, verb);
      const auto result = execute(policy, line);
      EXPECT_TRUE(result.ok()) << line << ": " << (result.ok() ? "" : result.error().message);
      if (verb == "show" && result.ok()) {
        EXPECT_TRUE(result->starts_with(std::string(object) + " add ")) << *result;
      }
      EXPECT_NE(block.find("\n" + std::string(object) + " " + std::string(verb) + " "), std::string::npos)
          << "doc/language.md's grammar lacks `" << object << " " << verb << "`";
    }
  }
  EXPECT_EQ(detail::kObjectVerbs.size(), 5u);  // the loop above covers every verb of the list
  for (std::string_view command : detail::kLanguageCommands)
    EXPECT_NE(block.find("\n" + std::string(command)), std::string::npos) << command;
}

TEST(LanguageVocabulary, ShowOfOneObjectNamesWhatIsMissing) {
  Policy policy = must_load(kBaseConfig);
  const auto shown = execute(policy, "rule show nosuch");
  ASSERT_FALSE(shown.ok());
  EXPECT_EQ(shown.error().message, "'nosuch': no such rule");
  const auto extra = execute(policy, "profile show gold extra");
  ASSERT_FALSE(extra.ok());
  const auto verb = execute(policy, "rule sow web");
  ASSERT_FALSE(verb.ok());
  EXPECT_EQ(verb.error().message, "'sow': expected add, change, delete, list or show after 'rule'");
}

}  // namespace
}  // namespace tricolor::control
