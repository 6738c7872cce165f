// Random operations against a model: a std::unordered_map of the live keys with their last-seen time,
// meter state and packet count. Keys come from a small universe (hits, renewals) and a large one
// (inserts, floods); time moves in small steps, large jumps past the timeout, and backwards (stale
// clocks). After every operation the outcome and size() must match the model, an entry never moves
// while its key lives, and periodically for_each() must list exactly the model's keys and values.
// The control side (replenish()) runs before each operation, with pauses: while it is paused, a new
// key below capacity may be refused for want of a ready chunk, and must then be counted as starved;
// while it runs, never.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

#include "dataplane/engine/key_table.hpp"
#include "tests/dataplane/engine/key_table_test_support.hpp"
#include "tests/policer/meter_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using test::Rng;

struct ModelEntry {
  std::uint64_t last;
  std::uint64_t level1;  // fixed at creation (from the key), so the walk can check state per key
  std::uint64_t packets;
  const void* entry;     // the table's entry: it never moves while the key lives
};

struct KeyHash {
  template <class Key>
  std::size_t operator()(const Key& k) const noexcept {
    std::uint64_t h = 1469598103934665603ull;
    for (std::uint8_t b : k) h = (h ^ b) * 1099511628211ull;
    return h;
  }
};

template <std::size_t KeySize>
class ModelRun {
 public:
  using Table = KeyTable<KeySize>;
  using Key = typename Table::Key;
  using Outcome = typename Table::Outcome;

  ModelRun(std::uint64_t seed, std::uint32_t capacity, std::uint64_t idle)
      : r_{seed}, owned_(test_keys::made<Table>(capacity, idle)), table_(*owned_), capacity_(capacity), idle_(idle) {}

