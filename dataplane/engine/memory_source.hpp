#pragma once
// Where a key table's memory comes from (dataplane/engine/key_table.hpp): its index and bookkeeping when the
// rule is installed, and its chunks of entries when the control side tops up the table's ready pool.
// Only the control side calls a source, never the packet path: a virtual call per block is nothing
// beside committing the block's pages.
//
// A block is zeroed and aligned. allocate() returns it committed: every page resident now, so that no
// packet later pays a page fault and a shortage shows when the block is asked for, not at some later
// write. reserve() and commit() are allocate() in two steps, for a caller that must learn that all of
// several large blocks can be had before it commits any (committing a 4 GiB index takes seconds).
//
// Sources: HeapMemory (below: the process's own memory, for tricolor-replay and the tests) and
// DpdkMemory (dataplane/dpdk/dpdk_memory.hpp: DPDK's heap on a NUMA socket, for the daemon).
#include <cstddef>

namespace tricolor::dataplane {

class MemorySource {
 public:
  // The largest alignment a source honours: a page.
  static constexpr std::size_t kMaxAlign = 4096;

  virtual ~MemorySource() = default;

  // `bytes` (> 0) of zeroed memory aligned to `align` (a power of two, at most kMaxAlign), every page
  // committed; nullptr if the memory or its pages cannot be had.
  void* allocate(std::size_t bytes, std::size_t align) noexcept;

  // Zeroed memory whose pages may come only as they are first written; nullptr if it cannot be had.
  virtual void* reserve(std::size_t bytes, std::size_t align) noexcept = 0;
  // Commits the pages of [p, p + bytes), part of a block from reserve(); false if they cannot be had
  // (the block stays reserved: release it). Idempotent.
  virtual bool commit(void* p, std::size_t bytes) noexcept = 0;
  // Gives back a block from reserve() or allocate(), with the size it was asked for.
  virtual void release(void* p, std::size_t bytes) noexcept = 0;

 protected:
  MemorySource() = default;
  MemorySource(const MemorySource&) = default;
  MemorySource& operator=(const MemorySource&) = default;
};

// Anonymous pages from the kernel (mmap), as malloc gives large blocks, but with no allocator between:
// the pages are zero when mapped, committed by commit(), and unmapped by release(). Blocks of 2 MiB
// or more are aligned to 2 MiB and advised as transparent huge pages (a random probe of a large index
// then costs no page walk; ignored where THP is off), before they are committed.
class HeapMemory final : public MemorySource {
 public:
  void* reserve(std::size_t bytes, std::size_t align) noexcept override;
  bool commit(void* p, std::size_t bytes) noexcept override;
  void release(void* p, std::size_t bytes) noexcept override;
};

// The process's HeapMemory (it has no state): KeyTable's default source.
MemorySource& heap_memory() noexcept;

// Makes the whole pages that [p, p + bytes) touches resident, or says that it could not. Linux 5.14+
// MADV_POPULATE_WRITE faults them in as if written and reports ENOMEM (populating writes nothing, so
// pages shared with a neighbour block are safe); where it is not supported (EINVAL), each page of the
// range is written instead (the range is ours and zero: a zero is written back). For any source whose
// memory is mapped in this process.
bool commit_pages(void* p, std::size_t bytes) noexcept;

}  // namespace tricolor::dataplane
