// tricolord's command line for the DPDK daemon (control/daemon/tricolord_options): what the workers'
// burst accepts and refuses before the EAL starts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/daemon/tricolord_options.hpp"
#include "tests/control/daemon/command_line.hpp"

namespace tricolor::control {
namespace {

TEST(DaemonOptions, BurstDefaultsToDpdksUsual) {
  const auto parsed = parse_arguments({"-l", "0,1", "--", "--policy", "p"});
  ASSERT_TRUE(parsed.options);
  EXPECT_EQ(parsed.options->burst, 32u);
  EXPECT_EQ(parsed.options->burst, dataplane::kDefaultRxBurst);
}

TEST(DaemonOptions, BurstFromOneToTheEnginesBurst) {
  for (const char* n : {"1", "17", "64"}) {
    const auto parsed = parse_arguments({"-l", "0,1", "--", "--policy", "p", "--burst", n});
    ASSERT_TRUE(parsed.options) << n;
    EXPECT_EQ(parsed.options->burst, std::stoul(n));
  }
}

TEST(DaemonOptions, BurstRefused) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--", "--policy", "p", "--burst", "0"},
           {"--", "--policy", "p", "--burst", "65"},    // beyond the engine's burst
           {"--", "--policy", "p", "--burst", "-1"},
           {"--", "--policy", "p", "--burst", "many"},
           {"--xdp", "eth1", "--policy", "p", "--burst", "8"},  // the XDP program has no burst
       }) {
    const auto parsed = parse_arguments(args);
    EXPECT_FALSE(parsed.options) << args.back();
    EXPECT_EQ(parsed.exit_status, kExitUsage) << args.back();
  }
}

}  // namespace
}  // namespace tricolor::control
