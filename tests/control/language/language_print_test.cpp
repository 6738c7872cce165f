// print(): the exact form of a sample config, only non-default parts, and load(print(p)) == p on
// hand-written configs.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/language/language.hpp"
#include "language_test_support.hpp"

namespace tricolor::control {
namespace {

using dataplane::Policy;
using testing::must_load;
using testing::must_run;

constexpr std::string_view kSampleConfig = R"(# tricolor sample config
profile add gold trtcm cir 100mbit cbs 64k pir 200mbit pbs 128k
profile add dns srtcm cir 10kpps cbs 64pkt ebs 128pkt
profile add bulk 1r2c cir 1.5gbit cbs 1.5m
profile add scavenger trtcm4115 cir 0bit eir 12500kbit ebs 96000

rule add web dst 10.1.0.0/16 proto tcp dport 80,443 profile gold yellow remark af12 red drop
rule add dns-in   proto udp dport 53 profile dns length l3      # queries, metered by IP length
rule add voice first src 2001:DB8:0:0::/64 dscp 46,va input dscp profile gold green>yellow remark af41 pcp 5 yellow>red drop
rule add mgmt after web port 0,3 vlan 100 src 192.168.0.0/24 proto 6 sport 1024-65535 profile bulk length l1-4 green pcp 2 red remark be
rule add rest profile scavenger input blind length l2+0 green forward yellow remark cs1 red drop
default drop
)";

constexpr std::string_view kSamplePrinted =
    "profile add gold trtcm cir 100mbit cbs 64k pir 200mbit pbs 128k\n"
    "profile add dns srtcm cir 10kpps cbs 64pkt ebs 128pkt\n"
    "profile add bulk 1r2c cir 1500mbit cbs 1536k\n"
    "profile add scavenger trtcm4115 eir 12500kbit ebs 96000\n"
    "rule add voice src 2001:db8::/64 dscp ef,va profile gold input dscp green>yellow remark af41 pcp 5 yellow>red "
    "drop\n"
    "rule add web dst 10.1.0.0/16 proto tcp dport 80,443 profile gold yellow remark af12\n"
    "rule add mgmt port 0,3 vlan 100 src 192.168.0.0/24 proto tcp sport 1024-65535 profile bulk length l1-4 "
    "green pcp 2 red remark be\n"
    "rule add dns-in proto udp dport 53 profile dns length l3\n"
    "rule add rest profile scavenger yellow remark cs1\n"
    "default drop\n";

TEST(LanguagePrint, SampleConfigGolden) {
  const Policy policy = must_load(kSampleConfig);
  EXPECT_EQ(print(policy), kSamplePrinted);
  EXPECT_EQ(must_load(print(policy)), policy);
}

// Color maps, per-key meters, a parent and mapped input colors.
constexpr std::string_view kHierarchyConfig = R"(# per-customer policing under a shared aggregate
profile add per-host srtcm cir 10mbit cbs 64k ebs 64k
profile add site trtcm cir 1gbit cbs 1m pir 2gbit pbs 2m
profile add keys 1r2c cir 100pps cbs 10pkt
color-map add af dscp red af13,af23,af33,af43,14 yellow af12,af22,af32,af42 green be
color-map add prio pcp red 0 yellow 3,2,1
color-map add odd dscp yellow 1,3,5,7,9,11,13 red 62-63,61,60 green 2
color-map add plain pcp green 0-7
rule add hosts src 10.0.0.0/8 input map dscp-map af pcp-map prio unmapped yellow per src/24,56 timeout 120000ms capacity 65536 fallback aggregate parent site profile per-host yellow>red drop
rule add flows per 5-tuple profile keys timeout 1.5s capacity 1000 fallback default length l3
rule add tiny per dst/32,64 capacity 1536 timeout 86400s fallback drop profile keys parent keys input dscp
rule add mapped profile keys input map pcp-map prio unmapped green
)";

constexpr std::string_view kHierarchyPrinted =
    "profile add per-host srtcm cir 10mbit cbs 64k ebs 64k\n"
    "profile add site trtcm cir 1gbit cbs 1m pir 2gbit pbs 2m\n"
    "profile add keys 1r2c cir 100pps cbs 10pkt\n"
    "color-map add af dscp yellow af12,af22,af32,af42 red af13,af23,af33,af43\n"
    "color-map add prio pcp yellow 1-3 red 0\n"
    "color-map add odd dscp yellow 1,3,5,7,9,11,13 red 60-63\n"
    "color-map add plain pcp green 0-7\n"
    "rule add hosts src 10.0.0.0/8 profile per-host per src/24,56 timeout 2m capacity 64k parent site "
    "input map pcp-map prio dscp-map af unmapped yellow yellow>red drop\n"
    "rule add flows profile keys per 5-tuple timeout 1500ms capacity 1000 fallback default length l3\n"
    "rule add tiny profile keys per dst/32,64 timeout 24h capacity 1536 fallback drop parent keys input dscp\n"
    "rule add mapped profile keys input map pcp-map prio\n";

