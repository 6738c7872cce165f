// Shared by the key table's tests.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "dataplane/engine/memory_source.hpp"

namespace tricolor::dataplane::test_keys {

// Distinct keys from a number: the number in the first word, its complement in the last (a reader
// that copies a torn key sees the two disagree).
template <class Table>
typename Table::Key key_of(std::uint64_t id) {
  typename Table::Key key{};
  std::memcpy(key.data(), &id, sizeof id);
  const std::uint64_t check = ~id;
  std::memcpy(key.data() + key.size() - sizeof check, &check, sizeof check);
  return key;
}

// A table from KeyTable::make. The tests' tables are small: failing to get their memory is the test
// machine's fault, reported as such.
template <class Table>
std::unique_ptr<Table> made(std::uint32_t capacity, std::uint64_t idle_ticks, MemorySource& source = heap_memory(),
                            std::size_t spare_chunks = Table::kDefaultSpareChunks) {
  auto table = Table::make(capacity, idle_ticks, source, spare_chunks);
  if (table == nullptr) throw std::bad_alloc();
  return table;
}

// Pages of [p, p + bytes) not resident now (mincore).
inline std::size_t pages_not_resident(const void* p, std::size_t bytes) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes + page - 1) & ~(page - 1);
  std::vector<unsigned char> resident((end - begin) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, resident.data()) != 0) return resident.size();
  return static_cast<std::size_t>(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return (r & 1) == 0; }));
}

// The heap source, keeping account of what it has handed out: blocks and bytes outstanding, and
// releases of a block it did not hand out or with another size (a chunk given back twice, say). It can
// also refuse every new block (a source out of memory). Thread-safe: the control side and the test
// may be different threads.
class CountingSource final : public MemorySource {
 public:
  void* reserve(std::size_t bytes, std::size_t align) noexcept override {
    std::lock_guard lock(mutex_);
    if (refusing_ || allowed_ == 0) return nullptr;
    void* p = heap_memory().reserve(bytes, align);
    if (p != nullptr) {
      blocks_[p] = bytes;
      bytes_ += bytes;
      ++reserved_;
      if (allowed_ != kUnlimited) --allowed_;
    }
    return p;
  }
  bool commit(void* p, std::size_t bytes) noexcept override { return heap_memory().commit(p, bytes); }
  void release(void* p, std::size_t bytes) noexcept override {
    std::lock_guard lock(mutex_);
    const auto it = blocks_.find(p);
    if (it == blocks_.end() || it->second != bytes) {
      ++bad_releases_;
      return;
    }
    blocks_.erase(it);
    bytes_ -= bytes;
    heap_memory().release(p, bytes);
  }

  void refuse(bool refusing) {
    std::lock_guard lock(mutex_);
    refusing_ = refusing;
    allowed_ = kUnlimited;
  }
  // The next `blocks` blocks, then none.
  void refuse_after(std::size_t blocks) {
    std::lock_guard lock(mutex_);
    refusing_ = false;
    allowed_ = blocks;
  }
  std::size_t bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
  }
  std::size_t blocks() const {
    std::lock_guard lock(mutex_);
    return blocks_.size();
  }
  std::size_t reserved() const {  // blocks handed out, ever
    std::lock_guard lock(mutex_);
    return reserved_;
  }
  std::size_t bad_releases() const {
    std::lock_guard lock(mutex_);
    return bad_releases_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<void*, std::size_t> blocks_;
  std::size_t bytes_ = 0;
  std::size_t reserved_ = 0;
  std::size_t bad_releases_ = 0;
  bool refusing_ = false;
  static constexpr std::size_t kUnlimited = ~std::size_t{0};
  std::size_t allowed_ = kUnlimited;
};

}  // namespace tricolor::dataplane::test_keys
