// A cluster meter's local end (policer/cluster_lease.hpp): green passes exactly on leased tokens, from
// several threads at once; the fallback modes; a new share keeps the local meter's level.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include "policer/cluster_lease.hpp"
#include "tests/policer/meter_test_support.hpp"

namespace tricolor::test {
namespace {

using policer::ClusterLease;
using policer::ClusterMode;

constexpr std::uint64_t kHz = 1'000'000'000;

Profile share_profile(Unit unit, std::uint64_t cir, std::uint64_t cbs) {
  return Profile::make(Params{.algorithm = Algorithm::one_rate_two_color, .unit = unit, .cir = cir, .cbs = cbs},
                       TickRate::make(kHz).value())
      .value();
}

TEST(ClusterLease, GreenPassesExactlyOnLeasedTokensAndOnlyGreenTakesThem) {
  const Profile share = share_profile(Unit::bytes, 1000, 100);
  ClusterLease lease(share, 1, ClusterMode::leased);
  std::vector<std::uint64_t> times(4, 0);
  std::vector<std::uint32_t> lengths{100, 100, 100, 100};
  std::vector<Color> colors(4, Color::green);
  lease.gate(share, 1, times, lengths, colors);  // nothing leased yet
  EXPECT_EQ(colors, std::vector<Color>(4, Color::red));

  lease.grant(250);
  colors = {Color::green, Color::yellow, Color::green, Color::green};
  lease.gate(share, 1, times, lengths, colors);
  EXPECT_EQ(colors, (std::vector<Color>{Color::green, Color::yellow, Color::green, Color::red}));
  EXPECT_EQ(lease.spent(), 200u);
  EXPECT_EQ(lease.balance(), 50u);
  EXPECT_EQ(lease.passed(), 2u);
  EXPECT_EQ(lease.refused(), 5u);
  // A smaller packet still fits what is left; the balance never goes below zero.
  lengths = {50, 1};
  colors = {Color::green, Color::green};
  lease.gate(share, 1, std::span(times).first(2), lengths, colors);
  EXPECT_EQ(colors, (std::vector<Color>{Color::green, Color::red}));
  EXPECT_EQ(lease.balance(), 0u);
}

TEST(ClusterLease, PacketModeCostsOneTokenAPacket) {
  const Profile share = share_profile(Unit::packets, 10, 5);
  ClusterLease lease(share, 1, ClusterMode::leased);
  lease.grant(3);
  std::vector<std::uint64_t> times(5, 0);
  std::vector<std::uint32_t> lengths{1500, 64, 9000, 64, 64};
  std::vector<Color> colors(5, Color::green);
  lease.gate(share, 1, times, lengths, colors);
  EXPECT_EQ(colors, (std::vector<Color>{Color::green, Color::green, Color::green, Color::red, Color::red}));
}

// Several workers spending one lease while the lease side grants: exactly the granted tokens pass,
// whatever the interleaving, and no grant is lost.
TEST(ClusterLease, ThreadsSpendExactlyWhatIsGranted) {
  const Profile share = share_profile(Unit::bytes, 1000, 100);
  ClusterLease lease(share, 1, ClusterMode::leased);
  constexpr unsigned kThreads = 3;
  constexpr std::uint64_t kGrants = 2000, kGrant = 77;
  std::atomic<bool> granting{true};
  std::atomic<std::uint64_t> passed_bytes{0};
  std::latch start(kThreads + 1);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < kThreads; ++t) {
    workers.emplace_back([&] {
      start.arrive_and_wait();
      std::vector<std::uint64_t> times(8, 0);
      std::vector<std::uint32_t> lengths{10, 20, 30, 40, 10, 20, 30, 40};
      std::uint64_t mine = 0;
      for (;;) {
        const bool last_round = !granting.load();
        std::vector<Color> colors(8, Color::green);
        lease.gate(share, 1, times, lengths, colors);
        for (std::size_t i = 0; i < colors.size(); ++i)
          if (colors[i] == Color::green) mine += lengths[i];
        if (last_round) break;
      }
      passed_bytes += mine;
    });
  }
  start.arrive_and_wait();
  for (std::uint64_t g = 0; g < kGrants; ++g) lease.grant(kGrant);
  granting = false;
  for (auto& w : workers) w.join();
  // Drain what a 10-byte packet can still take.
  std::vector<std::uint64_t> times(1, 0);
  std::vector<std::uint32_t> ten{10};
  for (;;) {
    std::vector<Color> c{Color::green};
    lease.gate(share, 1, times, ten, c);
    if (c[0] != Color::green) break;
    passed_bytes += 10;
  }
  EXPECT_EQ(lease.granted(), kGrants * kGrant);
  EXPECT_EQ(lease.spent(), passed_bytes.load());
  EXPECT_LT(lease.balance(), 10u);
  EXPECT_EQ(passed_bytes.load() + lease.balance(), kGrants * kGrant);
}

TEST(ClusterLease, FallbackModes) {
  const Profile share = share_profile(Unit::bytes, 1000, 300);  // 300 bytes of burst, 1000 bytes/s
  ClusterLease lease(share, 1, ClusterMode::share);
  std::vector<std::uint64_t> times{0, 0, 0, 0};
  std::vector<std::uint32_t> lengths{100, 100, 100, 100};
  std::vector<Color> colors(4, Color::green);
  lease.gate(share, 1, times, lengths, colors);  // the local meter: CBS 300, full at the start
  EXPECT_EQ(colors, (std::vector<Color>{Color::green, Color::green, Color::green, Color::red}));
  // 100 ms later: 100 bytes earned.
  times.assign(2, 100'000'000);
  colors.assign(2, Color::green);
  lease.gate(share, 1, times, std::span(lengths).first(2), colors);
  EXPECT_EQ(colors, (std::vector<Color>{Color::green, Color::red}));
  EXPECT_EQ(lease.fallback_packets(), 6u);
  EXPECT_EQ(lease.spent(), 0u);  // the share spends no leased token

  lease.set_mode(ClusterMode::open);
  colors.assign(4, Color::green);
  lease.gate(share, 1, std::vector<std::uint64_t>(4, 100'000'000), lengths, colors);
  EXPECT_EQ(colors, std::vector<Color>(4, Color::green));
  lease.set_mode(ClusterMode::closed);
  colors = {Color::green, Color::yellow, Color::green, Color::red};
  lease.gate(share, 1, std::vector<std::uint64_t>(4, 100'000'000), lengths, colors);
  EXPECT_EQ(colors, (std::vector<Color>{Color::red, Color::yellow, Color::red, Color::red}));
}

// A new share (a rate change, or other boxes expected) reaches the local meter at the first burst of
// its generation and keeps the bucket's level, as any live change of a 1R2C meter does.
TEST(ClusterLease, ANewShareKeepsTheLocalLevel) {
  const Profile slow = share_profile(Unit::bytes, 1000, 300);
  const Profile fast = share_profile(Unit::bytes, 100'000, 300);
  ClusterLease lease(slow, 1, ClusterMode::share);
  std::vector<std::uint64_t> times{0, 0, 0};
  std::vector<std::uint32_t> lengths{100, 100, 100};
  std::vector<Color> colors(3, Color::green);
  lease.gate(slow, 1, times, lengths, colors);  // empties the bucket
  EXPECT_EQ(lease.passed(), 3u);
  // The fast share arrives with a burst at 1 ms: 1 byte earned until then at the old rate, so red; the
  // bucket is not refilled by the change.
  times.assign(1, 1'000'000);
  colors.assign(1, Color::green);
  lease.gate(fast, 2, times, std::span(lengths).first(1), colors);
  EXPECT_EQ(colors[0], Color::red);
  // 1 ms on at the new rate: 1 + 100 bytes, one packet of 100.
  times.assign(2, 2'000'000);
  colors.assign(2, Color::green);
  lease.gate(fast, 2, times, std::span(lengths).first(2), colors);
  EXPECT_EQ(colors, (std::vector<Color>{Color::green, Color::red}));
}

}  // namespace
}  // namespace tricolor::test
