// GoogleTest main for tests that use DPDK libraries: one memory-only EAL for the whole process.
#include <gtest/gtest.h>

#include <iostream>

#include "dataplane/dpdk/eal.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto eal = tricolor::dataplane::MemoryOnlyEal::init("tricolor-test");
  if (!eal) {
    std::cerr << eal.error().message << "\n";
    return 1;
  }
  return RUN_ALL_TESTS();
}
