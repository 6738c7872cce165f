#include "tests/allocation_probe.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>

// tests/meson.build defines TRICOLOR_ALLOCATION_PROBE in plain builds; the sanitizers' own macros are
// checked as well, in case a sanitizer comes by another way (CXXFLAGS).
#if defined(TRICOLOR_ALLOCATION_PROBE) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TRICOLOR_PROBE_INTERPOSES 1
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#undef TRICOLOR_PROBE_INTERPOSES
#endif
#endif
#endif

namespace tricolor::test {
namespace {
// The current thread's probe. Static TLS of the executable: reading it allocates nothing.
thread_local AllocationCalls* t_calls = nullptr;
}  // namespace

#ifdef TRICOLOR_PROBE_INTERPOSES
bool AllocationProbe::usable() noexcept { return true; }
const char* AllocationProbe::why_unusable() noexcept { return ""; }
#else
bool AllocationProbe::usable() noexcept { return false; }
const char* AllocationProbe::why_unusable() noexcept {
  return "the allocation probe runs in the plain build only (sanitizers interpose malloc themselves)";
}
#endif

AllocationProbe::AllocationProbe() noexcept : outer_(t_calls) { t_calls = &calls_; }
AllocationProbe::~AllocationProbe() { t_calls = outer_; }

std::string AllocationCalls::describe() const {
  std::string text;
  const auto add = [&](const char* name, std::size_t n) {
    if (n == 0) return;
    if (!text.empty()) text += ", ";
    text += name;
    text += ' ';
    text += std::to_string(n);
  };
  add("malloc", malloc);
  add("calloc", calloc);
  add("realloc", realloc);
  add("aligned", aligned);
  add("free", free);
  add("operator new", new_);
  add("operator delete", delete_);
  add("mmap", mmap);
  add("munmap", munmap);
  add("madvise", madvise);
  return text.empty() ? "none" : text;
}

#ifdef TRICOLOR_PROBE_INTERPOSES
namespace probe_detail {
template <std::size_t AllocationCalls::*Field>
inline void count() noexcept {
  if (AllocationCalls* calls = t_calls) ++(calls->*Field);
}
}  // namespace probe_detail
#endif

}  // namespace tricolor::test

#ifdef TRICOLOR_PROBE_INTERPOSES
#include <sys/syscall.h>
#include <unistd.h>

using tricolor::test::AllocationCalls;
using tricolor::test::probe_detail::count;

// glibc's allocator under its exported internal names (GLIBC_2.2.5).
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void __libc_free(void*);
void* __libc_memalign(std::size_t, std::size_t);
}

