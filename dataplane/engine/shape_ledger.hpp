#pragma once
// A shaping rule's bound on one worker (`red shape max-delay D queue N`, doc/engine.md "Shaping"): the
// release ticks of the packets the rule holds there (policer::ShapeQueue, a min-heap of N u64), made
// when the rule is installed from the worker's MemorySource, resident, and never grown (a live change
// to a smaller N keeps it, its limit lowered by the worker: CompiledRule::shape_queue). Only its
// worker reads and writes it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "dataplane/engine/memory_source.hpp"
#include "policer/shaping.hpp"

namespace tricolor::dataplane {

class ShapeLedger {
 public:
  static constexpr std::size_t bytes_for(std::uint32_t limit) noexcept { return std::size_t{limit} * sizeof(std::uint64_t); }

  // nullptr if the memory cannot be had from `source` (which must outlive the ledger). limit >= 1.
  static std::unique_ptr<ShapeLedger> make(std::uint32_t limit, MemorySource& source) {
    std::unique_ptr<ShapeLedger> ledger(new (std::nothrow) ShapeLedger(limit, source));
    if (ledger == nullptr) return nullptr;
    auto* storage = static_cast<std::uint64_t*>(source.allocate(bytes_for(limit), alignof(std::uint64_t)));
    if (storage == nullptr) return nullptr;
    ledger->storage_ = storage;
    ledger->queue_ = policer::ShapeQueue(storage, limit);
    return ledger;
  }
  ~ShapeLedger() {
    if (storage_ != nullptr) source_->release(storage_, bytes_for(limit_));
  }
  ShapeLedger(const ShapeLedger&) = delete;
  ShapeLedger& operator=(const ShapeLedger&) = delete;

  policer::ShapeQueue& queue() noexcept { return queue_; }
  std::uint32_t capacity() const noexcept { return limit_; }

 private:
  ShapeLedger(std::uint32_t limit, MemorySource& source) noexcept : source_(&source), limit_(limit) {}

  MemorySource* source_;
  std::uint32_t limit_;
  std::uint64_t* storage_ = nullptr;
  policer::ShapeQueue queue_;
};

}  // namespace tricolor::dataplane