  void run(std::size_t operations) {
    for (std::size_t op = 0; op < operations; ++op) {
      step();
      if (testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(table_.size(), model_.size()) << "operation " << op;
      if (op % kWalkEvery == 0) {
        compare_walk();
        if (testing::Test::HasFatalFailure()) return;
      }
    }
    compare_walk();
  }
  std::uint64_t starved() const { return starved_; }

 private:
  static constexpr std::size_t kWalkEvery = 97;
  static constexpr std::uint64_t kSmallUniverse = 48;

  bool expired(std::uint64_t last) const { return idle_ != 0 && now_ > last && now_ - last >= idle_; }

  Key random_key() {
    Key key{};
    // Mostly a small universe (hits); sometimes a fresh random key (inserts, fulls). Two words vary.
    const std::uint64_t a = r_.chance(70) ? r_.below(kSmallUniverse) : r_.next();
    const std::uint64_t b = r_.chance(90) ? 0 : r_.below(3);
    std::memcpy(key.data(), &a, sizeof a);
    std::memcpy(key.data() + KeySize - sizeof b, &b, sizeof b);
    return key;
  }

  static std::uint64_t level1_of(const Key& key) { return KeyHash{}(key) & 0xffffff; }

  void advance_time() {
    const std::uint64_t roll = r_.below(100);
    if (roll < 60) now_ += r_.below(idle_ == 0 ? 50 : idle_ / 20 + 1);
    else if (roll < 70) now_ += idle_ + r_.below(3);                              // past the timeout
    else if (roll < 80 && idle_ > 1) now_ += idle_ - 1;                           // just under it
    else if (roll < 90) now_ = now_ > 100 ? now_ - r_.below(100) : now_;          // stale clock
  }

  void step() {
    if (r_.below(1000) < 5) paused_ = !paused_;  // pauses of ~200 operations
    if (!paused_) {
      ASSERT_TRUE(table_.replenish());
    }
    advance_time();
    const std::uint64_t roll = r_.below(100);
    if (roll < 85) return acquire();
    if (roll < 92) return full_sweep();
    return partial_sweep();
  }

  void acquire() {
    const Key key = random_key();
    const policer::State fresh{{5, level1_of(key)}, now_};
    Outcome outcome;
    typename Table::Entry* e = table_.acquire(key, table_.hash(key), now_, fresh, outcome);
    auto it = model_.find(key);
    Outcome expected;
    if (it == model_.end()) expected = model_.size() < capacity_ ? Outcome::created : Outcome::full;
    else expected = expired(it->second.last) ? Outcome::renewed : Outcome::found;
    const std::uint64_t starved = table_.starved();
    if (expected == Outcome::created && outcome == Outcome::full) {
      ASSERT_TRUE(paused_) << "a key refused for want of a chunk while the control side kept up";
      ASSERT_EQ(starved, starved_ + 1) << "a starved key not counted";
      ASSERT_EQ(e, nullptr);
      starved_ = starved;
      return;
    }
    ASSERT_EQ(starved, starved_) << "a key counted as starved, yet not refused";
    ASSERT_EQ(static_cast<int>(outcome), static_cast<int>(expected)) << "now " << now_;
    if (expected == Outcome::full) {
      ASSERT_EQ(e, nullptr);
      return;
    }
    ASSERT_NE(e, nullptr);
    ASSERT_EQ(e->key, key);
    ASSERT_NE(e->live, 0u);
    if (expected == Outcome::found) {
      ASSERT_EQ(e, it->second.entry);
      ASSERT_EQ(e->state.last, it->second.last);
      ASSERT_EQ(e->counters.packets[0], it->second.packets);
    } else {
      if (it != model_.end()) {
        ASSERT_EQ(e, it->second.entry);  // renewed in place
      }
      ASSERT_EQ(e->state.last, now_);
      ASSERT_EQ(e->state.level[0], 5u);
      ASSERT_EQ(e->counters.packets[0], 0u);
      it = model_.insert_or_assign(key, ModelEntry{now_, level1_of(key), 0, e}).first;
    }
    // The worker's write: a meter check at now (last never moves back) and one packet.
    Table::begin_write(*e);
    e->state.last = std::max(e->state.last, now_);
    e->state.level[0] += 1;
    e->counters.packets[0] += 1;
    e->counters.bytes[0] += 100;
    Table::end_write(*e);
    it->second.last = std::max(it->second.last, now_);
    it->second.packets += 1;
  }

  // A full round plus a look per removal: exactly the idle keys go.
  void full_sweep() {
    std::size_t idle = 0;
    for (auto it = model_.begin(); it != model_.end();) {
      if (expired(it->second.last)) {
        it = model_.erase(it);
        ++idle;
      } else {
        ++it;
      }
    }
    const std::size_t budget = 2 * std::max<std::size_t>(table_.index_slots(), 1);
    ASSERT_EQ(table_.sweep(now_, budget), idle) << "now " << now_;
  }

  // A few slots: some idle keys go; the walk says which, and each must have been idle.
  void partial_sweep() {
    const std::size_t removed = table_.sweep(now_, 1 + r_.below(16));
    std::unordered_map<Key, bool, KeyHash> seen;
    table_.for_each([&](const Key& k, const policer::State&, const KeyCounters&) { seen[k] = true; });
    std::size_t gone = 0;
    for (auto it = model_.begin(); it != model_.end();) {
      if (seen.count(it->first) == 0) {
        ASSERT_TRUE(expired(it->second.last)) << "a key that was not idle disappeared";
        it = model_.erase(it);
        ++gone;
      } else {
        ++it;
      }
    }
    ASSERT_EQ(gone, removed);
  }

  void compare_walk() {
    std::size_t n = 0;
    table_.for_each([&](const Key& k, const policer::State& s, const KeyCounters& c) {
      ++n;
      auto it = model_.find(k);
      ASSERT_NE(it, model_.end()) << "a key the model does not have";
      EXPECT_EQ(s.last, it->second.last);
      EXPECT_EQ(s.level[0], 5 + it->second.packets);
      EXPECT_EQ(s.level[1], it->second.level1);
      EXPECT_EQ(c.packets[0], it->second.packets);
      EXPECT_EQ(c.bytes[0], 100 * it->second.packets);
      EXPECT_EQ(c.packets[1] + c.packets[2] + c.bytes[1] + c.bytes[2], 0u);
    });
    ASSERT_EQ(n, model_.size());
    ASSERT_EQ(table_.memory_bytes(), table_.index_bytes() + table_.entry_bytes() + table_.spare_bytes());
    if (paused_) return;  // chunks may wait in the return queue
    ASSERT_TRUE(table_.replenish());
    // No key, no chunk held (no reader holds one here); with the spares, at most the chunks of the
    // capacity (a table never keeps more chunks than it could use).
    if (model_.empty()) {
      ASSERT_EQ(table_.entry_bytes(), 0u) << "no key, yet chunks are kept";
    }
    ASSERT_LE(table_.entry_bytes() + table_.spare_bytes(), std::size_t{capacity_} * sizeof(typename Table::Entry));
  }

  Rng r_;
  std::unique_ptr<Table> owned_;
  Table& table_;
  std::uint32_t capacity_;
  std::uint64_t idle_;
  std::uint64_t now_ = 1'000'000;
  std::unordered_map<Key, ModelEntry, KeyHash> model_;
  bool paused_ = false;       // the control side does not run
  std::uint64_t starved_ = 0;  // keys refused for want of a ready chunk, so far
};

struct Case {
  std::uint32_t capacity;
  std::uint64_t idle;
  std::size_t operations;
};

constexpr Case kCases[] = {
    {1, 1000, 3000},   {7, 1000, 20000},  {40, 1000, 30000}, {64, 0, 20000},
    {300, 500, 30000}, {5000, 2000, 30000}, {9000, 100, 20000},
};

TEST(KeyTableModel, Ipv4KeysMatchTheModel) {
  std::uint64_t seed = 1, starved = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE("capacity " + std::to_string(c.capacity) + " idle " + std::to_string(c.idle));
    ModelRun<16> run(seed++, c.capacity, c.idle);
    run.run(c.operations);
    if (HasFatalFailure()) return;
    starved += run.starved();
  }
  EXPECT_GT(starved, 0u) << "the control side's pauses never starved a key: that path went untested";
}

TEST(KeyTableModel, Ipv6KeysMatchTheModel) {
  std::uint64_t seed = 100, starved = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE("capacity " + std::to_string(c.capacity) + " idle " + std::to_string(c.idle));
    ModelRun<40> run(seed++, c.capacity, c.idle);
    run.run(c.operations);
    if (HasFatalFailure()) return;
    starved += run.starved();
  }
  EXPECT_GT(starved, 0u) << "the control side's pauses never starved a key: that path went untested";
}

}  // namespace
}  // namespace tricolor::dataplane
