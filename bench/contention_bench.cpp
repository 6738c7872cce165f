// tricolor-bench-contention: what two workers pay to share one meter, and what a packet pays to be
// handed from one worker to another, on real threads pinned to cores 0 and 1. Micro-benchmarks: the
// whole daemon is measured by bench/daemon.
//
// BM_shared_meter/<mode>/<burst>: a worker's metering loop and nothing else. Per burst: one rte_rdtsc()
// as the time of all its packets, then one policer::SharedMeter::check_burst_after (one critical
// section, catch-up included, as Worker::check_shared does), then the colors are consumed. Modes:
// one_worker (core 0 alone), two_workers_own_meters (cores 0 and 1, one meter each, on cache lines
// 128 bytes apart: the baseline without contention) and two_workers_same_meter (cores 0 and 1, one
// meter). The contention cost is same_meter - own_meters, per packet and per burst.
// BM_split_lock_meter/two_workers_same_meter/<burst> is the same critical section with the lock on a cache
// line apart from the meter's (SplitLockMeter below, a comparison, not tricolor's SharedMeter). Two workers doing
// nothing but metering is the worst case: real workers parse and classify between critical sections.
//
// BM_handoff/<mode>/<ring size>: pointers to 64-byte (one cache line) packets through one
// single-producer single-consumer rte_ring (RING_F_SP_ENQ | RING_F_SC_DEQ), in bursts of 32. The
// producer writes 16 bytes into each packet before enqueueing it (as a worker writes the mbuf), the
// consumer reads them (as the owner reads the packet: prefetched 4 ahead, as Worker::process does) and
// checks that the sequence numbers arrive in order. Modes: two_cores (producer on core 0, consumer on
// core 1: the cache lines cross) and one_core (the same loop on core 0: produce a burst, consume it).
// Packets come from a pool of ring size + 64 taken in order, so that no packet is rewritten while the
// ring or the consumer's burst still holds it.
//
// Timing: each benchmark iteration is a window of kWindowSeconds (1 ms). Worker 0 is the benchmark's thread, pinned to
// core 0; it ends the window by its own clock and tells worker 1 (a thread pinned to core 1, started
// once per benchmark run) to stop. Each worker counts its own TSC cycles and packets in the window, so
// both measure the same interval of contention (neither finishes early and runs the rest alone).
// Counters, in ns from the TSC rate, each the median over the run's windows (robust to a window in which
// the kernel ran another process on one of the cores):
//   ns_per_packet / ns_per_burst  mean over the workers of (worker's cycles / worker's packets)
//   w0_ns, w1_ns                  the same per worker (lock fairness shows here)
//   Mpps                          all workers' packets per second of window
//   consumer_ns                   handoff: consumer's cycles per packet received (the pipeline's rate)
//   producer_busy_ns, consumer_busy_ns  handoff: cycles per packet outside the waits for ring space or
//                                 packets; their sum is the CPU a handed-off packet costs
// A table of the figures (medians under --benchmark_repetitions) is printed at the end.
//
// Run: tricolor-bench-contention --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Needs the EAL (memory only, no hugepages) for the TSC rate, so it runs as root.
#include <benchmark/benchmark.h>

#include <pthread.h>
#include <rte_cycles.h>
#include <rte_ring.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "dataplane/dpdk/eal.hpp"
#include "dataplane/engine/rule_set.hpp"
#include "policer/meter.hpp"
#include "policer/profile.hpp"
#include "policer/shared_meter.hpp"

