#pragma once
// Key-table memory for the engine benchmark on 2 MiB pages, as the daemon's is (DPDK's heap on
// hugetlbfs, dataplane/dpdk/dpdk_memory.hpp). The heap source maps each block by itself, so a table's
// 512 KiB chunks of entries lie on 4 KiB pages: at 1 Mi keys, 128 MiB of entries that a random key
// reaches through a page walk the daemon does not make. Here one mapping, 2 MiB aligned and advised as
// transparent huge pages (THP "madvise" or "always"), is handed out block after block; released blocks
// are not reused (a benchmark's table only grows) and the whole goes back when the arena does, after
// its engine. huge_page_share() says how much of it the kernel did put on huge pages.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "dataplane/engine/memory_source.hpp"

namespace tricolor::bench {

class HugePageArena final : public dataplane::MemorySource {
 public:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  // `bytes`: address space for every block the arena's tables will take (reserved, not committed).
  explicit HugePageArena(std::size_t bytes) noexcept {
    length_ = (bytes + kHugePage - 1) & ~(kHugePage - 1);
    const std::size_t mapped = length_ + kHugePage;
    void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return;
    map_ = static_cast<unsigned char*>(base);
    mapped_ = mapped;
    const auto start = reinterpret_cast<std::uintptr_t>(base);
    begin_ = reinterpret_cast<unsigned char*>((start + kHugePage - 1) & ~(std::uintptr_t{kHugePage} - 1));
    madvise(begin_, length_, MADV_HUGEPAGE);  // advisory: where THP is off, 4 KiB pages as the heap's
  }
  ~HugePageArena() override {
    if (map_ != nullptr) munmap(map_, mapped_);
  }
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  bool ok() const noexcept { return begin_ != nullptr; }

  void* reserve(std::size_t bytes, std::size_t align) noexcept override {
    if (begin_ == nullptr || bytes == 0 || align == 0 || align > kMaxAlign || (align & (align - 1)) != 0) return nullptr;
    const std::size_t at = (used_ + align - 1) & ~(align - 1);
    if (at > length_ || bytes > length_ - at) return nullptr;
    used_ = at + bytes;
    return begin_ + at;  // never handed out before: zero
  }
  bool commit(void* p, std::size_t bytes) noexcept override { return dataplane::commit_pages(p, bytes); }
  void release(void*, std::size_t) noexcept override {}

  // The share of the huge pages the arena's blocks touch that the kernel did make huge (0 where THP is
  // off; 1 where every block lies on 2 MiB pages).
  double huge_page_share() const noexcept {
    const std::size_t touched = (used_ + kHugePage - 1) & ~(kHugePage - 1);
    return touched == 0 ? 0 : static_cast<double>(huge_page_bytes()) / static_cast<double>(touched);
  }
  // The arena's bytes on huge pages now (its mapping's AnonHugePages in /proc/self/smaps); 0 if unknown.
  std::size_t huge_page_bytes() const noexcept {
    std::FILE* smaps = std::fopen("/proc/self/smaps", "r");
    if (smaps == nullptr) return 0;
    char line[256];
    bool ours = false;
    std::size_t kib = 0;
    while (std::fgets(line, sizeof line, smaps) != nullptr) {
      unsigned long from = 0, to = 0;
      if (std::sscanf(line, "%lx-%lx ", &from, &to) == 2) {  // a mapping's first line (no field reads so)
        ours = from <= reinterpret_cast<std::uintptr_t>(begin_) && reinterpret_cast<std::uintptr_t>(begin_) < to;
        continue;
      }
      std::size_t value = 0;
      if (ours && std::sscanf(line, "AnonHugePages: %zu kB", &value) == 1) kib += value;
    }
    std::fclose(smaps);
    return kib * 1024;
  }

 private:
  unsigned char* map_ = nullptr;
  std::size_t mapped_ = 0;
  unsigned char* begin_ = nullptr;
  std::size_t length_ = 0;
  std::size_t used_ = 0;
};

}  // namespace tricolor::bench
