// The shared form under 2 and 4 threads hammering one meter: together they admit exactly what one
// meter admits seeing their bursts in commit order.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include "policer/shared_meter.hpp"
#include "tests/policer/limiter_test_support.hpp"
#include "tests/policer/meter_test_support.hpp"

namespace tricolor::test {
namespace {

using policer::SharedMeter;

constexpr std::array kAlgorithms{Algorithm::one_rate_two_color, Algorithm::srtcm, Algorithm::trtcm,
                                 Algorithm::trtcm_4115};

Params params_for(Algorithm a, Unit unit, std::uint64_t cir, std::uint64_t cbs) {
  Params p{.algorithm = a, .unit = unit, .cir = cir, .cbs = cbs};
  if (a == Algorithm::srtcm) p.ebs = cbs / 2;
  if (a == Algorithm::trtcm) p.pir = cir * 2, p.pbs = cbs * 3 / 2;
  if (a == Algorithm::trtcm_4115) p.eir = cir, p.ebs = cbs / 2;
  return p;
}

struct Shape {
  Algorithm algorithm;
  unsigned threads;
};

void PrintTo(const Shape& s, std::ostream* os) { *os << policer::to_string(s.algorithm) << "/" << s.threads << " threads"; }

class Shared : public ::testing::TestWithParam<Shape> {};

// The clock stands still, so no token is ever added: whatever the interleaving, exactly the tokens
// the meter started with can be handed out. Lost updates show up as more.
TEST_P(Shared, AtOneInstantExactlyTheStartingTokensAreAdmitted) {
  const Shape shape = GetParam();
  constexpr std::uint64_t kBurst = 30'000;  // packets in C
  const Params p = params_for(shape.algorithm, Unit::packets, 1000, kBurst);
  const Profile profile = make_profile(p, 1'000'000'000);
  const std::uint64_t tokens_c = kBurst;
  const std::uint64_t tokens_second = shape.algorithm == Algorithm::trtcm ? p.pbs : p.ebs;
  for (int round = 0; round < 10; ++round) {
    SharedMeter meter(profile, 0);
    std::array<std::atomic<std::uint64_t>, 3> totals{};
    std::latch start(shape.threads);  // all threads hammer the meter at once
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < shape.threads; ++i) {
      threads.emplace_back([&] {
        start.arrive_and_wait();
        std::array<std::uint32_t, 32> lengths;
        lengths.fill(64);
        std::array<Color, 32> colors;
        std::array<std::uint64_t, 3> mine{};
        // Each thread alone offers more than all the tokens there are.
        for (std::uint64_t sent = 0; sent < 2 * (tokens_c + tokens_second); sent += lengths.size()) {
          meter.check_burst_blind(7, lengths, colors);
          for (Color c : colors) ++mine[static_cast<int>(c)];
        }
        for (int c = 0; c < 3; ++c) totals[c] += mine[c];
      });
    }
    for (auto& t : threads) t.join();
    switch (shape.algorithm) {
      case Algorithm::one_rate_two_color:
        ASSERT_EQ(totals[0], tokens_c);
        ASSERT_EQ(totals[1], 0u);
        break;
      case Algorithm::srtcm:
      case Algorithm::trtcm_4115:
        ASSERT_EQ(totals[0], tokens_c);
        ASSERT_EQ(totals[1], tokens_second);
        break;
      case Algorithm::trtcm:  // P holds every non-red packet; C the green ones
        ASSERT_EQ(totals[0], tokens_c);
        ASSERT_EQ(totals[0] + totals[1], tokens_second);
        break;
      default: FAIL() << "not an RFC meter";
    }
  }
}

struct Burst {
  std::uint64_t now;
  std::vector<std::uint32_t> lengths;
  std::vector<Color> in;
  std::vector<Color> out;
};

struct Commit {
  unsigned thread;
  std::size_t burst;
};

// Threads read a common clock (as workers read the TSC), so their bursts reach the meter in any order,
// stale ones included. The meter records the commit order; replaying the bursts in that order through
// one unshared meter, and through the reference model, must give the very same colors.
TEST_P(Shared, ColorsEqualOneMeterReplayingTheBurstsInCommitOrder) {
  const Shape shape = GetParam();
  constexpr std::uint64_t kHz = 1'000'000'000;
  constexpr std::size_t kBurstsPerThread = 4000;
  for (bool aware : {false, true}) {
    const Params p = params_for(shape.algorithm, Unit::bytes, 1'000'000'000, 64 * 1024);
    const Profile profile = make_profile(p, kHz);
    SharedMeter meter(profile, 0);
    std::atomic<std::uint64_t> clock{0};
    std::atomic<std::size_t> commits{0};
    std::vector<Commit> order(shape.threads * kBurstsPerThread);
    std::vector<std::vector<Burst>> bursts(shape.threads);
    // Packets are made before the start so that the threads meter at the same time.
    for (unsigned id = 0; id < shape.threads; ++id) {
      Rng rng{1234 + id};
      bursts[id].resize(kBurstsPerThread);
      for (Burst& burst : bursts[id]) {
        const std::size_t n = rng.between(1, 32);
        for (std::size_t i = 0; i < n; ++i) {
          burst.lengths.push_back(static_cast<std::uint32_t>(rng.between(64, 1500)));
          burst.in.push_back(static_cast<Color>(rng.below(3)));
        }
        burst.out.resize(n);
      }
    }

    std::latch start(shape.threads);
    std::vector<std::thread> threads;
    for (unsigned id = 0; id < shape.threads; ++id) {
      threads.emplace_back([&, id] {
        Rng rng{5678 + id};
        start.arrive_and_wait();
        for (std::size_t b = 0; b < kBurstsPerThread; ++b) {
          Burst& burst = bursts[id][b];
          // Time advances 4 µs per burst on average while a burst carries about 12.5 KB: three times the
          // CIR and half again the PIR, so every algorithm marks red however the threads interleave.
          burst.now = clock.fetch_add(rng.below(8'000)) + rng.below(3);
          auto record = [&](const State&) { order[commits.fetch_add(1)] = Commit{id, b}; };
          if (aware) meter.check_burst_aware(burst.now, burst.lengths, burst.in, burst.out, record);
          else meter.check_burst_blind(burst.now, burst.lengths, burst.out, record);
        }
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(commits.load(), order.size());

    policer::Meter replay(profile, 0);
    ReferenceMeter model(to_ref(p, kHz), 0);
    std::array<std::uint64_t, 3> colors{};
    std::size_t stale = 0;
    std::uint64_t latest = 0;
    for (const Commit& c : order) {
      const Burst& burst = bursts[c.thread][c.burst];
      stale += burst.now < latest;
      latest = std::max(latest, burst.now);
      for (std::size_t i = 0; i < burst.lengths.size(); ++i) {
        const Color want = aware ? replay.check_aware(burst.now, burst.lengths[i], burst.in[i])
                                 : replay.check_blind(burst.now, burst.lengths[i]);
        const RefColor model_color = aware ? model.check_aware(burst.now, burst.lengths[i], to_ref(burst.in[i]))
                                           : model.check(burst.now, burst.lengths[i]);
        ASSERT_EQ(policer::to_string(burst.out[i]), policer::to_string(want))
            << "thread " << c.thread << " burst " << c.burst << " packet " << i;
        ASSERT_EQ(to_string(model_color), policer::to_string(want));
        ++colors[static_cast<int>(want)];
      }
    }
    const State final_state = meter.snapshot();
    EXPECT_EQ(final_state.level[0], replay.state().level[0]);
    EXPECT_EQ(final_state.level[1], replay.state().level[1]);
    EXPECT_GT(colors[0], 0u);
    EXPECT_GT(colors[2], 0u);
    // Stale bursts happen only when commits interleave; with one core they may not.
    RecordProperty("stale_bursts_" + std::string(aware ? "aware" : "blind"), static_cast<int>(stale));
  }
}

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (Algorithm a : kAlgorithms)
    for (unsigned n : {2u, 4u}) out.push_back({a, n});
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, Shared, ::testing::ValuesIn(shapes()), [](const auto& info) {
  return std::string(policer::to_string(info.param.algorithm)) + "_" + std::to_string(info.param.threads) + "threads";
});

TEST(SharedMeter, ProfileChangeAndResetHappenUnderTheLock) {
  const Profile a = make_profile({.algorithm = Algorithm::one_rate_two_color, .cir = 1000, .cbs = 100}, 1000);
  const Profile b = make_profile({.algorithm = Algorithm::one_rate_two_color, .cir = 2000, .cbs = 50}, 1000);
  SharedMeter meter(a, 0);
  std::array<std::uint32_t, 2> lengths{30, 30};
  std::array<Color, 2> colors;
  meter.check_burst_blind(0, lengths, colors);
  EXPECT_EQ(meter.snapshot().level[0], 40u * 1000);
  meter.change_profile(b, 5);  // 45 at the old rate, clamped to 50 -> 45
  EXPECT_EQ(meter.snapshot().level[0], 45u * 1000);
  meter.check_burst_blind(6, std::span<const std::uint32_t>(lengths).first(0), colors);
  EXPECT_EQ(meter.snapshot().level[0], 47u * 1000);  // one tick at the new rate
  meter.reset(7);
  EXPECT_EQ(meter.snapshot().level[0], 50u * 1000);
}

// A burst of one tick metered at that tick once (check_burst_at_after) colors as one metered packet by
// packet at that tick (check_burst_after), color-blind and color-aware, burst after burst.
TEST(SharedMeter, ABurstOfOneTickColorsAsPacketByPacket) {
  constexpr std::array kEvery{Algorithm::one_rate_two_color, Algorithm::srtcm,          Algorithm::trtcm,
                              Algorithm::trtcm_4115,         Algorithm::fixed_window,   Algorithm::sliding_window,
                              Algorithm::gcra,               Algorithm::smooth,         Algorithm::warmup};
  Rng rng{23};
  for (const Algorithm a : kEvery) {
    for (const bool aware : {false, true}) {
      const Params params = policer::is_limiter(a) ? random_limiter_params(rng, a, Unit::bytes, 1'000'000'000)
                                                   : params_for(a, Unit::bytes, 1'000'000, 3000);
      const auto profile = *policer::Profile::make(params, *TickRate::make(1'000'000'000));
      SharedMeter once(profile, 0), each(profile, 0);
      std::uint64_t seed = 17, now = 0;
      const auto no_change = [](policer::AggregateMeter&, std::uint64_t&) {};
      for (int burst = 0; burst < 2000; ++burst) {
        now += tricolor::splitmix64(seed) % 3'000'000;
        const std::size_t n = 1 + tricolor::splitmix64(seed) % 32;
        std::vector<std::uint64_t> times(n, now);
        std::vector<std::uint32_t> lengths(n);
        std::vector<Color> in(n), a_colors(n), b_colors(n);
        for (std::size_t i = 0; i < n; ++i) {
          lengths[i] = static_cast<std::uint32_t>(64 + tricolor::splitmix64(seed) % 1500);
          in[i] = static_cast<Color>(tricolor::splitmix64(seed) % 3);
        }
        const std::span<const Color> input = aware ? std::span<const Color>(in) : std::span<const Color>();
        once.check_burst_at_after(no_change, now, lengths, input, a_colors);
        each.check_burst_after(no_change, times, lengths, input, b_colors);
        ASSERT_EQ(a_colors, b_colors) << policer::to_string(a) << (aware ? " aware" : " blind") << " burst " << burst;
      }
      const State x = once.snapshot(), y = each.snapshot();
      EXPECT_EQ(x.level[0], y.level[0]) << policer::to_string(a);
      EXPECT_EQ(x.level[1], y.level[1]) << policer::to_string(a);
      EXPECT_EQ(x.last, y.last) << policer::to_string(a);
    }
  }
}

}  // namespace
}  // namespace tricolor::test
