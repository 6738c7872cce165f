// The engine split by owner, under threads (also run under ThreadSanitizer by ./dev test): two workers
// process bursts on their own threads while the control thread publishes policy changes (rates, a
// rule added and deleted, key tables replaced, a parent changed), reads counters and keys, and
// reclaims retired rule sets. Packets whose key the other worker owns are passed to it (through an
// inbox here; the daemon uses rings) and metered there. Nothing a worker may be reading is changed or
// freed under it; every packet is counted once, under its rule's name; every key lives in the table
// of one worker, its owner; and once the workers are offline every retired set is freed.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/replay/splitmix64.hpp"
#include "tests/dataplane/engine/engine_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using namespace engine_test;

// Ethernet + IPv4 + UDP from 192.0.2.<source> to 10.0.0.<host>.
std::vector<std::uint8_t> udp4_from(std::uint8_t source, std::uint8_t host) {
  auto f = udp4(100, host, 53);
  f[29] = source;  // the last byte of the IPv4 source address
  return f;
}

struct Tally {
  std::map<std::string, std::uint64_t> by_rule;  // packets per rule name, as the worker saw them
  std::uint64_t defaults = 0;
  std::uint64_t bursts = 0;
  std::uint64_t handed_out = 0, handed_in = 0;
};

// Packets passed to a worker by the other one: copies of the frames, with what the receiver learned.
struct Inbox {
  std::mutex lock;
  std::vector<std::pair<std::vector<std::uint8_t>, Handed>> packets;
};

Policy policy_at(int version) {
  Policy p;
  p.profiles.push_back({"a", params_1r2c(100'000 + 1000 * (version % 7), 20'000)});
  policer::Params b;
  b.algorithm = policer::Algorithm::trtcm;
  b.cir = 50'000 + 500 * (version % 5), b.pir = 2 * b.cir, b.cbs = 5000, b.pbs = 10'000;
  p.profiles.push_back({"b", b});
  p.profiles.push_back({"site", params_1r2c(300'000 + 3000 * (version % 3), 60'000)});
  p.rules.push_back(rule("agg", 1, "a"));
  Rule keyed = rule("keyed", 2, "b");
  keyed.per_key.kind = version % 4 < 2 ? KeyKind::src : KeyKind::five_tuple;  // tables replaced now and then
  keyed.per_key.capacity = 4096;
  keyed.parent = "site";
  p.rules.push_back(keyed);
  if (version % 2 == 1) p.rules.push_back(rule("extra", 3, "a"));  // added and deleted
  return p;
}

