#pragma once
// A worker's timing wheel for shaping (issue 27): the packets a shaping rule holds, each until its
// release tick. A template over the held item (the daemon's mbuf pointers; ints in the tests), no
// DPDK in it.
//
// Slots are a power of two, each a power of two of ticks wide (about a microsecond), so that a tick's
// slot is a shift and a mask: no division per item. The wheel spans the longest delay plus two slots,
// so that an item's slot never wraps onto an earlier one's. Entries come from a node pool of fixed
// capacity, allocated once (u32 indexes, a free list); a slot is a FIFO list of them. A bitmap of the
// slots that hold something lets a drain skip empty slots 64 at a time, and an empty wheel costs one
// comparison. The slot array is left untouched until a slot is used (its bitmap bit says whether its
// head and tail mean anything): the pages a worker never shapes into are never written.
//
// Exact release: drain(now) takes every item whose tick is <= now, not one slot late, because a packet
// of the same flow that conforms at `now` leaves at once and must not overtake a held one released at
// an earlier tick. Whole slots before now's slot leave as they are; in now's slot, items are taken
// from the head while due when the slot's ticks were inserted in order (the usual case: one flow, or
// flows of similar delay), and the slot is searched when they were not.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <span>

namespace tricolor::dataplane {

// A wheel's shape: slots of 2^slot_shift ticks, 2^slot_bits of them.
struct WheelGeometry {
  unsigned slot_shift = 0;
  unsigned slot_bits = 0;

  // For a clock of tick_hz: slots of about a microsecond (the power of two of ticks nearest to one),
  // spanning max_delay_ns plus two slots. Computed once, at startup (divisions are fine here).
  static WheelGeometry for_clock(std::uint64_t tick_hz, std::uint64_t max_delay_ns) noexcept {
    const std::uint64_t per_us = tick_hz >= 1'000'000 ? tick_hz / 1'000'000 : 1;
    WheelGeometry g;
    g.slot_shift = static_cast<unsigned>(std::bit_width(per_us) - 1);  // 2^shift <= per_us < 2^(shift+1)
    const std::uint64_t low = std::uint64_t{1} << g.slot_shift;
    if (per_us * per_us > low * low * 2) ++g.slot_shift;  // the nearer of the two, by ratio
    const std::uint64_t width = std::uint64_t{1} << g.slot_shift;
    const auto delay_ticks =
        static_cast<std::uint64_t>((static_cast<unsigned __int128>(max_delay_ns) * tick_hz + 999'999'999) / 1'000'000'000);
    const std::uint64_t slots = (delay_ticks + width - 1) / width + 2;
    g.slot_bits = static_cast<unsigned>(std::bit_width(slots - 1));  // the power of two >= slots (at least 64)
    return g;
  }
};

template <typename T>
class TimingWheel {
 public:
  // capacity: items held at once (refused beyond); geometry: its slots.
  TimingWheel(std::uint32_t capacity, WheelGeometry geometry)
      : shift_(geometry.slot_shift),
        slot_count_(std::uint64_t{1} << std::max(geometry.slot_bits, kMinSlotBits)),
        mask_(slot_count_ - 1),
        capacity_(capacity),
        nodes_(std::make_unique<Node[]>(capacity)),
        slots_(std::make_unique_for_overwrite<Slot[]>(slot_count_)),
        occupied_(std::make_unique<std::uint64_t[]>(words())),
        disordered_(std::make_unique<std::uint64_t[]>(words())) {
    for (std::uint32_t i = 0; i < capacity; ++i) nodes_[i].next = i + 1 < capacity ? i + 1 : kNone;
    free_ = capacity != 0 ? 0 : kNone;
  }
  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;

  // Holds `item` until `release` (a tick). False, and the item not taken, when the wheel is full or
  // when release lies beyond the span from the oldest slot still held (a clock that jumped while items
  // were held; the caller drains before inserting, so a sane clock never meets it). A release already
  // past goes into the oldest slot: out at the next drain.
  bool insert(std::uint64_t release, T item) noexcept {
    if (free_ == kNone) return false;
    std::uint64_t slot = release >> shift_;
    if (size_ == 0) {
      if (slot >= cursor_ + slot_count_) cursor_ = slot - (slot_count_ - 1);  // catch up: nothing held to skip
    } else if (slot >= cursor_ + slot_count_) {
      return false;
    }
    if (slot < cursor_) slot = cursor_;
    const std::uint32_t n = free_;
    free_ = nodes_[n].next;
    nodes_[n] = {release, kNone, item};
    const std::uint64_t at = slot & mask_;
    if (!test(occupied_.get(), at)) {
      set(occupied_.get(), at);
      clear(disordered_.get(), at);
      slots_[at] = {n, n};
    } else {
      Slot& s = slots_[at];
      if (release < nodes_[s.tail].release) set(disordered_.get(), at);
      nodes_[s.tail].next = n;
      s.tail = n;
    }
    ++size_;
    return true;
  }

  // Moves into `out`, in slot order and FIFO within a slot, items whose release tick is <= now; up to
  // out.size() of them (call again while it fills `out`). Returns how many.
  std::size_t drain(std::uint64_t now, std::span<T> out) noexcept {
    const std::uint64_t now_slot = now >> shift_;
    if (size_ == 0) {  // nothing held: the cursor jumps
      if (now_slot > cursor_) cursor_ = now_slot;
      return 0;
    }
    std::size_t taken = 0;
    while (taken < out.size() && size_ != 0) {
      std::uint64_t slot;
      if (now_slot < cursor_ || !next_occupied(now_slot - cursor_, slot)) {
        if (now_slot > cursor_) cursor_ = now_slot;  // every slot before now's is empty
        break;
      }
      cursor_ = slot;
      const std::uint64_t at = slot & mask_;
      if (slot < now_slot) {  // wholly past: all of it is due
        taken += take_head(at, out.subspan(taken), UINT64_MAX);
      } else if (!test(disordered_.get(), at)) {  // now's slot, in tick order: due ones are at the head
        taken += take_head(at, out.subspan(taken), now);
        break;
      } else {
        taken += take_due(at, out.subspan(taken), now);
        break;
      }
      if (test(occupied_.get(), at)) break;  // `out` is full
    }
    return taken;
  }

