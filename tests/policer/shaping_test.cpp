// Shaping's conforming tick (policer/shaping.hpp) against its definition: the earliest tick at which
// the meter's own check colors the packet green. For random profiles of every algorithm that has one,
// at random states reached by random traffic: the check at the answer is green and the check one tick
// earlier is not; no answer means no later tick is green either. Then a shaper: packets held to their
// conforming tick leave in arrival order, each green when released.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "policer/shaping.hpp"
#include "tests/policer/limiter_test_support.hpp"
#include "tests/policer/meter_test_support.hpp"

namespace tricolor::test {
namespace {

Params shapeable_params(Rng& r, Algorithm a, Unit unit, std::uint64_t hz) {
  if (a == Algorithm::gcra || a == Algorithm::smooth) return random_limiter_params(r, a, unit, hz);
  return random_params(r, a, unit);
}

// A gap between two packets: none, a tick, a token's time, up to a fill time.
std::uint64_t random_gap(Rng& r, const Profile& p) {
  const std::uint64_t token = std::max<std::uint64_t>(1, p.cost(1500) / std::max<std::uint64_t>(p.rate(0), 1));
  switch (r.below(5)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return r.between(1, token);
    case 3: return r.between(1, std::max<std::uint64_t>(p.fill_ticks(0), 1));
    default: return r.between(1, 4 * token);
  }
}

bool green_at(State s, const Profile& p, std::uint64_t tick, std::uint32_t length) {
  return policer::with_algorithm(p.algorithm(), [&](auto algo) {
    return policer::check_blind<decltype(algo)>(s, p, tick, length) == Color::green;
  });
}

template <class Algo>
void check_algorithm(Algorithm a) {
  Rng rng{0x5a17 + static_cast<std::uint64_t>(a)};
  int answered = 0, waited = 0, never = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Unit unit = rng.chance(50) ? Unit::bytes : Unit::packets;
    const std::uint64_t hz = random_hz(rng);
    const Params params = shapeable_params(rng, a, unit, hz);
    const Profile profile = make_profile(params, hz);
    if (::testing::Test::HasFailure()) return;
    State s = policer::full_state(profile, 0);
    std::uint64_t now = rng.below(1000);
    for (int step = 0; step < 60; ++step) {
      now += random_gap(rng, profile);
      const std::uint32_t length = random_length(rng, params);
      const auto at = policer::conforming_at<Algo>(s, profile, now, length);
      const std::uint64_t earliest = std::max(now, s.last);
      const std::string where = describe(params, hz) + ", state (" + std::to_string(s.level[0]) + ", " +
                                std::to_string(s.level[1]) + ", last " + std::to_string(s.last) + "), now " +
                                std::to_string(now) + ", length " + std::to_string(length);
      if (at) {
        ++answered;
        ASSERT_GE(*at, earliest) << where;
        ASSERT_TRUE(green_at(s, profile, *at, length)) << where << ": not green at " << *at;
        if (*at > earliest) {
          ++waited;
          ASSERT_FALSE(green_at(s, profile, *at - 1, length)) << where << ": green already at " << *at - 1;
        }
      } else {
        ++never;
        for (const std::uint64_t later : {earliest, earliest + profile.fill_ticks(0), earliest + 4 * profile.fill_ticks(0) + 1})
          ASSERT_FALSE(green_at(s, profile, later, length)) << where << ": no answer, but green at " << later;
      }
      // The traffic goes on: checked now, or (a shaper) released at its tick.
      if (at && *at - now <= 4 * profile.fill_ticks(0) + 1000 && rng.chance(50))
        policer::check_blind<Algo>(s, profile, *at, length);
      else policer::check_blind<Algo>(s, profile, now, length);
    }
  }
  EXPECT_GT(waited, 300) << "too few packets had to wait to say anything";
  EXPECT_GT(answered, waited);
  std::printf("%s: %d answered (%d of them later than now), %d never\n", std::string(policer::to_string(a)).c_str(),
              answered, waited, never);
}

TEST(Shaping, OneRateTwoColor) { check_algorithm<policer::OneRateTwoColor>(Algorithm::one_rate_two_color); }
TEST(Shaping, SrTcm) { check_algorithm<policer::SrTcm>(Algorithm::srtcm); }
TEST(Shaping, TrTcm) { check_algorithm<policer::TrTcm>(Algorithm::trtcm); }
TEST(Shaping, TrTcm4115) { check_algorithm<policer::TrTcm4115>(Algorithm::trtcm_4115); }
TEST(Shaping, Gcra) { check_algorithm<policer::Gcra>(Algorithm::gcra); }
TEST(Shaping, Smooth) { check_algorithm<policer::Smooth>(Algorithm::smooth); }

TEST(Shaping, OnlyTheseAlgorithmsHaveAConformingTick) {
  for (const Algorithm a : {Algorithm::one_rate_two_color, Algorithm::srtcm, Algorithm::trtcm, Algorithm::trtcm_4115,
                            Algorithm::gcra, Algorithm::smooth})
    EXPECT_TRUE(policer::can_shape(a)) << policer::to_string(a);
  for (const Algorithm a : {Algorithm::fixed_window, Algorithm::sliding_window, Algorithm::warmup})
    EXPECT_FALSE(policer::can_shape(a)) << policer::to_string(a);
}

// A shaper with a maximum delay over a greedy source (1R2C, 1000 packets/s, a bucket of 5, 4000
// packets/s offered): every packet is released green at its conforming tick or dropped when that is
// more than the delay away; releases never go back; what is released in any span is within the
// bucket plus the rate times the span; none is released later than its arrival plus the delay.
TEST(Shaping, AShaperReleasesInOrderWithinTheRateAndTheDelay) {
  constexpr std::uint64_t kHz = 1'000'000;  // microseconds
  const Profile p = make_profile(Params{.algorithm = Algorithm::one_rate_two_color, .unit = Unit::packets, .cir = 1000, .cbs = 5}, kHz);
  constexpr std::uint64_t kMaxDelay = 20'000;  // 20 ms: about 20 packets' worth at the rate
  State s = policer::full_state(p, 0);
  std::vector<std::uint64_t> released;
  std::size_t dropped = 0;
  for (std::uint64_t i = 0; i < 4000; ++i) {
    const std::uint64_t arrival = i * 250;  // 4000 packets/s for a second
    const auto at = policer::conforming_at(s, p, arrival, 64);
    ASSERT_TRUE(at.has_value());
    if (*at - arrival > kMaxDelay) {
      ++dropped;
      continue;
    }
    ASSERT_EQ(policer::check_blind<policer::OneRateTwoColor>(s, p, *at, 64), Color::green) << i;
    ASSERT_TRUE(released.empty() || *at >= released.back()) << i;
    released.push_back(*at);
  }
  // Within the bucket plus the rate over any span of releases (one token a millisecond).
  for (std::size_t i = 0; i < released.size(); ++i)
    for (std::size_t j = i; j < released.size(); ++j)
      ASSERT_LE(j - i + 1, 5 + (released[j] - released[i]) / 1000 + 1) << i << ".." << j;
  // Once the queue formed, one a millisecond exactly; in all, the bucket, a second's rate and the
  // delay's backlog (the last arrival at 999.75 ms may leave up to 20 ms later).
  for (std::size_t j = released.size() - 500; j < released.size(); ++j)
    ASSERT_EQ(released[j] - released[j - 1], 1000u) << j;
  EXPECT_EQ(released.size() + dropped, 4000u);
  EXPECT_NEAR(static_cast<double>(released.size()), 5 + 1000 + 20, 3.0);
}

// A shaper's queue (ShapeQueue, `queue N`): against a multiset of release ticks, at random arrivals and
// releases out of order (a per-key rule's keys interleave): the same count held after every release
// <= now leaves, full exactly at N.
TEST(ShapeQueue, HoldsWhatAMultisetHolds) {
  Rng r{27};
  for (const std::uint32_t limit : {1u, 2u, 7u, 64u}) {
    std::vector<std::uint64_t> storage(limit);
    policer::ShapeQueue queue(storage.data(), limit);
    std::multiset<std::uint64_t> model;
    std::uint64_t now = 0;
    for (int step = 0; step < 20'000; ++step) {
      now += r.below(4);
      queue.leave_by(now);
      model.erase(model.begin(), model.upper_bound(now));  // a release at now has left
      ASSERT_EQ(queue.held(), model.size()) << "limit " << limit << ", step " << step;
      ASSERT_EQ(queue.full(), model.size() >= limit);
      if (!queue.full()) {
        const std::uint64_t release = now + 1 + r.below(20);
        queue.hold(release);
        model.insert(release);
      }
    }
  }
}

}  // namespace
}  // namespace tricolor::test