TEST(LanguagePrint, HierarchyConfigGolden) {
  const Policy policy = must_load(kHierarchyConfig);
  EXPECT_EQ(print(policy), kHierarchyPrinted);
  EXPECT_EQ(must_load(print(policy)), policy);
}

// A cluster meter (issue 26) prints after the parent and loads back the same; its profile is in use.
TEST(LanguagePrint, ClusterRoundTrips) {
  const Policy policy = must_load(
      "profile add local trtcm cir 1gbit cbs 1m pir 2gbit pbs 2m\n"
      "profile add site 1r2c cir 100mbit cbs 100k\n"
      "profile add total 1r2c cir 1gbit cbs 1m\n"
      "rule add web dst 10.0.0.0/8 profile local parent site cluster total red drop\n");
  ASSERT_EQ(policy.rules.size(), 1u);
  EXPECT_EQ(policy.rules[0].cluster, "total");
  EXPECT_NE(print(policy).find("parent site cluster total"), std::string::npos) << print(policy);
  EXPECT_EQ(must_load(print(policy)), policy);
  Policy changed = policy;
  const auto refused = execute(changed, "profile delete total");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "'total': profile total is used by rule web as its cluster; change or delete that rule first");
}

// A shaping rule (issue 27) prints its red action as given and loads back the same.
TEST(LanguagePrint, ShapingRoundTrips) {
  const Policy policy = must_load(
      "profile add s 1r2c cir 10mbit cbs 15k\n"
      "rule add shaped proto udp profile s per src red shape max-delay 1500us green remark af11\n");
  ASSERT_EQ(policy.rules.size(), 1u);
  EXPECT_EQ(policy.rules[0].on_color[2].shape_max_delay_ns, 1'500'000u);
  EXPECT_TRUE(policy.rules[0].on_color[2].drop);  // what a late packet gets
  EXPECT_NE(print(policy).find("green remark af11 red shape max-delay 1500us"), std::string::npos) << print(policy);
  EXPECT_EQ(must_load(print(policy)), policy);
}

// queue N is printed only when given (scaled as a capacity), and loads back the same.
TEST(LanguagePrint, ShapingQueueRoundTrips) {
  const Policy policy = must_load(
      "profile add s 1r2c cir 10mbit cbs 15k\n"
      "rule add a proto udp profile s red shape max-delay 2ms queue 64\n"
      "rule add b proto tcp profile s per src red shape max-delay 1ms queue 4096\n"
      "rule add c proto sctp profile s red shape max-delay 1ms queue 1m\n"
      "rule add d profile s red shape max-delay 3ms\n");
  ASSERT_EQ(policy.rules.size(), 4u);
  EXPECT_EQ(policy.rules[0].on_color[2].shape_queue, 64u);
  EXPECT_EQ(policy.rules[1].on_color[2].shape_queue, 4096u);
  EXPECT_EQ(policy.rules[2].on_color[2].shape_queue, 1u << 20);
  EXPECT_FALSE(policy.rules[3].on_color[2].shape_queue);
  const std::string text = print(policy);
  EXPECT_NE(text.find("red shape max-delay 2ms queue 64\n"), std::string::npos) << text;
  EXPECT_NE(text.find("red shape max-delay 1ms queue 4k\n"), std::string::npos) << text;
  EXPECT_NE(text.find("red shape max-delay 1ms queue 1m\n"), std::string::npos) << text;
  EXPECT_NE(text.find("red shape max-delay 3ms\n"), std::string::npos) << text;
  EXPECT_EQ(must_load(text), policy);
}

