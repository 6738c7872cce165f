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
// worker's MemorySource, zeroed and resident when made, and in the same block 8 B of bucket sentinel
// per 64 flows of capacity (2 KiB at least, 512 KiB at most): bytes_for(capacity) in all.
//
// Expiry is exact where it matters (doc/engine.md): a timing wheel of deadlines, each open flow in the
// bucket of its last packet plus the timeout as it was when the flow was placed there. A packet only
// writes `last`; a flow found not idle when its bucket comes due moves on to its present deadline's
// bucket. Before a refusal, expire_due(now, exact) also drains the bucket holding `now` once its
// earliest deadline can have come, so that no flow idle at `now` is left.
#include <algorithm>
#include <array>
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
  static constexpr std::uint32_t kFlowsPerBucket = 64, kMinBuckets = 256, kMaxBuckets = 1u << 16;
  struct Link {  // a bucket's sentinel, or a flow's place in its bucket's list
    std::uint32_t prev, next;
  };

 public:
  struct alignas(64) Flow {
    MeterKey key;                   // the 5-tuple (keys.hpp, KeyKind::five_tuple, whole addresses)
    std::uint64_t last = 0;         // tick of its latest packet
    std::uint32_t tag = 0;          // kLive | the hash's low 31 bits (the home slot needs at most 25)
    std::uint32_t incarnation = 0;  // of the key entry it counts against
    std::uint32_t prev = 0, next = 0;  // its expiry bucket's list: slots, or sentinels past the slots
  };
  static_assert(sizeof(Flow) == 64);

  static constexpr std::size_t slots_for(std::uint32_t capacity) noexcept {
    return std::bit_ceil(std::max<std::size_t>(8, 2 * std::size_t{capacity}));
  }
  // Buckets of the expiry wheel (a power of two): one per 64 flows of capacity, so that a bucket holds
  // few flows when the table is full (the cost of draining the one holding `now`), within 256 .. 64 Ki.
  static constexpr std::uint32_t buckets_for(std::uint32_t capacity) noexcept {
    return std::clamp<std::uint32_t>(std::bit_ceil(capacity / kFlowsPerBucket), kMinBuckets, kMaxBuckets);
  }
  // The slots, then the buckets' sentinels and the scratch one (8 B each).
  static constexpr std::size_t bytes_for(std::uint32_t capacity) noexcept {
    return slots_for(capacity) * sizeof(Flow) + (std::size_t{buckets_for(capacity)} + 1) * sizeof(Link);
  }

  // How much of what is due expire_due() closes.
  enum class Expiry : std::uint8_t {
    whole_buckets,  // the buckets wholly at or before `now`: one comparison when none is
    exact,          // and the bucket holding `now`: no flow idle at `now` is left open
  };

  // capacity: most open flows; idle_ticks: a flow whose last packet is this far behind is closed.
  // nullptr if the memory cannot be had from `source` (which must outlive the table).
  static std::unique_ptr<FlowTable> make(std::uint32_t capacity, std::uint64_t idle_ticks, MemorySource& source) {
    std::unique_ptr<FlowTable> table(new (std::nothrow) FlowTable(capacity, idle_ticks, source));
    if (table == nullptr) return nullptr;
    table->slots_ = static_cast<Flow*>(source.allocate(bytes_for(capacity), alignof(Flow)));
    if (table->slots_ == nullptr) return nullptr;
    table->heads_ = reinterpret_cast<Link*>(table->slots_ + table->slot_count());
    for (std::uint32_t b = 0; b <= table->buckets_; ++b) table->heads_[b] = Link{table->sentinel(b), table->sentinel(b)};
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
    const std::uint32_t tag = tag_of(hash);
    for (std::size_t pos = hash & mask_;; pos = (pos + 1) & mask_) {
      Flow& f = slots_[pos];
      if (f.tag == 0) return nullptr;
      if (f.tag == tag && f.key == key) return &f;
    }
  }

  // Opens the flow of `key` (not open): nullptr if `capacity` flows are open.
  Flow* open(const MeterKey& key, std::uint64_t hash, std::uint64_t now, std::uint32_t incarnation) noexcept {
    if (live_ >= capacity_) return nullptr;
    std::size_t pos = hash & mask_;
    while (slots_[pos].tag != 0) pos = (pos + 1) & mask_;
    Flow& f = slots_[pos];
    f.key = key;
    f.last = now;
    f.tag = tag_of(hash);
    f.incarnation = incarnation;
    ++live_;
    place(static_cast<std::uint32_t>(pos));
    return &f;
  }

  // A packet of an open flow: its deadline moves on, and the flow with it when its bucket comes due
  // (lazily: no list operation per packet). A clock that steps back does not make it older.
  static void touch(Flow& flow, std::uint64_t now) noexcept { flow.last = std::max(flow.last, now); }

  // Closes `flow` (from find() or open()): out of its bucket, and the rest of its cluster moves back
  // over the hole wherever its home allows, each moved flow's neighbours told its new slot.
  void close(Flow& flow) noexcept {
    std::size_t hole = static_cast<std::size_t>(&flow - slots_);
    unlink(static_cast<std::uint32_t>(hole));
    for (std::size_t pos = (hole + 1) & mask_; slots_[pos].tag != 0; pos = (pos + 1) & mask_) {
      const std::size_t home = slots_[pos].tag & mask_;
      // Movable if its home is not within (hole, pos], cyclically.
      if (((pos - home) & mask_) >= ((pos - hole) & mask_)) {
        slots_[hole] = slots_[pos];
        next_of(slots_[hole].prev) = static_cast<std::uint32_t>(hole);
        prev_of(slots_[hole].next) = static_cast<std::uint32_t>(hole);
        hole = pos;
      }
    }
    slots_[hole].tag = 0;
    --live_;
  }

  bool idle(const Flow& flow, std::uint64_t now) const noexcept {
    return now > flow.last && now - flow.last >= idle_;
  }

  // Closes the flows due at `now` (Expiry above), passing each to on_expired(const Flow&) first; a
  // flow that had packets since it was placed goes on to the bucket of its present deadline. Returns
  // the flows closed. Each flow is handled once per deadline it had when placed, and the bucket
  // holding `now` is rescanned only once a flow in it can be due (`due_floor_`): O(1) amortized.
  template <class OnExpired>
  std::size_t expire_due(std::uint64_t now, Expiry expiry, OnExpired&& on_expired) noexcept {
    std::size_t closed = 0;
    // Buckets below `through` lie wholly at or before `now`.
    const std::uint64_t through = (now >> shift_) + ((now & (width() - 1)) == width() - 1 ? 1 : 0);
    if (through > cursor_) [[unlikely]] {
      if (through - cursor_ >= buckets_) {  // a revolution or more behind: every bucket once
        advance_to(through);
        for (std::uint32_t b = 0; b < buckets_; ++b) closed += drain(b, now, on_expired);
      } else {
        while (cursor_ < through) {
          const std::uint32_t b = bucket_index(cursor_);
          advance_to(cursor_ + 1);  // what stays goes on to later buckets
          closed += drain(b, now, on_expired);
        }
      }
    }
    if (expiry == Expiry::exact && due_floor_ <= now) [[unlikely]] {
      due_floor_ = UINT64_MAX;  // drain() lowers it again to the earliest deadline it keeps there
      closed += drain(bucket_index(cursor_), now, on_expired);
    }
    return closed;
  }

  std::size_t size() const noexcept { return live_; }
  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t memory_bytes() const noexcept { return bytes_for(capacity_); }

  // For the tests: whether every open flow is in exactly one bucket list, the lists are well linked,
  // and no flow sits in a bucket after its deadline's (nor below the cursor).
  bool consistent() const noexcept {
    if (heads_[scratch()].next != sentinel(scratch())) return false;
    std::size_t seen = 0;
    for (std::uint32_t b = 0; b < buckets_; ++b) {
      const std::uint32_t head = sentinel(b);
      const std::uint64_t absolute = cursor_ + ((b - bucket_index(cursor_)) & (buckets_ - 1));
      for (std::uint32_t i = link(head).next, before = head; i != head; before = i, i = link(i).next) {
        if (i >= slot_count() || slots_[i].tag == 0 || slots_[i].prev != before) return false;
        const std::uint64_t due = slots_[i].last + idle_;
        if (absolute == cursor_ ? due < due_floor_ : (due >> shift_) < absolute) return false;
        if (++seen > live_) return false;
      }
    }
    return seen == live_;
  }

 private:
  static constexpr std::uint32_t kLive = 1u << 31;
  static_assert(kMaxFlowCapacity <= (1u << 30), "a home slot in the tag's low 31 bits");
  FlowTable(std::uint32_t capacity, std::uint64_t idle_ticks, MemorySource& source) noexcept
      : source_(&source), capacity_(capacity), idle_(idle_ticks), mask_(slots_for(capacity) - 1),
        buckets_(buckets_for(capacity)),
        // Buckets of 2^shift_ ticks, (buckets_ - 1) of them longer than the timeout: any deadline a
        // flow can have (its last packet plus the timeout) lies within one revolution of the cursor.
        shift_(static_cast<unsigned>(std::bit_width(idle_ticks / (buckets_ - 1)))) {}

  static std::uint32_t tag_of(std::uint64_t hash) noexcept { return kLive | static_cast<std::uint32_t>(hash & ~kLive); }
  std::uint64_t width() const noexcept { return std::uint64_t{1} << shift_; }
  std::uint32_t slot_count() const noexcept { return static_cast<std::uint32_t>(mask_ + 1); }
  std::uint32_t sentinel(std::uint32_t bucket) const noexcept { return slot_count() + bucket; }
  std::uint32_t scratch() const noexcept { return buckets_; }  // the sentinel of a bucket being drained
  std::uint32_t bucket_index(std::uint64_t absolute) const noexcept {
    return static_cast<std::uint32_t>(absolute & (buckets_ - 1));
  }
  Link link(std::uint32_t i) const noexcept {
    return i < slot_count() ? Link{slots_[i].prev, slots_[i].next} : heads_[i - slot_count()];
  }
  std::uint32_t& next_of(std::uint32_t i) noexcept { return i < slot_count() ? slots_[i].next : heads_[i - slot_count()].next; }
  std::uint32_t& prev_of(std::uint32_t i) noexcept { return i < slot_count() ? slots_[i].prev : heads_[i - slot_count()].prev; }

  void unlink(std::uint32_t i) noexcept {
    const Flow& f = slots_[i];
    next_of(f.prev) = f.next;
    prev_of(f.next) = f.prev;
  }
  void push(std::uint32_t head, std::uint32_t i) noexcept {
    Flow& f = slots_[i];
    f.prev = head;
    f.next = next_of(head);
    prev_of(f.next) = i;
    next_of(head) = i;
  }

  // The cursor moves on to `absolute`, whose bucket has not been drained: its deadlines are at least
  // its start (a flow is never placed after its deadline's bucket, and a deadline only grows).
  void advance_to(std::uint64_t absolute) noexcept {
    cursor_ = absolute;
    due_floor_ = absolute << shift_;
  }

  // Into the bucket of its deadline, within [cursor, cursor + buckets_): a deadline past that window
  // (a clock stepping back) goes early, to be placed again; one behind the cursor goes to the
  // cursor's bucket, whose floor it lowers.
  void place(std::uint32_t i) noexcept {
    const std::uint64_t due = slots_[i].last + idle_;
    const std::uint64_t absolute = std::clamp(due >> shift_, cursor_, cursor_ + buckets_ - 1);
    if (absolute == cursor_) due_floor_ = std::min(due_floor_, due);
    push(sentinel(bucket_index(absolute)), i);
  }

  // Every flow of bucket `b`: closed if idle at `now`, else placed again (never into the list being
  // walked: the bucket's list is moved to the scratch sentinel first, and walked from its head).
  template <class OnExpired>
  std::size_t drain(std::uint32_t b, std::uint64_t now, OnExpired& on_expired) noexcept {
    Link& from = heads_[b];
    const std::uint32_t head = sentinel(b), scratch = sentinel(this->scratch());
    if (from.next == head) return 0;
    heads_[this->scratch()] = from;
    prev_of(from.next) = scratch;
    next_of(from.prev) = scratch;
    from = Link{head, head};
    std::size_t closed = 0;
    for (std::uint32_t i; (i = heads_[this->scratch()].next) != scratch;) {
      Flow& f = slots_[i];
      if (idle(f, now)) {
        on_expired(static_cast<const Flow&>(f));
        close(f);  // may move other flows of the scratch list: their links follow
        ++closed;
      } else {
        unlink(i);
        place(i);
      }
    }
    return closed;
  }

  MemorySource* source_;
  Flow* slots_ = nullptr;
  std::uint32_t capacity_;
  std::uint64_t idle_;
  std::size_t mask_;
  std::size_t live_ = 0;
  std::uint32_t buckets_;
  unsigned shift_;
  std::uint64_t cursor_ = 0;      // the earliest bucket not yet drained whole (absolute: tick >> shift_)
  std::uint64_t due_floor_ = 0;   // no flow in the cursor's bucket is due before this tick
  Link* heads_ = nullptr;  // the buckets' sentinels, then the scratch one: after the slots, in their block
  SecretHash<kKeySize> hash_;
};

}  // namespace tricolor::dataplane
