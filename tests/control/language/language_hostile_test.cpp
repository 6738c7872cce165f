// Hostile text (issue 7): error messages quote tokens short and printable (finding 13), and load()
// ends lines at LF, CR LF or a lone CR (finding 14).
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "control/language/language.hpp"
#include "language_test_support.hpp"
#include "policer/quote.hpp"
#include "policer/units.hpp"

namespace tricolor::control {
namespace {

using namespace std::string_literals;
using testing::kBaseConfig;
using testing::must_load;
using testing::rule_names;

// ---- quote() ----

TEST(Quote, PrintableAsciiShowsAsItself) {
  EXPECT_EQ(quote("gold"), "'gold'");
  EXPECT_EQ(quote(""), "''");
  EXPECT_EQ(quote(" ~!#10.1.0.0/16"), "' ~!#10.1.0.0/16'");
}

TEST(Quote, QuoteAndBackslashAreEscaped) {
  EXPECT_EQ(quote("it's"), R"('it\'s')");
  EXPECT_EQ(quote(R"(a\b)"), R"('a\\b')");
}

TEST(Quote, EveryOtherByteIsHex) {
  EXPECT_EQ(quote("\0"s), R"('\x00')");
  EXPECT_EQ(quote("\x1b]0;pwned\x07"), R"('\x1b]0;pwned\x07')");     // an OSC sequence: set the title
  EXPECT_EQ(quote("\xef\xbb\xbfprofile"), R"('\xef\xbb\xbfprofile')");  // a UTF-8 byte order mark
  EXPECT_EQ(quote("a\xc2\xa0" "b"), R"('a\xc2\xa0b')");                // a no-break space
  EXPECT_EQ(quote("\t\r\n\x7f\xff"), R"('\x09\x0d\x0a\x7f\xff')");
  for (int byte = 0; byte < 256; ++byte) {
    const std::string quoted = quote(std::string(1, static_cast<char>(byte)));
    const bool plain = byte >= 0x20 && byte <= 0x7e && byte != '\'' && byte != '\\';
    EXPECT_EQ(quoted.size(), plain ? 3u : byte == '\'' || byte == '\\' ? 4u : 6u) << byte;
  }
}

TEST(Quote, AtMost64BytesThenTheLength) {
  ASSERT_EQ(kQuoteMaxBytes, 64u);
  const std::string limit(64, 'x');
  EXPECT_EQ(quote(limit), "'" + limit + "'");
  EXPECT_EQ(quote(limit + "y"), "'" + limit + "'... (65 bytes)");
  std::string escapes;
  for (int i = 0; i < 64; ++i) escapes += R"(\x1b)";
  EXPECT_EQ(quote(std::string(10'000'000, '\x1b')), "'" + escapes + "'... (10000000 bytes)");
  // A cut never splits an escape: bytes, not characters of the output, are counted.
  EXPECT_EQ(quote(std::string(63, 'x') + "\xc2\xa0"), "'" + std::string(63, 'x') + R"(\xc2'... (65 bytes))");
}

// ---- errors of hostile commands ----

// Short, one line of printable ASCII: what an operator's terminal can show safely.
void expect_safe(const std::string& message) {
  EXPECT_LE(message.size(), 600u);
  for (const char c : message)
    ASSERT_TRUE(c >= 0x20 && c <= 0x7e) << "byte " << static_cast<int>(static_cast<unsigned char>(c)) << " in "
                                        << quote(message);
}

struct Hostile {
  std::string command;
  std::string subject;  // as given, raw
  std::string message;
};

void PrintTo(const Hostile& h, std::ostream* os) { *os << quote(h.command); }

class LanguageHostile : public ::testing::TestWithParam<Hostile> {};

TEST_P(LanguageHostile, ErrorIsShortPrintableAndShowsTheToken) {
  const Hostile& h = GetParam();
  dataplane::Policy policy = must_load(kBaseConfig);
  const dataplane::Policy before = policy;
  const auto result = execute(policy, h.command);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().subject, h.subject);
  EXPECT_EQ(result.error().message, h.message);
  expect_safe(result.error().message);
  EXPECT_EQ(policy, before);

