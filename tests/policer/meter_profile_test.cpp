// Profiles: every validation error names its parameter; operator units; live profile changes.
#include <gtest/gtest.h>

#include <string>

#include "policer/units.hpp"
#include "tests/policer/meter_test_support.hpp"

namespace tricolor::test {
namespace {

using policer::kMaxBurst;
using policer::kMaxByteRate;
using policer::kMaxHz;
using policer::kMaxPacketRate;
using policer::parse_burst;
using policer::parse_rate;
using policer::Quantity;

const TickRate kGigahertz = *TickRate::make(1'000'000'000);

// The parameters are refused, the error names `subject`, and the message contains `words`.
void expect_refused(const Params& p, const std::string& subject, const std::string& words) {
  auto profile = Profile::make(p, kGigahertz);
  ASSERT_FALSE(profile.ok()) << describe(p, 1'000'000'000) << " was accepted";
  EXPECT_EQ(profile.error().subject, subject) << profile.error().message;
  EXPECT_NE(profile.error().message.find(subject), std::string::npos) << profile.error().message;
  EXPECT_NE(profile.error().message.find(words), std::string::npos) << profile.error().message;
}

void expect_accepted(const Params& p) {
  auto profile = Profile::make(p, kGigahertz);
  EXPECT_TRUE(profile.ok()) << describe(p, 1'000'000'000) << ": " << profile.error().message;
}

constexpr Algorithm k1r2c = Algorithm::one_rate_two_color;
constexpr Algorithm kSr = Algorithm::srtcm;
constexpr Algorithm kTr = Algorithm::trtcm;
constexpr Algorithm k4115 = Algorithm::trtcm_4115;

TEST(Validation, TickRate) {
  EXPECT_FALSE(TickRate::make(0).ok());
  EXPECT_EQ(TickRate::make(0).error().subject, "hz");
  EXPECT_FALSE(TickRate::make(kMaxHz + 1).ok());
  EXPECT_NE(TickRate::make(kMaxHz + 1).error().message.find("5000000000"), std::string::npos);
  EXPECT_TRUE(TickRate::make(1).ok());
  EXPECT_TRUE(TickRate::make(kMaxHz).ok());
}

TEST(Validation, OneRateTwoColor) {
  expect_accepted({.algorithm = k1r2c, .cir = 1, .cbs = 1});
  expect_refused({.algorithm = k1r2c, .cir = 0, .cbs = 1}, "cir", "greater than 0");
  expect_refused({.algorithm = k1r2c, .cir = 1, .cbs = 0}, "cbs", "greater than 0");
  expect_refused({.algorithm = k1r2c, .cir = 1, .cbs = 1, .ebs = 5}, "ebs", "not a parameter of 1r2c");
  expect_refused({.algorithm = k1r2c, .cir = 1, .cbs = 1, .pir = 5}, "pir", "not a parameter of 1r2c");
}

TEST(Validation, SrTcm) {
  expect_accepted({.algorithm = kSr, .cir = 1, .cbs = 0, .ebs = 1});
  expect_accepted({.algorithm = kSr, .cir = 1, .cbs = 1, .ebs = 0});
  expect_refused({.algorithm = kSr, .cir = 0, .cbs = 1, .ebs = 1}, "cir", "greater than 0");
  expect_refused({.algorithm = kSr, .cir = 1, .cbs = 0, .ebs = 0}, "cbs", "cannot both be 0");
  expect_refused({.algorithm = kSr, .cir = 1, .cbs = 1, .eir = 1, .ebs = 1}, "eir", "not a parameter of srtcm");
  expect_refused({.algorithm = kSr, .cir = 1, .cbs = 1, .ebs = 1, .pbs = 1}, "pbs", "not a parameter of srtcm");
}

TEST(Validation, TrTcm) {
  expect_accepted({.algorithm = kTr, .cir = 5, .cbs = 1, .pir = 5, .pbs = 1});
  expect_refused({.algorithm = kTr, .cir = 0, .cbs = 1, .pir = 5, .pbs = 1}, "cir", "greater than 0");
  expect_refused({.algorithm = kTr, .cir = 6, .cbs = 1, .pir = 5, .pbs = 1}, "pir", "at least cir");
  expect_refused({.algorithm = kTr, .cir = 5, .cbs = 0, .pir = 5, .pbs = 1}, "cbs", "greater than 0");
  expect_refused({.algorithm = kTr, .cir = 5, .cbs = 1, .pir = 5, .pbs = 0}, "pbs", "greater than 0");
  expect_refused({.algorithm = kTr, .cir = 5, .cbs = 1, .ebs = 1, .pir = 5, .pbs = 1}, "ebs", "not a parameter of trtcm");
}

TEST(Validation, TrTcm4115) {
  expect_accepted({.algorithm = k4115, .cir = 0, .cbs = 0, .eir = 1, .ebs = 1});
  expect_accepted({.algorithm = k4115, .cir = 1, .cbs = 1, .eir = 0, .ebs = 0});
  expect_accepted({.algorithm = k4115, .cir = 0, .cbs = 9, .eir = 1, .ebs = 1});  // starts full, never refills
  expect_refused({.algorithm = k4115, .cir = 0, .cbs = 1, .eir = 0, .ebs = 1}, "cir", "cannot both be 0");
  expect_refused({.algorithm = k4115, .cir = 1, .cbs = 0, .eir = 1, .ebs = 1}, "cbs", "when cir is greater than 0");
  expect_refused({.algorithm = k4115, .cir = 1, .cbs = 1, .eir = 1, .ebs = 0}, "ebs", "when eir is greater than 0");
  expect_refused({.algorithm = k4115, .cir = 1, .cbs = 1, .eir = 1, .ebs = 1, .pir = 1}, "pir",
                 "not a parameter of trtcm4115");
}

TEST(Validation, Limits) {
  for (Unit unit : {Unit::bytes, Unit::packets}) {
    const std::uint64_t max_rate = unit == Unit::bytes ? kMaxByteRate : kMaxPacketRate;
    expect_accepted({.algorithm = kTr, .unit = unit, .cir = max_rate, .cbs = kMaxBurst, .pir = max_rate, .pbs = kMaxBurst});
    expect_refused({.algorithm = k1r2c, .unit = unit, .cir = max_rate + 1, .cbs = 1}, "cir", "exceeds the maximum rate");
    expect_refused({.algorithm = kTr, .unit = unit, .cir = 1, .cbs = 1, .pir = max_rate + 1, .pbs = 1}, "pir",
                   "exceeds the maximum rate");
    expect_refused({.algorithm = k4115, .unit = unit, .cir = 1, .cbs = 1, .eir = max_rate + 1, .ebs = 1}, "eir",
                   "exceeds the maximum rate");
    expect_refused({.algorithm = k1r2c, .unit = unit, .cir = 1, .cbs = kMaxBurst + 1}, "cbs", "exceeds the maximum burst");
    expect_refused({.algorithm = kSr, .unit = unit, .cir = 1, .cbs = 1, .ebs = kMaxBurst + 1}, "ebs",
                   "exceeds the maximum burst");
    expect_refused({.algorithm = kTr, .unit = unit, .cir = 1, .cbs = 1, .pir = 1, .pbs = kMaxBurst + 1}, "pbs",
                   "exceeds the maximum burst");
  }
  // The packet-rate limit is not the byte-rate limit.
  expect_refused({.algorithm = k1r2c, .unit = Unit::packets, .cir = kMaxPacketRate + 1, .cbs = 1}, "cir", "packets/s");
}

TEST(Validation, BitRateMustBeWholeBytes) {
  EXPECT_EQ(*policer::byte_rate_from_bit_rate(800), 100u);
  auto bad = policer::byte_rate_from_bit_rate(1001);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("1001 bit/s is not a whole number of bytes per second"), std::string::npos);
}

TEST(Units, Rates) {
  EXPECT_EQ(*parse_rate("100mbit"), (Quantity{12'500'000, Unit::bytes}));
  EXPECT_EQ(*parse_rate("400gbit"), (Quantity{50'000'000'000, Unit::bytes}));
  EXPECT_EQ(*parse_rate("8bit"), (Quantity{1, Unit::bytes}));
  EXPECT_EQ(*parse_rate("1.5Mbit"), (Quantity{187'500, Unit::bytes}));
  EXPECT_EQ(*parse_rate("10kpps"), (Quantity{10'000, Unit::packets}));
  EXPECT_EQ(*parse_rate("2.5kpps"), (Quantity{2'500, Unit::packets}));
  EXPECT_EQ(*parse_rate("14.880952mpps"), (Quantity{14'880'952, Unit::packets}));
  EXPECT_EQ(*parse_rate("0pps"), (Quantity{0, Unit::packets}));
  EXPECT_EQ(*parse_rate("1tbit"), (Quantity{125'000'000'000, Unit::bytes}));  // parsed; the profile refuses it

  auto not_whole_bytes = parse_rate("1001bit");
  ASSERT_FALSE(not_whole_bytes.ok());
  EXPECT_NE(not_whole_bytes.error().message.find("not a whole number of bytes per second"), std::string::npos);
  EXPECT_NE(not_whole_bytes.error().message.find("1001bit"), std::string::npos);
  EXPECT_NE(parse_rate("1.0000001kbit").error().message.find("not a whole number"), std::string::npos);
  EXPECT_NE(parse_rate("100").error().message.find("needs a unit"), std::string::npos);
  EXPECT_NE(parse_rate("10mbps").error().message.find("ambiguous"), std::string::npos);
  EXPECT_NE(parse_rate("10furlongs").error().message.find("unknown unit 'furlongs'"), std::string::npos);
  EXPECT_NE(parse_rate("mbit").error().message.find("expected a rate"), std::string::npos);
  EXPECT_NE(parse_rate("").error().message.find("expected a rate"), std::string::npos);
  EXPECT_NE(parse_rate("99999999999999999999999999gbit").error().message.find("too large"), std::string::npos);
  EXPECT_FALSE(parse_rate("1.2.3mbit").ok());
  EXPECT_FALSE(parse_rate("-5mbit").ok());
}

TEST(Units, Bursts) {
  EXPECT_EQ(*parse_burst("64k"), (Quantity{65'536, Unit::bytes}));
  EXPECT_EQ(*parse_burst("64kb"), (Quantity{65'536, Unit::bytes}));
  EXPECT_EQ(*parse_burst("1500"), (Quantity{1'500, Unit::bytes}));
  EXPECT_EQ(*parse_burst("1500b"), (Quantity{1'500, Unit::bytes}));
  EXPECT_EQ(*parse_burst("1.5k"), (Quantity{1'536, Unit::bytes}));
  EXPECT_EQ(*parse_burst("2m"), (Quantity{2u << 20, Unit::bytes}));
  EXPECT_EQ(*parse_burst("1G"), (Quantity{1u << 30, Unit::bytes}));
  EXPECT_EQ(*parse_burst("64pkt"), (Quantity{64, Unit::packets}));
  EXPECT_EQ(*parse_burst("0pkt"), (Quantity{0, Unit::packets}));
  EXPECT_NE(parse_burst("1.1b").error().message.find("not a whole number of bytes"), std::string::npos);
  EXPECT_NE(parse_burst("1.5pkt").error().message.find("not a whole number of packets"), std::string::npos);
  EXPECT_NE(parse_burst("64q").error().message.find("unknown unit 'q'"), std::string::npos);
}

// ---- live change ----

constexpr std::uint64_t kHz = 1000;  // rates of 1000 tokens/s give one token per tick

TEST(LiveChange, SameAlgorithmKeepsLevelsAndCreditsAtTheNewRateFromThatInstant) {
  const Profile slow = make_profile({.algorithm = kTr, .cir = 1000, .cbs = 100, .pir = 2000, .pbs = 200}, kHz);
  const Profile fast = make_profile({.algorithm = kTr, .cir = 4000, .cbs = 300, .pir = 8000, .pbs = 400}, kHz);
  policer::Meter m(slow, 0);
  ASSERT_EQ(m.check_blind(0, 100), Color::green);  // C 0, P 100
  // At t=10 the operator raises the rates: 10 ticks at the old rates first (C 10, P 120).
  m.change_profile(fast, 10);
  EXPECT_EQ(m.state().level[0], 10u * kHz);
  EXPECT_EQ(m.state().level[1], 120u * kHz);
  EXPECT_EQ(m.state().last, 10u);
  // From t=10 on, the new rates: 5 ticks give C +20 and P +40.
  ASSERT_EQ(m.check_blind(15, 0), Color::green);
  EXPECT_EQ(m.state().level[0], 30u * kHz);
  EXPECT_EQ(m.state().level[1], 160u * kHz);
  // And the new sizes bound the refill.
  m.check_blind(1000, 0);
  EXPECT_EQ(m.state().level[0], 300u * kHz);
  EXPECT_EQ(m.state().level[1], 400u * kHz);
}

TEST(LiveChange, SmallerBurstsClampTheLevels) {
  const Profile big = make_profile({.algorithm = kSr, .cir = 1000, .cbs = 100, .ebs = 100}, kHz);
  const Profile small = make_profile({.algorithm = kSr, .cir = 1000, .cbs = 30, .ebs = 80}, kHz);
  policer::Meter m(big, 0);
  ASSERT_EQ(m.check_blind(0, 40), Color::green);  // C 60, E 100
  m.change_profile(small, 0);
  EXPECT_EQ(m.state().level[0], 30u * kHz);
  EXPECT_EQ(m.state().level[1], 80u * kHz);
  // No reset: a packet larger than what is left is not green.
  EXPECT_EQ(m.check_blind(0, 31), Color::yellow);
}

TEST(LiveChange, OtherAlgorithmOrUnitOrExplicitResetStartsFull) {
  const Profile sr = make_profile({.algorithm = kSr, .cir = 1000, .cbs = 100, .ebs = 100}, kHz);
  const Profile sr_packets = make_profile({.algorithm = kSr, .unit = Unit::packets, .cir = 1000, .cbs = 7, .ebs = 9}, kHz);
  const Profile rfc4115 = make_profile({.algorithm = k4115, .cir = 1000, .cbs = 50, .eir = 1000, .ebs = 60}, kHz);
  policer::Meter m(sr, 0);
  ASSERT_EQ(m.check_blind(5, 100), Color::green);
  ASSERT_EQ(m.check_blind(5, 50), Color::yellow);  // C 0, E 50
  m.change_profile(rfc4115, 6);
  EXPECT_EQ(m.state().level[0], 50u * kHz);
  EXPECT_EQ(m.state().level[1], 60u * kHz);
  EXPECT_EQ(m.state().last, 6u);
  m.change_profile(sr, 7);
  EXPECT_EQ(m.state().level[0], 100u * kHz);
  ASSERT_EQ(m.check_blind(7, 100), Color::green);
  ASSERT_EQ(m.check_blind(7, 90), Color::yellow);  // C 0, E 10
  m.change_profile(sr_packets, 8);
  EXPECT_EQ(m.state().level[0], 7u * kHz);
  EXPECT_EQ(m.state().level[1], 9u * kHz);
  m.check_blind(8, 1);
  m.reset(9);
  EXPECT_EQ(m.state().level[0], 7u * kHz);
  EXPECT_EQ(m.state().last, 9u);
}

TEST(LiveChange, AtAStaleTimeCreditsNothingAndKeepsTheClock) {
  const Profile a = make_profile({.algorithm = k1r2c, .cir = 1000, .cbs = 100}, kHz);
  const Profile b = make_profile({.algorithm = k1r2c, .cir = 9000, .cbs = 100}, kHz);
  policer::Meter m(a, 0);
  m.check_blind(100, 100);  // C 0 at t=100
  m.change_profile(b, 50);
  EXPECT_EQ(m.state().level[0], 0u);
  EXPECT_EQ(m.state().last, 100u);
  m.reset(50);  // an explicit reset refills even when stamped earlier, but keeps the clock
  EXPECT_EQ(m.state().level[0], 100u * kHz);
  EXPECT_EQ(m.state().last, 100u);
  m.check_blind(100, 100);
  m.check_blind(101, 0);  // one tick at the new rate
  EXPECT_EQ(m.state().level[0], 9u * kHz);
}

TEST(LiveChange, IsAdvanceAtTheOldRateThenClampThenTheNewRate) {
  // Random traffic, a change at a random instant: the levels are those of the old profile at that
  // instant, clamped to the new sizes, then refilled by the new profile (advance itself is checked
  // against the reference model in meter_exactness_test).
  Rng rng{99};
  for (int round = 0; round < 200; ++round) {
    const Params p1{.algorithm = kSr, .cir = rng.between(1, 5000), .cbs = rng.between(1, 3000), .ebs = rng.between(0, 3000)};
    const Params p2{.algorithm = kSr, .cir = rng.between(1, 5000), .cbs = rng.between(1, 3000), .ebs = rng.between(0, 3000)};
    const Profile a = make_profile(p1, kHz), b = make_profile(p2, kHz);
    policer::Meter m(a, 0);
    std::uint64_t t = 0;
    for (int i = 0; i < 50; ++i) m.check_blind(t += rng.below(5), static_cast<std::uint32_t>(rng.between(1, 1500)));
    const std::uint64_t change_at = t + rng.below(5);
    State expected = m.state();
    policer::SrTcm::advance(expected, a, change_at);
    expected.level[0] = std::min(expected.level[0], b.size(0));
    expected.level[1] = std::min(expected.level[1], b.size(1));
    m.change_profile(b, change_at);
    ASSERT_EQ(m.state().level[0], expected.level[0]);
    ASSERT_EQ(m.state().level[1], expected.level[1]);
    const std::uint64_t later = change_at + rng.below(3000);
    policer::SrTcm::advance(expected, b, later);
    m.check_blind(later, 0);
    ASSERT_EQ(m.state().level[0], expected.level[0]);
    ASSERT_EQ(m.state().level[1], expected.level[1]);
  }
}

}  // namespace
}  // namespace tricolor::test
