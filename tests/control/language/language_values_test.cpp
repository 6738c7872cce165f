// Below the commands: the tokenizer, prefixes in every RFC 4291 text form, and the printed forms of
// rates, bursts, prefixes and DSCP values (each parsing back to the same value).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "control/language/language_internal.hpp"
#include "policer/units.hpp"

namespace tricolor::control::detail {
namespace {

using dataplane::Prefix;
using policer::Unit;

std::vector<std::pair<std::string, std::size_t>> tokens_of(std::string_view line) {
  std::vector<std::pair<std::string, std::size_t>> out;
  for (const Token& t : tokenize(line)) out.emplace_back(std::string(t.text), t.column);
  return out;
}

using Tokens = std::vector<std::pair<std::string, std::size_t>>;

TEST(LanguageTokenize, SpacesTabsAndColumns) {
  EXPECT_EQ(tokens_of("rule add web"), (Tokens{{"rule", 1}, {"add", 6}, {"web", 10}}));
  EXPECT_EQ(tokens_of("  \trule\t\tadd  "), (Tokens{{"rule", 4}, {"add", 10}}));
  EXPECT_EQ(tokens_of("a\r\n"), (Tokens{{"a", 1}}));
  EXPECT_EQ(tokens_of(""), Tokens{});
  EXPECT_EQ(tokens_of(" \t "), Tokens{});
}

TEST(LanguageTokenize, CommentsRunToTheEnd) {
  EXPECT_EQ(tokens_of("# all comment"), Tokens{});
  EXPECT_EQ(tokens_of("show # the policy"), (Tokens{{"show", 1}}));
  EXPECT_EQ(tokens_of("show#x y"), (Tokens{{"show", 1}}));
  EXPECT_EQ(tokens_of("a b#c"), (Tokens{{"a", 1}, {"b", 3}}));
}

TEST(LanguageKeywords, WordsOfTheGrammar) {
  for (const std::string_view word :
       {"profile", "rule",      "add",       "change",    "delete",  "list",    "show",     "default",  "first",
        "last",    "before",    "after",     "port",      "vlan",    "src",     "dst",      "proto",    "sport",
        "dport",   "dscp",      "input",     "length",    "blind",   "green",   "yellow",   "red",      "forward",
        "drop",    "remark",    "pcp",       "cir",       "cbs",     "eir",     "ebs",      "pir",      "pbs",
        "srtcm",   "trtcm",     "trtcm4115", "tcp",       "udp",     "sctp",    "icmp",     "icmpv6",   "l1",
        "l2",      "l3",        "be",        "df",        "cs0",     "cs7",     "af11",     "af43",     "ef",
        "va",      "color-map", "per",       "src+dport", "5-tuple", "timeout", "capacity", "fallback", "aggregate",
        "parent",  "map",       "pcp-map",   "dscp-map",  "unmapped"})
    EXPECT_TRUE(is_keyword(word)) << word;
  for (const std::string_view word :
       {"gold", "web", "Drop", "TCP", "af14", "cs8", "l4", "profiles", "Map", "color", "maps", "s", "ms", "k"})
    EXPECT_FALSE(is_keyword(word)) << word;
}

Prefix v6(std::initializer_list<std::uint16_t> groups, std::uint8_t length = 128) {
  Prefix p;
  p.ipv6 = true;
  std::size_t i = 0;
  for (const auto g : groups) {
    p.address[2 * i] = static_cast<std::uint8_t>(g >> 8);
    p.address[2 * i + 1] = static_cast<std::uint8_t>(g);
    ++i;
  }
  p.length = length;
  return p;
}

Prefix v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d, std::uint8_t length = 32) {
  Prefix p;
  p.address[0] = a, p.address[1] = b, p.address[2] = c, p.address[3] = d;
  p.length = length;
  return p;
}

void expect_prefix(std::string_view text, const Prefix& expected, std::string_view printed) {
  const auto parsed = parse_prefix(text);
  ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.error().message;
  EXPECT_EQ(*parsed, expected) << text;
  EXPECT_EQ(format_prefix(*parsed), printed) << text;
}

TEST(LanguagePrefix, Ipv4) {
  expect_prefix("10.1.0.0/16", v4(10, 1, 0, 0, 16), "10.1.0.0/16");
  expect_prefix("192.168.1.7", v4(192, 168, 1, 7), "192.168.1.7");
  expect_prefix("192.168.1.7/32", v4(192, 168, 1, 7), "192.168.1.7");
  expect_prefix("0.0.0.0/0", v4(0, 0, 0, 0, 0), "0.0.0.0/0");
  expect_prefix("255.255.255.255", v4(255, 255, 255, 255), "255.255.255.255");
  expect_prefix("10.0.0.0/08", v4(10, 0, 0, 0, 8), "10.0.0.0/8");
}

TEST(LanguagePrefix, Ipv6TextForms) {
  // RFC 4291 section 2.2: full form, "::" for one or more zero groups, mixed IPv4 tail, any case.
  expect_prefix("2001:DB8:0:0:8:800:200C:417A", v6({0x2001, 0xdb8, 0, 0, 8, 0x800, 0x200c, 0x417a}),
                "2001:db8::8:800:200c:417a");
  expect_prefix("2001:db8::8:800:200c:417a", v6({0x2001, 0xdb8, 0, 0, 8, 0x800, 0x200c, 0x417a}),
                "2001:db8::8:800:200c:417a");
  expect_prefix("FF01::101", v6({0xff01, 0, 0, 0, 0, 0, 0, 0x101}), "ff01::101");
  expect_prefix("::1", v6({0, 0, 0, 0, 0, 0, 0, 1}), "::1");
  expect_prefix("::", v6({}), "::");
  expect_prefix("::/0", v6({}, 0), "::/0");
  expect_prefix("0:0:0:0:0:0:0:0", v6({}), "::");
  expect_prefix("2001:0db8:0000:0000:0000:0000:0000:0000/32", v6({0x2001, 0xdb8}, 32), "2001:db8::/32");
  expect_prefix("1::", v6({1}), "1::");
  expect_prefix("1:2:3:4:5:6:7::", v6({1, 2, 3, 4, 5, 6, 7, 0}), "1:2:3:4:5:6:7:0");  // "::" for one group
  expect_prefix("::2:3:4:5:6:7:8", v6({0, 2, 3, 4, 5, 6, 7, 8}), "0:2:3:4:5:6:7:8");
  expect_prefix("0:0:0:0:0:0:13.1.68.3", v6({0, 0, 0, 0, 0, 0, 0x0d01, 0x4403}), "::d01:4403");
  expect_prefix("::13.1.68.3", v6({0, 0, 0, 0, 0, 0, 0x0d01, 0x4403}), "::d01:4403");
  expect_prefix("::FFFF:129.144.52.38", v6({0, 0, 0, 0, 0, 0xffff, 0x8190, 0x3426}), "::ffff:129.144.52.38");
  expect_prefix("::ffff:10.0.0.0/104", v6({0, 0, 0, 0, 0, 0xffff, 0x0a00, 0}, 104), "::ffff:10.0.0.0/104");
  expect_prefix("1:2:3:4:5:6:1.2.3.4", v6({1, 2, 3, 4, 5, 6, 0x102, 0x304}), "1:2:3:4:5:6:102:304");
  // RFC 5952 section 4.2: the longest run of zeros, the first on a tie; a single zero group stays.
  expect_prefix("1:0:0:2:0:0:0:3", v6({1, 0, 0, 2, 0, 0, 0, 3}), "1:0:0:2::3");
  expect_prefix("1:0:0:2:3:0:0:4", v6({1, 0, 0, 2, 3, 0, 0, 4}), "1::2:3:0:0:4");
  expect_prefix("2001:db8:0:1:1:1:1:1", v6({0x2001, 0xdb8, 0, 1, 1, 1, 1, 1}), "2001:db8:0:1:1:1:1:1");
  expect_prefix("fe80::/10", v6({0xfe80}, 10), "fe80::/10");
}

TEST(LanguagePrefix, MalformedIsRefused) {
  for (const std::string_view text : {"",
                                      "/8",
                                      "10.0.0",
                                      "10.0.0.0.0",
                                      "10.0.0.256",
                                      "10.0.0.01",
                                      "10..0.0",
                                      "10.0.0.0/",
                                      "10.0.0.0/-1",
                                      "10.0.0.0/33",
                                      "10.0.0.0/8/8",
                                      "10.0.0.0 ",
                                      "a.b.c.d",
                                      "1:2:3:4:5:6:7",
                                      "1:2:3:4:5:6:7:8:9",
                                      "1:2:3:4:5:6:7:8::",
                                      "::1:2:3:4:5:6:7:8",
                                      "1::2::3",
                                      ":::",
                                      ":1::",
                                      "1::2:",
                                      "1:::2",
                                      "12345::",
                                      "g::",
                                      "::1.2.3.4:5",
                                      "1.2.3.4::",
                                      "::1.2.3",
                                      "::1.2.3.04",
                                      "1:2:3:4:5:6:7:1.2.3.4",
                                      "::/129",
                                      "fe80::1%eth0",
                                      "::ffff:1.2.3.4/",
                                      "1:2"})
    EXPECT_FALSE(parse_prefix(text).ok()) << text;
}

TEST(LanguagePrefix, HostBitsSuggestTheNetwork) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"10.1.2.3/16", "'10.1.2.3/16': has host bits set; did you mean 10.1.0.0/16?"},
      {"10.1.2.3/0", "'10.1.2.3/0': has host bits set; did you mean 0.0.0.0/0?"},
      {"10.1.2.3/31", "'10.1.2.3/31': has host bits set; did you mean 10.1.2.2/31?"},
      {"2001:db8::1/64", "'2001:db8::1/64': has host bits set; did you mean 2001:db8::/64?"},
      {"ffff::/9", "'ffff::/9': has host bits set; did you mean ff80::/9?"},
      {"::ffff:1.2.3.4/120", "'::ffff:1.2.3.4/120': has host bits set; did you mean ::ffff:1.2.3.0/120?"}};
  for (const auto& [text, message] : cases) {
    const auto parsed = parse_prefix(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.error().subject, text);
    EXPECT_EQ(parsed.error().message, message);
  }
}