  // The same in a file, with its line number.
  const auto loaded = load("\n" + h.command + "\n", before);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().message, "line 2: " + h.message);
  expect_safe(loaded.error().message);
}

const std::string k10MB(10 * 1024 * 1024, 'a');
const std::string kShown64 = std::string(64, 'a');
constexpr std::string_view kUnknownCommand = "unknown command; expected profile, color-map, rule, default or show";
constexpr std::string_view kClauses =
    "expected a match (port, vlan, src, dst, proto, sport, dport, dscp), profile, per, timeout, capacity, "
    "fallback, max-flows, flow-timeout, flow-capacity, flow-excess, parent, cluster, input, length or a color and its action (green, yellow, red or a pair IN>OUT such as "
    "green>yellow)";

INSTANTIATE_TEST_SUITE_P(
    Tokens, LanguageHostile,
    ::testing::Values(
        // A 10 MB token: 64 bytes of it and its length.
        Hostile{k10MB, k10MB, "'" + kShown64 + "'... (10485760 bytes): " + std::string(kUnknownCommand)},
        Hostile{"rule add r profile " + k10MB, k10MB, "'" + kShown64 + "'... (10485760 bytes): no such profile"},
        Hostile{"rule add " + k10MB + " profile gold", k10MB,
                "'" + kShown64 + "'... (10485760 bytes): a rule name is at most 64 characters; this one has 10485760"},
        Hostile{"profile add p srtcm cir 1" + k10MB, "1" + k10MB,
                "'1" + std::string(63, 'a') + "'... (10485761 bytes): unknown unit '" + kShown64 +
                    "'... (10485760 bytes); expected bit, kbit, mbit, gbit, tbit, pps, kpps, mpps, gpps"},
        // A token quoted inside the message (the value of an earlier parameter, the item of a list, the
        // token before the end of a command), valid but long.
        Hostile{"profile add p srtcm cir " + std::string(1'000'000, '0') + "1mbit cbs 64pkt", "64pkt",
                "'64pkt': srtcm's cbs and cir must both be in packets or both in bytes (cir '" +
                    std::string(64, '0') + "'... (1000005 bytes) is in bytes)"},
        Hostile{"rule add r port 1," + k10MB + " profile gold", "1," + k10MB,
                "'1," + std::string(62, 'a') + "'... (10485762 bytes): '" + kShown64 +
                    "'... (10485760 bytes) is not a valid item; expected port numbers 0-65535 separated by commas, "
                    "such as 0 or 0,1"},
        Hostile{"default pcp " + std::string(1'000'000, '0') + "1 now", "now",
                "'now': unexpected after '" + std::string(64, '0') + "'... (1000001 bytes): the command ends there"},
        // A terminal escape sequence (OSC 0: set the window title) does not reach the terminal.
        Hostile{"rule add r profile \x1b]0;pwned\x07", "\x1b]0;pwned\x07", R"('\x1b]0;pwned\x07': no such profile)"},
        Hostile{"profile add p srtcm cir 1mbit\x1b[2J cbs 1k", "1mbit\x1b[2J",
                R"('1mbit\x1b[2J': unknown unit 'mbit\x1b[2J'; expected bit, kbit, mbit, gbit, tbit, pps, kpps, )"
                R"(mpps, gpps)"},
        Hostile{"rule add r dscp ef,\x1b[31mred profile gold", "ef,\x1b[31mred",
                R"('ef,\x1b[31mred': '\x1b[31mred' is not a valid item; expected DSCP values 0-63 or names (be, df, )"
                R"(cs0-cs7, af11-af43, ef, va) separated by commas)"},
        // A NUL shows (it printed as '' before).
        Hostile{"rule add r proto \0 profile gold"s, "\0"s,
                R"('\x00': expected a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255)"},
        // A UTF-8 byte order mark before the first command word, a no-break space inside a token.
        Hostile{"\xef\xbb\xbfprofile add p srtcm cir 1mbit cbs 1k", "\xef\xbb\xbfprofile",
                R"('\xef\xbb\xbfprofile': )" + std::string(kUnknownCommand)},
        Hostile{"rule add r profile\xc2\xa0gold", "profile\xc2\xa0gold",
                R"('profile\xc2\xa0gold': )" + std::string(kClauses)},
        Hostile{"rule add r profile gold\xc2\xa0", "gold\xc2\xa0", R"('gold\xc2\xa0': no such profile)"},
        // Quotes and backslashes in a token.
        Hostile{R"(rule add r profile it's\)", R"(it's\)", R"('it\'s\\': no such profile)"},
        // A token of exactly 64 bytes shows whole; one byte more is cut.
        Hostile{"rule add r profile " + std::string(64, 'b'), std::string(64, 'b'),
                "'" + std::string(64, 'b') + "': no such profile"},
        Hostile{"rule add r profile " + std::string(65, 'b'), std::string(65, 'b'),
                "'" + std::string(64, 'b') + "'... (65 bytes): no such profile"}));

