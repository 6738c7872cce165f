// tricolord --xdp's command line and key-table sizing (control/daemon/tricolord_options, xdp_daemon):
// what is accepted, and what is refused before anything is loaded.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/daemon/tricolord_options.hpp"
#include "tests/control/daemon/command_line.hpp"
#include "control/daemon/xdp_daemon.hpp"
#include "control/language/language.hpp"

namespace tricolor::control {
namespace {

TEST(XdpOptions, InterfacesWithoutSeparator) {
  const auto parsed = parse_arguments({"--xdp", "eth1,eth2", "--policy", "p"});
  ASSERT_TRUE(parsed.options);
  EXPECT_EQ(parsed.options->xdp_interfaces, (std::vector<std::string>{"eth1", "eth2"}));
  EXPECT_EQ(parsed.options->xdp_mode, XdpMode::native);
  EXPECT_FALSE(parsed.options->xdp_force);
}

TEST(XdpOptions, ModeAndForce) {
  const auto parsed = parse_arguments({"--", "--xdp", "eth1", "--xdp-mode", "skb", "--xdp-force", "--policy", "p"});
  ASSERT_TRUE(parsed.options);
  EXPECT_EQ(parsed.options->xdp_mode, XdpMode::skb);
  EXPECT_TRUE(parsed.options->xdp_force);
}

TEST(XdpOptions, Refused) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--xdp", "eth1,eth1", "--policy", "p"},             // twice
           {"--xdp", "eth1,", "--policy", "p"},                 // an empty name
           {"--xdp", "a-name-of-sixteen", "--policy", "p"},     // longer than IFNAMSIZ - 1
           {"--xdp", "eth1", "--xdp-mode", "hw", "--policy", "p"},
           {"--", "--xdp-force", "--policy", "p"},              // without --xdp
           {"-l", "0,1", "--", "--xdp", "eth1", "--policy", "p"},  // EAL options
           {"--xdp", "eth1", "--pair", "0:1", "--policy", "p"},     // DPDK ports
       }) {
    const auto parsed = parse_arguments(args);
    EXPECT_FALSE(parsed.options) << args[1] << " " << args[2];
    EXPECT_EQ(parsed.exit_status, kExitUsage);
  }
}

TEST(XdpKeyBudget, FromThePolicysCapacities) {
  auto small = load("profile add p srtcm cir 1mbit cbs 8k ebs 8k\nrule add a per src capacity 100 profile p\n");
  ASSERT_TRUE(small);
  EXPECT_EQ(*xdp_key_budget(*small), kMinXdpKeys);  // at least the minimum
  auto two = load("profile add p srtcm cir 1mbit cbs 8k ebs 8k\nrule add a src 10.0.0.0/8 per src capacity 4k profile p\n"
                  "rule add b per dst capacity 2k profile p\nrule add c profile p\n");
  ASSERT_TRUE(two);
  EXPECT_EQ(*xdp_key_budget(*two), 6144u);  // added up; an aggregate rule takes none
  auto huge = load("profile add p srtcm cir 1mbit cbs 8k ebs 8k\nrule add a per src capacity 4m profile p\n"
                   "rule add b per dst capacity 1m profile p\n");
  ASSERT_TRUE(huge);
  EXPECT_FALSE(xdp_key_budget(*huge));  // beyond kMaxXdpKeys: refused, not truncated
}

}  // namespace
}  // namespace tricolor::control
