#pragma once
// Counts what the current thread asks of the allocator and of the kernel's memory calls while a probe
// is alive: malloc, calloc, realloc, free, aligned_alloc, posix_memalign, memalign, valloc, every
// operator new and delete, mmap, munmap, madvise. A test wraps a packet path in a probe and expects
// zero.
//
// How: tests/allocation_probe.cpp defines those functions in the test executable (linked whole, see
// tests/meson.build), so that every call in the process reaches them first; each counts the call if
// the calling thread has a probe, then forwards to glibc's allocator (__libc_malloc & co.) or makes
// the system call itself (syscall(2)). glibc's own internal mmap calls (malloc's) are not seen: only
// what code asks for through the public symbols.
//
// Plain builds only: ASan and TSan interpose malloc themselves, so there the functions are not
// defined and usable() is false (a test then skips, saying so).
#include <cstddef>
#include <string>

namespace tricolor::test {

struct AllocationCalls {
  std::size_t malloc = 0;
  std::size_t calloc = 0;
  std::size_t realloc = 0;
  std::size_t aligned = 0;  // aligned_alloc, posix_memalign, memalign, valloc, pvalloc
  std::size_t free = 0;
  std::size_t new_ = 0;     // every operator new and new[]
  std::size_t delete_ = 0;  // every operator delete and delete[]
  std::size_t mmap = 0;     // mmap, mmap64
  std::size_t munmap = 0;
  std::size_t madvise = 0;

  std::size_t total() const noexcept {
    return malloc + calloc + realloc + aligned + free + new_ + delete_ + mmap + munmap + madvise;
  }
  // "calloc 1, madvise 1", or "none".
  std::string describe() const;
};

class AllocationProbe {
 public:
  // Whether the functions are interposed in this build; if not, why not.
  static bool usable() noexcept;
  static const char* why_unusable() noexcept;

  // Counting starts on this thread; a probe made inside another pauses it until it goes.
  AllocationProbe() noexcept;
  ~AllocationProbe();
  AllocationProbe(const AllocationProbe&) = delete;
  AllocationProbe& operator=(const AllocationProbe&) = delete;

  // The calls so far. Reading them makes none (a copy of plain counters).
  AllocationCalls calls() const noexcept { return calls_; }

 private:
  AllocationCalls calls_;
  AllocationCalls* outer_;
};

}  // namespace tricolor::test
