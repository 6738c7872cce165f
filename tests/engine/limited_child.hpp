#pragma once
// Memory-exhaustion tests run their code in a forked child under an address-space limit
// (RLIMIT_AS), so that a regression ends the child (an uncaught std::bad_alloc aborts it) or fails
// an allocation instead of swapping the machine. The child reports a line of text through a pipe.
//
// Sanitizers reserve terabytes of address space for their shadow memory, so the limit cannot be set
// under them: such tests skip themselves there (see kAddressSpaceLimitUsable) and run in the plain
// build only.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <string>

namespace tricolor::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kAddressSpaceLimitUsable = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kAddressSpaceLimitUsable = false;
#else
inline constexpr bool kAddressSpaceLimitUsable = true;
#endif
#else
inline constexpr bool kAddressSpaceLimitUsable = true;
#endif

inline constexpr const char* kNoLimitUnderSanitizers =
    "an address-space limit cannot be set under a sanitizer (its shadow memory reserves terabytes); "
    "this test runs in the plain build";

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

inline constexpr int kThrew = 5;  // the child's exit status when fn threw

struct ChildOutcome {
  bool exited = false;  // returned normally (else killed by a signal, e.g. an abort)
  int status = 0;       // exit status, or the signal
  std::string text;     // what the child's function returned
};

// Runs fn in a forked child whose address space may grow by at most `headroom` bytes beyond the
// parent's at the fork. The child exits right after fn (no destructors, no test framework teardown),
// with status 0, or kThrew if fn threw (where a program would have aborted).
inline ChildOutcome run_with_address_space_limit(std::size_t headroom, const std::function<std::string()>& fn) {
  ChildOutcome outcome;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return outcome;
  const std::size_t limit = address_space_bytes() + headroom;
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    const rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    // Whatever fn throws ends the child here, never in the test framework's copy in this process
    // (which would go on running the other tests).
    std::string text;
    int status = 0;
    try {
      text = fn();
    } catch (const std::exception& e) {
      text = std::string("uncaught exception: ") + e.what();
      status = kThrew;
    } catch (...) {
      text = "uncaught exception";
      status = kThrew;
    }
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = write(pipe_fds[1], text.data() + done, text.size() - done);
      if (n <= 0) _exit(4);
      done += static_cast<std::size_t>(n);
    }
    _exit(status);
  }
  close(pipe_fds[1]);
  if (pid < 0) {
    close(pipe_fds[0]);
    return outcome;
  }
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) outcome.text.append(buffer, static_cast<std::size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  outcome.exited = WIFEXITED(status);
  outcome.status = outcome.exited ? WEXITSTATUS(status) : WTERMSIG(status);
  return outcome;
}

}  // namespace tricolor::test
