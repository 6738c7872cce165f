// Every error of the command language: the subject (the offending token, "" at the end of the line),
// the exact message, and a policy left exactly as it was.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "control/language/language.hpp"
#include "language_test_support.hpp"

namespace tricolor::control {
namespace {

using testing::kBaseConfig;
using testing::kMapConfig;
using testing::must_load;

struct ErrorCase {
  std::string command;
  std::string subject;
  std::string message;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.command; }

class LanguageError : public ::testing::TestWithParam<ErrorCase> {};

// Runs the command on the base config and checks the error and that nothing changed.
TEST_P(LanguageError, NamesTheTokenAndLeavesThePolicyUnchanged) {
  const ErrorCase& c = GetParam();
  dataplane::Policy policy = must_load(kBaseConfig);
  const dataplane::Policy before = policy;
  const auto result = execute(policy, c.command);
  ASSERT_FALSE(result.ok()) << "accepted: " << c.command;
  EXPECT_EQ(result.error().subject, c.subject);
  EXPECT_EQ(result.error().message, c.message);
  EXPECT_EQ(policy, before);
}

const std::string kLongName(65, 'a');
const std::string kLongNameProfile = "profile add " + kLongName + " srtcm cir 1mbit cbs 1k";
const std::string kLongNameRule = "rule add " + kLongName + " profile gold";
// A token is quoted up to 64 bytes (policer/quote.hpp), then its length.
const std::string kLongNameQuoted = "'" + std::string(64, 'a') + "'... (65 bytes)";
const std::string kLongNameMessage = kLongNameQuoted + ": a profile name is at most 64 characters; this one has 65";
const std::string kLongRuleMessage = kLongNameQuoted + ": a rule name is at most 64 characters; this one has 65";

constexpr std::string_view kClauses =
    "expected a match (port, vlan, src, dst, proto, sport, dport, dscp), profile, per, timeout, capacity, "
    "fallback, max-flows, flow-timeout, flow-capacity, flow-excess, parent, cluster, input, length or a color and its action (green, yellow, red or a pair IN>OUT such as "
    "green>yellow)";

INSTANTIATE_TEST_SUITE_P(
    Commands, LanguageError,
    ::testing::Values(
        ErrorCase{"foo", "foo", "'foo': unknown command; expected profile, color-map, rule, default or show"},
        ErrorCase{
            "Profile list", "Profile",
            "'Profile': unknown command; expected profile, color-map, rule, default or show (keywords are lower-case)"},
        ErrorCase{"  \tfoo bar # comment", "foo",
                  "'foo': unknown command; expected profile, color-map, rule, default or show"},
        ErrorCase{"profile", "", "after 'profile': expected add, change, delete, list or show"},
        ErrorCase{"profile remove gold", "remove", "'remove': expected add, change, delete, list or show after 'profile'"},
        ErrorCase{"rule", "", "after 'rule': expected add, change, delete, list or show"},
        ErrorCase{"rule move web", "move", "'move': expected add, change, delete, list or show after 'rule'"},
        ErrorCase{"show all", "all", "'all': unexpected after 'show': the command ends there"},
        ErrorCase{"profile list all", "all", "'all': unexpected after 'list': the command ends there"},
        ErrorCase{"rule list all", "all", "'all': unexpected after 'list': the command ends there"},
        ErrorCase{"default", "", "after 'default': expected an action: forward, drop, remark DSCP or pcp N"},
        ErrorCase{"default reject", "reject", "'reject': expected an action: forward, drop, remark DSCP or pcp N"},
        ErrorCase{"default Drop", "Drop",
                  "'Drop': expected an action: forward, drop, remark DSCP or pcp N (keywords are lower-case)"},
        ErrorCase{"default drop now", "now", "'now': unexpected after 'drop': the command ends there"},
        ErrorCase{"default remark ef pcp 1 now", "now", "'now': unexpected after '1': the command ends there"}));

INSTANTIATE_TEST_SUITE_P(
    Names, LanguageError,
    ::testing::Values(
        ErrorCase{"profile add", "", "after 'add': expected a profile name"},
        ErrorCase{"profile add 9x srtcm cir 1mbit cbs 1k", "9x",
                  "'9x': expected a profile name: a letter, then up to 63 letters, digits, '_', '.' or '-'"},
        ErrorCase{"profile add a/b srtcm cir 1mbit cbs 1k", "a/b",
                  "'a/b': expected a profile name: a letter, then up to 63 letters, digits, '_', '.' or '-'"},
        ErrorCase{"profile add _x srtcm cir 1mbit cbs 1k", "_x",
                  "'_x': expected a profile name: a letter, then up to 63 letters, digits, '_', '.' or '-'"},
        ErrorCase{kLongNameProfile, kLongName, kLongNameMessage},
        ErrorCase{"profile add srtcm srtcm cir 1mbit cbs 1k", "srtcm",
                  "'srtcm': srtcm is a keyword and cannot name a profile"},
        ErrorCase{"profile add drop srtcm cir 1mbit cbs 1k", "drop",
                  "'drop': drop is a keyword and cannot name a profile"},
        ErrorCase{"profile add gold srtcm cir 1mbit cbs 1k", "gold", "'gold': a profile named gold already exists"},
        ErrorCase{"rule add", "", "after 'add': expected a rule name"},
        ErrorCase{"rule add 1st profile gold", "1st",
                  "'1st': expected a rule name: a letter, then up to 63 letters, digits, '_', '.' or '-'"},
        ErrorCase{"rule add w:x profile gold", "w:x",
                  "'w:x': expected a rule name: a letter, then up to 63 letters, digits, '_', '.' or '-'"},
        ErrorCase{kLongNameRule, kLongName, kLongRuleMessage},
        ErrorCase{"rule add first profile gold", "first", "'first': first is a keyword and cannot name a rule"},
        ErrorCase{"rule add tcp proto tcp profile gold", "tcp", "'tcp': tcp is a keyword and cannot name a rule"},
        ErrorCase{"rule add ef dscp ef profile gold", "ef", "'ef': ef is a keyword and cannot name a rule"},
        ErrorCase{"rule add web profile gold", "web", "'web': a rule named web already exists"}));

INSTANTIATE_TEST_SUITE_P(
    Profiles, LanguageError,
    ::testing::Values(
        ErrorCase{"profile add p", "", "after 'p': expected an algorithm: 1r2c, srtcm, trtcm, trtcm4115, fixed-window, sliding-window, gcra, smooth or warmup"},
        ErrorCase{"profile add p tbf cir 1mbit", "tbf",
                  "'tbf': expected an algorithm: 1r2c, srtcm, trtcm, trtcm4115, fixed-window, sliding-window, gcra, smooth or warmup"},
        ErrorCase{"profile add p SRTCM cir 1mbit", "SRTCM",
                  "'SRTCM': expected an algorithm: 1r2c, srtcm, trtcm, trtcm4115, fixed-window, sliding-window, gcra, smooth or warmup (keywords are lower-case)"},
        ErrorCase{"profile add p srtcm", "", "after 'srtcm': expected the parameters of srtcm: cir, cbs, ebs"},
        ErrorCase{"profile add p srtcm burst 1k", "burst", "'burst': expected a parameter of srtcm: cir, cbs, ebs"},
        ErrorCase{"profile add p srtcm rate 1mbit", "rate", "'rate': srtcm takes cir, cbs, ebs"},
        ErrorCase{"profile add p srtcm cir", "", "after 'cir': expected a rate such as 100mbit or 10kpps"},
        ErrorCase{"profile add p srtcm cir 1mbit cbs", "", "after 'cbs': expected a burst such as 64k or 64pkt"},
        ErrorCase{"profile add p srtcm cir 1mbit cir 2mbit", "cir", "'cir': cir given twice"},
        ErrorCase{"profile add p srtcm cir 1mbit cbs 1k cbs 1k", "cbs", "'cbs': cbs given twice"},
        // Not parameters of the algorithm.
        ErrorCase{"profile add p trtcm cir 10mbit eir 1mbit", "eir", "'eir': trtcm takes cir, cbs, pir, pbs"},
        ErrorCase{"profile add p srtcm cir 1mbit cbs 64k pbs 1k", "pbs", "'pbs': srtcm takes cir, cbs, ebs"},
        ErrorCase{"profile add p 1r2c cir 1mbit ebs 1k", "ebs", "'ebs': 1r2c takes cir, cbs"},
        ErrorCase{"profile add p trtcm4115 cir 1mbit pir 2mbit", "pir", "'pir': trtcm4115 takes cir, cbs, eir, ebs"},
        // Units (parse_rate and parse_burst name the token themselves).
        ErrorCase{"profile add p srtcm cir 100 cbs 1k", "100",
                  "'100': rate needs a unit: bit, kbit, mbit, gbit, tbit, pps, kpps, mpps, gpps"},
        ErrorCase{
            "profile add p srtcm cir 10mbps cbs 1k", "10mbps",
            "'10mbps': 'bps' is ambiguous (tc reads it as bytes/s); write the rate in bit, kbit, mbit, gbit or tbit"},
        ErrorCase{"profile add p srtcm cir 1mbit cbs 64x", "64x",
                  "'64x': unknown unit 'x'; expected b, k, m, g (1024-based bytes) or pkt"},
        ErrorCase{"profile add p srtcm cir 1mbit cbs 64kpps", "64kpps",
                  "'64kpps': unknown unit 'kpps'; expected b, k, m, g (1024-based bytes) or pkt"},
        ErrorCase{"profile add p srtcm cir 12bit cbs 1k", "12bit",
                  "'12bit': is not a whole number of bytes per second; give a multiple of 8 bit/s"},
        // Unit kinds mixed within a profile.
        ErrorCase{"profile add p srtcm cir 10kpps cbs 64k", "64k",
                  "'64k': srtcm's cbs and cir must both be in packets or both in bytes (cir '10kpps' is in packets)"},
        ErrorCase{"profile add p srtcm cbs 64k cir 10kpps", "10kpps",
                  "'10kpps': srtcm's cir and cbs must both be in packets or both in bytes (cbs '64k' is in bytes)"},
        ErrorCase{"profile add p trtcm cir 10kpps cbs 10pkt pir 100mbit pbs 10pkt", "100mbit",
                  "'100mbit': trtcm's pir and cir must both be in packets or both in bytes (cir '10kpps' is in "
                  "packets)"},
        ErrorCase{"profile add p 1r2c cir 1mbit cbs 0pkt", "0pkt",
                  "'0pkt': 1r2c's cbs and cir must both be in packets or both in bytes (cir '1mbit' is in bytes)"},
        // policer::validate, pointed at the parameter's value, or naming the missing parameter.
        ErrorCase{"profile add p 1r2c cir 0bit cbs 1k", "0bit", "'0bit': 1r2c: cir must be greater than 0"},
        ErrorCase{"profile add p 1r2c cbs 1k", "", "missing 'cir RATE' (1r2c: cir must be greater than 0)"},
        ErrorCase{"profile add p 1r2c cir 1mbit", "", "missing 'cbs BURST' (1r2c: cbs must be greater than 0)"},
        ErrorCase{"profile add p srtcm cir 1mbit", "", "missing 'cbs BURST' (srtcm: cbs and ebs cannot both be 0)"},
        ErrorCase{"profile add p srtcm cir 1mbit cbs 0 ebs 0", "0", "'0': srtcm: cbs and ebs cannot both be 0"},
        ErrorCase{"profile add p srtcm cbs 1k", "", "missing 'cir RATE' (srtcm: cir must be greater than 0)"},
        ErrorCase{"profile add p trtcm cir 10mbit cbs 1k pir 1mbit pbs 1k", "1mbit",
                  "'1mbit': trtcm: pir 125000 bytes/s must be at least cir 1250000 bytes/s"},
        ErrorCase{"profile add p trtcm cir 10mbit cbs 1k pir 20mbit", "",
                  "missing 'pbs BURST' (trtcm: pbs must be greater than 0)"},
        ErrorCase{"profile add p trtcm cir 10mbit cbs 1k pbs 1k", "",
                  "missing 'pir RATE' (trtcm: pir must be greater than 0)"},
        ErrorCase{"profile add p trtcm cir 10kpps cbs 0pkt pir 20kpps pbs 1pkt", "0pkt",
                  "'0pkt': trtcm: cbs must be greater than 0"},
        ErrorCase{"profile add p trtcm4115 cir 0bit eir 0bit", "0bit",
                  "'0bit': trtcm4115: cir and eir cannot both be 0"},
        ErrorCase{"profile add p trtcm4115 eir 0bit cbs 1k", "",
                  "missing 'cir RATE' (trtcm4115: cir and eir cannot both be 0)"},
        ErrorCase{"profile add p trtcm4115 cir 1mbit", "",
                  "missing 'cbs BURST' (trtcm4115: cbs must be greater than 0 when cir is greater than 0)"},
        ErrorCase{"profile add p trtcm4115 eir 1mbit cbs 1k", "",
                  "missing 'ebs BURST' (trtcm4115: ebs must be greater than 0 when eir is greater than 0)"},
        ErrorCase{"profile add p trtcm4115 cir 1kpps cbs 1pkt eir 1kpps ebs 0pkt", "0pkt",
                  "'0pkt': trtcm4115: ebs must be greater than 0 when eir is greater than 0"},
        ErrorCase{"profile add p 1r2c cir 401gbit cbs 1k", "401gbit",
                  "'401gbit': cir 50125000000 bytes/s exceeds the maximum rate of 50000000000 bytes/s"},
        ErrorCase{"profile add p 1r2c cir 2gpps cbs 1pkt", "2gpps",
                  "'2gpps': cir 2000000000 packets/s exceeds the maximum rate of 1000000000 packets/s"},
        ErrorCase{"profile add p srtcm cir 1mbit cbs 1k ebs 2g", "2g",
                  "'2g': ebs 2147483648 bytes exceeds the maximum burst of 1073741824 bytes"},
        // change and delete.
        ErrorCase{"profile change", "", "after 'change': expected a profile name"},
        ErrorCase{"profile change nope srtcm cir 1mbit cbs 1k", "nope", "'nope': no such profile"},
        ErrorCase{"profile change gold srtcm cir 1mbit", "",
                  "missing 'cbs BURST' (srtcm: cbs and ebs cannot both be 0)"},
        ErrorCase{"profile change gold trtcm cir 1mbit cbs 1k pir 2mbit pbs 1kpps", "1kpps",
                  "'1kpps': unknown unit 'kpps'; expected b, k, m, g (1024-based bytes) or pkt"},
        ErrorCase{"profile delete", "", "after 'delete': expected a profile name"},
        ErrorCase{"profile delete nope", "nope", "'nope': no such profile"},
        ErrorCase{"profile delete gold", "gold",
                  "'gold': profile gold is used by rule web; change or delete that rule first"},
        ErrorCase{"profile delete dns now", "now", "'now': unexpected after 'dns': the command ends there"}));

INSTANTIATE_TEST_SUITE_P(
    RulePositions, LanguageError,
    ::testing::Values(
        ErrorCase{"rule add r", "", "missing 'profile PROFILE'"},
        ErrorCase{"rule add r first", "", "missing 'profile PROFILE'"},
        ErrorCase{"rule add r vlan 5", "", "missing 'profile PROFILE'"},
        ErrorCase{"rule add r before", "", "after 'before': expected a rule name"},
        ErrorCase{"rule add r after nope profile gold", "nope", "'nope': no such rule"},
        ErrorCase{"rule change web before web profile gold", "web", "'web': a rule cannot be placed before itself"},
        ErrorCase{"rule change web after web profile gold", "web", "'web': a rule cannot be placed after itself"},
        ErrorCase{"rule change", "", "after 'change': expected a rule name"},
        ErrorCase{"rule change nope profile gold", "nope", "'nope': no such rule"},
        ErrorCase{"rule change web proto tcpx profile gold", "tcpx",
                  "'tcpx': expected a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255"},
        ErrorCase{"rule change web vlan 1", "", "missing 'profile PROFILE'"},
        ErrorCase{"rule delete", "", "after 'delete': expected a rule name"},
        ErrorCase{"rule delete nope", "nope", "'nope': no such rule"},
        ErrorCase{"rule delete web now", "now", "'now': unexpected after 'web': the command ends there"}));

INSTANTIATE_TEST_SUITE_P(
    RuleMatches, LanguageError,
    ::testing::Values(
        ErrorCase{"rule add r profile", "", "after 'profile': expected a profile name"},
        ErrorCase{"rule add r profile nope", "nope", "'nope': no such profile"},
        ErrorCase{"rule add r profile gold profile dns", "profile", "'profile': profile given twice"},
        ErrorCase{"rule add r vlan 1 vlan 2 profile gold", "vlan", "'vlan': vlan given twice"},
        ErrorCase{"rule add r dscp ef profile gold dscp af11", "dscp", "'dscp': dscp given twice"},
        ErrorCase{"rule add r profile gold extra", "extra", "'extra': " + std::string(kClauses)},
        ErrorCase{"rule add r Vlan 1 profile gold", "Vlan",
                  "'Vlan': " + std::string(kClauses) + " (keywords are lower-case)"},
        // ports
        ErrorCase{"rule add r port", "",
                  "after 'port': expected port numbers 0-65535 separated by commas, such as 0 or 0,1"},
        ErrorCase{"rule add r port 70000 profile gold", "70000",
                  "'70000': expected port numbers 0-65535 separated by commas, such as 0 or 0,1"},
        ErrorCase{
            "rule add r port 1,x profile gold", "1,x",
            "'1,x': 'x' is not a valid item; expected port numbers 0-65535 separated by commas, such as 0 or 0,1"},
        ErrorCase{
            "rule add r port 1,,2 profile gold", "1,,2",
            "'1,,2': empty item in the list; expected port numbers 0-65535 separated by commas, such as 0 or 0,1"},
        ErrorCase{"rule add r port 1, profile gold", "1,",
                  "'1,': empty item in the list; expected port numbers 0-65535 separated by commas, such as 0 or 0,1"},
        ErrorCase{"rule add r port 1-2 profile gold", "1-2",
                  "'1-2': expected port numbers 0-65535 separated by commas, such as 0 or 0,1"},
        // vlan
        ErrorCase{"rule add r vlan 4096 profile gold", "4096", "'4096': expected a VLAN id 0-4095"},
        ErrorCase{"rule add r vlan -1 profile gold", "-1", "'-1': expected a VLAN id 0-4095"},
        ErrorCase{"rule add r vlan", "", "after 'vlan': expected a VLAN id 0-4095"},
        // prefixes
        ErrorCase{"rule add r src any profile gold", "any",
                  "'any': expected an IPv4 or IPv6 prefix such as 10.1.0.0/16 or 2001:db8::/32"},
        ErrorCase{"rule add r src", "",
                  "after 'src': expected an IPv4 or IPv6 prefix such as 10.1.0.0/16 or 2001:db8::/32"},
        ErrorCase{"rule add r src 10.0.0.256 profile gold", "10.0.0.256",
                  "'10.0.0.256': expected an IPv4 prefix a.b.c.d[/n] such as 10.1.0.0/16 (a, b, c, d 0-255 without "
                  "leading zeros, n 0-32)"},
        ErrorCase{"rule add r src 10.0.0.0/33 profile gold", "10.0.0.0/33",
                  "'10.0.0.0/33': expected a prefix length 0-32 after '/'"},
        ErrorCase{"rule add r dst 2001:db8::/129 profile gold", "2001:db8::/129",
                  "'2001:db8::/129': expected a prefix length 0-128 after '/'"},
        ErrorCase{"rule add r dst 2001:db8:::1 profile gold", "2001:db8:::1",
                  "'2001:db8:::1': expected an IPv6 prefix such as 2001:db8::/32 (RFC 4291 text form, /0-128)"},
        ErrorCase{"rule add r src 10.1.2.3/16 profile gold", "10.1.2.3/16",
                  "'10.1.2.3/16': has host bits set; did you mean 10.1.0.0/16?"},
        ErrorCase{"rule add r dst 2001:db8::1/32 profile gold", "2001:db8::1/32",
                  "'2001:db8::1/32': has host bits set; did you mean 2001:db8::/32?"},
        ErrorCase{"rule add r src 10.0.0.0/8 dst ::1 profile gold", "::1",
                  "'::1': dst is IPv6 but src is IPv4; src and dst must be the same family"},
        ErrorCase{"rule add r dst 2001:db8::/32 src 10.0.0.0/8 profile gold", "10.0.0.0/8",
                  "'10.0.0.0/8': src is IPv4 but dst is IPv6; src and dst must be the same family"},
        // protocol and L4 ports
        ErrorCase{"rule add r proto tcpx profile gold", "tcpx",
                  "'tcpx': expected a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255"},
        ErrorCase{"rule add r proto 256 profile gold", "256",
                  "'256': expected a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255"},
        ErrorCase{
            "rule add r proto TCP profile gold", "TCP",
            "'TCP': expected a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255 (keywords are lower-case)"},
        ErrorCase{"rule add r proto icmp dport 5 profile gold", "dport",
                  "'dport': dport needs proto tcp, udp or sctp (or no proto); icmp has no ports"},
        ErrorCase{"rule add r sport 5 proto 47 profile gold", "47",
                  "'47': sport needs proto tcp, udp or sctp (or no proto); 47 has no ports"},
        ErrorCase{"rule add r dport 5-3 profile gold", "5-3", "'5-3': the range 5-3 is reversed; write 3-5"},
        ErrorCase{"rule add r sport 1,9-2 profile gold", "1,9-2", "'1,9-2': the range 9-2 is reversed; write 2-9"},
        ErrorCase{
            "rule add r dport 1-2-3 profile gold", "1-2-3",
            "'1-2-3': expected ports N or ranges N-M (0-65535) separated by commas, such as 80,443 or 1024-65535"},
        ErrorCase{
            "rule add r dport 80,http profile gold", "80,http",
            "'80,http': 'http' is not a valid item; expected ports N or ranges N-M (0-65535) separated by commas, "
            "such as 80,443 or 1024-65535"},
        ErrorCase{
            "rule add r dport 1-65536 profile gold", "1-65536",
            "'1-65536': expected ports N or ranges N-M (0-65535) separated by commas, such as 80,443 or 1024-65535"},
        // dscp, input, length
        ErrorCase{
            "rule add r dscp af14 profile gold", "af14",
            "'af14': expected DSCP values 0-63 or names (be, df, cs0-cs7, af11-af43, ef, va) separated by commas"},
        ErrorCase{"rule add r dscp 64 profile gold", "64",
                  "'64': expected DSCP values 0-63 or names (be, df, cs0-cs7, af11-af43, ef, va) separated by commas"},
        ErrorCase{"rule add r dscp ef,AF11 profile gold", "ef,AF11",
                  "'ef,AF11': 'AF11' is not a valid item; expected DSCP values 0-63 or names (be, df, cs0-cs7, "
                  "af11-af43, ef, va) separated by commas"},
        ErrorCase{"rule add r profile gold input aware", "aware",
                  "'aware': expected an input color source: blind, dscp or map"},
        ErrorCase{"rule add r profile gold input blind input dscp", "input", "'input': input given twice"},
        ErrorCase{"rule add r profile gold length l4", "l4",
                  "'l4': expected a metered length l1, l2 or l3, optionally adjusted such as l2+4 or l3-20 "
                  "(-100000..100000)"},
        ErrorCase{"rule add r profile gold length l2+", "l2+",
                  "'l2+': expected a metered length l1, l2 or l3, optionally adjusted such as l2+4 or l3-20 "
                  "(-100000..100000)"},
        ErrorCase{"rule add r profile gold length l2*3", "l2*3",
                  "'l2*3': expected a metered length l1, l2 or l3, optionally adjusted such as l2+4 or l3-20 "
                  "(-100000..100000)"},
        ErrorCase{"rule add r profile gold length l3-100001", "l3-100001",
                  "'l3-100001': the adjustment must be -100000..100000 bytes"},
        ErrorCase{"rule add r profile gold length l1+99999999999999999999", "l1+99999999999999999999",
                  "'l1+99999999999999999999': expected a metered length l1, l2 or l3, optionally adjusted such as l2+4 "
                  "or l3-20 (-100000..100000)"}));

INSTANTIATE_TEST_SUITE_P(
    RuleActions, LanguageError,
    ::testing::Values(
        ErrorCase{"rule add r profile gold green", "",
                  "after 'green': expected an action: forward, drop, remark DSCP or pcp N"},
        ErrorCase{"rule add r profile gold green reject", "reject",
                  "'reject': expected an action: forward, drop, remark DSCP or pcp N"},
        ErrorCase{"rule add r profile gold green drop green forward", "green", "'green': green given twice"},
        ErrorCase{"rule add r profile gold green>yellow drop", "green>yellow",
                  "'green>yellow': a color pair IN>OUT needs a color-aware input: 'input dscp' or 'input map ...'"},
        ErrorCase{"rule add r profile gold input blind red drop yellow>red drop", "yellow>red",
                  "'yellow>red': a color pair IN>OUT needs a color-aware input: 'input dscp' or 'input map ...'"},
        ErrorCase{"rule add r profile gold input dscp yellow>green drop", "yellow>green",
                  "'yellow>green': never happens: a color-aware meter never turns a yellow packet green"},
        ErrorCase{"rule add r profile gold input dscp red>yellow drop", "red>yellow",
                  "'red>yellow': never happens: a color-aware meter never turns a red packet yellow"},
        ErrorCase{"rule add r profile gold input dscp green>purple drop", "green>purple",
                  "'green>purple': expected a color pair IN>OUT such as green>yellow (colors green, yellow, red)"},
        ErrorCase{"rule add r profile gold input dscp green> drop", "green>",
                  "'green>': expected a color pair IN>OUT such as green>yellow (colors green, yellow, red)"},
        ErrorCase{"rule add r profile gold input dscp green>red drop green>red forward", "green>red",
                  "'green>red': green>red given twice"},
        ErrorCase{"rule add r profile gold red remark", "",
                  "after 'remark': expected a DSCP 0-63 or a name: be, df, cs0-cs7, af11-af43, ef, va"},
        ErrorCase{"rule add r profile gold red remark 64", "64",
                  "'64': expected a DSCP 0-63 or a name: be, df, cs0-cs7, af11-af43, ef, va"},
        ErrorCase{"rule add r profile gold red remark EF", "EF",
                  "'EF': expected a DSCP 0-63 or a name: be, df, cs0-cs7, af11-af43, ef, va (keywords are lower-case)"},
        ErrorCase{"rule add r profile gold red pcp", "", "after 'pcp': expected a PCP 0-7"},
        ErrorCase{"rule add r profile gold red pcp 8", "8", "'8': expected a PCP 0-7"},
        ErrorCase{"rule add r profile gold red remark ef pcp", "", "after 'pcp': expected a PCP 0-7"},
        ErrorCase{"rule add r profile gold red drop remark 5", "remark",
                  "'remark': drop cannot be combined with remark"},
        ErrorCase{"rule add r profile gold red drop pcp 5", "pcp", "'pcp': drop cannot be combined with pcp"},
        ErrorCase{"rule add r profile gold red forward remark 5", "remark",
                  "'remark': forward takes nothing more; 'remark DSCP' alone forwards the packet remarked"},
        ErrorCase{"rule add r profile gold red forward pcp 5", "pcp",
                  "'pcp': forward takes nothing more; 'pcp N' alone forwards the packet with that PCP"},
        ErrorCase{"rule add r profile gold red remark 5 pcp 3 pcp 4", "pcp", "'pcp': pcp given twice in one action"},
        ErrorCase{"rule add r profile gold red pcp 3 remark 5 remark 6", "remark",
                  "'remark': remark given twice in one action"},
        ErrorCase{"rule add r profile gold red remark 5 remark 6", "remark",
                  "'remark': remark given twice in one action"},
        ErrorCase{"default pcp 3 pcp 4", "pcp", "'pcp': pcp given twice in one action"}));

// The same on kBaseConfig with kMapConfig added: color maps, per-key meters, parents and input maps.
class LanguageMapError : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(LanguageMapError, NamesTheTokenAndLeavesThePolicyUnchanged) {
  const ErrorCase& c = GetParam();
  dataplane::Policy policy = must_load(kMapConfig, must_load(kBaseConfig));
  const dataplane::Policy before = policy;
  const auto result = execute(policy, c.command);
  ASSERT_FALSE(result.ok()) << "accepted: " << c.command;
  EXPECT_EQ(result.error().subject, c.subject);
  EXPECT_EQ(result.error().message, c.message);
  EXPECT_EQ(policy, before);
}

const std::string kLongMapName = "color-map add " + kLongName + " dscp red 1";
const std::string kLongMapMessage = kLongNameQuoted + ": a color map name is at most 64 characters; this one has 65";
constexpr std::string_view kNameSyntax = "a letter, then up to 63 letters, digits, '_', '.' or '-'";
constexpr std::string_view kDscpValues =
    "expected DSCP values 0-63, ranges N-M or names (be, df, cs0-cs7, af11-af43, ef, va) separated by commas";
constexpr std::string_view kPcpValues = "expected PCP values 0-7 or ranges N-M separated by commas";

std::string quoted(std::string_view token, std::string_view rest) {
  return "'" + std::string(token) + "': " + std::string(rest);
}

INSTANTIATE_TEST_SUITE_P(
    ColorMaps, LanguageMapError,
    ::testing::Values(
        ErrorCase{"color-map", "", "after 'color-map': expected add, change, delete, list or show"},
        ErrorCase{"color-map remove af", "remove", "'remove': expected add, change, delete, list or show after 'color-map'"},
        ErrorCase{"color-map Add m dscp red 1", "Add",
                  "'Add': expected add, change, delete, list or show after 'color-map' (keywords are lower-case)"},
        ErrorCase{"Color-map list", "Color-map",
                  "'Color-map': unknown command; expected profile, color-map, rule, default or show (keywords are "
                  "lower-case)"},
        ErrorCase{"colormap list", "colormap",
                  "'colormap': unknown command; expected profile, color-map, rule, default or show"},
        ErrorCase{"color-map list all", "all", "'all': unexpected after 'list': the command ends there"},
        // names
        ErrorCase{"color-map add", "", "after 'add': expected a color map name"},
        ErrorCase{"color-map add 9m dscp red 1", "9m",
                  quoted("9m", "expected a color map name: ") + std::string(kNameSyntax)},
        ErrorCase{"color-map add m+n dscp red 1", "m+n",
                  quoted("m+n", "expected a color map name: ") + std::string(kNameSyntax)},
        ErrorCase{kLongMapName, kLongName, kLongMapMessage},
        ErrorCase{"color-map add red dscp red 1", "red", "'red': red is a keyword and cannot name a color map"},
        ErrorCase{"color-map add map dscp red 1", "map", "'map': map is a keyword and cannot name a color map"},
        ErrorCase{"color-map add color-map dscp red 1", "color-map",
                  "'color-map': color-map is a keyword and cannot name a color map"},
        ErrorCase{"color-map add af dscp red 1", "af", "'af': a color map named af already exists"},
        // kind and values
        ErrorCase{"color-map add m", "", "after 'm': expected a color map kind: dscp or pcp"},
        ErrorCase{"color-map add m vlan red 1", "vlan", "'vlan': expected a color map kind: dscp or pcp"},
        ErrorCase{"color-map add m PCP red 1", "PCP",
                  "'PCP': expected a color map kind: dscp or pcp (keywords are lower-case)"},
        ErrorCase{"color-map add m dscp", "", "after 'dscp': expected a color (green, yellow or red) and its values"},
        ErrorCase{"color-map add m pcp", "", "after 'pcp': expected a color (green, yellow or red) and its values"},
        ErrorCase{"color-map add m dscp blue 1", "blue", "'blue': expected a color: green, yellow or red"},
        ErrorCase{"color-map add m dscp Red 1", "Red",
                  "'Red': expected a color: green, yellow or red (keywords are lower-case)"},
        ErrorCase{"color-map add m dscp red", "", "after 'red': " + std::string(kDscpValues)},
        ErrorCase{"color-map add m pcp yellow", "", "after 'yellow': " + std::string(kPcpValues)},
        ErrorCase{"color-map add m dscp red 64", "64", quoted("64", kDscpValues)},
        ErrorCase{"color-map add m dscp red 60-64", "60-64", quoted("60-64", kDscpValues)},
        ErrorCase{"color-map add m pcp red 8", "8", quoted("8", kPcpValues)},
        ErrorCase{"color-map add m pcp red ef", "ef", quoted("ef", kPcpValues)},
        ErrorCase{"color-map add m dscp red af11-af13", "af11-af13", quoted("af11-af13", kDscpValues)},
        ErrorCase{"color-map add m dscp red 1,x", "1,x",
                  quoted("1,x", "'x' is not a valid item; ") + std::string(kDscpValues)},
        ErrorCase{"color-map add m pcp red 1-", "1-", quoted("1-", kPcpValues)},
        ErrorCase{"color-map add m dscp red 1,,2", "1,,2",
                  quoted("1,,2", "empty item in the list; ") + std::string(kDscpValues)},
        ErrorCase{"color-map add m dscp red 9-3", "9-3", "'9-3': the range 9-3 is reversed; write 3-9"},
        ErrorCase{"color-map add m pcp red 1,7-6", "1,7-6", "'1,7-6': the range 7-6 is reversed; write 6-7"},
        ErrorCase{"color-map add m dscp red 1 red 2", "red", "'red': red given twice"},
        ErrorCase{"color-map add m dscp yellow 10-20 red af13,af23", "af13,af23",
                  "'af13,af23': 14 is listed under both yellow and red; a value has one color"},
        ErrorCase{"color-map add m pcp green 0-7 yellow 7", "7",
                  "'7': 7 is listed under both green and yellow; a value has one color"},
        ErrorCase{"color-map add m dscp red 1 extra", "extra", "'extra': expected a color: green, yellow or red"},
        ErrorCase{"color-map add m dscp red 1 yellow", "", "after 'yellow': " + std::string(kDscpValues)},
        // change
        ErrorCase{"color-map change", "", "after 'change': expected a color map name"},
        ErrorCase{"color-map change nope dscp red 1", "nope", "'nope': no such color map"},
        ErrorCase{"color-map change af pcp red 1", "pcp",
                  "'pcp': color map af is used by rule cust as its dscp-map, which needs a dscp map; change or delete "
                  "that rule first"},
        ErrorCase{"color-map change prio dscp red 1", "dscp",
                  "'dscp': color map prio is used by rule cust as its pcp-map, which needs a pcp map; change or "
                  "delete that rule first"},
        ErrorCase{"color-map change af dscp red 99", "99", quoted("99", kDscpValues)},
        ErrorCase{"color-map change af dscp", "",
                  "after 'dscp': expected a color (green, yellow or red) and its values"},
        // delete
        ErrorCase{"color-map delete", "", "after 'delete': expected a color map name"},
        ErrorCase{"color-map delete nope", "nope", "'nope': no such color map"},
        ErrorCase{"color-map delete af", "af",
                  "'af': color map af is used by rule cust as its dscp-map; change or delete that rule first"},
        ErrorCase{"color-map delete prio", "prio",
                  "'prio': color map prio is used by rule cust as its pcp-map; change or delete that rule first"},
        ErrorCase{"color-map delete spare now", "now", "'now': unexpected after 'spare': the command ends there"},
        ErrorCase{"color-map delete gold", "gold", "'gold': no such color map"}));  // a profile, not a map

INSTANTIATE_TEST_SUITE_P(
    PerKey, LanguageMapError,
    ::testing::Values(
        ErrorCase{"rule add r profile gold per", "",
                  "after 'per': expected a key: src, dst, src+dport or 5-tuple, optionally with address masks such "
                  "as src/24 or src/24,64"},
        ErrorCase{"rule add r profile gold per flow", "flow",
                  "'flow': expected a key: src, dst, src+dport or 5-tuple, optionally with address masks such as "
                  "src/24 or src/24,64"},
        ErrorCase{"rule add r profile gold per SRC", "SRC",
                  "'SRC': expected a key: src, dst, src+dport or 5-tuple, optionally with address masks such as "
                  "src/24 or src/24,64 (keywords are lower-case)"},
        ErrorCase{"rule add r profile gold per src,dst", "src,dst",
                  "'src,dst': expected a key: src, dst, src+dport or 5-tuple, optionally with address masks such as "
                  "src/24 or src/24,64"},
        ErrorCase{"rule add r profile gold per dst/24,64,8", "dst/24,64,8",
                  "'dst/24,64,8': expected a key: src, dst, src+dport or 5-tuple, optionally with address masks such "
                  "as src/24 or src/24,64"},
        ErrorCase{"rule add r profile gold per src/33", "src/33",
                  "'src/33': expected an IPv4 mask length 0-32 after '/'"},
        ErrorCase{"rule add r profile gold per src/", "src/", "'src/': expected an IPv4 mask length 0-32 after '/'"},
        ErrorCase{"rule add r profile gold per src/,64", "src/,64",
                  "'src/,64': expected an IPv4 mask length 0-32 after '/'"},
        ErrorCase{"rule add r profile gold per 5-tuple/-1", "5-tuple/-1",
                  "'5-tuple/-1': expected an IPv4 mask length 0-32 after '/'"},
        ErrorCase{"rule add r profile gold per src+dport/24,129", "src+dport/24,129",
                  "'src+dport/24,129': expected an IPv6 mask length 0-128 after ','"},
        ErrorCase{"rule add r profile gold per src/24,", "src/24,",
                  "'src/24,': expected an IPv6 mask length 0-128 after ','"},
        ErrorCase{"rule add r profile gold per src per dst", "per", "'per': per given twice"},
        // timeout
        ErrorCase{"rule add r profile gold per src timeout", "",
                  "after 'timeout': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"rule add r profile gold per src timeout 30", "30",
                  "'30': a duration needs a unit: ns, us, ms, s, m or h"},
        ErrorCase{"rule add r profile gold per src timeout 30x", "30x",
                  "'30x': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"rule add r profile gold per src timeout 30sec", "30sec",
                  "'30sec': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"rule add r profile gold per src timeout s", "s",
                  "'s': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"rule add r profile gold per src timeout 1.s", "1.s",
                  "'1.s': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"rule add r profile gold per src timeout -1s", "-1s",
                  "'-1s': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"rule add r profile gold per src timeout 999us", "999us",
                  "'999us': the timeout must be at least 1ms"},
        ErrorCase{"rule add r profile gold per src timeout 0s", "0s", "'0s': the timeout must be at least 1ms"},
        ErrorCase{"rule add r profile gold per src timeout 0.0009s", "0.0009s",
                  "'0.0009s': the timeout must be at least 1ms"},
        ErrorCase{"rule add r profile gold per src timeout 25h", "25h", "'25h': the timeout must be at most 24h"},
        ErrorCase{"rule add r profile gold per src timeout 86400001ms", "86400001ms",
                  "'86400001ms': the timeout must be at most 24h"},
        ErrorCase{"rule add r profile gold per src timeout 99999999999999999999999999h", "99999999999999999999999999h",
                  "'99999999999999999999999999h': the timeout must be at most 24h"},
        ErrorCase{"rule add r profile gold per src timeout 1.5ns", "1.5ns",
                  "'1.5ns': is not a whole number of nanoseconds"},
        ErrorCase{"rule add r profile gold per src timeout 1.0000000000000000000000000001s",
                  "1.0000000000000000000000000001s",
                  "'1.0000000000000000000000000001s': is not a whole number of nanoseconds"},
        ErrorCase{"rule add r profile gold per src timeout 1s timeout 2s", "timeout", "'timeout': timeout given twice"},
        ErrorCase{"rule add r profile gold timeout 30s", "timeout",
                  "'timeout': timeout needs per-key meters: add 'per KEY' (src, dst, src+dport or 5-tuple)"},
        // capacity
        ErrorCase{"rule add r profile gold per src capacity", "",
                  "after 'capacity': expected a number of keys such as 4096, 64k or 1m (k = 1024, m = 1048576)"},
        ErrorCase{"rule add r profile gold per src capacity lots", "lots",
                  "'lots': expected a number of keys such as 4096, 64k or 1m (k = 1024, m = 1048576)"},
        ErrorCase{"rule add r profile gold per src capacity 64kb", "64kb",
                  "'64kb': expected a number of keys such as 4096, 64k or 1m (k = 1024, m = 1048576)"},
        ErrorCase{"rule add r profile gold per src capacity 1g", "1g",
                  "'1g': expected a number of keys such as 4096, 64k or 1m (k = 1024, m = 1048576)"},
        ErrorCase{"rule add r profile gold per src capacity 0", "0",
                  "'0': the capacity must be 1 to 256m (268435456) keys"},
        ErrorCase{"rule add r profile gold per src capacity 0.1k", "0.1k", "'0.1k': is not a whole number of keys"},
        ErrorCase{"rule add r profile gold per src capacity 257m", "257m",
                  "'257m': the capacity must be 1 to 256m (268435456) keys"},
        ErrorCase{"rule add r profile gold per src capacity 268435457", "268435457",
                  "'268435457': the capacity must be 1 to 256m (268435456) keys"},
        ErrorCase{"rule add r profile gold per src capacity 1.5", "1.5", "'1.5': is not a whole number of keys"},
        ErrorCase{"rule add r profile gold per src capacity 1k capacity 2k", "capacity",
                  "'capacity': capacity given twice"},
        ErrorCase{"rule add r capacity 64k profile gold", "capacity",
                  "'capacity': capacity needs per-key meters: add 'per KEY' (src, dst, src+dport or 5-tuple)"},
        // fallback
        ErrorCase{"rule add r profile gold per src fallback", "",
                  "after 'fallback': expected a fallback: aggregate, default or drop"},
        ErrorCase{"rule add r profile gold per src fallback shared", "shared",
                  "'shared': expected a fallback: aggregate, default or drop"},
        ErrorCase{"rule add r profile gold per src fallback Drop", "Drop",
                  "'Drop': expected a fallback: aggregate, default or drop (keywords are lower-case)"},
        ErrorCase{"rule add r profile gold per src fallback drop fallback drop", "fallback",
                  "'fallback': fallback given twice"},
        // the first clause that needs per is named
        ErrorCase{"rule add r profile gold fallback drop timeout 1s", "fallback",
                  "'fallback': fallback needs per-key meters: add 'per KEY' (src, dst, src+dport or 5-tuple)"},
        ErrorCase{"rule add r", "", "missing 'profile PROFILE'"},
        ErrorCase{"rule add r per src timeout 1s", "", "missing 'profile PROFILE'"},
        // keywords cannot name anything
        ErrorCase{"rule add per profile gold", "per", "'per': per is a keyword and cannot name a rule"},
        ErrorCase{"rule add unmapped profile gold", "unmapped",
                  "'unmapped': unmapped is a keyword and cannot name a rule"},
        ErrorCase{"profile add parent srtcm cir 1mbit cbs 1k", "parent",
                  "'parent': parent is a keyword and cannot name a profile"},
        ErrorCase{"profile add aggregate srtcm cir 1mbit cbs 1k", "aggregate",
                  "'aggregate': aggregate is a keyword and cannot name a profile"},
        ErrorCase{"profile add pcp-map srtcm cir 1mbit cbs 1k", "pcp-map",
                  "'pcp-map': pcp-map is a keyword and cannot name a profile"}));

// Shaping (issue 27): red only, with max-delay in range, color-blind, without a parent or a cluster.
INSTANTIATE_TEST_SUITE_P(
    Shaping, LanguageError,
    ::testing::Values(
        ErrorCase{"rule add r profile gold red shape", "shape",
                  "'shape': shape takes max-delay: a maximum delay such as 5ms or 200us (1us to 1s)"},
        ErrorCase{"rule add r profile gold red shape 5ms", "5ms",
                  "'5ms': shape takes max-delay: a maximum delay such as 5ms or 200us (1us to 1s)"},
        ErrorCase{"rule add r profile gold red shape max-delay", "",
                  "after 'max-delay': expected a maximum delay such as 5ms or 200us (1us to 1s)"},
        ErrorCase{"rule add r profile gold red shape max-delay 2s", "2s", "'2s': max-delay must be from 1us to 1s"},
        ErrorCase{"rule add r profile gold red shape max-delay 999ns", "999ns", "'999ns': max-delay must be from 1us to 1s"},
        ErrorCase{"rule add r profile gold red shape max-delay 5", "5", "'5': a duration needs a unit: ns, us, ms, s, m or h"},
        ErrorCase{"rule add r profile gold yellow shape max-delay 5ms", "yellow",
                  "'yellow': only red packets are shaped: 'red shape max-delay D' (a yellow packet leaves now)"},
        ErrorCase{"rule add r profile gold red shape max-delay 5ms remark af11", "remark",
                  "'remark': shape cannot be combined with remark: a released packet takes the green action"},
        ErrorCase{"rule add r profile gold input dscp red shape max-delay 5ms", "shape",
                  "'shape': a shaping rule is color-blind: it cannot have 'input dscp' or 'input map'"},
        ErrorCase{"rule add r profile gold parent dns red shape max-delay 5ms", "shape",
                  "'shape': a shaping rule cannot have a parent meter: the parent would color a packet again after its release"},
        ErrorCase{"rule add r profile gold cluster dns red shape max-delay 5ms", "shape",
                  "'shape': a shaping rule cannot have a cluster meter: the cluster would color a packet again after its release"},
        ErrorCase{"rule add r profile gold input dscp green>red shape max-delay 5ms", "green>red",
                  "'green>red': a color pair cannot shape: a shaping rule is color-blind ('red shape max-delay D')"},
        ErrorCase{"default shape max-delay 5ms", "shape",
                  "'shape': the default action cannot shape: only a rule's red packets are shaped"},
        ErrorCase{"profile add max-delay srtcm cir 1mbit cbs 1k", "max-delay",
                  "'max-delay': max-delay is a keyword and cannot name a profile"},
        // queue N: right after max-delay, 1 to 1m packets.
        ErrorCase{"rule add r profile gold red drop queue 5", "queue",
                  "'queue': queue belongs to a shaping action, right after it: red shape max-delay D queue N"},
        ErrorCase{"rule add r profile gold queue 5 red shape max-delay 5ms", "queue",
                  "'queue': queue belongs to a shaping action, right after it: red shape max-delay D queue N"},
        ErrorCase{"rule add r profile gold red shape max-delay 5ms queue 0", "0",
                  "'0': queue must be 1 to 1m (1048576) packets"},
        ErrorCase{"rule add r profile gold red shape max-delay 5ms queue 1048577", "1048577",
                  "'1048577': queue must be 1 to 1m (1048576) packets"},
        ErrorCase{"rule add r profile gold red shape max-delay 5ms queue 2m", "2m",
                  "'2m': queue must be 1 to 1m (1048576) packets"},
        ErrorCase{"rule add r profile gold red shape max-delay 5ms queue many", "many",
                  "'many': expected a number of packets held at once such as 64, 4k or 1m (1 to 1m, k = 1024, m = 1048576)"},
        ErrorCase{"rule add r profile gold red shape max-delay 5ms queue", "",
                  "after 'queue': expected a number of packets held at once such as 64, 4k or 1m (1 to 1m, k = 1024, m = 1048576)"},
        ErrorCase{"rule add r profile gold red shape max-delay 5ms queue 4 queue 8", "queue",
                  "'queue': queue belongs to a shaping action, right after it: red shape max-delay D queue N"}));

// Flows per key (issue 27): max-flows on a per-key rule of several flows per key, in range; its
// flow-timeout and flow-capacity only with it.
INSTANTIATE_TEST_SUITE_P(
    MaxFlows, LanguageError,
    ::testing::Values(
        ErrorCase{"rule add r profile gold max-flows 10", "max-flows",
                  "'max-flows': max-flows needs per-key meters: add 'per KEY' (src, dst, src+dport or 5-tuple)"},
        ErrorCase{"rule add r profile gold per 5-tuple max-flows 10", "max-flows",
                  "'max-flows': max-flows needs a key of several flows: with per 5-tuple each key is one flow"},
        ErrorCase{"rule add r profile gold per src max-flows 0", "0",
                  "'0': expected a number of flows per key, 1 to 16777216"},
        ErrorCase{"rule add r profile gold per src max-flows 16777217", "16777217",
                  "'16777217': expected a number of flows per key, 1 to 16777216"},
        ErrorCase{"rule add r profile gold per src max-flows ten", "ten",
                  "'ten': expected a number of flows per key, 1 to 16777216"},
        ErrorCase{"rule add r profile gold per src max-flows", "",
                  "after 'max-flows': expected a number of flows per key, 1 to 16777216"},
        ErrorCase{"rule add r profile gold per src max-flows 2 max-flows 3", "max-flows", "'max-flows': max-flows given twice"},
        ErrorCase{"rule add r profile gold per src flow-timeout 5s", "flow-timeout",
                  "'flow-timeout': flow-timeout needs a flow limit: add 'max-flows N'"},
        ErrorCase{"rule add r profile gold per src flow-capacity 1k", "flow-capacity",
                  "'flow-capacity': flow-capacity needs a flow limit: add 'max-flows N'"},
        ErrorCase{"rule add r profile gold per src max-flows 2 flow-timeout 0ms", "0ms", "'0ms': the timeout must be at least 1ms"},
        ErrorCase{"rule add r profile gold per src max-flows 2 flow-capacity 17m", "17m",
                  "'17m': flow-capacity must be 1 to 16m (16777216) flows"},
        ErrorCase{"rule add r profile gold per src flow-excess yellow", "flow-excess",
                  "'flow-excess': flow-excess needs a flow limit: add 'max-flows N'"},
        ErrorCase{"rule add r profile gold per src max-flows 2 flow-excess blue", "blue",
                  "'blue': expected a color: green, yellow or red"},
        ErrorCase{"rule add r profile gold per src max-flows 2 flow-excess", "",
                  "after 'flow-excess': expected a color: green, yellow or red"},
        ErrorCase{"rule add r profile gold per src max-flows 2 flow-excess red flow-excess green", "flow-excess",
                  "'flow-excess': flow-excess given twice"},
        ErrorCase{"rule add r profile gold per src max-flows 2 red shape max-delay 5ms", "max-flows",
                  "'max-flows': a max-flows rule cannot shape: a refused flow's packet is red and never conforms later"},
        ErrorCase{"profile add flow-timeout srtcm cir 1mbit cbs 1k", "flow-timeout",
                  "'flow-timeout': flow-timeout is a keyword and cannot name a profile"}));

INSTANTIATE_TEST_SUITE_P(
    Hierarchy, LanguageMapError,
    ::testing::Values(
        ErrorCase{"rule add r profile gold parent", "", "after 'parent': expected a profile name"},
        ErrorCase{"rule add r profile gold parent nope", "nope", "'nope': no such profile"},
        ErrorCase{"rule add r profile gold parent af", "af", "'af': no such profile"},  // a color map
        ErrorCase{"rule add r profile gold parent dns parent gold", "parent", "'parent': parent given twice"},
        ErrorCase{"rule add r profile gold cluster", "", "after 'cluster': expected a profile name"},
        ErrorCase{"rule add r profile gold cluster nope", "nope", "'nope': no such profile"},
        ErrorCase{"rule add r profile gold cluster dns cluster gold", "cluster", "'cluster': cluster given twice"},
        ErrorCase{"profile add cluster srtcm cir 1mbit cbs 1k", "cluster",
                  "'cluster': cluster is a keyword and cannot name a profile"},
        ErrorCase{"profile delete silver", "silver",
                  "'silver': profile silver is used by rule cust as its parent; change or delete that rule first"},
        ErrorCase{"profile delete dns", "dns",
                  "'dns': profile dns is used by rule cust; change or delete that rule first"}));

INSTANTIATE_TEST_SUITE_P(
    InputMaps, LanguageMapError,
    ::testing::Values(
        ErrorCase{"rule add r profile gold input", "",
                  "after 'input': expected an input color source: blind, dscp or map"},
        ErrorCase{"rule add r profile gold input maps", "maps",
                  "'maps': expected an input color source: blind, dscp or map"},
        ErrorCase{"rule add r profile gold input map", "map",
                  "'map': input map needs a map: pcp-map NAME, dscp-map NAME or both"},
        ErrorCase{"rule add r profile gold input map unmapped red", "map",
                  "'map': input map needs a map: pcp-map NAME, dscp-map NAME or both"},
        ErrorCase{"rule add r input map length l3 profile gold", "map",
                  "'map': input map needs a map: pcp-map NAME, dscp-map NAME or both"},
        ErrorCase{"rule add r profile gold input map pcp-map", "", "after 'pcp-map': expected a pcp color map name"},
        ErrorCase{"rule add r profile gold input map dscp-map", "", "after 'dscp-map': expected a dscp color map name"},
        ErrorCase{"rule add r profile gold input map pcp-map nope", "nope", "'nope': no such color map"},
        ErrorCase{"rule add r profile gold input map dscp-map gold", "gold", "'gold': no such color map"},
        ErrorCase{"rule add r profile gold input map pcp-map af", "af",
                  "'af': color map af is a dscp map; pcp-map needs a pcp map"},
        ErrorCase{"rule add r profile gold input map dscp-map prio", "prio",
                  "'prio': color map prio is a pcp map; dscp-map needs a dscp map"},
        ErrorCase{"rule add r profile gold input map dscp-map af dscp-map spare", "dscp-map",
                  "'dscp-map': dscp-map given twice"},
        ErrorCase{"rule add r profile gold input map unmapped red dscp-map af unmapped red", "unmapped",
                  "'unmapped': unmapped given twice"},
        ErrorCase{"rule add r profile gold input map dscp-map af unmapped", "",
                  "after 'unmapped': expected a color: green, yellow or red"},
        ErrorCase{"rule add r profile gold input map dscp-map af unmapped blue", "blue",
                  "'blue': expected a color: green, yellow or red"},
        ErrorCase{"rule add r profile gold input map dscp-map af unmapped RED", "RED",
                  "'RED': expected a color: green, yellow or red (keywords are lower-case)"},
        ErrorCase{"rule add r profile gold pcp-map prio", "pcp-map",
                  "'pcp-map': pcp-map belongs to 'input map', right after it: input map [pcp-map NAME] [dscp-map "
                  "NAME] [unmapped COLOR]"},
        ErrorCase{"rule add r input map dscp-map af profile gold unmapped red", "unmapped",
                  "'unmapped': unmapped belongs to 'input map', right after it: input map [pcp-map NAME] [dscp-map "
                  "NAME] [unmapped COLOR]"},
        ErrorCase{"rule add r profile gold input dscp dscp-map af", "dscp-map",
                  "'dscp-map': dscp-map belongs to 'input map', right after it: input map [pcp-map NAME] [dscp-map "
                  "NAME] [unmapped COLOR]"},
        ErrorCase{"rule add r profile gold input map dscp-map af input dscp", "input", "'input': input given twice"},
        ErrorCase{"rule add r profile gold input blind green>yellow drop", "green>yellow",
                  "'green>yellow': a color pair IN>OUT needs a color-aware input: 'input dscp' or 'input map ...'"},
        ErrorCase{"rule add r profile gold input map dscp-map af yellow>green drop", "yellow>green",
                  "'yellow>green': never happens: a color-aware meter never turns a yellow packet green"}));

// A second position keyword is no clause of the rule body.
TEST(LanguageErrorMisc, TwoPositionsAreRefused) {
  dataplane::Policy policy = must_load(kBaseConfig);
  const auto result = execute(policy, "rule add r first last profile gold");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().subject, "last");
  EXPECT_EQ(result.error().message, "'last': " + std::string(kClauses));
}

}  // namespace
}  // namespace tricolor::control