TEST(UnitsHostile, ParseRateAndBurstQuoteTheirText) {
  const auto rate = policer::parse_rate("10\x1b]0;x\x07");
  ASSERT_FALSE(rate.ok());
  EXPECT_EQ(rate.error().subject, "10\x1b]0;x\x07");
  EXPECT_EQ(rate.error().message,
            R"('10\x1b]0;x\x07': unknown unit '\x1b]0;x\x07'; expected bit, kbit, mbit, gbit, tbit, pps, kpps, )"
            R"(mpps, gpps)");
  const auto burst = policer::parse_burst(k10MB);
  ASSERT_FALSE(burst.ok());
  EXPECT_EQ(burst.error().message,
            "'" + kShown64 + "'... (10485760 bytes): expected a burst such as b, k, m, g (1024-based bytes) or pkt");
  const auto nul = policer::parse_burst("64\0"s);
  ASSERT_FALSE(nul.ok());
  EXPECT_EQ(nul.error().message, R"('64\x00': unknown unit '\x00'; expected b, k, m, g (1024-based bytes) or pkt)");
}

// ---- line endings ----

// Four lines, the fourth an error; blank and comment lines count.
constexpr std::string_view kLines[] = {
    "profile add gold trtcm cir 100mbit cbs 64k pir 200mbit pbs 128k",
    "# rules",
    "rule add web proto tcp dport 80 profile gold",
    "rule add dns proto udpx profile gold",
};

std::string join(std::string_view end, std::size_t lines = 4) {
  std::string text;
  for (std::size_t i = 0; i < lines; ++i) text.append(kLines[i]).append(end);
  return text;
}

TEST(LanguageLineEndings, LfCrLfAndLoneCrEachEndALine) {
  const dataplane::Policy expected = must_load(join("\n", 3));
  ASSERT_EQ(rule_names(expected), std::vector<std::string>{"web"});
  for (const std::string_view end : {"\n", "\r\n", "\r"}) {
    SCOPED_TRACE(quote(end));
    EXPECT_EQ(must_load(join(end, 3)), expected);
    const auto failed = load(join(end));
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().message,
              "line 4: 'udpx': expected a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255");
    // Without the last line end too.
    const std::string unterminated = join(end).substr(0, join(end).size() - end.size());
    EXPECT_EQ(load(unterminated).error().message, failed.error().message);
  }
}

TEST(LanguageLineEndings, MixedEndsNumberEveryLine) {
  // LF, CR LF, CR LF, then a lone CR: an empty line 4.
  const std::string text = std::string(kLines[0]) + "\n" + std::string(kLines[1]) + "\r\n" + std::string(kLines[2]) +
                           "\r\n\r" + "rule add a profile nope\r";
  const auto failed = load(text);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message, "line 5: 'nope': no such profile");
  EXPECT_EQ(load(std::string(kLines[0]) + "\r\r\n\n\rrule add a profile nope").error().message,
            "line 5: 'nope': no such profile");
}

TEST(LanguageLineEndings, CrOnlyConfigIsNotOneLine) {
  // Before: one line, "expected a parameter of trtcm" at the first word of line 2.
  const auto loaded = load(join("\r", 3));
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->profiles.size(), 1u);
  EXPECT_EQ(rule_names(*loaded), std::vector<std::string>{"web"});
}

}  // namespace
}  // namespace tricolor::control
