// print(): the exact form of a sample config, only non-default parts, and load(print(p)) == p on
// hand-written configs.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "control/language.hpp"
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
  must_run(policy, {"rule add r port 0,1,65535 sport 7-7,0-65535,9 dport 80,443 dscp 0,df,cs0,10,63 profile p"});
  EXPECT_EQ(policy.rules[0].match.src_ports.size(), 3u);
  EXPECT_EQ(print(policy),
            "profile add p srtcm cir 1mbit cbs 1k\n"
            "rule add r port 0,1,65535 sport 7,0-65535,9 dport 80,443 dscp be,be,be,af11,63 profile p\n");
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
