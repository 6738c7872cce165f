// Every rule of each algorithm (shared/docs/meters.md), color-blind and color-aware, in byte and packet
// mode, as hand-worked scenarios. The clock runs at 1000 ticks/s and rates are multiples of 1000
// tokens/s, so levels are whole tokens at every step and the expected values can be read off.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "tests/policer/meter_test_support.hpp"

namespace tricolor::test {
namespace {

constexpr std::uint64_t kHz = 1000;

struct Step {
  std::uint64_t t;                 // tick
  std::uint32_t tokens;            // metered cost of the packet in tokens
  std::optional<Color> in;         // color-aware input, or blind
  Color expect;
  std::uint64_t c_after;           // level of C after the packet, whole tokens
  std::uint64_t second_after;      // level of E or P after the packet, whole tokens
};

constexpr Color G = Color::green, Y = Color::yellow, R = Color::red;
constexpr std::optional<Color> blind = std::nullopt;

// Runs the steps in byte mode (a packet of `tokens` bytes) or packet mode (a 1500-byte frame costing
// one packet, so every step must cost 1 token), against the meter and against the reference model.
void run(Params params, const std::vector<Step>& steps) {
  const Profile profile = make_profile(params, kHz);
  policer::Meter meter(profile, 0);
  ReferenceMeter model(to_ref(params, kHz), 0);
  const bool packets = params.unit == Unit::packets;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    SCOPED_TRACE(describe(params, kHz) + ", step " + std::to_string(i) + " at t=" + std::to_string(s.t));
    if (packets) {
      ASSERT_EQ(s.tokens, 1u) << "packet-mode steps cost one packet";
    }
    const std::uint32_t length = packets ? 1500 : s.tokens;
    const Color got = s.in ? meter.check_aware(s.t, length, *s.in) : meter.check_blind(s.t, length);
    const RefColor want_model = s.in ? model.check_aware(s.t, length, to_ref(*s.in)) : model.check(s.t, length);
    EXPECT_EQ(policer::to_string(got), policer::to_string(s.expect));
    EXPECT_EQ(to_string(want_model), policer::to_string(s.expect)) << "the reference model disagrees with the scenario";
    EXPECT_EQ(meter.state().level[0], s.c_after * kHz);
    EXPECT_EQ(meter.state().level[1], s.second_after * kHz);
    EXPECT_TRUE(same_levels(meter.state(), model));
  }
}

class Rules : public ::testing::TestWithParam<Unit> {
 protected:
  Params params(Algorithm a) const {
    Params p;
    p.algorithm = a;
    p.unit = GetParam();
    return p;
  }
};

INSTANTIATE_TEST_SUITE_P(Units, Rules, ::testing::Values(Unit::bytes, Unit::packets),
                         [](const auto& info) { return std::string(policer::to_string(info.param)); });

// ---- 1R2C ----
TEST_P(Rules, OneRateTwoColorBlind) {
  Params p = params(Algorithm::one_rate_two_color);
  p.cir = 1000;  // one token per tick
  p.cbs = 2;
  run(p, {{0, 1, blind, G, 1, 0},
          {0, 1, blind, G, 0, 0},
          {0, 1, blind, R, 0, 0},   // exceed: no token taken
          {1, 1, blind, G, 0, 0},   // one tick, one token
          {1, 1, blind, R, 0, 0},
          {9, 1, blind, G, 1, 0},   // 8 ticks fill to cbs = 2, the rest is discarded
          {9, 1, blind, G, 0, 0},
          {9, 1, blind, R, 0, 0}});
}

TEST_P(Rules, OneRateTwoColorAwareNonGreenInputIsRed) {
  Params p = params(Algorithm::one_rate_two_color);
  p.cir = 1000;
  p.cbs = 2;
  run(p, {{0, 1, Y, R, 2, 0},       // full bucket, yellow input: red, and no token taken
          {0, 1, R, R, 2, 0},
          {0, 1, G, G, 1, 0},
          {0, 1, G, G, 0, 0},
          {0, 1, G, R, 0, 0}});
}

// ---- srTCM (RFC 2697) ----
TEST_P(Rules, SrTcmBlind) {
  Params p = params(Algorithm::srtcm);
  p.cir = 1000;
  p.cbs = 3;
  p.ebs = 2;
  run(p, {{0, 1, blind, G, 2, 2},   // Tc - B >= 0: green, Tc -= B
          {0, 1, blind, G, 1, 2},
          {0, 1, blind, G, 0, 2},
          {0, 1, blind, Y, 0, 1},   // else Te - B >= 0: yellow, Te -= B
          {0, 1, blind, Y, 0, 0},
          {0, 1, blind, R, 0, 0},   // else red, no change
          {1, 1, blind, G, 0, 0},   // tokens go to C first
          {5, 1, blind, G, 2, 1},   // 4 tokens: 3 fill C, 1 overflows into E
          {10, 1, blind, G, 2, 2},  // 5 tokens: 1 to C, 1 to E, 3 discarded
          {10, 1, blind, G, 1, 2}});
}

TEST_P(Rules, SrTcmAware) {
  Params p = params(Algorithm::srtcm);
  p.cir = 1000;
  p.cbs = 3;
  p.ebs = 2;
  run(p, {{0, 1, R, R, 3, 2},       // pre-red: red whatever the buckets
          {0, 1, Y, Y, 3, 1},       // pre-yellow never takes C
          {0, 1, G, G, 2, 1},
          {0, 1, Y, Y, 2, 0},
          {0, 1, Y, R, 2, 0},       // pre-yellow and Te < B: red although Tc >= B
          {0, 1, G, G, 1, 0},
          {0, 1, G, G, 0, 0},
          {0, 1, G, R, 0, 0},       // pre-green, both empty
          {4, 1, G, G, 2, 1},       // 4 tokens: 3 fill C, 1 overflows into E
          {8, 1, G, G, 2, 2},       // 4 tokens: 1 to C, 1 to E, 2 discarded
          {8, 1, Y, Y, 2, 1}});
}

TEST_P(Rules, SrTcmWithoutCommittedBurstIsNeverGreen) {
  Params p = params(Algorithm::srtcm);
  p.cir = 1000;
  p.cbs = 0;
  p.ebs = 2;
  run(p, {{0, 1, blind, Y, 0, 1},
          {0, 1, blind, Y, 0, 0},
          {0, 1, blind, R, 0, 0},
          {1, 1, blind, Y, 0, 0},   // every token overflows straight to E
          {5, 1, G, Y, 0, 1}});
}

TEST_P(Rules, SrTcmWithoutExcessBurstIsTwoColor) {
  Params p = params(Algorithm::srtcm);
  p.cir = 1000;
  p.cbs = 2;
  p.ebs = 0;
  run(p, {{0, 1, blind, G, 1, 0},
          {0, 1, blind, G, 0, 0},
          {0, 1, blind, R, 0, 0},
          {10, 1, blind, G, 1, 0},  // overflow beyond C is discarded: E has no room
          {10, 1, Y, R, 1, 0}});
}

// ---- trTCM (RFC 2698) ----
TEST_P(Rules, TrTcmBlind) {
  Params p = params(Algorithm::trtcm);
  p.cir = 1000;
  p.cbs = 2;
  p.pir = 2000;
  p.pbs = 4;
  run(p, {{0, 1, blind, G, 1, 3},   // Tp, Tc >= B: green, both -= B
          {0, 1, blind, G, 0, 2},
          {0, 1, blind, Y, 0, 1},   // Tc < B: yellow, Tp -= B
          {0, 1, blind, Y, 0, 0},
          {0, 1, blind, R, 0, 0},   // Tp < B: red, no change
          {1, 1, blind, G, 0, 1},   // C +1, P +2
          {1, 1, blind, Y, 0, 0},
          {1, 1, blind, R, 0, 0},
          {11, 1, blind, G, 1, 3}});  // both refilled to their own sizes
}

TEST_P(Rules, TrTcmAware) {
  Params p = params(Algorithm::trtcm);
  p.cir = 1000;
  p.cbs = 2;
  p.pir = 2000;
  p.pbs = 4;
  run(p, {{0, 1, R, R, 2, 4},       // pre-red: red even with full buckets
          {0, 1, Y, Y, 2, 3},       // pre-yellow: yellow, only P taken
          {0, 1, G, G, 1, 2},
          {0, 1, Y, Y, 1, 1},
          {0, 1, G, G, 0, 0},
          {0, 1, G, R, 0, 0},
          {0, 1, Y, R, 0, 0},
          {1, 1, G, G, 0, 1},
          {1, 1, G, Y, 0, 0}});     // pre-green but Tc < B: yellow
}

// ---- RFC 4115 ----
TEST_P(Rules, TrTcm4115Blind) {
  Params p = params(Algorithm::trtcm_4115);
  p.cir = 1000;
  p.cbs = 2;
  p.eir = 2000;
  p.ebs = 3;
  run(p, {{0, 1, blind, G, 1, 3},
          {0, 1, blind, G, 0, 3},
          {0, 1, blind, Y, 0, 2},
          {0, 1, blind, Y, 0, 1},
          {0, 1, blind, Y, 0, 0},
          {0, 1, blind, R, 0, 0},
          {1, 1, blind, G, 0, 2},   // C +1, E +2: independent rates
          {1, 1, blind, Y, 0, 1}});
}

TEST_P(Rules, TrTcm4115BucketsFillIndependently) {
  Params p = params(Algorithm::trtcm_4115);
  p.cir = 1000;
  p.cbs = 2;
  p.eir = 1000;
  p.ebs = 3;
  run(p, {{0, 1, Y, Y, 2, 2},       // pre-yellow takes E only
          {0, 1, Y, Y, 2, 1},
          {0, 1, Y, Y, 2, 0},
          {1, 1, Y, Y, 2, 0},       // C is full: with srTCM its token would overflow to E; here it does not
          {0, 1, Y, R, 2, 0},       // a stale check (t=0 < 1) credits nothing
          {3, 1, Y, Y, 2, 1},
          {3, 1, R, R, 2, 1},
          {3, 1, G, G, 1, 1}});
}

TEST_P(Rules, TrTcm4115ZeroCommittedRate) {
  Params p = params(Algorithm::trtcm_4115);
  p.cir = 0;
  p.cbs = 1;  // starts full, never refills
  p.eir = 1000;
  p.ebs = 1;
  run(p, {{0, 1, blind, G, 0, 1},
          {0, 1, blind, Y, 0, 0},
          {1000000, 1, blind, Y, 0, 0},  // after 1000 s C is still empty, E refilled
          {1000000, 1, blind, R, 0, 0}});
}

TEST_P(Rules, TrTcm4115ZeroExcessRate) {
  Params p = params(Algorithm::trtcm_4115);
  p.cir = 1000;
  p.cbs = 1;
  p.eir = 0;
  p.ebs = 0;
  run(p, {{0, 1, blind, G, 0, 0},
          {0, 1, blind, R, 0, 0},
          {7, 1, blind, G, 0, 0},
          {7, 1, Y, R, 0, 0}});
}

// ---- byte mode only: sizes above one token, a packet exactly equal to the level ----
TEST(RulesBytes, PacketExactlyEqualToTheLevelPasses) {
  Params p{.algorithm = Algorithm::srtcm, .unit = Unit::bytes, .cir = 1000, .cbs = 100, .ebs = 50};
  run(p, {{0, 100, blind, G, 0, 50},   // exactly Tc
          {0, 51, blind, R, 0, 50},    // one byte more than Te
          {0, 50, blind, Y, 0, 0},     // exactly Te
          {30, 31, blind, R, 30, 0},   // one byte more than Tc
          {30, 30, blind, G, 0, 0}});
}

TEST(RulesBytes, TrTcmTestsPeakBucketFirst) {
  Params p{.algorithm = Algorithm::trtcm, .unit = Unit::bytes, .cir = 1000, .cbs = 10, .pir = 1000, .pbs = 10};
  run(p, {{0, 5, G, G, 5, 5},
          {0, 5, Y, Y, 5, 0},
          {0, 3, blind, R, 5, 0}});  // Tc = 5 >= 3 but Tp = 0 < 3: red
}

TEST(RulesBytes, PacketLargerThanEveryBucket) {
  Params p{.algorithm = Algorithm::srtcm, .unit = Unit::bytes, .cir = 1000, .cbs = 100, .ebs = 1000};
  run(p, {{0, 101, blind, Y, 100, 899},   // larger than CBS, fits E
          {0, 1001, blind, R, 100, 899},  // larger than any bucket: red, nothing taken
          {0, 4294967295u, blind, R, 100, 899}});
}

TEST(RulesBytes, ZeroLengthPacketIsGreenAndFree) {
  Params p{.algorithm = Algorithm::one_rate_two_color, .unit = Unit::bytes, .cir = 1000, .cbs = 1};
  run(p, {{0, 1, blind, G, 0, 0}, {0, 0, blind, G, 0, 0}});
}

TEST(RulesPackets, LengthIsIgnored) {
  Params p{.algorithm = Algorithm::one_rate_two_color, .unit = Unit::packets, .cir = 1000, .cbs = 2};
  const Profile profile = make_profile(p, kHz);
  policer::Meter meter(profile, 0);
  EXPECT_EQ(meter.check_blind(0, 9000), Color::green);
  EXPECT_EQ(meter.check_blind(0, 0), Color::green);
  EXPECT_EQ(meter.check_blind(0, 64), Color::red);
  EXPECT_EQ(meter.state().level[0], 0u);
}

}  // namespace
}  // namespace tricolor::test