namespace {
constexpr std::size_t kPage = 4096;

void* aligned_or_null(std::size_t align, std::size_t bytes) noexcept { return __libc_memalign(align, bytes); }

// operator new: the standard's loop (new handler, then bad_alloc).
void* new_bytes(std::size_t bytes, std::size_t align) {
  if (bytes == 0) bytes = 1;
  for (;;) {
    void* p = align <= alignof(std::max_align_t) ? __libc_malloc(bytes) : __libc_memalign(align, bytes);
    if (p != nullptr) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}
void* new_bytes_nothrow(std::size_t bytes, std::size_t align) noexcept {
  try {
    return new_bytes(bytes, align);
  } catch (...) {
    return nullptr;
  }
}
}  // namespace

extern "C" {

void* malloc(std::size_t bytes) {
  count<&AllocationCalls::malloc>();
  return __libc_malloc(bytes);
}
void* calloc(std::size_t n, std::size_t size) {
  count<&AllocationCalls::calloc>();
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t bytes) {
  count<&AllocationCalls::realloc>();
  return __libc_realloc(p, bytes);
}
void free(void* p) {
  count<&AllocationCalls::free>();
  __libc_free(p);
}
void* aligned_alloc(std::size_t align, std::size_t bytes) {
  count<&AllocationCalls::aligned>();
  return aligned_or_null(align, bytes);
}
void* memalign(std::size_t align, std::size_t bytes) {
  count<&AllocationCalls::aligned>();
  return aligned_or_null(align, bytes);
}
void* valloc(std::size_t bytes) {
  count<&AllocationCalls::aligned>();
  return aligned_or_null(kPage, bytes);
}
void* pvalloc(std::size_t bytes) {
  count<&AllocationCalls::aligned>();
  return aligned_or_null(kPage, (bytes + kPage - 1) & ~(kPage - 1));
}
int posix_memalign(void** out, std::size_t align, std::size_t bytes) {
  count<&AllocationCalls::aligned>();
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
  void* p = aligned_or_null(align, bytes);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

// Both names by their symbols: with _FILE_OFFSET_BITS=64, <sys/mman.h> renames mmap to mmap64.
void* probe_mmap(void* address, std::size_t length, int protection, int flags, int fd, off_t offset)
    __asm__("mmap");
void* probe_mmap64(void* address, std::size_t length, int protection, int flags, int fd, off_t offset)
    __asm__("mmap64");
void* probe_mmap(void* address, std::size_t length, int protection, int flags, int fd, off_t offset) {
  count<&AllocationCalls::mmap>();
  return reinterpret_cast<void*>(syscall(SYS_mmap, address, length, protection, flags, fd, offset));
}
void* probe_mmap64(void* address, std::size_t length, int protection, int flags, int fd, off_t offset) {
  count<&AllocationCalls::mmap>();
  return reinterpret_cast<void*>(syscall(SYS_mmap, address, length, protection, flags, fd, offset));
}
int munmap(void* address, std::size_t length) {
  count<&AllocationCalls::munmap>();
  return static_cast<int>(syscall(SYS_munmap, address, length));
}
int madvise(void* address, std::size_t length, int advice) {
  count<&AllocationCalls::madvise>();
  return static_cast<int>(syscall(SYS_madvise, address, length, advice));
}

}  // extern "C"

// Every replaceable operator new and delete.
void* operator new(std::size_t bytes) {
  count<&AllocationCalls::new_>();
  return new_bytes(bytes, 0);
}
void* operator new[](std::size_t bytes) {
  count<&AllocationCalls::new_>();
  return new_bytes(bytes, 0);
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  count<&AllocationCalls::new_>();
  return new_bytes_nothrow(bytes, 0);
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  count<&AllocationCalls::new_>();
  return new_bytes_nothrow(bytes, 0);
}
void* operator new(std::size_t bytes, std::align_val_t align) {
  count<&AllocationCalls::new_>();
  return new_bytes(bytes, static_cast<std::size_t>(align));
}
void* operator new[](std::size_t bytes, std::align_val_t align) {
  count<&AllocationCalls::new_>();
  return new_bytes(bytes, static_cast<std::size_t>(align));
}
void* operator new(std::size_t bytes, std::align_val_t align, const std::nothrow_t&) noexcept {
  count<&AllocationCalls::new_>();
  return new_bytes_nothrow(bytes, static_cast<std::size_t>(align));
}
void* operator new[](std::size_t bytes, std::align_val_t align, const std::nothrow_t&) noexcept {
  count<&AllocationCalls::new_>();
  return new_bytes_nothrow(bytes, static_cast<std::size_t>(align));
}

namespace {
void delete_bytes(void* p) noexcept {
  count<&AllocationCalls::delete_>();
  __libc_free(p);
}
}  // namespace

void operator delete(void* p) noexcept { delete_bytes(p); }
void operator delete[](void* p) noexcept { delete_bytes(p); }
void operator delete(void* p, std::size_t) noexcept { delete_bytes(p); }
void operator delete[](void* p, std::size_t) noexcept { delete_bytes(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { delete_bytes(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { delete_bytes(p); }
void operator delete(void* p, std::align_val_t) noexcept { delete_bytes(p); }
void operator delete[](void* p, std::align_val_t) noexcept { delete_bytes(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { delete_bytes(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { delete_bytes(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { delete_bytes(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { delete_bytes(p); }

#endif  // TRICOLOR_PROBE_INTERPOSES
