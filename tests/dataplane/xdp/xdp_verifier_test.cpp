// A program the kernel's verifier refuses fails to load with the verifier's reason in the error, as
// XdpProgram::load reports it (the same open options: check_object_file). The fixture,
// broken_xdp.bpf.c, is built as the production program is, twice: as written (it reads the frame's
// first byte unchecked: refused) and with the bounds check (TXDP_BOUNDS_CHECKED: accepted, so the
// refusal is the verifier's, not the build's or the loader's).
//
// Needs root (or CAP_BPF): skipped, saying why, without it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "dataplane/xdp/xdp_program.hpp"

namespace tricolor::dataplane::xdp {
namespace {

class XdpVerifier : public ::testing::Test {
 protected:
  // Once: the production program loads with the verifier's log buffer given (at log level 0: no log
  // kept when it is accepted); where it cannot load, BPF is unavailable and every test skips.
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      skip_ = "loading a BPF program needs root (or CAP_BPF): run as root";
      return;
    }
    if (auto loaded = XdpProgram::load(LoadOptions{}); !loaded) skip_ = "BPF unavailable here: " + loaded.error().message;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }
  static inline std::string skip_;
};

TEST_F(XdpVerifier, ARefusedProgramFailsWithTheVerifiersLog) {
  auto checked = check_object_file(TXDP_BROKEN_OBJECT);
  ASSERT_FALSE(checked.ok()) << "the verifier accepted a program that reads the frame unchecked";
  const std::string& message = checked.error().message;
  EXPECT_NE(message.find(TXDP_BROKEN_OBJECT), std::string::npos) << message;
  EXPECT_NE(message.find("the end of the verifier's log"), std::string::npos) << message;
  EXPECT_NE(message.find("invalid access to packet"), std::string::npos) << message;
  EXPECT_NE(message.find("processed "), std::string::npos) << "the log's last line is missing: " << message;
}

TEST_F(XdpVerifier, TheSameProgramWithItsBoundsCheckLoads) {
  auto checked = check_object_file(TXDP_CHECKED_OBJECT);
  EXPECT_TRUE(checked.ok()) << checked.error().message;
}

TEST_F(XdpVerifier, AMissingObjectSaysWhichFile) {
  auto checked = check_object_file("/nonexistent/tricolor.bpf.o");
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.error().message.find("/nonexistent/tricolor.bpf.o"), std::string::npos) << checked.error().message;
}

}  // namespace
}  // namespace tricolor::dataplane::xdp
