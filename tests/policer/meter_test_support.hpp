#pragma once
// Glue between policer/ and the independent reference model: conversions only, no metering logic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "dataplane/replay/splitmix64.hpp"
#include "policer/meter.hpp"
#include "tests/policer/reference_model.hpp"

namespace tricolor::test {

using policer::Algorithm;
using policer::Color;
using policer::Params;
using policer::Profile;
using policer::State;
using policer::TickRate;
using policer::Unit;

inline RefAlgorithm to_ref(Algorithm a) {
  switch (a) {
    case Algorithm::one_rate_two_color: return RefAlgorithm::one_rate_two_color;
    case Algorithm::srtcm: return RefAlgorithm::srtcm;
    case Algorithm::trtcm: return RefAlgorithm::trtcm;
    case Algorithm::trtcm_4115: return RefAlgorithm::trtcm_4115;
    default: break;  // the limiters have their own model (tests/policer/limiter_model.hpp)
  }
  return RefAlgorithm::one_rate_two_color;
}

inline RefColor to_ref(Color c) {
  return c == Color::green ? RefColor::green : c == Color::yellow ? RefColor::yellow : RefColor::red;
}

inline RefParams to_ref(const Params& p, std::uint64_t hz) {
  return RefParams{to_ref(p.algorithm), p.unit == Unit::packets, p.cir, p.cbs, p.eir, p.ebs, p.pir, p.pbs, hz};
}

inline Profile make_profile(const Params& p, std::uint64_t hz) {
  auto tick_rate = TickRate::make(hz);
  EXPECT_TRUE(tick_rate.ok()) << tick_rate.error().message;
  auto profile = Profile::make(p, *tick_rate);
  EXPECT_TRUE(profile.ok()) << profile.error().message;
  return *profile;
}

inline std::string describe(const Params& p, std::uint64_t hz) {
  return std::string(policer::to_string(p.algorithm)) + " " + std::string(policer::to_string(p.unit)) +
         " cir=" + std::to_string(p.cir) + " cbs=" + std::to_string(p.cbs) + " eir=" + std::to_string(p.eir) +
         " ebs=" + std::to_string(p.ebs) + " pir=" + std::to_string(p.pir) + " pbs=" + std::to_string(p.pbs) +
         " hz=" + std::to_string(hz);
}

inline std::string u128_string(u128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v != 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

// Levels of the meter under test equal the model's, exactly (both in 1/hz tokens).
inline ::testing::AssertionResult same_levels(const State& s, const ReferenceMeter& m) {
  if (u128(s.level[0]) == m.c_level() && u128(s.level[1]) == m.second_level()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "levels (" << s.level[0] << ", " << s.level[1] << ") but the model has ("
                                       << u128_string(m.c_level()) << ", " << u128_string(m.second_level()) << ")";
}

using Rng = tricolor::SplitMix64;  // reproducible random tests

// A rate as tests draw them: tiny, middling, large, the maximum of its unit.
inline std::uint64_t random_rate(Rng& r, Unit unit) {
  const std::uint64_t max = unit == Unit::bytes ? policer::kMaxByteRate : policer::kMaxPacketRate;
  switch (r.below(5)) {
    case 0: return r.between(1, 100);
    case 1: return r.between(100, 1'000'000);
    case 2: return r.between(1'000'000, max);
    case 3: return max;
    default: return r.between(1, 10'000);
  }
}

// A tick rate as tests draw them: the extremes, round ones, TSC-like ones, any.
inline std::uint64_t random_hz(Rng& r) {
  switch (r.below(6)) {
    case 0: return 1;
    case 1: return 1000;
    case 2: return 1'000'000'000;
    case 3: return policer::kMaxHz;
    case 4: return r.between(2'000'000'000, 3'999'999'999);  // TSC-like, not round
    default: return r.between(1, policer::kMaxHz);
  }
}

// Valid parameters of one of the RFC meters, as the exactness tests draw them.
inline std::uint64_t random_burst(Rng& r, Unit unit) {
  // Packet-mode packets cost one token each: small bursts, or nothing would ever be red.
  if (unit == Unit::packets && r.chance(80)) return r.between(1, 40);
  switch (r.below(5)) {
    case 0: return r.between(1, 16);
    case 1: return r.between(16, 100'000);
    case 2: return r.between(100'000, policer::kMaxBurst);
    case 3: return policer::kMaxBurst;
    default: return r.between(1, 3000);
  }
}

inline Params random_params(Rng& r, Algorithm a, Unit unit) {
  Params p;
  p.algorithm = a;
  p.unit = unit;
  const std::uint64_t max_rate = unit == Unit::bytes ? policer::kMaxByteRate : policer::kMaxPacketRate;
  switch (a) {
    case Algorithm::one_rate_two_color:
      p.cir = random_rate(r, unit);
      p.cbs = random_burst(r, unit);
      break;
    case Algorithm::srtcm:
      p.cir = random_rate(r, unit);
      p.cbs = r.chance(10) ? 0 : random_burst(r, unit);
      p.ebs = (p.cbs != 0 && r.chance(10)) ? 0 : random_burst(r, unit);
      break;
    case Algorithm::trtcm:
      p.cir = random_rate(r, unit);
      p.pir = r.chance(20) ? p.cir : r.between(p.cir, std::min(max_rate, p.cir * 1 + r.below(max_rate)));
      p.cbs = random_burst(r, unit);
      p.pbs = random_burst(r, unit);
      break;
    case Algorithm::trtcm_4115:
      p.cir = r.chance(15) ? 0 : random_rate(r, unit);
      p.eir = (p.cir != 0 && r.chance(15)) ? 0 : random_rate(r, unit);
      p.cbs = p.cir != 0 || r.chance(50) ? random_burst(r, unit) : 0;
      p.ebs = p.eir != 0 || r.chance(50) ? random_burst(r, unit) : 0;
      break;
    default: break;  // the limiters: tests/limiter_*_test.cpp
  }
  return p;
}

// Packet lengths around the bucket sizes, so that all colors occur, with a few extremes.
inline std::uint32_t random_length(Rng& r, const Params& p) {
  const std::uint64_t scale = std::max({p.cbs, p.ebs, p.pbs, std::uint64_t{1}});
  switch (r.below(8)) {
    case 0: return 0;
    case 1: return static_cast<std::uint32_t>(r.between(policer::kMaxBurst - 2, std::numeric_limits<std::uint32_t>::max()));
    case 2: case 3: return static_cast<std::uint32_t>(r.between(1, std::min<std::uint64_t>(scale * 2, 0xffffffff)));
    case 4: return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, scale / (1 + r.below(64))));
    default: return static_cast<std::uint32_t>(r.between(40, 1500));
  }
}

}  // namespace tricolor::test
