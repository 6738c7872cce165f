// The five limiters in the command language (issue 13 §2): each parameter parsed by its kind (rate,
// burst, duration, count), the Params it gives, the printed form and its round trip, and every error
// with its exact message naming the token.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "control/language/language.hpp"
#include "language_test_support.hpp"

namespace tricolor::control {
namespace {

using dataplane::Policy;
using policer::Algorithm;
using policer::Params;
using policer::Unit;
using testing::kBaseConfig;
using testing::must_load;
using testing::must_run;

constexpr std::uint64_t kMs = 1'000'000;
constexpr std::uint64_t kSecond = 1'000'000'000;

// The Params of the one profile a command adds.
Params params_of(std::string_view command) {
  Policy policy;
  must_run(policy, {command});
  EXPECT_EQ(policy.profiles.size(), 1u) << command;
  return policy.profiles.empty() ? Params{} : policy.profiles.front().params;
}

// ---- what each command means ----

TEST(LanguageLimiters, FixedWindowTakesALimitAndAWindow) {
  EXPECT_EQ(params_of("profile add p fixed-window limit 100pkt window 1s"),
            (Params{.algorithm = Algorithm::fixed_window, .unit = Unit::packets, .limit = 100, .window = kSecond}));
  // Either order; a burst in bytes as cbs's; the language's minutes.
  EXPECT_EQ(params_of("profile add p fixed-window window 2m limit 64k"),
            (Params{.algorithm = Algorithm::fixed_window, .unit = Unit::bytes, .limit = 65536, .window = 120 * kSecond}));
}

TEST(LanguageLimiters, SlidingWindowTakesACountOfSubWindows) {
  EXPECT_EQ(params_of("profile add p sliding-window limit 1.5k window 1.5s buckets 8"),
            (Params{.algorithm = Algorithm::sliding_window, .limit = 1536, .window = 1500 * kMs, .buckets = 8}));
  EXPECT_EQ(params_of("profile add p sliding-window buckets 064 window 10us limit 1pkt"),
            (Params{.algorithm = Algorithm::sliding_window, .unit = Unit::packets, .limit = 1,
                    .window = 10'000, .buckets = 64}));
}

TEST(LanguageLimiters, GcraToleranceMayBeZeroOrLeftOut) {
  EXPECT_EQ(params_of("profile add p gcra rate 10mbit tolerance 10ms"),
            (Params{.algorithm = Algorithm::gcra, .rate = 1'250'000, .tolerance = 10 * kMs}));
  EXPECT_EQ(params_of("profile add p gcra rate 5kpps tolerance 0ns"),
            (Params{.algorithm = Algorithm::gcra, .unit = Unit::packets, .rate = 5000}));
  EXPECT_EQ(params_of("profile add p gcra rate 5kpps"),
            (Params{.algorithm = Algorithm::gcra, .unit = Unit::packets, .rate = 5000}));
}

TEST(LanguageLimiters, SmoothTakesARateAndAMaxBurst) {
  EXPECT_EQ(params_of("profile add p smooth rate 1mbit max-burst 1500"),
            (Params{.algorithm = Algorithm::smooth, .rate = 125'000, .max_burst = 1500}));
  EXPECT_EQ(params_of("profile add p smooth max-burst 10pkt rate 100pps"),
            (Params{.algorithm = Algorithm::smooth, .unit = Unit::packets, .rate = 100, .max_burst = 10}));
}

TEST(LanguageLimiters, WarmupColdFactorIsThreeWhenNotGiven) {
  EXPECT_EQ(params_of("profile add p warmup rate 1kpps period 10s"),
            (Params{.algorithm = Algorithm::warmup, .unit = Unit::packets, .rate = 1000, .period = 10 * kSecond,
                    .cold_factor = 3}));
  EXPECT_EQ(params_of("profile add p warmup cold-factor 5 period 500ms rate 8mbit"),
            (Params{.algorithm = Algorithm::warmup, .rate = 1'000'000, .period = 500 * kMs, .cold_factor = 5}));
}

// change replaces every parameter, also across algorithms, and keeps the rules that use the profile.
TEST(LanguageLimiters, ChangeReplacesTheParameters) {
  Policy policy = must_load(kBaseConfig);
  must_run(policy, {"profile change gold gcra rate 100mbit tolerance 5ms"});
  EXPECT_EQ(policy.find_profile("gold")->params,
            (Params{.algorithm = Algorithm::gcra, .rate = 12'500'000, .tolerance = 5 * kMs}));
  must_run(policy, {"profile change gold warmup rate 100mbit period 1s"});
  EXPECT_EQ(policy.find_profile("gold")->params,
            (Params{.algorithm = Algorithm::warmup, .rate = 12'500'000, .period = kSecond, .cold_factor = 3}));
  must_run(policy, {"profile change gold trtcm cir 100mbit cbs 64k pir 200mbit pbs 128k"});
  EXPECT_EQ(policy, must_load(kBaseConfig));
}

// ---- printed back ----

constexpr std::string_view kLimitersConfig = R"(# one of each, parameters in any order
profile add fw fixed-window window 1000ms limit 100pkt
profile add sw sliding-window buckets 4 limit 1.5m window 0.25s
profile add g gcra tolerance 2500us rate 10mbit
profile add g0 gcra rate 5kpps
profile add sm smooth rate 1mbit max-burst 1500
profile add sm0 smooth rate 100pps
profile add wu warmup rate 1kpps period 10s
profile add wu5 warmup period 2m rate 1mbit cold-factor 5
rule add api dport 443 proto tcp profile g parent wu
)";

// Every parameter of a limiter is printed, 0 too (tolerance 0ns, max-burst 0pkt), and the cold-factor
// in effect; durations in their largest exact unit.
constexpr std::string_view kLimitersPrinted =
    "profile add fw fixed-window limit 100pkt window 1s\n"
    "profile add sw sliding-window limit 1536k window 250ms buckets 4\n"
    "profile add g gcra rate 10mbit tolerance 2500us\n"
    "profile add g0 gcra rate 5kpps tolerance 0ns\n"
    "profile add sm smooth rate 1mbit max-burst 1500\n"
    "profile add sm0 smooth rate 100pps max-burst 0pkt\n"
    "profile add wu warmup rate 1kpps period 10s cold-factor 3\n"
    "profile add wu5 warmup rate 1mbit period 2m cold-factor 5\n"
    "rule add api proto tcp dport 443 profile g parent wu\n";

TEST(LanguageLimiters, PrintedInFullAndLoadedBackTheSame) {
  const Policy policy = must_load(kLimitersConfig);
  EXPECT_EQ(print(policy), kLimitersPrinted);
  EXPECT_EQ(must_load(print(policy)), policy);
  Policy listed = policy;
  EXPECT_EQ(must_run(listed, {"profile list"}),
            std::string(kLimitersPrinted.substr(0, kLimitersPrinted.find("rule add"))));
}

// Round trips at the edges of every range: the largest values, the smallest, and durations that have
// no larger exact unit.
TEST(LanguageLimiters, EdgesOfTheRangesRoundTrip) {
  for (const std::string_view command : {
           "profile add p fixed-window limit 1g window 8784h",             // 2^30 bytes, 366 days
           "profile add p fixed-window limit 1pkt window 1ns",
           "profile add p sliding-window limit 1073741824pkt window 1000000001ns buckets 1",
           "profile add p sliding-window limit 1 window 366000001us buckets 64",
           "profile add p gcra rate 400gbit tolerance 21ms",                 // 2^30 - 1 bytes at the most
           "profile add p gcra rate 1gpps tolerance 1073741823ns",
           "profile add p gcra rate 8bit tolerance 8784h",
           "profile add p smooth rate 1pps max-burst 1073741824pkt",
           "profile add p warmup rate 1pps period 1ns cold-factor 2",
           "profile add p warmup rate 8bit period 5000h cold-factor 100",
       }) {
    Policy policy;
    must_run(policy, {command});
    ASSERT_EQ(policy.profiles.size(), 1u) << command;
    const std::string printed = print(policy);
    EXPECT_EQ(must_load(printed), policy) << command << " printed as " << printed;
  }
}

// ---- errors ----

struct ErrorCase {
  std::string command;
  std::string subject;
  std::string message;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.command; }

class LanguageLimiterError : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(LanguageLimiterError, NamesTheTokenAndLeavesThePolicyUnchanged) {
  const ErrorCase& c = GetParam();
  Policy policy = must_load(kBaseConfig);
  const Policy before = policy;
  const auto result = execute(policy, c.command);
  ASSERT_FALSE(result.ok()) << "accepted: " << c.command;
  EXPECT_EQ(result.error().subject, c.subject);
  EXPECT_EQ(result.error().message, c.message);
  EXPECT_EQ(policy, before);
}

INSTANTIATE_TEST_SUITE_P(
    Parameters, LanguageLimiterError,
    ::testing::Values(
        ErrorCase{"profile add p fixed-window", "",
                  "after 'fixed-window': expected the parameters of fixed-window: limit, window"},
        // Not a parameter of the algorithm, another algorithm's or none at all.
        ErrorCase{"profile add p gcra rate 1mbit cbs 1k", "cbs", "'cbs': gcra takes rate, tolerance"},
        ErrorCase{"profile add p gcra rate 1mbit window 1s", "window", "'window': gcra takes rate, tolerance"},
        ErrorCase{"profile add p fixed-window limit 1k window 1s buckets 4", "buckets",
                  "'buckets': fixed-window takes limit, window"},
        ErrorCase{"profile add p sliding-window limit 1k rate 1mbit", "rate",
                  "'rate': sliding-window takes limit, window, buckets"},
        ErrorCase{"profile add p smooth rate 1mbit period 1s", "period", "'period': smooth takes rate, max-burst"},
        ErrorCase{"profile add p warmup rate 1mbit max-burst 1k", "max-burst",
                  "'max-burst': warmup takes rate, period, cold-factor"},
        ErrorCase{"profile add p 1r2c cir 1mbit cbs 1k tolerance 1ms", "tolerance", "'tolerance': 1r2c takes cir, cbs"},
        ErrorCase{"profile add p warmup rate 1mbit coldfactor 3", "coldfactor",
                  "'coldfactor': expected a parameter of warmup: rate, period, cold-factor"},
        ErrorCase{"profile add p warmup rate 1mbit Period 1s", "Period",
                  "'Period': expected a parameter of warmup: rate, period, cold-factor (keywords are lower-case)"},
        ErrorCase{"profile add p Gcra rate 1mbit", "Gcra",
                  "'Gcra': expected an algorithm: 1r2c, srtcm, trtcm, trtcm4115, fixed-window, sliding-window, gcra, "
                  "smooth or warmup (keywords are lower-case)"},
        // Given twice.
        ErrorCase{"profile add p gcra rate 1mbit tolerance 1ms tolerance 2ms", "tolerance",
                  "'tolerance': tolerance given twice"},
        ErrorCase{"profile add p warmup rate 1mbit period 1s cold-factor 3 cold-factor 4", "cold-factor",
                  "'cold-factor': cold-factor given twice"},
        ErrorCase{"profile add p sliding-window buckets 2 limit 1k window 1s buckets 2", "buckets",
                  "'buckets': buckets given twice"},
        // A value missing at the end of the line.
        ErrorCase{"profile add p fixed-window limit 1k window", "",
                  "after 'window': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"profile add p sliding-window limit 1k window 1s buckets", "",
                  "after 'buckets': expected a whole number such as 8 (no unit)"},
        ErrorCase{"profile add p smooth rate", "", "after 'rate': expected a rate such as 100mbit or 10kpps"},
        ErrorCase{"profile add p smooth rate 1mbit max-burst", "", "after 'max-burst': expected a burst such as 64k or 64pkt"},
        // A parameter missing: validate()'s message, with a placeholder of the value's kind.
        ErrorCase{"profile add p fixed-window limit 10pkt", "",
                  "missing 'window DURATION' (fixed-window: window must be greater than 0)"},
        ErrorCase{"profile add p fixed-window window 1s", "",
                  "missing 'limit BURST' (fixed-window: limit must be greater than 0)"},
        ErrorCase{"profile add p sliding-window limit 1k window 1s", "",
                  "missing 'buckets COUNT' (sliding-window: buckets 0 is out of range: 1 to 64 sub-windows)"},
        ErrorCase{"profile add p gcra tolerance 1ms", "", "missing 'rate RATE' (gcra: rate must be greater than 0)"},
        ErrorCase{"profile add p smooth max-burst 10pkt", "", "missing 'rate RATE' (smooth: rate must be greater than 0)"},
        ErrorCase{"profile add p warmup rate 1mbit", "",
                  "missing 'period DURATION' (warmup: period must be greater than 0)"},
        ErrorCase{"profile add p warmup period 1s cold-factor 4", "",
                  "missing 'rate RATE' (warmup: rate must be greater than 0)"}));

INSTANTIATE_TEST_SUITE_P(
    Values, LanguageLimiterError,
    ::testing::Values(
        // Durations: the language's units (m is minutes; no min, no d), whole nanoseconds.
        ErrorCase{"profile add p fixed-window limit 1k window 10", "10",
                  "'10': a duration needs a unit: ns, us, ms, s, m or h"},
        ErrorCase{"profile add p fixed-window limit 1k window 10min", "10min",
                  "'10min': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"profile add p fixed-window limit 1k window 1d", "1d",
                  "'1d': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"profile add p gcra rate 1mbit tolerance 1.5ns", "1.5ns",
                  "'1.5ns': is not a whole number of nanoseconds"},
        ErrorCase{"profile add p gcra rate 1mbit tolerance -1ms", "-1ms",
                  "'-1ms': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        ErrorCase{"profile add p warmup rate 1mbit period 1kbit", "1kbit",
                  "'1kbit': expected a duration such as 30s, 500ms or 2m (units ns, us, ms, s, m, h)"},
        // Only the tolerance may be 0; no duration above 366 days.
        ErrorCase{"profile add p fixed-window limit 1k window 0s", "0s",
                  "'0s': fixed-window: window must be greater than 0"},
        ErrorCase{"profile add p warmup rate 1kpps period 0ms", "0ms", "'0ms': warmup: period must be greater than 0"},
        ErrorCase{"profile add p sliding-window limit 1k window 8785h buckets 2", "8785h",
                  "'8785h': sliding-window: window 31626000000000000 ns exceeds the maximum of 366 days "
                  "(31622400000000000 ns)"},
        ErrorCase{"profile add p gcra rate 8bit tolerance 8784.000001h", "8784.000001h",
                  "'8784.000001h': gcra: tolerance 31622400003600000 ns exceeds the maximum of 366 days "
                  "(31622400000000000 ns)"},
        ErrorCase{"profile add p fixed-window limit 1k window 99999999999999999999999h", "99999999999999999999999h",
                  "'99999999999999999999999h': fixed-window: window exceeds the maximum of 366 days"},
        // Counts: digits only.
        ErrorCase{"profile add p sliding-window limit 1k window 1s buckets 8x", "8x",
                  "'8x': expected a whole number such as 8 (no unit)"},
        ErrorCase{"profile add p sliding-window limit 1k window 1s buckets 1.5", "1.5",
                  "'1.5': expected a whole number such as 8 (no unit)"},
        ErrorCase{"profile add p warmup rate 1mbit period 1s cold-factor -3", "-3",
                  "'-3': expected a whole number such as 8 (no unit)"},
        ErrorCase{"profile add p sliding-window limit 1k window 1s buckets 99999999999", "99999999999",
                  "'99999999999': sliding-window: buckets 99999999999 is far out of range"},
        // The sub-windows: 1 to 64 (a per-key meter's limit is the engine's); the cold factor 2 to 100.
        ErrorCase{"profile add p sliding-window limit 1k window 1s buckets 0", "0",
                  "'0': sliding-window: buckets 0 is out of range: 1 to 64 sub-windows"},
        ErrorCase{"profile add p sliding-window limit 1k window 1s buckets 65", "65",
                  "'65': sliding-window: buckets 65 is out of range: 1 to 64 sub-windows"},
        ErrorCase{"profile add p sliding-window limit 1k window 1s buckets 4294967295", "4294967295",
                  "'4294967295': sliding-window: buckets 4294967295 is out of range: 1 to 64 sub-windows"},
        ErrorCase{"profile add p warmup rate 1mbit period 1s cold-factor 1", "1",
                  "'1': warmup: cold-factor 1 is out of range: 2 to 100"},
        ErrorCase{"profile add p warmup rate 1mbit period 1s cold-factor 101", "101",
                  "'101': warmup: cold-factor 101 is out of range: 2 to 100"},
        // The other limits of validate(), at the value's token.
        ErrorCase{"profile add p fixed-window limit 2g window 1s", "2g",
                  "'2g': limit 2147483648 bytes exceeds the maximum of 1073741824 bytes"},
        ErrorCase{"profile add p fixed-window limit 0pkt window 1s", "0pkt",
                  "'0pkt': fixed-window: limit must be greater than 0"},
        ErrorCase{"profile add p gcra rate 0bit", "0bit", "'0bit': gcra: rate must be greater than 0"},
        ErrorCase{"profile add p gcra rate 2gpps", "2gpps",
                  "'2gpps': rate 2000000000 packets/s exceeds the maximum rate of 1000000000 packets/s"},
        ErrorCase{"profile add p gcra rate 1gbit tolerance 10s", "10s",
                  "'10s': gcra: tolerance 10000000000 ns at rate 125000000 bytes/s allows a burst above 1073741824 "
                  "bytes (tolerance * rate + 1 must be at most that)"},
        ErrorCase{"profile add p smooth rate 1mbit max-burst 1073741825", "1073741825",
                  "'1073741825': max-burst 1073741825 bytes exceeds the maximum burst of 1073741824 bytes"},
        ErrorCase{"profile add p warmup rate 1gbit period 10s", "10s",
                  "'10s': warmup: period 10000000000 ns at rate 125000000 bytes/s stores too many permits: period * "
                  "rate * (C + 5) / (2 (C + 1)) * C must be at most 1073741824 bytes"},
        // Rates and bursts are parsed as cir and cbs; one unit per profile.
        ErrorCase{"profile add p gcra rate 64k", "64k",
                  "'64k': unknown unit 'k'; expected bit, kbit, mbit, gbit, tbit, pps, kpps, mpps, gpps"},
        ErrorCase{"profile add p fixed-window limit 10kpps window 1s", "10kpps",
                  "'10kpps': unknown unit 'kpps'; expected b, k, m, g (1024-based bytes) or pkt"},
        ErrorCase{"profile add p smooth rate 10kpps max-burst 64k", "64k",
                  "'64k': smooth's max-burst and rate must both be in packets or both in bytes (rate '10kpps' is in "
                  "packets)"},
        ErrorCase{"profile add p smooth max-burst 64pkt rate 1mbit", "1mbit",
                  "'1mbit': smooth's rate and max-burst must both be in packets or both in bytes (max-burst '64pkt' "
                  "is in packets)"},
        // change: the same checks, nothing changed.
        ErrorCase{"profile change gold gcra rate 1mbit tolerance 1ms rate 2mbit", "rate", "'rate': rate given twice"},
        ErrorCase{"profile change dns warmup rate 10kpps period 1s cold-factor 0", "0",
                  "'0': warmup: cold-factor 0 is out of range: 2 to 100"}));

// The new words are keywords: no profile, rule or color map may be named by one.
INSTANTIATE_TEST_SUITE_P(
    Keywords, LanguageLimiterError,
    ::testing::Values(
        ErrorCase{"profile add gcra gcra rate 1mbit", "gcra", "'gcra': gcra is a keyword and cannot name a profile"},
        ErrorCase{"profile add sliding-window 1r2c cir 1mbit cbs 1k", "sliding-window",
                  "'sliding-window': sliding-window is a keyword and cannot name a profile"},
        ErrorCase{"rule add window profile gold", "window", "'window': window is a keyword and cannot name a rule"},
        ErrorCase{"rule add cold-factor profile gold", "cold-factor",
                  "'cold-factor': cold-factor is a keyword and cannot name a rule"},
        ErrorCase{"color-map add rate dscp red 1", "rate", "'rate': rate is a keyword and cannot name a color map"}));

}  // namespace
}  // namespace tricolor::control