  // Moves into `out` up to out.size() items whatever their tick, in slot order (at the stop: nothing
  // is left held). Returns how many; 0 once the wheel is empty.
  std::size_t take_all(std::span<T> out) noexcept {
    std::size_t taken = 0;
    std::uint64_t slot;
    while (taken < out.size() && size_ != 0 && next_occupied(slot_count_ - 1, slot)) {
      cursor_ = slot;
      taken += take_head(slot & mask_, out.subspan(taken), UINT64_MAX);
    }
    return taken;
  }

  std::uint32_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::uint32_t capacity() const noexcept { return capacity_; }
  std::uint64_t slot_ticks() const noexcept { return std::uint64_t{1} << shift_; }
  std::uint64_t slots() const noexcept { return slot_count_; }
  // The oldest slot (absolute: tick >> shift) a drain looks at next: after a drain of an empty wheel,
  // now's slot (the cursor jumped; nothing was scanned).
  std::uint64_t cursor_slot() const noexcept { return cursor_; }

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  static constexpr unsigned kMinSlotBits = 6;  // a bitmap word never straddles the wrap
  struct Node {
    std::uint64_t release;
    std::uint32_t next;  // in its slot's list, or in the free list
    T item;
  };
  struct Slot {
    std::uint32_t head, tail;
  };

  std::uint64_t words() const noexcept { return (slot_count_ + 63) / 64; }
  static bool test(const std::uint64_t* bits, std::uint64_t i) noexcept { return (bits[i >> 6] >> (i & 63)) & 1; }
  static void set(std::uint64_t* bits, std::uint64_t i) noexcept { bits[i >> 6] |= std::uint64_t{1} << (i & 63); }
  static void clear(std::uint64_t* bits, std::uint64_t i) noexcept { bits[i >> 6] &= ~(std::uint64_t{1} << (i & 63)); }

  // The first slot holding something among cursor_ .. cursor_ + distance (capped at one lap), as an
  // absolute slot number.
  bool next_occupied(std::uint64_t distance, std::uint64_t& found) const noexcept {
    if (distance >= slot_count_) distance = slot_count_ - 1;
    std::uint64_t from = cursor_;
    const std::uint64_t last = cursor_ + distance;
    while (from <= last) {
      const std::uint64_t at = from & mask_;
      const std::uint64_t bits = occupied_[at >> 6] >> (at & 63);  // this word, from `at` on
      if (bits != 0) {
        const std::uint64_t slot = from + static_cast<unsigned>(std::countr_zero(bits));
        if (slot > last) return false;
        found = slot;
        return true;
      }
      from += 64 - (at & 63);  // the next word (slot_count_ is a power of two: a word never straddles the wrap)
    }
    return false;
  }

  void release_node(std::uint32_t n) noexcept {
    nodes_[n].next = free_;
    free_ = n;
    --size_;
  }

  // From the head of slot `at`, the items due by `now` (all when now is UINT64_MAX), up to out.size().
  std::size_t take_head(std::uint64_t at, std::span<T> out, std::uint64_t now) noexcept {
    Slot& s = slots_[at];
    std::size_t taken = 0;
    std::uint32_t n = s.head;
    while (taken < out.size() && n != kNone && nodes_[n].release <= now) {
      const std::uint32_t next = nodes_[n].next;
      out[taken++] = nodes_[n].item;
      release_node(n);
      n = next;
    }
    if (n == kNone) clear(occupied_.get(), at);
    else s.head = n;
    return taken;
  }

  // Slot `at`, whose ticks are out of order: every item due by `now`, in list order, up to out.size();
  // the others stay, in their order.
  std::size_t take_due(std::uint64_t at, std::span<T> out, std::uint64_t now) noexcept {
    Slot& s = slots_[at];
    std::size_t taken = 0;
    std::uint32_t prev = kNone, n = s.head;
    while (n != kNone && taken < out.size()) {
      const std::uint32_t next = nodes_[n].next;
      if (nodes_[n].release <= now) {
        out[taken++] = nodes_[n].item;
        if (prev == kNone) s.head = next;
        else nodes_[prev].next = next;
        if (s.tail == n) s.tail = prev;
        release_node(n);
      } else {
        prev = n;
      }
      n = next;
    }
    if (s.tail == kNone) clear(occupied_.get(), at);  // emptied
    return taken;
  }

  const unsigned shift_;
  const std::uint64_t slot_count_, mask_;
  const std::uint32_t capacity_;
  std::unique_ptr<Node[]> nodes_;
  std::unique_ptr<Slot[]> slots_;                 // valid where occupied_ says so
  std::unique_ptr<std::uint64_t[]> occupied_;     // a bit per slot: its list is not empty
  std::unique_ptr<std::uint64_t[]> disordered_;   // a bit per occupied slot: ticks inserted out of order
  std::uint32_t free_ = kNone;                    // the free list's head
  std::uint32_t size_ = 0;
  std::uint64_t cursor_ = 0;  // absolute slot: every item held is in cursor_ .. cursor_ + slots - 1
};

}  // namespace tricolor::dataplane