// A max-flows rule (issue 27) prints its flow clauses after the key's, the defaults left out, and
// loads back the same.
TEST(LanguagePrint, MaxFlowsRoundTrips) {
  const Policy policy = must_load(
      "profile add s 1r2c cir 10mbit cbs 15k\n"
      "rule add a proto tcp max-flows 100 profile s per src/24\n"
      "rule add b flow-capacity 4k per src+dport flow-timeout 1500ms profile s max-flows 1\n");
  ASSERT_EQ(policy.rules.size(), 2u);
  EXPECT_EQ(policy.rules[0].per_key.max_flows, 100u);
  EXPECT_EQ(policy.rules[0].per_key.flow_timeout_ns, 60'000'000'000u);
  EXPECT_EQ(policy.rules[1].per_key.max_flows, 1u);
  EXPECT_EQ(policy.rules[1].per_key.flow_timeout_ns, 1'500'000'000u);
  EXPECT_EQ(policy.rules[1].per_key.flow_capacity, 4096u);
  const std::string text = print(policy);
  EXPECT_NE(text.find("per src/24 max-flows 100\n"), std::string::npos) << text;
  EXPECT_NE(text.find("per src+dport max-flows 1 flow-timeout 1500ms flow-capacity 4k"), std::string::npos) << text;
  EXPECT_EQ(must_load(text), policy);
}

// flow-excess (a refused flow's color) prints only when it is not red, after the other flow clauses.
TEST(LanguagePrint, FlowExcessRoundTrips) {
  const Policy policy = must_load(
      "profile add s 1r2c cir 10mbit cbs 15k\n"
      "rule add a flow-excess yellow per src max-flows 4 profile s yellow remark 10\n"
      "rule add b per dst max-flows 2 flow-excess green flow-timeout 5s profile s\n"
      "rule add c per dst max-flows 2 flow-excess red profile s\n");
  ASSERT_EQ(policy.rules.size(), 3u);
  EXPECT_EQ(policy.rules[0].per_key.flow_excess, dataplane::Color::yellow);
  EXPECT_EQ(policy.rules[1].per_key.flow_excess, dataplane::Color::green);
  EXPECT_EQ(policy.rules[2].per_key.flow_excess, dataplane::Color::red);
  const std::string text = print(policy);
  EXPECT_NE(text.find("per src max-flows 4 flow-excess yellow yellow remark af11\n"), std::string::npos) << text;
  EXPECT_NE(text.find("per dst max-flows 2 flow-timeout 5s flow-excess green\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rule add c profile s per dst max-flows 2\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("flow-excess red"), std::string::npos) << text;
  EXPECT_EQ(must_load(text), policy);
}

TEST(LanguagePrint, ColorMapsCompactly) {
  struct Case {
    std::string command, printed;
  };
  for (const Case& c : std::vector<Case>{
           // ranges where consecutive (two or more values), DSCP names for single values, yellow before red
           {"color-map add m dscp red 10 yellow 12,13", "color-map add m dscp yellow 12-13 red af11"},
           {"color-map add m dscp yellow 0,1,2,4,cs1,63", "color-map add m dscp yellow 0-2,4,cs1,63"},
           {"color-map add m dscp red 0-63", "color-map add m dscp red 0-63"},
           {"color-map add m dscp yellow 0-62", "color-map add m dscp yellow 0-62"},
           {"color-map add m dscp red 46,44,va,ef", "color-map add m dscp red va,ef"},
           {"color-map add m dscp red be,cs7", "color-map add m dscp red be,cs7"},
           {"color-map add m pcp yellow 7,0 red 6", "color-map add m pcp yellow 0,7 red 6"},
           {"color-map add m pcp red 0-7", "color-map add m pcp red 0-7"},
           {"color-map add m pcp red 0,2,4,6 yellow 1,3,5,7", "color-map add m pcp yellow 1,3,5,7 red 0,2,4,6"},
           // green is the default and not printed, unless the map is all green
           {"color-map add m dscp green 0-9 red 10", "color-map add m dscp red af11"},
           {"color-map add m dscp green 5", "color-map add m dscp green 0-63"},
           {"color-map add m pcp green 5", "color-map add m pcp green 0-7"},
       }) {
    Policy policy;
    must_run(policy, {c.command});
    EXPECT_EQ(print(policy), c.printed + "\n") << c.command;
    EXPECT_EQ(must_load(print(policy)), policy) << c.command;
  }
}

TEST(LanguagePrint, DurationsAndCapacitiesInTheLargestExactUnit) {
  struct Case {
    std::string clauses, printed;
  };
  for (const Case& c : std::vector<Case>{
           {"timeout 60s capacity 1m fallback aggregate", ""},  // the defaults
           {"timeout 1m capacity 1024k", ""},
           {"timeout 90s", " timeout 90s"},
           {"timeout 3600s", " timeout 1h"},
           {"timeout 0.5h", " timeout 30m"},
           {"timeout 1001ms", " timeout 1001ms"},
           {"timeout 1000001us", " timeout 1000001us"},
           {"timeout 1000000001ns", " timeout 1000000001ns"},
           {"timeout 1ms", " timeout 1ms"},
           {"capacity 1", " capacity 1"},
           {"capacity 1023", " capacity 1023"},
           {"capacity 1025", " capacity 1025"},
           {"capacity 2048", " capacity 2k"},
           {"capacity 1.5m", " capacity 1536k"},
           {"capacity 268435456", " capacity 256m"},
           {"fallback drop", " fallback drop"},
           {"fallback default", " fallback default"},
       }) {
    Policy policy = must_load("profile add p srtcm cir 1mbit cbs 1k\n");
    must_run(policy, {"rule add r profile p per src " + c.clauses});
    EXPECT_EQ(print(policy), "profile add p srtcm cir 1mbit cbs 1k\nrule add r profile p per src" + c.printed + "\n")
        << c.clauses;
    EXPECT_EQ(must_load(print(policy)), policy) << c.clauses;
  }
}

TEST(LanguagePrint, MasksOnlyWhenNotTheDefault) {
  for (const auto& [given, printed] : std::vector<std::pair<std::string, std::string>>{
           {"src", "src"},
           {"src/32", "src"},
           {"src/32,128", "src"},
           {"src/24", "src/24"},
           {"src/24,128", "src/24"},
           {"dst/32,64", "dst/32,64"},
           {"src+dport/0,0", "src+dport/0,0"},
           {"5-tuple/8", "5-tuple/8"},
       }) {
    Policy policy = must_load("profile add p srtcm cir 1mbit cbs 1k\n");
    must_run(policy, {"rule add r profile p per " + given});
    EXPECT_EQ(print(policy), "profile add p srtcm cir 1mbit cbs 1k\nrule add r profile p per " + printed + "\n")
        << given;
  }
}

TEST(LanguagePrint, EmptyPolicyPrintsNothing) { EXPECT_EQ(print(Policy{}), ""); }

TEST(LanguagePrint, DefaultLineOnlyWhenNotPlainForward) {
  Policy policy;
  must_run(policy, {"default forward"});
  EXPECT_EQ(print(policy), "");
  must_run(policy, {"default pcp 3"});
  EXPECT_EQ(print(policy), "default pcp 3\n");
  must_run(policy, {"default pcp 3 remark af11"});
  EXPECT_EQ(print(policy), "default remark af11 pcp 3\n");
}

TEST(LanguagePrint, OnlyNonDefaultPartsOfARule) {
  Policy policy = must_load("profile add p srtcm cir 1mbit cbs 1k\n");
  must_run(policy, {"rule add r profile p input blind length l2 green forward yellow forward red drop"});
  EXPECT_EQ(print(policy), "profile add p srtcm cir 1mbit cbs 1k\nrule add r profile p\n");
  must_run(policy, {"rule change r profile p input dscp green drop yellow drop red forward"});
  EXPECT_EQ(
      print(policy),
      "profile add p srtcm cir 1mbit cbs 1k\nrule add r profile p input dscp green drop yellow drop red forward\n");
  // A pair action is printed even when it equals the action of its output color: it takes precedence.
  must_run(policy, {"rule change r profile p input dscp red>red drop green>green forward"});
  EXPECT_EQ(print(policy),
            "profile add p srtcm cir 1mbit cbs 1k\nrule add r profile p input dscp green>green forward red>red drop\n");
}

TEST(LanguagePrint, ListsAndRangesCompactly) {
  Policy policy = must_load("profile add p srtcm cir 1mbit cbs 1k\n");
  must_run(policy, {"rule add r port 0,1,65535 sport 7-7,10-65535,9 dport 80,443 dscp 0,cs1,10,63 profile p"});
  EXPECT_EQ(policy.rules[0].match.src_ports.size(), 3u);
  EXPECT_EQ(print(policy),
            "profile add p srtcm cir 1mbit cbs 1k\n"
            "rule add r port 0,1,65535 sport 7,10-65535,9 dport 80,443 dscp be,cs1,af11,63 profile p\n");
}

// A list holds each value once, in the order typed: a value (by any of its names) or a port listed
// twice, or port ranges that overlap, are refused, naming them; nothing is merged behind the
// operator's back, so `show` still prints what was typed.
TEST(LanguageErrors, AListNamesEachValueOnce) {
  Policy policy = must_load("profile add p srtcm cir 1mbit cbs 1k\n");
  const Policy before = policy;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rule add r port 1,2,1 profile p", "'1,2,1': port 1 is listed twice; list each once"},
      {"rule add r dscp 0,df,cs0 profile p", "'0,df,cs0': DSCP 0 is listed twice; list each once"},
      {"rule add r dport 80,443,80 profile p", "'80,443,80': ports 80 and 80 are the same port; list each once"},
      {"rule add r sport 7-7,0-65535,9 profile p", "'7-7,0-65535,9': ports 0-65535 and 7 overlap; list each port once"},
      {"rule add r dport 1024-2048,2048-4096 profile p",
       "'1024-2048,2048-4096': ports 1024-2048 and 2048-4096 overlap; list each port once"},
  };
  for (const auto& [line, message] : cases) {
    auto result = execute(policy, line);
    ASSERT_FALSE(result.ok()) << line;
    EXPECT_EQ(result.error().message, message) << line;
    EXPECT_EQ(policy, before) << line;
  }
  std::string many = "rule add r dport 80";
  for (int i = 0; i < 50'000; ++i) many += ",80";
  EXPECT_FALSE(execute(policy, many + " profile p").ok());  // 50 000 copies of a port: refused, not kept
}

TEST(LanguagePrint, ProfilesWithZeroParametersPrintBack) {
  // Missing parameters are 0; a valid profile always has a non-zero rate, which gives the unit.
  for (const std::string_view config : {
           "profile add a srtcm cir 1kpps ebs 1pkt\n",
           "profile add a srtcm cir 1kpps cbs 1pkt\n",
           "profile add a trtcm4115 eir 1kpps ebs 1pkt\n",
           "profile add a trtcm4115 cir 0pps cbs 5pkt eir 1kpps ebs 1pkt\n",
           "profile add a trtcm4115 cir 8bit cbs 1\n",
       }) {
    const Policy policy = must_load(config);
    EXPECT_EQ(must_load(print(policy)), policy) << config << print(policy);
  }
  EXPECT_EQ(print(must_load("profile add a trtcm4115 cir 0pps cbs 5pkt eir 1kpps ebs 1pkt\n")),
            "profile add a trtcm4115 cbs 5pkt eir 1kpps ebs 1pkt\n");
}

TEST(LanguagePrint, HandWrittenConfigsPrintBack) {
  for (const std::string_view config : {
           kSampleConfig,
           std::string_view("profile add p 1r2c cir 8bit cbs 1\nrule add r profile p\n"),
           std::string_view("profile add p 1r2c cir 400gbit cbs 1g\n"
                            "rule add a src ::/0 dst ::ffff:0.0.0.0/96 profile p\n"
                            "rule add b before a dst 0.0.0.0/0 proto 0 profile p length l3-100000\n"
                            "rule add c after a proto sctp sport 0 dport 65535 profile p length l1+100000\n"
                            "rule change a first vlan 0 profile p red pcp 0\n"
                            "default remark 1\n"),
           std::string_view("profile add p srtcm cir 1gpps cbs 1073741824pkt ebs 1pkt\n"
                            "rule add x proto icmpv6 dscp 1,2,3 profile p input dscp green>green pcp 1 "
                            "green>yellow pcp 2 green>red pcp 3 yellow>yellow remark 4 yellow>red drop red>red "
                            "forward green remark ef yellow pcp 7 red pcp 0 remark 0\n"),
           kHierarchyConfig,
           std::string_view("profile add p 1r2c cir 8bit cbs 1\ncolor-map add m pcp red 1\n"
                            "color-map add n dscp yellow 2\n"
                            "rule add r profile p parent p per src input map pcp-map m dscp-map n unmapped red\n"
                            "color-map change n dscp red 3\ncolor-map add o dscp green 1\n"
                            "color-map change o pcp yellow 0\ncolor-map delete o\n"),
           std::string_view("profile add p trtcm cir 1kbit cbs 1 pir 1kbit pbs 1023\n"
                            "profile add q trtcm cir 1kbit cbs 1 pir 1kbit pbs 1025\n"
                            "rule add r1 profile p\nrule add r2 profile q\nrule delete r1\nprofile delete p\n"),
       }) {
    const Policy policy = must_load(config);
    const std::string printed = print(policy);
    EXPECT_EQ(must_load(printed), policy) << printed;
    EXPECT_EQ(print(must_load(printed)), printed);
  }
}

}  // namespace
}  // namespace tricolor::control