TEST(EngineThreads, WorkersMeterWhileTheControlThreadPublishes) {
  EngineOptions options;
  options.workers = 2;
  auto made = Engine::create(policy_at(0), *policer::TickRate::make(kHz), options);
  ASSERT_TRUE(made.ok()) << made.error().message;
  Engine& engine = **made;
  constexpr int kVersions = 60;        // policies the control thread publishes while the workers run
  constexpr std::uint64_t kBursts = 2000;  // at least, per worker
  std::atomic<bool> stop{false};
  std::vector<Tally> tallies(2);
  Inbox inboxes[2];

  // One burst through worker w: counted, and what the other worker owns passed to it.
  auto process = [&](unsigned w, std::vector<std::vector<std::uint8_t>>& frames, std::span<const Handed> handed,
                     std::uint64_t now) {
    std::vector<PacketView> views(frames.size());
    std::vector<Verdict> verdicts(frames.size());
    for (std::size_t i = 0; i < frames.size(); ++i) views[i] = PacketView{frames[i].data(), 100, 100, now, 0, 0, false};
    const RuleSet& set = engine.worker(w).process(views, verdicts, handed);
    Tally& tally = tallies[w];
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const Verdict& v = verdicts[i];
      if (v.handoff) {
        EXPECT_EQ(v.owner, 1 - w);
        ++tally.handed_out;
        std::lock_guard hold(inboxes[v.owner].lock);
        inboxes[v.owner].packets.emplace_back(frames[i], Handed{static_cast<std::uint32_t>(set.generation), v.rule});
      } else if (v.rule == kNoRule) {
        ++tally.defaults;
      } else {
        ++tally.by_rule[set.policy->rules[v.rule].name];
      }
    }
    tally.handed_in += handed.size();
  };
  // Up to a burst of what the other worker passed to w.
  auto drain = [&](unsigned w, std::uint64_t now) {
    std::vector<std::vector<std::uint8_t>> frames;
    std::vector<Handed> handed;
    {
      std::lock_guard hold(inboxes[w].lock);
      auto& box = inboxes[w].packets;
      const std::size_t n = std::min<std::size_t>(box.size(), 32);
      for (std::size_t i = 0; i < n; ++i) frames.push_back(std::move(box[i].first)), handed.push_back(box[i].second);
      box.erase(box.begin(), box.begin() + static_cast<std::ptrdiff_t>(n));
    }
    if (!frames.empty()) process(w, frames, handed, now);
    return frames.size();
  };

  auto work = [&](unsigned w) {
    Worker& worker = engine.worker(w);
    SplitMix64 rng(w + 1);
    std::vector<std::vector<std::uint8_t>> frames(32);
    worker.online();
    for (std::uint64_t b = 0; b < kBursts || !stop.load(std::memory_order_acquire); ++b) {
      const std::uint64_t now = b * 20'000;  // 20 us a burst
      for (std::size_t i = 0; i < frames.size(); ++i)
        frames[i] = udp4_from(static_cast<std::uint8_t>(rng.below(200)), static_cast<std::uint8_t>(1 + rng.below(4)));
      process(w, frames, {}, now);
      drain(w, now);
      ++tallies[w].bursts;
      worker.quiescent();
    }
    worker.offline();
  };
  std::thread first(work, 0u), second(work, 1u);

  // The control thread: publish, read, reclaim; then let the workers stop.
  std::uint64_t read_packets = 0;
  for (int version = 1; version <= kVersions; ++version) {
    const auto published = engine.update(policy_at(version));
    EXPECT_TRUE(published.ok()) << published.error().message;
    for (std::size_t r = 0; r < engine.policy().rules.size(); ++r) {
      const RuleCounters c = engine.counters(r);
      read_packets += c.packets[0] + c.packets[1] + c.packets[2];
      std::size_t keys = 0;
      engine.for_each_key(r, [&](const Engine::LiveKey&) { ++keys; });
      read_packets += keys + engine.live_keys(r) + engine.key_memory_bytes(r) / 4096;
    }
    read_packets += engine.default_counters().packets;
    engine.reclaim();
  }
  stop.store(true, std::memory_order_release);
  first.join();
  second.join();
  EXPECT_GT(read_packets, 0u);
  // What was still on its way, metered by its owner (each worker on this thread in turn).
  // (One handed over under an older set is placed again under the newest, and may be passed on.)
  for (std::size_t moved = 1; moved != 0;) {
    moved = 0;
    for (unsigned w = 0; w < 2; ++w) {
      engine.worker(w).online();
      while (const std::size_t n = drain(w, kBursts * 40'000)) moved += n, engine.worker(w).quiescent();
      engine.worker(w).offline();
    }
  }
  EXPECT_GT(tallies[0].handed_out + tallies[1].handed_out, 0u);
  EXPECT_EQ(tallies[0].handed_out + tallies[1].handed_out, tallies[0].handed_in + tallies[1].handed_in);

  // Every packet counted once, under its rule's name: the rules that lived throughout keep their
  // counters across every change; default-action packets are the workers'.
  engine.reclaim();
  EXPECT_EQ(engine.retired_sets(), 0u) << "the workers are offline: nothing waits for them";
  const Policy& now = engine.policy();
  for (std::size_t r = 0; r < now.rules.size(); ++r) {
    const std::string& name = now.rules[r].name;
    if (name == "extra") continue;  // deleted and added again: its counters started again
    const RuleCounters c = engine.counters(r);
    EXPECT_EQ(c.packets[0] + c.packets[1] + c.packets[2], tallies[0].by_rule[name] + tallies[1].by_rule[name]) << name;
  }
  EXPECT_EQ(engine.default_counters().packets, tallies[0].defaults + tallies[1].defaults);
  // Each key in one worker's table only.
  for (std::size_t r = 0; r < now.rules.size(); ++r) {
    std::set<MeterKey> seen[2];
    engine.for_each_key(r, [&](const Engine::LiveKey& live) { seen[live.worker].insert(live.key); });
    for (const MeterKey& key : seen[0]) EXPECT_FALSE(seen[1].contains(key)) << now.rules[r].name;
    if (now.rules[r].per_key.kind != KeyKind::none) {
      EXPECT_EQ(engine.placement(r), Placement::by_key_hash);
    }
  }
  EXPECT_GE(tallies[0].bursts, kBursts);
  EXPECT_GE(tallies[1].bursts, kBursts);
}

}  // namespace
}  // namespace tricolor::dataplane
