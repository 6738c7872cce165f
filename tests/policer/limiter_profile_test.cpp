// The limiters' profiles: every validation error names its parameter; the per-key limit on sub-windows;
// the constants translated once (roundings as stated); live changes within an algorithm keep state.
#include <gtest/gtest.h>

#include <string>

#include "tests/policer/limiter_test_support.hpp"

namespace tricolor::test {
namespace {

constexpr std::uint64_t kGhz = 1'000'000'000;
const TickRate kGigahertz = *TickRate::make(kGhz);

constexpr Algorithm kFixed = Algorithm::fixed_window;
constexpr Algorithm kSliding = Algorithm::sliding_window;
constexpr Algorithm kGcra = Algorithm::gcra;
constexpr Algorithm kSmooth = Algorithm::smooth;
constexpr Algorithm kWarmup = Algorithm::warmup;

// The parameters are refused, the error names `subject`, and the message contains `words`.
void expect_refused(const Params& p, const std::string& subject, const std::string& words) {
  auto profile = Profile::make(p, kGigahertz);
  ASSERT_FALSE(profile.ok()) << describe_limiter(p, kGhz) << " was accepted";
  EXPECT_EQ(profile.error().subject, subject) << profile.error().message;
  EXPECT_NE(profile.error().message.find(subject), std::string::npos) << profile.error().message;
  EXPECT_NE(profile.error().message.find(words), std::string::npos) << profile.error().message;
}

void expect_accepted(const Params& p) {
  auto profile = Profile::make(p, kGigahertz);
  EXPECT_TRUE(profile.ok()) << describe_limiter(p, kGhz) << ": " << profile.error().message;
}

// ---- the validation table (README) ----

TEST(Validation, FixedWindow) {
  expect_accepted({.algorithm = kFixed, .limit = 1, .window = 1});
  expect_accepted({.algorithm = kFixed, .limit = kMaxBurst, .window = kMaxDurationNs});
  expect_refused({.algorithm = kFixed, .limit = 0, .window = 1}, "limit", "greater than 0");
  expect_refused({.algorithm = kFixed, .limit = kMaxBurst + 1, .window = 1}, "limit", "exceeds the maximum");
  expect_refused({.algorithm = kFixed, .limit = 1, .window = 0}, "window", "greater than 0");
  expect_refused({.algorithm = kFixed, .limit = 1, .window = kMaxDurationNs + 1}, "window", "366 days");
  expect_refused({.algorithm = kFixed, .limit = 1, .window = 1, .buckets = 2}, "buckets", "not a parameter of fixed-window");
  expect_refused({.algorithm = kFixed, .cir = 5, .limit = 1, .window = 1}, "cir", "not a parameter of fixed-window");
}

TEST(Validation, SlidingWindow) {
  expect_accepted({.algorithm = kSliding, .limit = 1, .window = 1, .buckets = 1});
  expect_accepted({.algorithm = kSliding, .limit = 1, .window = 1, .buckets = 64});
  expect_refused({.algorithm = kSliding, .limit = 1, .window = 1, .buckets = 0}, "buckets", "1 to 64");
  expect_refused({.algorithm = kSliding, .limit = 1, .window = 1, .buckets = 65}, "buckets", "1 to 64");
  expect_refused({.algorithm = kSliding, .limit = 0, .window = 1, .buckets = 2}, "limit", "greater than 0");
  expect_refused({.algorithm = kSliding, .limit = 1, .window = 0, .buckets = 2}, "window", "greater than 0");
  expect_refused({.algorithm = kSliding, .limit = 1, .window = 1, .buckets = 2, .cold_factor = 3}, "cold-factor",
                 "not a parameter of sliding-window");
}

TEST(Validation, SlidingWindowPerKeyHoldsFourSubWindows) {
  for (std::uint32_t k = 1; k <= 4; ++k) {
    EXPECT_TRUE(policer::validate_per_key({.algorithm = kSliding, .limit = 9, .window = kGhz, .buckets = k}).ok());
  }
  auto five = policer::validate_per_key({.algorithm = kSliding, .limit = 9, .window = kGhz, .buckets = 5});
  ASSERT_FALSE(five.ok());
  EXPECT_EQ(five.error().subject, "buckets");
  EXPECT_NE(five.error().message.find("buckets 5 does not fit a per-key meter"), std::string::npos) << five.error().message;
  EXPECT_NE(five.error().message.find("1 to 4"), std::string::npos);
  // Everything else fits, and validate_per_key still validates.
  EXPECT_TRUE(policer::validate_per_key({.algorithm = kGcra, .rate = 5, .tolerance = 9}).ok());
  EXPECT_EQ(policer::validate_per_key({.algorithm = kGcra, .rate = 0}).error().subject, "rate");
}

TEST(Validation, Gcra) {
  expect_accepted({.algorithm = kGcra, .rate = 1, .tolerance = 0});
  expect_accepted({.algorithm = kGcra, .rate = 1000, .tolerance = (kMaxBurst - 1) * 1'000'000});  // bucket of 2^30
  expect_refused({.algorithm = kGcra, .rate = 1000, .tolerance = (kMaxBurst - 1) * 1'000'000 + 1}, "tolerance",
                 "allows a burst above 1073741824 bytes");
  expect_refused({.algorithm = kGcra, .rate = 0, .tolerance = 5}, "rate", "greater than 0");
  expect_refused({.algorithm = kGcra, .rate = kMaxByteRate + 1}, "rate", "exceeds the maximum rate");
  expect_refused({.algorithm = kGcra, .unit = Unit::packets, .rate = kMaxPacketRate + 1}, "rate", "packets/s");
  expect_refused({.algorithm = kGcra, .rate = 1, .tolerance = kMaxDurationNs + 1}, "tolerance", "366 days");
  expect_refused({.algorithm = kGcra, .rate = 1, .limit = 4}, "limit", "not a parameter of gcra");
}

TEST(Validation, Smooth) {
  expect_accepted({.algorithm = kSmooth, .rate = 1, .max_burst = 0});  // prepaid spacing, no stored permits
  expect_accepted({.algorithm = kSmooth, .rate = kMaxByteRate, .max_burst = kMaxBurst});
  expect_refused({.algorithm = kSmooth, .rate = 0, .max_burst = 1}, "rate", "greater than 0");
  expect_refused({.algorithm = kSmooth, .rate = 1, .max_burst = kMaxBurst + 1}, "max-burst", "exceeds the maximum burst");
  expect_refused({.algorithm = kSmooth, .rate = 1, .period = 1}, "period", "not a parameter of smooth");
}

TEST(Validation, Warmup) {
  expect_accepted({.algorithm = kWarmup, .rate = 1000, .period = kGhz, .cold_factor = 3});
  expect_accepted({.algorithm = kWarmup, .rate = 1000, .period = kGhz, .cold_factor = 2});
  expect_accepted({.algorithm = kWarmup, .rate = 1000, .period = kGhz, .cold_factor = 100});
  expect_refused({.algorithm = kWarmup, .rate = 1000, .period = kGhz, .cold_factor = 0}, "cold-factor", "2 to 100");
  expect_refused({.algorithm = kWarmup, .rate = 1000, .period = kGhz, .cold_factor = 1}, "cold-factor", "2 to 100");
  expect_refused({.algorithm = kWarmup, .rate = 1000, .period = kGhz, .cold_factor = 101}, "cold-factor", "2 to 100");
  expect_refused({.algorithm = kWarmup, .rate = 1000, .period = 0, .cold_factor = 3}, "period", "greater than 0");
  expect_refused({.algorithm = kWarmup, .rate = 0, .period = kGhz, .cold_factor = 3}, "rate", "greater than 0");
  // C = 3: most = period * rate; times C at most 2^30: at 1 Gbyte/s, about 357 ms.
  expect_accepted({.algorithm = kWarmup, .rate = kGhz, .period = 357'913'941, .cold_factor = 3});
  expect_refused({.algorithm = kWarmup, .rate = kGhz, .period = 357'913'942, .cold_factor = 3}, "period",
                 "stores too many permits");
  // A zone below one 1/hz token at this tick rate: refused by the profile, not the parameters.
  const Params tiny{.algorithm = kWarmup, .rate = 1, .period = 1, .cold_factor = 3};
  EXPECT_TRUE(policer::validate(tiny).ok());
  auto made = Profile::make(tiny, *TickRate::make(1000));
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.error().subject, "period");
  EXPECT_NE(made.error().message.find("no warm-up zone"), std::string::npos) << made.error().message;
}

TEST(Validation, TheRfcParametersAreNotTheLimitersAndTheOtherWayRound) {
  expect_refused({.algorithm = kSmooth, .cbs = 5, .rate = 1}, "cbs", "not a parameter of smooth");
  expect_refused({.algorithm = Algorithm::trtcm, .cir = 5, .cbs = 1, .pir = 5, .pbs = 1, .rate = 5}, "rate",
                 "not a parameter of trtcm");
  expect_refused({.algorithm = Algorithm::one_rate_two_color, .cir = 5, .cbs = 1, .window = 5}, "window",
                 "not a parameter of 1r2c");
}

// ---- constants, translated once ----

TEST(Constants, RoundingsAreTheStatedOnes) {
  const TickRate three = *TickRate::make(3);  // 1/3 s per tick: every duration rounds
  // Fixed window of 1 s: 3 ticks; of 1.1 s: 3.3 ticks, rounded up to 4.
  EXPECT_EQ(Profile::make({.algorithm = kFixed, .limit = 1, .window = kGhz}, three)->limiter().ticks, 3u);
  EXPECT_EQ(Profile::make({.algorithm = kFixed, .limit = 1, .window = 1'100'000'000}, three)->limiter().ticks, 4u);
  // Sliding window of 1 s in 4: 0.75 tick each, rounded up to 1 (the window is then 4 ticks).
  EXPECT_EQ(Profile::make({.algorithm = kSliding, .limit = 1, .window = kGhz, .buckets = 4}, three)->limiter().ticks, 1u);
  EXPECT_EQ(Profile::make({.algorithm = kSliding, .limit = 1, .window = 2 * kGhz, .buckets = 3}, three)->limiter().ticks, 2u);
  // GCRA: floor(tolerance * hz * rate / 1e9) + hz, in 1/hz tokens: 0.5 s at 5 tokens/s, hz 3: 7 + 3.
  EXPECT_EQ(Profile::make({.algorithm = kGcra, .rate = 5, .tolerance = 500'000'000}, three)->limiter().limit, 10u);
  // Warm-up at C = 3, period 1 s, rate 5, hz 3: threshold floor(7.5) = 7, zone floor(2*15/4) = 7.
  auto w = Profile::make({.algorithm = kWarmup, .rate = 5, .period = kGhz, .cold_factor = 3}, three);
  EXPECT_EQ(w->limiter().threshold, 7u);
  EXPECT_EQ(w->limiter().limit, 14u);
  EXPECT_EQ(w->size(0), 14u);  // a new meter is cold: full
}

TEST(Constants, TheReciprocalDividesExactly) {
  Rng rng{0xd1};
  for (int i = 0; i < 200'000; ++i) {
    const std::uint64_t d = rng.chance(10) ? rng.between(1, 3) : rng.chance(50) ? rng.between(1, 1'000'000) : rng.next() >> rng.below(64);
    if (d == 0) continue;
    const policer::Reciprocal r = policer::Reciprocal::of(d);
    const u128 n = rng.chance(30) ? u128(rng.next()) : (u128(rng.next()) << 64 | rng.next()) >> (1 + rng.below(100));
    ASSERT_EQ(r.floor_div(n), n / d) << "d=" << d;
    const u128 edge = (n / d) * d;  // a multiple, and one below it
    ASSERT_EQ(r.floor_div(edge), edge / d);
    if (edge != 0) {
      ASSERT_EQ(r.floor_div(edge - 1), (edge - 1) / d);
    }
  }
}

// ---- live change within an algorithm keeps state ----

constexpr std::uint64_t kHz = 1000;

TEST(LiveChange, FixedWindowKeepsItsEndAndCount) {
  const Profile small = make_profile({.algorithm = kFixed, .limit = 100, .window = 10 * kGhz}, kHz);  // 10000 ticks
  const Profile big = make_profile({.algorithm = kFixed, .limit = 150, .window = kGhz}, kHz);        // 1000 ticks
  policer::Meter m(small, 0);
  ASSERT_EQ(m.check_blind(0, 80), Color::green);  // window [0, 10000), 80 counted
  m.change_profile(big, 500);
  // The new limit minus what the open window has counted, and still the old window's end.
  EXPECT_EQ(m.check_blind(600, 71), Color::red);
  EXPECT_EQ(m.check_blind(600, 70), Color::green);
  EXPECT_EQ(m.check_blind(9999, 1), Color::red);
  EXPECT_EQ(m.check_blind(10'000, 150), Color::green);  // the next window is of the new length
  EXPECT_EQ(m.check_blind(10'999, 1), Color::red);
  EXPECT_EQ(m.check_blind(11'000, 150), Color::green);
  // A lower limit than the count: nothing more in this window.
  m.change_profile(small, 11'001);
  EXPECT_EQ(m.check_blind(11'500, 1), Color::red);
  EXPECT_EQ(m.check_blind(12'000, 100), Color::green);
}

TEST(LiveChange, SlidingWindowKeepsItsSubWindowsOrLumpsThem) {
  // Sub-windows of 100 ticks; K = 4 then 2 (same length), then 4 sub-windows of 40 ticks.
  const Profile four = make_profile({.algorithm = kSliding, .limit = 100, .window = 400'000'000, .buckets = 4}, kHz);
  const Profile two = make_profile({.algorithm = kSliding, .limit = 100, .window = 200'000'000, .buckets = 2}, kHz);
  const Profile fine = make_profile({.algorithm = kSliding, .limit = 100, .window = 160'000'000, .buckets = 4}, kHz);
  for (bool wide : {false, true}) {
    SCOPED_TRACE(wide ? "AggregateMeter" : "Meter");
    policer::Meter m(four, 0);
    policer::AggregateMeter v(four, 0);
    auto check = [&](std::uint64_t t, std::uint32_t b) { return wide ? v.check_blind(t, b) : m.check_blind(t, b); };
    auto change = [&](const Profile& to, std::uint64_t t) { wide ? v.change_profile(to, t) : m.change_profile(to, t); };
    ASSERT_EQ(check(0, 30), Color::green);    // sub-window 0
    ASSERT_EQ(check(150, 40), Color::green);  // sub-window 1
    ASSERT_EQ(check(250, 20), Color::green);  // sub-window 2
    change(two, 260);                          // K = 2: sub-windows 1 and 2 stay, 0 drops
    EXPECT_EQ(check(260, 41), Color::red);
    EXPECT_EQ(check(260, 40), Color::green);  // 40 + 20 + 40
    EXPECT_EQ(check(300, 41), Color::red);    // window 2..3: 60 counted
    EXPECT_EQ(check(300, 40), Color::green);
    change(fine, 310);  // another length: the window's 100 lumped into the current sub-window
    EXPECT_EQ(check(310, 1), Color::red);
    EXPECT_EQ(check(439, 1), Color::red);      // sub-window 10: its window 7..10 still holds 7 (280..320)
    EXPECT_EQ(check(440, 100), Color::green);  // sub-window 11: 7 has left
  }
}

TEST(LiveChange, GcraSmoothAndWarmupKeepWhatIsOwed) {
  // GCRA: the TAT's lead is kept in tokens and paid at the new rate.
  const Profile slow = make_profile({.algorithm = kGcra, .rate = 1000, .tolerance = 100'000'000}, kHz);  // 101 tokens
  const Profile fast = make_profile({.algorithm = kGcra, .rate = 2000, .tolerance = 100'000'000}, kHz);  // 201 tokens
  policer::Meter g(slow, 0);
  ASSERT_EQ(g.check_blind(0, 101), Color::green);  // lead 101 tokens
  g.change_profile(fast, 1);                        // 1 tick at 1000/s paid: lead 100
  EXPECT_EQ(g.state().level[0], 100u * kHz);
  EXPECT_EQ(g.check_blind(1, 102), Color::red);
  EXPECT_EQ(g.check_blind(1, 101), Color::green);
  EXPECT_EQ(g.check_blind(2, 2), Color::green);  // one tick pays 2 at the new rate

  // Smooth: the debt is kept, stored permits clamp to the new max-burst.
  const Profile a = make_profile({.algorithm = kSmooth, .rate = 1000, .max_burst = 500}, kHz);
  const Profile b = make_profile({.algorithm = kSmooth, .rate = 100, .max_burst = 50}, kHz);
  policer::Meter s(a, 0);
  ASSERT_EQ(s.check_blind(0, 200), Color::green);  // stored 300
  s.change_profile(b, 0);
  EXPECT_EQ(s.state().level[0], 50u * kHz);
  ASSERT_EQ(s.check_blind(0, 60), Color::green);  // 50 stored, 10 owed: 100 ms at 100/s
  EXPECT_EQ(s.check_blind(99, 0), Color::red);
  EXPECT_EQ(s.check_blind(100, 0), Color::green);

  // Warm-up: same, and a cold meter stays cold across a change of rate.
  const Profile w1 = make_profile({.algorithm = kWarmup, .rate = 1000, .period = kGhz, .cold_factor = 3}, kHz);
  const Profile w2 = make_profile({.algorithm = kWarmup, .rate = 2000, .period = kGhz, .cold_factor = 3}, kHz);
  policer::Meter w(w1, 0);
  w.change_profile(w2, 10);
  EXPECT_EQ(w.state().level[0], w1.limiter().limit);  // full at the old most (1000), below the new (2000)
  EXPECT_EQ(w.state().last, 10u);
}

TEST(LiveChange, AnotherAlgorithmStartsFresh) {
  const Profile fixed = make_profile({.algorithm = kFixed, .limit = 100, .window = kGhz}, kHz);
  const Profile gcra = make_profile({.algorithm = kGcra, .rate = 1000, .tolerance = 99'000'000}, kHz);  // 100 tokens
  policer::Meter m(fixed, 0);
  ASSERT_EQ(m.check_blind(0, 100), Color::green);
  m.change_profile(gcra, 5);
  EXPECT_EQ(m.state().level[0], 0u);
  EXPECT_EQ(m.check_blind(5, 100), Color::green);
}

}  // namespace
}  // namespace tricolor::test