namespace {

using namespace tricolor;
using policer::Color;

constexpr int kCore[2] = {0, 1};               // worker 0 (the benchmark's thread), worker 1
constexpr double kWindowSeconds = 1e-3;         // one benchmark iteration
constexpr std::size_t kHandoffBurst = 32;       // packets per enqueue / dequeue
constexpr std::size_t kMaxMeterBurst = 32;      // largest burst of BM_shared_meter
constexpr std::size_t kConsumerPrefetch = 4;    // packets ahead, as Worker::process (kPrefetchAhead)

std::uint64_t g_tsc_hz = 0;
double ns_per_cycle() { return 1e9 / static_cast<double>(g_tsc_hz); }

// ---------------------------------------------------------------------------------------------------
// Pinning and the two-worker window.

bool pin_to(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Pins the calling thread to a core for its lifetime, then restores the affinity it had.
class PinnedHere {
 public:
  explicit PinnedHere(int core) {
    CPU_ZERO(&saved_);
    have_saved_ = pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_) == 0;
    ok_ = pin_to(core);
  }
  ~PinnedHere() {
    if (have_saved_) pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
  }
  bool ok() const { return ok_; }

 private:
  cpu_set_t saved_;
  bool have_saved_ = false;
  bool ok_ = false;
};

// What one worker did, on its own cache line: cycles in windows, packets, cycles spent waiting.
struct alignas(64) Tally {
  std::uint64_t cycles = 0;
  std::uint64_t packets = 0;
  std::uint64_t wait_cycles = 0;
};

// A body is what a worker runs: step() does one unit of work (a burst) and adds to the tally;
// finish() closes anything open when the window ends (an open wait).
template <class Body>
concept WorkerBody = requires(Body b, Tally& t) {
  b.step(t);
  b.finish(t);
};

// Runs body0 on this thread (core 0) and, when given, body1 on a thread pinned to core 1, over windows
// of kWindowSeconds, one per benchmark iteration. Returns each window's tallies, or nullopt after
// SkipWithError. The figures are medians over the windows: a window in which the kernel ran something
// else on one of the cores (other builds share them) is an outlier, not part of a mean.
struct Window {
  std::atomic<std::uint64_t> round{0};  // worker 0 starts round r by storing r
  alignas(64) std::atomic<bool> stop{false};
  alignas(64) std::atomic<std::uint64_t> finished{0};  // worker 1 has tallied round r
  alignas(64) std::atomic<bool> quit{false};
  std::atomic<bool> pinned{true};
};

struct Windows {
  std::vector<Tally> w0, w1;  // per window; w1 empty with one worker
};

template <WorkerBody Body0, WorkerBody Body1 = Body0>
std::optional<Windows> run_windows(benchmark::State& state, Body0& body0, Body1* body1) {
  PinnedHere here(kCore[0]);
  if (!here.ok()) {
    state.SkipWithError("cannot pin the benchmark thread to core 0");
    return std::nullopt;
  }
  Window w;
  Windows out;
  const auto rounds = static_cast<std::size_t>(state.max_iterations);
  out.w0.resize(rounds);
  if (body1 != nullptr) out.w1.resize(rounds);
  std::thread helper;
  if (body1 != nullptr) {
    helper = std::thread([&] {
      if (!pin_to(kCore[1])) w.pinned = false;
      std::uint64_t seen = 0;
      for (;;) {
        std::uint64_t r;
        while ((r = w.round.load(std::memory_order_acquire)) == seen) {
          if (w.quit.load(std::memory_order_acquire)) return;
          __builtin_ia32_pause();
        }
        seen = r;
        Tally t;
        const std::uint64_t start = rte_rdtsc();
        while (!w.stop.load(std::memory_order_relaxed)) body1->step(t);
        body1->finish(t);
        t.cycles = rte_rdtsc() - start;
        out.w1[r - 1] = t;
        w.finished.store(r, std::memory_order_release);
      }
    });
  }
  const auto window_cycles = static_cast<std::uint64_t>(kWindowSeconds * static_cast<double>(g_tsc_hz));
  std::uint64_t r = 0;
  for (auto _ : state) {
    w.stop.store(false, std::memory_order_relaxed);
    w.round.store(++r, std::memory_order_release);
    Tally t;
    const std::uint64_t start = rte_rdtsc();
    const std::uint64_t deadline = start + window_cycles;
    while (rte_rdtsc() < deadline) body0.step(t);
    body0.finish(t);
    t.cycles = rte_rdtsc() - start;
    w.stop.store(true, std::memory_order_relaxed);
    out.w0[r - 1] = t;
    if (body1 != nullptr)
      while (w.finished.load(std::memory_order_acquire) != r) __builtin_ia32_pause();
    state.SetIterationTime(static_cast<double>(t.cycles) * ns_per_cycle() * 1e-9);
  }
  if (body1 != nullptr) {
    w.quit.store(true, std::memory_order_release);
    helper.join();
    if (!w.pinned) {
      state.SkipWithError("cannot pin the second worker to core 1");
      return std::nullopt;
    }
  }
  out.w0.resize(r);
  if (body1 != nullptr) out.w1.resize(r);
  return out;
}

double per_packet_ns(std::uint64_t cycles, std::uint64_t packets) {
  return packets == 0 ? 0.0 : static_cast<double>(cycles) * ns_per_cycle() / static_cast<double>(packets);
}
double mpps(std::uint64_t packets, std::uint64_t cycles) {
  return cycles == 0 ? 0.0 : static_cast<double>(packets) / (static_cast<double>(cycles) * ns_per_cycle() * 1e-3);
}

// The median over the windows of f(window index).
template <class F>
double median_over(std::size_t windows, F&& f) {
  std::vector<double> v(windows);
  for (std::size_t i = 0; i < windows; ++i) v[i] = f(i);
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// ---------------------------------------------------------------------------------------------------
// Shared meter.

// Simple IMIX, as the meter benchmark: 7 x 64, 4 x 576, 1 x 1500 bytes.
constexpr std::uint32_t kImix[12] = {64, 64, 64, 64, 64, 64, 64, 576, 576, 576, 576, 1500};
constexpr std::size_t kLengths = 1024;  // lengths cycled through, per worker (a power of two)

// trTCM at 10 Gbit/s committed, 20 peak, color-blind: the colors mix at the rates seen here (the
// decisions are branch-free, so the mix does not change the cost).
policer::Profile meter_profile() {
  policer::Params p;
  p.algorithm = policer::Algorithm::trtcm;
  p.unit = policer::Unit::bytes;
  p.cir = 1'250'000'000;
  p.cbs = 1'250'000;
  p.pir = 2'500'000'000;
  p.pbs = 2'500'000;
  auto tick_rate = policer::TickRate::make(g_tsc_hz);
  if (!tick_rate) throw std::runtime_error(tick_rate.error().message);
  auto profile = policer::Profile::make(p, *tick_rate);
  if (!profile) throw std::runtime_error(profile.error().message);
  return *profile;
}

// For comparison only, not tricolor's: SharedMeter's critical section with the lock on a cache line of
// its own. In SharedMeter the lock and the meter share one line, so a waiter spinning on the lock keeps
// taking that line from the holder, whose every write to the meter then waits for it to come back.
class SplitLockMeter {
 public:
  SplitLockMeter(const policer::Profile& p, std::uint64_t now) noexcept : meter_(p, now) {}

  template <class CatchUp>
  void check_burst_after(CatchUp&& catch_up, std::span<const std::uint64_t> times,
                         std::span<const std::uint32_t> lengths, std::span<const Color> in,
                         std::span<Color> colors) noexcept {
    lock_.lock();
    catch_up(meter_, generation_);
    meter_.color_each(times, lengths, in, colors);  // as SharedMeter::check_burst_after
    lock_.unlock();
  }

 private:
  alignas(64) policer::SpinLock lock_;
  alignas(64) policer::AggregateMeter meter_;
  std::uint64_t generation_ = 0;
};

// Meters 128 bytes apart at least, so that workers on separate meters share no cache line (nor a pair
// of lines an adjacent-line prefetcher fetches together).
template <class M>
struct alignas(128) PaddedMeter {
  explicit PaddedMeter(const policer::Profile& p) : meter(p, rte_rdtsc()) {}
  M meter;
};

// One worker's metering loop over bursts of `burst` packets.
template <class M>
struct MeterWorker {
  M* meter;
  const policer::Profile* profile;
  std::size_t burst;
  std::size_t pos = 0;
  std::uint64_t green = 0;
  dataplane::SeenGenerations seen;  // the worker's record of rule sets (none changed here)
  std::uint32_t lengths[kLengths];
  std::uint64_t times[kMaxMeterBurst];
  Color colors[kMaxMeterBurst];

  MeterWorker(M& m, const policer::Profile& p, std::size_t b, std::uint32_t seed)
      : meter(&m), profile(&p), burst(b) {
    for (std::size_t i = 0; i < kLengths; ++i) lengths[i] = kImix[(i * 7 + seed) % 12];
  }

  void step(Tally& t) noexcept {
    const std::uint64_t now = rte_rdtsc();  // one clock read per burst, as a worker stamps its burst
    for (std::size_t k = 0; k < burst; ++k) times[k] = now;
    const std::uint64_t profile_generation = 0;  // the meter's own: catch-up returns at once, as nearly always
    meter->check_burst_after(
        [&](policer::AggregateMeter& m, std::uint64_t& applied) {
          dataplane::catch_up_shared(m, applied, nullptr, profile_generation, *profile, seen, now);
        },
        std::span<const std::uint64_t>(times, burst), std::span<const std::uint32_t>(lengths + pos, burst),
        std::span<const Color>(), std::span<Color>(colors, burst));
    for (std::size_t k = 0; k < burst; ++k) green += colors[k] == Color::green;
    pos = (pos + burst) & (kLengths - 1);
    t.packets += burst;
  }
  void finish(Tally&) noexcept {}
};
static_assert(kLengths % kMaxMeterBurst == 0);

enum class MeterMode { one_worker, two_workers_own_meters, two_workers_same_meter };

template <class M>
void bm_shared_meter(benchmark::State& state, MeterMode mode) {
  const auto burst = static_cast<std::size_t>(state.range(0));
  const policer::Profile profile = meter_profile();
  const auto own0 = std::make_unique<PaddedMeter<M>>(profile);
  const auto own1 = std::make_unique<PaddedMeter<M>>(profile);
  auto w0 = std::make_unique<MeterWorker<M>>(own0->meter, profile, burst, 0);
  std::unique_ptr<MeterWorker<M>> w1;
  if (mode != MeterMode::one_worker)
    w1 = std::make_unique<MeterWorker<M>>(mode == MeterMode::two_workers_same_meter ? own0->meter : own1->meter,
                                          profile, burst, 5);
  const auto windows = run_windows(state, *w0, w1.get());
  if (!windows) return;
  const Windows& win = *windows;
  const std::size_t n = win.w0.size();
  const auto ns0 = [&](std::size_t i) { return per_packet_ns(win.w0[i].cycles, win.w0[i].packets); };
  const auto ns1 = [&](std::size_t i) { return w1 ? per_packet_ns(win.w1[i].cycles, win.w1[i].packets) : 0.0; };
  const auto both = [&](std::size_t i) { return win.w0[i].packets + (w1 ? win.w1[i].packets : 0); };
  const double ns = median_over(n, [&](std::size_t i) { return w1 ? (ns0(i) + ns1(i)) / 2 : ns0(i); });
  std::uint64_t packets = 0;
  for (std::size_t i = 0; i < n; ++i) packets += both(i);
  state.counters["ns_per_packet"] = ns;
  state.counters["ns_per_burst"] = ns * static_cast<double>(burst);
  state.counters["w0_ns"] = median_over(n, ns0);
  state.counters["w1_ns"] = median_over(n, ns1);
  state.counters["Mpps"] = median_over(n, [&](std::size_t i) { return mpps(both(i), win.w0[i].cycles); });
  state.counters["green"] =
      packets == 0 ? 0.0 : static_cast<double>(w0->green + (w1 ? w1->green : 0)) / static_cast<double>(packets);
  state.SetItemsProcessed(static_cast<std::int64_t>(packets));
}

// ---------------------------------------------------------------------------------------------------
// Handoff.

// One cache line, like the first line of an mbuf; the producer writes the first 16 bytes.
struct alignas(64) Packet {
  std::uint64_t sequence;
  std::uint32_t length;
  std::uint32_t hash;
  std::uint8_t rest[48];
};
static_assert(sizeof(Packet) == 64);

struct RingDeleter {
  void operator()(rte_ring* r) const noexcept { ::operator delete(r, std::align_val_t{64}); }
};
using RingPtr = std::unique_ptr<rte_ring, RingDeleter>;

// An SP/SC ring on memory of our own (no memzone: any number of runs, no names to free).
RingPtr make_ring(unsigned size) {
  const ssize_t bytes = rte_ring_get_memsize(size);
  if (bytes < 0) return nullptr;
  RingPtr ring(static_cast<rte_ring*>(::operator new(static_cast<std::size_t>(bytes), std::align_val_t{64})));
  if (rte_ring_init(ring.get(), "contention", size, RING_F_SP_ENQ | RING_F_SC_DEQ) != 0) return nullptr;
  return ring;
}

// Takes packets from the pool in order, writes them and enqueues them, a burst at a time; time spent
// with the ring full counts as waiting.
struct Producer {
  rte_ring* ring;
  Packet* pool;
  std::size_t pool_size;
  std::size_t next = 0;
  std::uint64_t sequence = 0;
  void* burst[kHandoffBurst] = {};

  void step(Tally& t) noexcept {
    for (std::size_t k = 0; k < kHandoffBurst; ++k) {
      Packet* p = &pool[next];
      p->sequence = sequence++;
      p->length = 64 + static_cast<std::uint32_t>(k);
      p->hash = static_cast<std::uint32_t>(sequence * 0x9e3779b9u);
      burst[k] = p;
      next = next + 1 == pool_size ? 0 : next + 1;  // a wrap, not a division
    }
    unsigned sent = rte_ring_sp_enqueue_burst(ring, burst, kHandoffBurst, nullptr);
    if (sent < kHandoffBurst) {
      const std::uint64_t waiting = rte_rdtsc();
      while (sent < kHandoffBurst) sent += rte_ring_sp_enqueue_burst(ring, burst + sent, kHandoffBurst - sent, nullptr);
      t.wait_cycles += rte_rdtsc() - waiting;
    }
    t.packets += kHandoffBurst;
  }
  void finish(Tally&) noexcept {}
};

// Dequeues up to a burst, reads each packet and checks the order; polls that find the ring empty,
// from the first to the next one that finds packets, count as waiting.
struct Consumer {
  rte_ring* ring;
  std::uint64_t expected = 0;
  std::uint64_t out_of_order = 0;
  std::uint64_t bytes = 0;
  std::uint64_t wait_start = 0;  // nonzero while waiting
  void* burst[kHandoffBurst] = {};

  void step(Tally& t) noexcept {
    const unsigned n = rte_ring_sc_dequeue_burst(ring, burst, kHandoffBurst, nullptr);
    if (n == 0) {
      if (wait_start == 0) wait_start = rte_rdtsc();
      return;
    }
    if (wait_start != 0) {
      t.wait_cycles += rte_rdtsc() - wait_start;
      wait_start = 0;
    }
    for (unsigned k = 0; k < n; ++k) {
      if (k + kConsumerPrefetch < n) __builtin_prefetch(burst[k + kConsumerPrefetch]);
      const auto* p = static_cast<const Packet*>(burst[k]);
      out_of_order += p->sequence != expected;
      expected = p->sequence + 1;
      bytes += p->length + (p->hash & 1);
    }
    t.packets += n;
  }
  void finish(Tally& t) noexcept {
    if (wait_start != 0) t.wait_cycles += rte_rdtsc() - wait_start;
    wait_start = 0;
  }
};

// Both on one thread: produce a burst, consume it.
struct ProduceConsume {
  Producer producer;
  Consumer consumer;
  Tally consumed;
  void step(Tally& t) noexcept {
    producer.step(t);
    consumer.step(consumed);
  }
  void finish(Tally&) noexcept {}
};

enum class HandoffMode { one_core, two_cores };

void bm_handoff(benchmark::State& state, HandoffMode mode) {
  const auto ring_size = static_cast<unsigned>(state.range(0));
  RingPtr ring = make_ring(ring_size);
  if (!ring) {
    state.SkipWithError("rte_ring_init failed");
    return;
  }
  // Ring size + 2 bursts: a packet written now was last enqueued more than a ring and a burst ago, so
  // the consumer is done with it.
  const std::size_t pool_size = ring_size + 2 * kHandoffBurst;
  std::unique_ptr<Packet[]> pool(new Packet[pool_size]());
  Producer producer{ring.get(), pool.get(), pool_size};
  Consumer consumer{ring.get()};

  double consumer_ns = 0, producer_busy = 0, consumer_busy = 0, rate = 0;
  std::uint64_t out_of_order = 0, consumed = 0;
  if (mode == HandoffMode::two_cores) {
    const auto windows = run_windows(state, producer, &consumer);
    if (!windows) return;
    const Windows& win = *windows;
    const std::size_t n = win.w0.size();
    consumer_ns = median_over(n, [&](std::size_t i) { return per_packet_ns(win.w1[i].cycles, win.w1[i].packets); });
    producer_busy = median_over(
        n, [&](std::size_t i) { return per_packet_ns(win.w0[i].cycles - win.w0[i].wait_cycles, win.w0[i].packets); });
    consumer_busy = median_over(
        n, [&](std::size_t i) { return per_packet_ns(win.w1[i].cycles - win.w1[i].wait_cycles, win.w1[i].packets); });
    rate = median_over(n, [&](std::size_t i) { return mpps(win.w1[i].packets, win.w0[i].cycles); });
    out_of_order = consumer.out_of_order;
    for (const Tally& t : win.w1) consumed += t.packets;
  } else {
    ProduceConsume both{producer, consumer, {}};
    const auto windows = run_windows<ProduceConsume, ProduceConsume>(state, both, nullptr);
    if (!windows) return;
    const std::vector<Tally>& win = windows->w0;
    consumer_ns = producer_busy =
        median_over(win.size(), [&](std::size_t i) { return per_packet_ns(win[i].cycles, win[i].packets); });
    rate = median_over(win.size(), [&](std::size_t i) { return mpps(win[i].packets, win[i].cycles); });
    out_of_order = both.consumer.out_of_order;
    consumed = both.consumed.packets;
  }
  if (out_of_order != 0) {
    state.SkipWithError(("the consumer saw " + std::to_string(out_of_order) + " packets out of order").c_str());
    return;
  }
  state.counters["ns_per_packet"] = consumer_ns;
  state.counters["Mpps"] = rate;
  state.counters["consumer_ns"] = consumer_ns;
  state.counters["producer_busy_ns"] = producer_busy;
  state.counters["consumer_busy_ns"] = consumer_busy;
  state.SetItemsProcessed(static_cast<std::int64_t>(consumed));
}

// ---------------------------------------------------------------------------------------------------
// The table at the end: the reporter keeps every result's counters (medians when aggregated).

class KeepingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) {
        failed_ = true;
        continue;
      }
      const bool aggregate = run.run_type == Run::RT_Aggregate;
      std::string name = run.run_name.str();
      if (const auto at = name.find("/manual_time"); at != std::string::npos) name.erase(at);
      if (aggregate && run.aggregate_name != "median") continue;
      if (!aggregate && aggregated_.contains(name)) continue;
      auto& kept = results_[name];
      for (const auto& [name, counter] : run.counters) kept[name] = counter.value;
      if (aggregate) aggregated_.insert({name, true});
    }
    ConsoleReporter::ReportRuns(runs);
  }
  const std::map<std::string, std::map<std::string, double>>& results() const { return results_; }
  bool failed() const { return failed_; }

 private:
  bool failed_ = false;
  std::map<std::string, std::map<std::string, double>> results_;
  std::map<std::string, bool> aggregated_;
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string cell(const std::map<std::string, std::map<std::string, double>>& r, const std::string& name,
                 const char* counter, double* out = nullptr) {
  const auto it = r.find(name);
  if (it == r.end() || !it->second.contains(counter)) return "—";
  const double v = it->second.at(counter);
  if (out) *out = v;
  return num(v);
}

