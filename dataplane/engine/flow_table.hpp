#pragma once
// The open flows of one max-flows rule on one worker (issue 27, doc/engine.md "Flows per key"): a
// fixed open-addressing table of 5-tuples, made when the rule is installed and never grown, so that a
// packet allocates nothing. One thread, the worker, reads and writes it; nobody else looks inside
// (a key's open flows are counted in its key-table entry, which readers see).
//
// Each flow remembers the incarnation of the key entry it counts against (KeyCounters::incarnation): a
// key that expired and came back starts with no flows, and a flow of its earlier life neither counts
// nor is subtracted from it.
//
// Layout: bit_ceil(max(8, 2 x capacity)) slots of 64 bytes (load <= 0.5), linear probing, deletion by
// backward shift (no tombstones). Memory: 128 B per flow of capacity at powers of two, from the
// worker's MemorySource, zeroed and resident when made.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "dataplane/engine/keys.hpp"
#include "dataplane/engine/memory_source.hpp"
#include "dataplane/engine/secret_hash.hpp"

namespace tricolor::dataplane {

class FlowTable {
 public:
  struct alignas(64) Flow {
    MeterKey key;                   // the 5-tuple (keys.hpp, KeyKind::five_tuple, whole addresses)
    std::uint64_t last = 0;         // tick of its latest packet
    std::uint64_t hash = 0;         // of `key`: the home slot when a deletion shifts it back
    std::uint32_t incarnation = 0;  // of the key entry it counts against
    std::uint32_t live = 0;         // nonzero while the slot holds a flow
  };
  static_assert(sizeof(Flow) == 64);

  static constexpr std::size_t slots_for(std::uint32_t capacity) noexcept {
    return std::bit_ceil(std::max<std::size_t>(8, 2 * std::size_t{capacity}));
  }
  static constexpr std::size_t bytes_for(std::uint32_t capacity) noexcept { return slots_for(capacity) * sizeof(Flow); }

  // capacity: most open flows; idle_ticks: a flow whose last packet is this far behind is closed.
  // nullptr if the memory cannot be had from `source` (which must outlive the table).
  static std::unique_ptr<FlowTable> make(std::uint32_t capacity, std::uint64_t idle_ticks, MemorySource& source) {
    std::unique_ptr<FlowTable> table(new (std::nothrow) FlowTable(capacity, idle_ticks, source));
    if (table == nullptr) return nullptr;
    table->slots_ = static_cast<Flow*>(source.allocate(bytes_for(capacity), alignof(Flow)));
    if (table->slots_ == nullptr) return nullptr;
    return table;
  }
  ~FlowTable() {
    if (slots_ != nullptr) source_->release(slots_, bytes_for(capacity_));
  }
  FlowTable(const FlowTable&) = delete;
  FlowTable& operator=(const FlowTable&) = delete;

  std::uint64_t hash(const MeterKey& key) const noexcept { return hash_(key); }

  // The flow of `key`, or nullptr.
  Flow* find(const MeterKey& key, std::uint64_t hash) noexcept {
    for (std::size_t pos = hash & mask_;; pos = (pos + 1) & mask_) {
      Flow& f = slots_[pos];
      if (f.live == 0) return nullptr;
      if (f.hash == hash && f.key == key) return &f;
    }
  }

  // Opens the flow of `key` (not open): nullptr if `capacity` flows are open.
  Flow* open(const MeterKey& key, std::uint64_t hash, std::uint64_t now, std::uint32_t incarnation) noexcept {
    if (live_ >= capacity_) return nullptr;
    std::size_t pos = hash & mask_;
    while (slots_[pos].live != 0) pos = (pos + 1) & mask_;
    Flow& f = slots_[pos];
    f.key = key;
    f.last = now;
    f.hash = hash;
    f.incarnation = incarnation;
    f.live = 1;
    ++live_;
    return &f;
  }

  // Closes `flow` (from find() or open()): the rest of its cluster moves back over the hole wherever
  // its home allows.
  void close(Flow& flow) noexcept {
    std::size_t hole = static_cast<std::size_t>(&flow - slots_);
    for (std::size_t pos = (hole + 1) & mask_; slots_[pos].live != 0; pos = (pos + 1) & mask_) {
      const std::size_t home = slots_[pos].hash & mask_;
      // Movable if its home is not within (hole, pos], cyclically.
      if (((pos - home) & mask_) >= ((pos - hole) & mask_)) {
        slots_[hole] = slots_[pos];
        hole = pos;
      }
    }
    slots_[hole].live = 0;
    --live_;
  }

  bool idle(const Flow& flow, std::uint64_t now) const noexcept {
    return now > flow.last && now - flow.last >= idle_;
  }

  // Examines up to `budget` slots from where the last call stopped; each idle flow is passed to
  // on_expired(const Flow&) and closed. Returns the flows closed.
  template <class OnExpired>
  std::size_t sweep(std::uint64_t now, std::size_t budget, OnExpired&& on_expired) noexcept {
    if (live_ == 0) return 0;
    std::size_t closed = 0;
    for (; budget > 0; --budget) {
      Flow& f = slots_[cursor_];
      if (f.live != 0 && idle(f, now)) {
        on_expired(static_cast<const Flow&>(f));
        close(f);  // a flow shifted into this slot is looked at next
        ++closed;
        continue;
      }
      cursor_ = (cursor_ + 1) & mask_;
    }
    return closed;
  }

  std::size_t size() const noexcept { return live_; }
  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t memory_bytes() const noexcept { return bytes_for(capacity_); }

 private:
  FlowTable(std::uint32_t capacity, std::uint64_t idle_ticks, MemorySource& source) noexcept
      : source_(&source), capacity_(capacity), idle_(idle_ticks), mask_(slots_for(capacity) - 1) {}

  MemorySource* source_;
  Flow* slots_ = nullptr;
  std::uint32_t capacity_;
  std::uint64_t idle_;
  std::size_t mask_;
  std::size_t live_ = 0;
  std::size_t cursor_ = 0;
  SecretHash<kKeySize> hash_;
};

}  // namespace tricolor::dataplane
