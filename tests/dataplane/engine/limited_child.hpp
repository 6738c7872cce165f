#pragma once
// Memory-exhaustion tests run their code in a child process under an address-space limit
// (RLIMIT_AS), so that a regression ends the child (an uncaught std::bad_alloc, where a program would
// abort) or fails an allocation instead of swapping the machine.
//
// The child is a fresh process, not a plain fork: with --no-huge, DPDK's heap is a shared memfd
// mapping while its bookkeeping (heap lists, tailqs) lives in each process's own memory, so a forked
// child that allocated from it would corrupt its parent's heap. A GoogleTest death test in the
// "threadsafe" style re-executes the test binary for the one test, which starts its own EAL; the
// test's body runs again up to the death test, whose statement sets the limit and runs the code:
//
//   EXPECT_EXIT(test::run_under_address_space_limit(headroom, fn, check), testing::ExitedWithCode(0), "");
//
// fn returns a text (an error message, say), check says whether it is the expected one; the child
// prints the text (shown by GoogleTest when the test fails) and exits 0 if check passed, 1 if not,
// kThrew if fn threw.
//
// Sanitizers reserve terabytes of address space for their shadow memory, so the limit cannot be set
// under them: such tests skip themselves there (kAddressSpaceLimitUsable) and run in the plain build
// only.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <string>

namespace tricolor::test {

// Built with a sanitizer that keeps shadow memory (ASan, TSan, MSan).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerShadow = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kSanitizerShadow = true;
#else
inline constexpr bool kSanitizerShadow = false;
#endif
#else
inline constexpr bool kSanitizerShadow = false;
#endif
inline constexpr bool kAddressSpaceLimitUsable = !kSanitizerShadow;

inline constexpr const char* kNoLimitUnderSanitizers =
    "an address-space limit cannot be set under a sanitizer (its shadow memory reserves terabytes); "
    "this test runs in the plain build";

inline constexpr int kThrew = 5;  // the child's exit status when fn threw

// The process's address space now (VmSize), in bytes; 0 if unknown.
inline std::size_t address_space_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      std::size_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(4096, '\n');
  }
  return 0;
}

// The death test's statement: in the child, with an address space that may grow by at most
// `headroom` bytes beyond what it has now, runs fn and exits (see above). Call it within EXPECT_EXIT
// after selecting the threadsafe style (use_fresh_child_processes()).
[[noreturn]] inline void run_under_address_space_limit(std::size_t headroom, const std::function<std::string()>& fn,
                                                       const std::function<bool(const std::string&)>& check) {
  const std::size_t limit = address_space_bytes() + headroom;
  const rlimit rl{limit, limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) {
    std::fprintf(stderr, "setrlimit(RLIMIT_AS) failed\n");
    std::_Exit(3);
  }
  std::string text;
  int status = 0;
  try {
    text = fn();
    status = check(text) ? 0 : 1;
  } catch (const std::exception& e) {
    text = std::string("uncaught exception: ") + e.what();
    status = kThrew;
  } catch (...) {
    text = "uncaught exception";
    status = kThrew;
  }
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
  std::_Exit(status);
}

// Death tests in this test re-execute the binary (its own EAL) rather than fork it.
inline void use_fresh_child_processes() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }

}  // namespace tricolor::test