void print_tables(const KeepingReporter& reporter) {
  const auto& r = reporter.results();
  std::printf("\n_ns per packet (per burst where said), median of the repetitions; TSC %.3f GHz; worker 0 on "
              "core %d, worker 1 on core %d_\n\n",
              static_cast<double>(g_tsc_hz) * 1e-9, kCore[0], kCore[1]);
  std::printf("| burst | 1 worker | 2 workers, own meters | 2 workers, same meter | contention per packet | "
              "contention per burst | Mpps own / same | same meter, lock on its own line (comparison) |\n"
              "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int burst : {4, 8, 32}) {
    const std::string b = std::to_string(burst);
    double own = 0, same = 0;
    const std::string one = cell(r, "BM_shared_meter/one_worker/" + b, "ns_per_packet");
    const std::string own_s = cell(r, "BM_shared_meter/two_workers_own_meters/" + b, "ns_per_packet", &own);
    const std::string same_s = cell(r, "BM_shared_meter/two_workers_same_meter/" + b, "ns_per_packet", &same);
    const bool both = own_s != "—" && same_s != "—";
    std::printf("| %d | %s | %s | %s | %s | %s | %s / %s | %s |\n", burst, one.c_str(), own_s.c_str(), same_s.c_str(),
                both ? num(same - own).c_str() : "—",
                both ? num((same - own) * burst).c_str() : "—",
                cell(r, "BM_shared_meter/two_workers_own_meters/" + b, "Mpps").c_str(),
                cell(r, "BM_shared_meter/two_workers_same_meter/" + b, "Mpps").c_str(),
                cell(r, "BM_split_lock_meter/two_workers_same_meter/" + b, "ns_per_packet").c_str());
  }
  std::printf("\n| ring | one core: produce + consume | two cores: at the consumer | producer busy | consumer busy | "
              "busy sum - one core |\n|---:|---:|---:|---:|---:|---:|\n");
  for (int ring : {1024, 4096}) {
    const std::string s = std::to_string(ring);
    double one = 0, pb = 0, cb = 0;
    const std::string one_s = cell(r, "BM_handoff/one_core/" + s, "ns_per_packet", &one);
    const std::string pb_s = cell(r, "BM_handoff/two_cores/" + s, "producer_busy_ns", &pb);
    const std::string cb_s = cell(r, "BM_handoff/two_cores/" + s, "consumer_busy_ns", &cb);
    const bool all = one_s != "—" && pb_s != "—" && cb_s != "—";
    std::printf("| %d | %s | %s | %s | %s | %s |\n", ring, one_s.c_str(),
                cell(r, "BM_handoff/two_cores/" + s, "consumer_ns").c_str(), pb_s.c_str(), cb_s.c_str(),
                all ? num(pb + cb - one).c_str() : "—");
  }
}

