// Exactness (shared/docs/meters.md): the meters against the independent reference model under random
// traffic, probes at every tick around a token's arrival, stale clocks, idle gaps of years, time split
// into many checks, and long greedy runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "tests/policer/meter_test_support.hpp"

namespace tricolor::test {
namespace {

using policer::kMaxBurst;
using policer::kMaxByteRate;
using policer::kMaxHz;
using policer::kMaxPacketRate;

constexpr std::array kAlgorithms{Algorithm::one_rate_two_color, Algorithm::srtcm, Algorithm::trtcm,
                                 Algorithm::trtcm_4115};

// Gaps: bursts at one instant, a token's time, a fill time, years; and sometimes a stale clock.
std::uint64_t random_time(Rng& r, const Params& p, std::uint64_t hz, std::uint64_t last, std::uint64_t length) {
  const std::uint64_t rate = std::max<std::uint64_t>({p.cir, p.eir, p.pir, 1});
  const std::uint64_t token_ticks = std::max<std::uint64_t>(1, hz / rate);
  const u128 fill128 = u128(std::max({p.cbs, p.ebs, p.pbs, std::uint64_t{1}})) * hz / rate;
  const std::uint64_t fill = static_cast<std::uint64_t>(std::min<u128>(fill128, u128(1) << 62));
  const std::uint64_t room = std::numeric_limits<std::uint64_t>::max() - last;
  std::uint64_t dt = 0;
  switch (r.below(12)) {
    case 0: case 10: case 11: dt = 0; break;  // packets of one burst
    case 1: return last - std::min(last, r.between(1, hz));  // stale
    case 2: dt = r.between(0, 3 * token_ticks); break;
    case 3: dt = r.between(0, fill * 2); break;
    case 4: dt = r.chance(5) ? r.between(hz * 86'400ULL * 365, hz * 86'400ULL * 365 * 30) : r.between(0, fill / 3 + 1); break;
    default: {
      const std::uint64_t p_mode = p.unit == Unit::packets ? 1 : std::max<std::uint64_t>(length, 1);
      const u128 t = u128(p_mode) * hz / rate;
      dt = static_cast<std::uint64_t>(std::min<u128>(t, u128(1) << 62)) * r.below(3);
      break;
    }
  }
  return last + std::min(dt, room / 4);
}

Color random_color(Rng& r) { return static_cast<Color>(r.below(3)); }

struct Case {
  Algorithm algorithm;
  Unit unit;
  bool aware;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << policer::to_string(c.algorithm) << "/" << policer::to_string(c.unit) << (c.aware ? "/aware" : "/blind");
}

class AgainstModel : public ::testing::TestWithParam<Case> {};

TEST_P(AgainstModel, RandomTrafficColorsAndLevelsMatchPacketForPacket) {
  const Case c = GetParam();
  Rng rng{0x7c01u + static_cast<unsigned>(c.algorithm) * 31 + static_cast<unsigned>(c.unit) * 7 + c.aware};
  std::array<std::uint64_t, 3> colors{};
  for (int meter_index = 0; meter_index < 300; ++meter_index) {
    const std::uint64_t hz = random_hz(rng);
    const Params params = random_params(rng, c.algorithm, c.unit);
    const Profile profile = make_profile(params, hz);
    const std::uint64_t created = rng.chance(50) ? 0 : rng.below(std::uint64_t{1} << 40);
    policer::Meter meter(profile, created);
    ReferenceMeter model(to_ref(params, hz), created);
    std::uint64_t t = created;
    for (int i = 0; i < 300; ++i) {
      const std::uint32_t length = random_length(rng, params);
      t = random_time(rng, params, hz, std::max(t, model.now()), length);
      const Color in = random_color(rng);
      const Color got = c.aware ? meter.check_aware(t, length, in) : meter.check_blind(t, length);
      const RefColor want = c.aware ? model.check_aware(t, length, to_ref(in)) : model.check(t, length);
      ASSERT_EQ(policer::to_string(got), to_string(want))
          << describe(params, hz) << " packet " << i << " length " << length << " at t=" << t;
      ASSERT_TRUE(same_levels(meter.state(), model)) << describe(params, hz) << " packet " << i;
      ASSERT_EQ(meter.state().last, model.now());
      ++colors[static_cast<int>(got)];
    }
  }
  // The generator must exercise every outcome the algorithm can produce.
  EXPECT_GT(colors[0], 1000u);
  EXPECT_GT(colors[2], 1000u);
  if (c.algorithm != Algorithm::one_rate_two_color) {
    EXPECT_GT(colors[1], 1000u);
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Algorithm a : kAlgorithms)
    for (Unit u : {Unit::bytes, Unit::packets})
      for (bool aware : {false, true}) cases.push_back({a, u, aware});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, AgainstModel, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  return std::string(policer::to_string(info.param.algorithm)) + "_" + std::string(policer::to_string(info.param.unit)) +
         (info.param.aware ? "_aware" : "_blind");
});

// ---- boundaries: every tick around the arrival of the token that lets a packet through ----

// Ticks for `rate` tokens/s to deliver `tokens`, rounded up: the first tick at which they are there.
std::uint64_t arrival_tick(u128 tokens, std::uint64_t hz, std::uint64_t rate) {
  const u128 scaled = tokens * hz;
  return static_cast<std::uint64_t>((scaled + rate - 1) / rate);
}

struct Probe {
  Algorithm algorithm;
  std::uint64_t c_level, second_level;  // starting state, 1/hz tokens
  bool aware;
  Color in;
};

class Boundaries : public ::testing::TestWithParam<Algorithm> {};

TEST_P(Boundaries, ColorChangesExactlyAtTheTokensArrivalTick) {
  const Algorithm a = GetParam();
  Rng rng{0xb0u + static_cast<unsigned>(a)};
  int probes = 0;
  for (int round = 0; round < 400; ++round) {
    const std::uint64_t hz = random_hz(rng);
    Params p = random_params(rng, a, Unit::bytes);
    if (a == Algorithm::trtcm_4115 && (p.cir == 0 || p.eir == 0)) continue;
    const Profile profile = make_profile(p, hz);
    // The packet size: sometimes one byte, sometimes the whole bucket, in between otherwise.
    const std::uint64_t c_burst = std::max<std::uint64_t>(p.cbs, 1);
    std::uint64_t b = rng.chance(30) ? 1 : rng.chance(30) ? c_burst : rng.between(1, c_burst);
    if (p.cbs == 0) b = 1;

    // Expected color as a function of k ticks after both buckets were emptied at t0.
    auto expected = [&](std::uint64_t k, bool probe_second) -> Color {
      const u128 bb = b;
      switch (a) {
        case Algorithm::one_rate_two_color:
          return k >= arrival_tick(bb, hz, p.cir) ? Color::green : Color::red;
        case Algorithm::srtcm:
          if (probe_second)  // yellow input: E only, which fills after C is full
            return k >= arrival_tick(u128(p.cbs) + bb, hz, p.cir) && b <= p.ebs ? Color::yellow : Color::red;
          if (b <= p.cbs && k >= arrival_tick(bb, hz, p.cir)) return Color::green;
          return b <= p.ebs && k >= arrival_tick(u128(p.cbs) + bb, hz, p.cir) ? Color::yellow : Color::red;
        case Algorithm::trtcm:  // probe C with P full, or P with C full
          if (probe_second)
            return (b <= p.pbs && k >= arrival_tick(bb, hz, p.pir)) ? (b <= p.cbs ? Color::green : Color::yellow)
                                                                    : Color::red;
          if (b > p.pbs) return Color::red;
          return (b <= p.cbs && k >= arrival_tick(bb, hz, p.cir)) ? Color::green : Color::yellow;
        case Algorithm::trtcm_4115:
          if (probe_second)  // yellow input: E only, filled at EIR
            return b <= p.ebs && k >= arrival_tick(bb, hz, p.eir) ? Color::yellow : Color::red;
          if (b <= p.cbs && k >= arrival_tick(bb, hz, p.cir)) return Color::green;
          return (b <= p.ebs && k >= arrival_tick(bb, hz, p.eir)) ? Color::yellow : Color::red;
        default: break;
      }
      return Color::red;
    };

    for (bool probe_second : {false, true}) {
      if (probe_second && a == Algorithm::one_rate_two_color) continue;
      const bool yellow_input = probe_second && a != Algorithm::trtcm;
      const std::uint64_t t0 = rng.below(1'000'000);
      State empty{{0, 0}, t0};
      if (a == Algorithm::trtcm) empty.level[probe_second ? 0 : 1] = profile.size(probe_second ? 0 : 1);
      const u128 target = a == Algorithm::srtcm && probe_second ? u128(p.cbs) + b : u128(b);
      const std::uint64_t rate = !probe_second ? p.cir : a == Algorithm::trtcm ? p.pir
                                 : a == Algorithm::trtcm_4115 ? p.eir : p.cir;
      const std::uint64_t k_star = arrival_tick(target, hz, rate);
      for (std::uint64_t k = k_star > 3 ? k_star - 3 : 0; k <= k_star + 3; ++k) {
        State s = empty;
        const std::uint64_t now = t0 + k;
        const Color got = policer::with_algorithm(a, [&](auto algo) {
          using Algo = decltype(algo);
          return yellow_input
                     ? policer::check_aware<Algo>(s, profile, now, static_cast<std::uint32_t>(b), Color::yellow)
                     : policer::check_blind<Algo>(s, profile, now, static_cast<std::uint32_t>(b));
        });
        ASSERT_EQ(policer::to_string(got), policer::to_string(expected(k, probe_second)))
            << describe(p, hz) << " packet " << b << " at k=" << k << " (arrival at " << k_star << ")";
        ++probes;
      }
    }
  }
  EXPECT_GT(probes, 1000);
}

INSTANTIATE_TEST_SUITE_P(All, Boundaries, ::testing::ValuesIn(kAlgorithms),
                         [](const auto& info) { return std::string(policer::to_string(info.param)); });

TEST(Boundaries, PacketExactlyEqualToAnExactlyArrivedLevelPasses) {
  Rng rng{42};
  for (int i = 0; i < 2000; ++i) {
    // rate * k == b * hz exactly: the level reaches b at tick k with nothing to spare.
    const std::uint64_t k = rng.between(1, 1'000'000);
    const std::uint64_t j = rng.between(1, kMaxHz / k);
    const std::uint64_t hz = k * j;
    const std::uint64_t b = rng.between(1, std::min<std::uint64_t>(kMaxByteRate / j, 100'000));
    const Params p{.algorithm = Algorithm::one_rate_two_color, .unit = Unit::bytes, .cir = b * j, .cbs = b};
    const Profile profile = make_profile(p, hz);
    State s{{0, 0}, 0};
    State before = s;
    EXPECT_EQ(policer::check_blind<policer::OneRateTwoColor>(before, profile, k - 1, static_cast<std::uint32_t>(b)),
              Color::red);
    EXPECT_EQ(policer::check_blind<policer::OneRateTwoColor>(s, profile, k, static_cast<std::uint32_t>(b)), Color::green)
        << describe(p, hz) << " k=" << k;
    EXPECT_EQ(s.level[0], 0u);
  }
}

// ---- stale clocks ----

TEST(StaleTime, EarlierCheckCreditsNothingAndDoesNotMoveTheClockBack) {
  for (Algorithm a : kAlgorithms) {
    Params p{.algorithm = a, .unit = Unit::bytes, .cir = 1000, .cbs = 100};
    if (a == Algorithm::srtcm || a == Algorithm::trtcm_4115) p.ebs = 100;
    if (a == Algorithm::trtcm_4115) p.eir = 1000;
    if (a == Algorithm::trtcm) p.pir = 1000, p.pbs = 100;
    const Profile profile = make_profile(p, 1000);  // one byte per tick
    policer::Meter m(profile, 0);
    ReferenceMeter model(to_ref(p, 1000), 0);
    SCOPED_TRACE(describe(p, 1000));
    // Drain at t=1000.
    for (int i = 0; i < 3; ++i) {
      m.check_blind(1000, 100);
      model.check(1000, 100);
    }
    const State drained = m.state();
    ASSERT_EQ(drained.level[0], 0u);
    ASSERT_EQ(drained.last, 1000u);
    // A packet stamped 500 ticks earlier (another core's older clock read): no credit, no clock change.
    EXPECT_EQ(m.check_blind(500, 1), Color::red);
    model.check(500, 1);
    EXPECT_EQ(m.state().last, 1000u);
    EXPECT_EQ(m.state().level[0], 0u);
    EXPECT_EQ(m.state().level[1], drained.level[1]);
    // Time 0 and a wrap-around-looking value below `last` credit nothing either.
    m.check_blind(0, 0);
    model.check(0, 0);
    EXPECT_EQ(m.state().level[0], 0u);
    // 50 ticks after the real last check: exactly 50 bytes, counted from 1000, not from 500.
    EXPECT_EQ(m.check_blind(1050, 51), Color::red);
    model.check(1050, 51);
    EXPECT_EQ(m.state().level[0], 50u * 1000);
    EXPECT_EQ(m.check_blind(1050, 50), Color::green);
    model.check(1050, 50);
    EXPECT_TRUE(same_levels(m.state(), model));
  }
}

// ---- idle gaps of years ----

TEST(LongGaps, YearsOfIdleFillExactlyToTheBurstWithoutOverflow) {
  const std::uint64_t hz = kMaxHz;
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  for (Algorithm a : kAlgorithms) {
    for (Unit unit : {Unit::bytes, Unit::packets}) {
      for (bool slow : {false, true}) {
        const std::uint64_t rate = slow ? 1 : unit == Unit::bytes ? kMaxByteRate : kMaxPacketRate;
        Params p{.algorithm = a, .unit = unit, .cir = rate, .cbs = kMaxBurst};
        if (a == Algorithm::srtcm || a == Algorithm::trtcm_4115) p.ebs = kMaxBurst;
        if (a == Algorithm::trtcm_4115) p.eir = rate;
        if (a == Algorithm::trtcm) p.pir = rate, p.pbs = kMaxBurst;
        const Profile profile = make_profile(p, hz);
        policer::Meter m(profile, 0);
        ReferenceMeter model(to_ref(p, hz), 0);
        SCOPED_TRACE(describe(p, hz));
        // Empty every bucket, then stay idle for one year, 50 years, and until the tick counter ends.
        const std::uint32_t all = unit == Unit::bytes ? static_cast<std::uint32_t>(kMaxBurst) : 1;
        const int rounds = unit == Unit::bytes ? 2 : 0;
        for (int i = 0; i < rounds; ++i) {
          m.check_aware(0, all, Color::green);
          model.check_aware(0, all, RefColor::green);
        }
        for (std::uint64_t t : {hz * 86'400 * 365, hz * 86'400 * 365 * 50, max - 1, max}) {
          // Bring the buckets to t without a packet (in packet mode any packet costs one token).
          policer::with_algorithm(a, [&](auto algo) { decltype(algo)::advance(m.state(), profile, t); });
          model.advance(t);
          ASSERT_TRUE(same_levels(m.state(), model)) << "at t=" << t;
          if (!slow && t != max) {  // the last gap is a single tick
            EXPECT_EQ(m.state().level[0], profile.size(0));
            EXPECT_EQ(m.state().level[1], profile.size(1));
          }
          // Spend a little so the next gap has something to refill.
          m.check_blind(t, 1);
          model.check(t, 1);
        }
      }
    }
  }
}

// ---- splitting time: many checks credit exactly what one would ----

TEST(Splitting, ManySmallAdvancesEqualOneLargeAdvance) {
  Rng rng{7};
  for (int round = 0; round < 3000; ++round) {
    const Algorithm a = kAlgorithms[rng.below(kAlgorithms.size())];
    const Unit unit = rng.chance(50) ? Unit::bytes : Unit::packets;
    const std::uint64_t hz = random_hz(rng);
    const Params p = random_params(rng, a, unit);
    const Profile profile = make_profile(p, hz);
    State start{{rng.below(profile.size(0) + 1), rng.below(profile.size(1) + 1)}, rng.below(1'000'000)};
    if (rng.chance(30)) start.level[0] = start.level[1] = 0;
    // A span short enough that nothing fills up, so every credited fraction matters.
    const u128 smallest_fill = u128(std::max<std::uint64_t>(1, std::min(p.cbs, p.cbs + p.ebs))) * hz /
                               std::max<std::uint64_t>({p.cir, p.eir, p.pir, 1});
    const std::uint64_t span = 1 + rng.below(static_cast<std::uint64_t>(std::min<u128>(smallest_fill, 1'000'000'000)));
    State whole = start, pieces = start;
    policer::with_algorithm(a, [&](auto algo) {
      using Algo = decltype(algo);
      Algo::advance(whole, profile, start.last + span);
      std::uint64_t t = start.last;
      while (t < start.last + span) {
        t = std::min(start.last + span, t + 1 + rng.below(span / 7 + 1));
        Algo::advance(pieces, profile, t);
      }
    });
    ASSERT_EQ(pieces.level[0], whole.level[0]) << describe(p, hz) << " span " << span;
    ASSERT_EQ(pieces.level[1], whole.level[1]) << describe(p, hz) << " span " << span;
    ASSERT_EQ(pieces.last, whole.last);
  }
}

// ---- greedy traffic: green = CBS + CIR * T within one packet ----

struct Greedy {
  Algorithm algorithm;
  Unit unit;
  std::uint64_t hz;
  std::uint64_t cir;      // bytes/s or packets/s
  std::uint32_t packet;   // bytes
  std::uint64_t seconds;
};

void PrintTo(const Greedy& g, std::ostream* os) {
  *os << policer::to_string(g.algorithm) << "/" << policer::to_string(g.unit) << " cir " << g.cir << " hz " << g.hz;
}

class GreedyRun : public ::testing::TestWithParam<Greedy> {};

TEST_P(GreedyRun, GreenIsCommittedBurstPlusRateTimesTimeWithinOnePacket) {
  const Greedy g = GetParam();
  Params p{.algorithm = g.algorithm, .unit = g.unit, .cir = g.cir, .cbs = g.unit == Unit::bytes ? 65536u : 64u};
  if (g.algorithm == Algorithm::srtcm || g.algorithm == Algorithm::trtcm_4115) p.ebs = p.cbs * 2;
  if (g.algorithm == Algorithm::trtcm_4115) p.eir = g.cir;
  if (g.algorithm == Algorithm::trtcm) p.pir = g.cir * 3, p.pbs = p.cbs * 2;
  const Profile profile = make_profile(p, g.hz);
  policer::Meter meter(profile, 0);
  // Offer twice the committed rate: one packet every half token-time of a packet.
  const std::uint64_t cost = g.unit == Unit::bytes ? g.packet : 1;
  const u128 gap_num = u128(cost) * g.hz;  // ticks between packets = gap_num / (2 * cir)
  const std::uint64_t end = g.seconds * g.hz;
  std::uint64_t green = 0, n = 0, t = 0, last = 0;
  for (; t <= end; t = static_cast<std::uint64_t>(u128(++n) * gap_num / (2 * g.cir))) {
    if (meter.check_blind(t, g.packet) == Color::green) green += cost;
    last = t;
  }
  // Everything credited up to the last packet, whole tokens: what one exact bucket can have given.
  const u128 bound = u128(p.cbs) + u128(g.cir) * last / g.hz;
  EXPECT_LE(u128(green), bound) << describe(p, g.hz);
  EXPECT_GT(u128(green) + cost, bound) << describe(p, g.hz) << ": green " << green << " more than a packet below "
                                       << u128_string(bound);
}

INSTANTIATE_TEST_SUITE_P(
    Rates, GreedyRun,
    ::testing::Values(
        // Rates whose period in ticks is far from whole: 3.33, 2025.0016, 0.02 ticks per token.
        Greedy{Algorithm::one_rate_two_color, Unit::bytes, 1'000'000'000, 300'000'000, 1500, 1},
        Greedy{Algorithm::srtcm, Unit::bytes, 2'500'000'000, 1'234'567, 1500, 10},
        Greedy{Algorithm::trtcm, Unit::bytes, 2'500'000'000, 1'234'567, 64, 3},
        Greedy{Algorithm::trtcm_4115, Unit::bytes, 1'000'000'000, 49'999'999'999, 9000, 1},
        Greedy{Algorithm::srtcm, Unit::bytes, 2'100'000'000, 12'500'001, 1514, 5},
        Greedy{Algorithm::one_rate_two_color, Unit::packets, 2'100'000'000, 3, 64, 100},
        Greedy{Algorithm::trtcm, Unit::packets, 1'000'000'000, 1'488'095, 64, 1},
        Greedy{Algorithm::trtcm_4115, Unit::packets, 3'000'000'001, 777, 1500, 20}));

}  // namespace
}  // namespace tricolor::test