TEST(LanguagePrefix, RandomPrefixesPrintBack) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 20000; ++i) {
    Prefix p;
    p.ipv6 = rng() % 2;
    const unsigned max = p.ipv6 ? 128 : 32;
    p.length = static_cast<std::uint8_t>(rng() % (max + 1));
    for (unsigned byte = 0; byte < max / 8; ++byte) {
      // Mostly zero bytes, so that runs of zero groups of every length occur.
      p.address[byte] = rng() % 3 == 0 ? static_cast<std::uint8_t>(rng()) : 0;
    }
    if (rng() % 4 == 0 && p.ipv6) p.address[10] = p.address[11] = 0xff;
    for (unsigned bit = p.length; bit < max; ++bit)
      p.address[bit / 8] &= static_cast<std::uint8_t>(~(0x80u >> (bit % 8)));
    const std::string text = format_prefix(p);
    const auto parsed = parse_prefix(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.error().message;
    ASSERT_EQ(*parsed, p) << text;
  }
}

TEST(LanguageFormat, RatesInTheLargestExactUnit) {
  EXPECT_EQ(format_rate(12'500'000, Unit::bytes), "100mbit");
  EXPECT_EQ(format_rate(187'500, Unit::bytes), "1500kbit");
  EXPECT_EQ(format_rate(1, Unit::bytes), "8bit");
  EXPECT_EQ(format_rate(125, Unit::bytes), "1kbit");
  EXPECT_EQ(format_rate(126, Unit::bytes), "1008bit");
  EXPECT_EQ(format_rate(125'000'000, Unit::bytes), "1gbit");
  EXPECT_EQ(format_rate(50'000'000'000, Unit::bytes), "400gbit");
  EXPECT_EQ(format_rate(125'000'000'000, Unit::bytes), "1tbit");
  EXPECT_EQ(format_rate(0, Unit::bytes), "0bit");
  EXPECT_EQ(format_rate(UINT64_MAX, Unit::bytes), "147573952589676412920bit");
  EXPECT_EQ(format_rate(10'000, Unit::packets), "10kpps");
  EXPECT_EQ(format_rate(1'500, Unit::packets), "1500pps");
  EXPECT_EQ(format_rate(2'000'000, Unit::packets), "2mpps");
  EXPECT_EQ(format_rate(1'000'000'000, Unit::packets), "1gpps");
  EXPECT_EQ(format_rate(0, Unit::packets), "0pps");
}

TEST(LanguageFormat, BurstsInKMGWhenExact) {
  EXPECT_EQ(format_burst(65536, Unit::bytes), "64k");
  EXPECT_EQ(format_burst(1536, Unit::bytes), "1536");
  EXPECT_EQ(format_burst(1 << 20, Unit::bytes), "1m");
  EXPECT_EQ(format_burst(3 << 20, Unit::bytes), "3m");
  EXPECT_EQ(format_burst(1 << 30, Unit::bytes), "1g");
  EXPECT_EQ(format_burst(1536 * 1024, Unit::bytes), "1536k");
  EXPECT_EQ(format_burst(1500, Unit::bytes), "1500");
  EXPECT_EQ(format_burst(0, Unit::bytes), "0");
  EXPECT_EQ(format_burst(64, Unit::packets), "64pkt");
  EXPECT_EQ(format_burst(0, Unit::packets), "0pkt");
}

TEST(LanguageFormat, RandomRatesAndBurstsParseBack) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const Unit unit = rng() % 2 ? Unit::bytes : Unit::packets;
    // Values of every magnitude, often round.
    std::uint64_t value = rng() >> (rng() % 64);
    if (rng() % 2) value -= value % 1000;
    if (rng() % 2) value = value / 1024 * 1024;
    // A byte rate is parsed in bit/s, which must fit 64 bits.
    const std::uint64_t rate_value = unit == Unit::bytes ? value / 8 : value;
    const auto rate = policer::parse_rate(format_rate(rate_value, unit));
    ASSERT_TRUE(rate.ok()) << format_rate(rate_value, unit) << ": " << rate.error().message;
    ASSERT_EQ(*rate, (policer::Quantity{rate_value, unit})) << format_rate(rate_value, unit);
    const auto burst = policer::parse_burst(format_burst(value, unit));
    ASSERT_TRUE(burst.ok()) << format_burst(value, unit);
    ASSERT_EQ(*burst, (policer::Quantity{value, unit})) << format_burst(value, unit);
  }
}

TEST(LanguageFormat, DscpByNameWhereItHasOne) {
  EXPECT_EQ(format_dscp(0), "be");
  EXPECT_EQ(format_dscp(8), "cs1");
  EXPECT_EQ(format_dscp(56), "cs7");
  EXPECT_EQ(format_dscp(10), "af11");
  EXPECT_EQ(format_dscp(38), "af43");
  EXPECT_EQ(format_dscp(46), "ef");
  EXPECT_EQ(format_dscp(44), "va");
  EXPECT_EQ(format_dscp(1), "1");
  EXPECT_EQ(format_dscp(63), "63");
}

TEST(LanguageFormat, DurationsInTheLargestExactUnit) {
  EXPECT_EQ(format_duration(60'000'000'000), "1m");
  EXPECT_EQ(format_duration(90'000'000'000), "90s");
  EXPECT_EQ(format_duration(3'600'000'000'000), "1h");
  EXPECT_EQ(format_duration(86'400'000'000'000), "24h");
  EXPECT_EQ(format_duration(5'400'000'000'000), "90m");
  EXPECT_EQ(format_duration(1'000'000), "1ms");
  EXPECT_EQ(format_duration(1'500'000'000), "1500ms");
  EXPECT_EQ(format_duration(1'000'001'000), "1000001us");
  EXPECT_EQ(format_duration(1'000'000'001), "1000000001ns");
  EXPECT_EQ(format_duration(0), "0ns");
}

TEST(LanguageFormat, CapacitiesInKAndMWhenExact) {
  EXPECT_EQ(format_capacity(1u << 20), "1m");
  EXPECT_EQ(format_capacity(1u << 28), "256m");
  EXPECT_EQ(format_capacity(65536), "64k");
  EXPECT_EQ(format_capacity(1536 * 1024), "1536k");
  EXPECT_EQ(format_capacity(1024), "1k");
  EXPECT_EQ(format_capacity(1000), "1000");
  EXPECT_EQ(format_capacity(1), "1");
  EXPECT_EQ(format_capacity(0), "0");
}

}  // namespace
}  // namespace tricolor::control::detail