void register_benchmarks() {
  using Bench = void (*)(benchmark::State&, MeterMode);
  const std::tuple<const char*, Bench, MeterMode> meter_modes[] = {
      {"BM_shared_meter/one_worker", bm_shared_meter<policer::SharedMeter>, MeterMode::one_worker},
      {"BM_shared_meter/two_workers_own_meters", bm_shared_meter<policer::SharedMeter>,
       MeterMode::two_workers_own_meters},
      {"BM_shared_meter/two_workers_same_meter", bm_shared_meter<policer::SharedMeter>,
       MeterMode::two_workers_same_meter},
      {"BM_split_lock_meter/two_workers_same_meter", bm_shared_meter<SplitLockMeter>,
       MeterMode::two_workers_same_meter},
  };
  for (int burst : {4, 8, 32})
    for (const auto& [name, fn, mode] : meter_modes)
      benchmark::RegisterBenchmark(name, fn, mode)->Arg(burst)->UseManualTime()->Unit(benchmark::kMillisecond);
  const std::pair<const char*, HandoffMode> handoff_modes[] = {
      {"BM_handoff/one_core", HandoffMode::one_core},
      {"BM_handoff/two_cores", HandoffMode::two_cores},
  };
  for (int ring : {1024, 4096})
    for (const auto& [name, mode] : handoff_modes)
      benchmark::RegisterBenchmark(name, bm_handoff, mode)->Arg(ring)->UseManualTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (std::thread::hardware_concurrency() < 2) {
    std::fprintf(stderr, "tricolor-bench-contention: needs two cores (0 and 1)\n");
    return 1;
  }
  auto eal = dataplane::MemoryOnlyEal::init("tricolor-bench-contention", 256);
  if (!eal) {
    std::fprintf(stderr, "tricolor-bench-contention: %s\n", eal.error().message.c_str());
    return 1;
  }
  g_tsc_hz = (*eal)->tsc_hz();
  benchmark::AddCustomContext("tsc_hz", std::to_string(g_tsc_hz));
  benchmark::AddCustomContext("cores", std::to_string(kCore[0]) + "," + std::to_string(kCore[1]));
  register_benchmarks();
  KeepingReporter reporter;
  const std::size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  print_tables(reporter);
  // Nothing run (a filter that matches nothing) or a benchmark that stopped with an error (a core it
  // could not pin to, packets out of order) fails the run, and so the smoke test.
  return ran == 0 || reporter.failed() ? 1 : 0;
}
