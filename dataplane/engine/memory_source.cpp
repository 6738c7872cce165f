#include "dataplane/engine/memory_source.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>

namespace tricolor::dataplane {
namespace {

constexpr std::uintptr_t kPage = 4096;
constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;

std::uintptr_t round_up(std::uintptr_t x, std::uintptr_t to) noexcept { return (x + to - 1) & ~(to - 1); }

// Bounded retries of a populate that was interrupted or found a resource busy (both transient).
constexpr int kPopulateAttempts = 8;

}  // namespace

void* MemorySource::allocate(std::size_t bytes, std::size_t align) noexcept {
  void* p = reserve(bytes, align);
  if (p == nullptr) return nullptr;
  if (!commit(p, bytes)) {
    release(p, bytes);
    return nullptr;
  }
  return p;
}

bool commit_pages(void* p, std::size_t bytes) noexcept {
  if (bytes == 0) return true;
#ifdef MADV_POPULATE_WRITE
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~(kPage - 1);
  const auto end = round_up(reinterpret_cast<std::uintptr_t>(p) + bytes, kPage);
  for (int attempt = 0; attempt < kPopulateAttempts; ++attempt) {
    if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return true;
    if (errno != EINTR && errno != EAGAIN) break;
  }
  if (errno != EINVAL) return false;
#endif
  auto* bytes_of = static_cast<volatile unsigned char*>(p);
  for (std::size_t offset = 0; offset < bytes; offset += kPage) bytes_of[offset] = 0;
  bytes_of[bytes - 1] = 0;
  return true;
}

void* HeapMemory::reserve(std::size_t bytes, std::size_t align) noexcept {
  if (bytes == 0 || align == 0 || align > kMaxAlign || (align & (align - 1)) != 0) return nullptr;
  const std::uintptr_t length = round_up(bytes, kPage);
  if (length < bytes) return nullptr;  // wrapped
  const bool huge = length >= kHugePage;
  // A huge-page-aligned block: map a huge page more and unmap what lies outside the aligned range.
  const std::uintptr_t mapped = huge ? length + kHugePage : length;
  if (mapped < length) return nullptr;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  if (!huge) return base;
  const auto start = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t aligned = round_up(start, kHugePage);
  if (aligned > start) munmap(base, aligned - start);
  const std::uintptr_t tail = start + mapped - (aligned + length);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // advisory: EINVAL where THP is off
  return reinterpret_cast<void*>(aligned);
}

bool HeapMemory::commit(void* p, std::size_t bytes) noexcept { return commit_pages(p, bytes); }

void HeapMemory::release(void* p, std::size_t bytes) noexcept {
  if (p != nullptr) munmap(p, round_up(bytes, kPage));
}

MemorySource& heap_memory() noexcept {
  // Never destroyed: a table made from it may outlive the static destructors (a global's, say).
  static HeapMemory& heap = *new HeapMemory();
  return heap;
}

}  // namespace tricolor::dataplane
