// The sweep's decision (dataplane/xdp/xdp_sweep.hpp): a key is deleted only when idle past its rule's
// timeout and the margin; never without a timeout, never when checked after the sweep read the clock.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "dataplane/xdp/xdp_sweep.hpp"

namespace tricolor::dataplane::xdp {
namespace {

constexpr std::uint64_t kTimeout = 5'000'000'000;  // 5 s
constexpr std::uint64_t kLast = 100'000'000'000;

TEST(XdpSweep, IdlePastTimeoutAndMargin) {
  EXPECT_FALSE(sweep_due(kLast, kLast + kTimeout - 1, kTimeout));                      // not idle long enough
  EXPECT_FALSE(sweep_due(kLast, kLast + kTimeout, kTimeout));                          // expired: renewed in place
  EXPECT_FALSE(sweep_due(kLast, kLast + kTimeout + kSweepMarginTicks - 1, kTimeout));  // within the margin
  EXPECT_TRUE(sweep_due(kLast, kLast + kTimeout + kSweepMarginTicks, kTimeout));
  EXPECT_TRUE(sweep_due(kLast, std::numeric_limits<std::uint64_t>::max(), kTimeout));  // no overflow
}

TEST(XdpSweep, Keeps) {
  EXPECT_FALSE(sweep_due(kLast, kLast + 1000 * kTimeout, 0));  // the rule has no timeout
  EXPECT_FALSE(sweep_due(kLast, kLast - 1, kTimeout));         // checked after `now` was read
  EXPECT_FALSE(sweep_due(kLast, kLast, kTimeout));
}

TEST(XdpSweep, Margin) {
  EXPECT_TRUE(sweep_due(0, kTimeout, kTimeout, 0));
  EXPECT_FALSE(sweep_due(0, kTimeout + 9, kTimeout, 10));
  EXPECT_TRUE(sweep_due(0, kTimeout + 10, kTimeout, 10));
}

}  // namespace
}  // namespace tricolor::dataplane::xdp
