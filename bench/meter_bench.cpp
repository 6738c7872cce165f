// tricolor-bench-meters: ns per check of tricolor's meters beside DPDK's rte_meter, same work, same loop.
//
// Every benchmark is named BM_<algorithm>_<blind|aware>/<tricolor|rte_meter>/<meters>; the limiters of
// issue 13 (fixed_window, sliding_window, sliding_window64, gcra, smooth, warmup) have no rte_meter side. It owns an array
// of <meters> meters sharing one profile and checks packets whose meter index, length and input color
// come from precomputed sequences shared by both libraries (deterministic, independent of the meter
// count). The loop is one template for both libraries: bursts of 32 packets, one rte_rdtsc() per burst
// used as the time of all its packets, and a write prefetch of the meter kPrefetch packets ahead
// (every cache line the meter can occupy). Only the call that checks one packet differs.
//
// Rates scale with the meter count so that each meter sees the same load at every size: the
// parameters assume 10 ns per check (1e8 checks/s over all meters) and, by default (--load=mixed),
// offer each meter about four times its CIR (trTCM: PIR = 2 CIR; RFC 4115: EIR = CIR), so that the
// colors mix. --load=light offers about CIR/30 instead: nearly all green. The counters green, yellow
// and red give the mix actually seen (it varies a little with speed: the clock is real).
//
// Meter arrays of 2 MiB or more ask for transparent huge pages (DPDK tables live in huge pages); each
// color is consumed the way a pipeline would, by indexing a per-color table.
//
// The EAL is initialised in memory only (no hugepages, no PCI, no shared files) for the TSC rate that
// rte_meter's profiles need; both libraries time with rte_rdtsc() at rte_get_tsc_hz().
//
// Quick smoke run: tricolor-bench-meters --benchmark_min_time=0.01  (a few seconds)
// Own option:      --load=mixed (default) | --load=light; every other option is Google Benchmark's.
// Table:           tricolor-bench-meters --benchmark_out=m.json --benchmark_out_format=json
//                  && python3 bench/table.py m.json
#include <benchmark/benchmark.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_meter.h>

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dataplane/replay/splitmix64.hpp"
#include "policer/meter.hpp"
#include "policer/profile.hpp"

namespace {

namespace policer = tricolor::policer;

constexpr std::size_t kBurst = 32;            // packets per rte_rdtsc()
constexpr std::size_t kPrefetch = 16;         // packets ahead whose meter is prefetched
constexpr std::size_t kSequence = 1u << 20;   // length of the visit sequence (power of two)
static_assert(kSequence % kBurst == 0 && (kSequence & (kSequence - 1)) == 0);
constexpr std::size_t kSizes[] = {1, 4096, std::size_t{1} << 20};  // meters per benchmark (powers of two)

// ---------------------------------------------------------------------------------------------------
// Workload: the same for both libraries.

using tricolor::splitmix64;

// Simple IMIX: 7 x 64, 4 x 576, 1 x 1500 bytes.
constexpr std::uint16_t kLengths[12] = {64, 64, 64, 64, 64, 64, 64, 576, 576, 576, 576, 1500};
constexpr double kMeanLength = (7 * 64 + 4 * 576 + 1500) / 12.0;

struct Workload {
  std::vector<std::uint64_t> random;  // raw draws; the meter index is the low bits
  std::vector<std::uint16_t> length;  // bytes
  std::vector<std::uint8_t> color;    // input color for aware checks: 70% green, 20% yellow, 10% red

  Workload() : random(kSequence), length(kSequence), color(kSequence) {
    std::uint64_t seed = 0x7231c0102b3e5eedULL;
    for (std::size_t i = 0; i < kSequence; ++i) {
      random[i] = splitmix64(seed);
      const std::uint64_t r = splitmix64(seed);
      length[i] = kLengths[(r & 0xffffffff) % 12];
      const std::uint64_t c = (r >> 32) % 10;
      color[i] = c < 7 ? 0 : c < 9 ? 1 : 2;  // numerically the same in both libraries
    }
  }
};

const Workload& workload() {
  static const Workload w;
  return w;
}

// The meter visited by each packet of the sequence, for `meters` (a power of two) meters.
const std::vector<std::uint32_t>& indices(std::size_t meters) {
  static std::map<std::size_t, std::vector<std::uint32_t>> made;
  auto [it, fresh] = made.try_emplace(meters);
  if (fresh) {
    const Workload& w = workload();
    it->second.resize(kSequence);
    for (std::size_t i = 0; i < kSequence; ++i) it->second[i] = static_cast<std::uint32_t>(w.random[i] & (meters - 1));
  }
  return it->second;
}

// How hard each meter is driven. mixed (default): offered load about 4 CIR, so that green, yellow
// and red mix and the color branches are hard to predict; it stays well above CIR even where a check
// takes twice the assumed time, so that the mix does not swing with the speed measured. light:
// offered load about CIR/30, nearly every packet green (the common case, predictable branches).
enum class Load { mixed, light };
Load g_load = Load::mixed;

// Parameters for `meters` meters, the same for both libraries (bytes, bytes/s). The offered load per
// meter is estimated assuming 10 ns per check (1e8 checks/s over all meters).
struct Rates {
  std::uint64_t cir, cbs, ebs, pir, pbs, eir;
};

Rates rates_for(std::size_t meters) {
  constexpr double kAssumedChecksPerSecond = 1e8;
  const double offered = kAssumedChecksPerSecond * kMeanLength / static_cast<double>(meters);  // per meter
  const double cir = g_load == Load::mixed ? offered / 4 : std::min(2.5e10, offered * 30);
  Rates r{};
  r.cir = std::max<std::uint64_t>(1000, static_cast<std::uint64_t>(std::llround(cir)));
  r.cbs = std::clamp<std::uint64_t>(r.cir / 500, 3000, 128 * 1024);  // 2 ms of CIR, at least two MTUs
  r.ebs = 2 * r.cbs;
  r.pir = 2 * r.cir;
  r.pbs = 2 * r.cbs;
  r.eir = r.cir;
  return r;
}

std::uint64_t tsc_hz() { return rte_get_tsc_hz(); }

// ---------------------------------------------------------------------------------------------------
// Storage: both libraries' meter arrays start on a cache line, and arrays of 2 MiB or more ask for
// transparent huge pages (as DPDK tables live in huge pages); without them a random walk over 1 Mi
// meters measures page walks, which vary with where the kernel happened to place the array.

constexpr std::size_t kHugePage = std::size_t{2} << 20;

template <class T>
struct CacheAligned {
  using value_type = T;
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) noexcept {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return static_cast<T*>(::operator new(bytes, std::align_val_t{64}));
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // advisory: 4 KiB pages if the kernel has no huge page to give
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHugePage) ::operator delete(p, std::align_val_t{64});
    else std::free(p);
  }
  template <class U>
  bool operator==(const CacheAligned<U>&) const noexcept { return true; }
};

template <class T>
using Array = std::vector<T, CacheAligned<T>>;

// Google Benchmark calls a benchmark function several times (growing iteration counts, then each
// repetition). The meters of the latest benchmark are kept between those calls, so that creating and
// draining 1 Mi meters is paid once per benchmark; the previous benchmark's are freed first.
struct Kept {
  const void* tag = nullptr;  // identifies the benchmark function
  std::size_t n = 0;
  std::shared_ptr<void> data;
};
Kept g_kept;

// Returns the kept T for (tag, n) and false, or make()'s new one (nullptr on failure) and true.
template <class T, class Make>
std::pair<T*, bool> keep(const void* tag, std::size_t n, Make&& make) {
  if (g_kept.data && g_kept.tag == tag && g_kept.n == n) return {static_cast<T*>(g_kept.data.get()), false};
  g_kept = {};
  std::shared_ptr<T> made = make();
  if (made) g_kept = {tag, n, made};
  return {made.get(), true};
}

// ---------------------------------------------------------------------------------------------------
// The loop, one template for both libraries.

// Prefetch, with write intent, every cache line a meter of type T can occupy in an array.
template <class T>
[[gnu::always_inline]] inline void prefetch_meter(const T* m) noexcept {
  __builtin_prefetch(m, 1, 3);
  if constexpr (64 % sizeof(T) != 0) __builtin_prefetch(reinterpret_cast<const char*>(m) + sizeof(T) - 1, 1, 3);
}

// One count per color, packed 20 bits apart.
constexpr std::uint64_t kColorCount[3] = {1, std::uint64_t{1} << 20, std::uint64_t{1} << 40};

// Checks one burst of kBurst packets from sequence position `pos` (a multiple of kBurst). Returns the
// colors seen, packed: 20 bits per color.
template <class M, class Check>
[[gnu::always_inline]] inline std::uint64_t burst(M* meters, const std::uint32_t* index, const std::uint16_t* length,
                                                  const std::uint8_t* color, std::size_t pos, Check& check) noexcept {
  const std::uint64_t now = rte_rdtsc();
  std::uint64_t packed = 0;
  for (std::size_t k = 0; k < kBurst; ++k) {
    const std::size_t i = pos + k;
    prefetch_meter(&meters[index[(i + kPrefetch) & (kSequence - 1)]]);
    const unsigned c = check(meters[index[i]], now, length[i], color[i]);
    packed += kColorCount[c];  // what a pipeline does with a color: index a per-color table
  }
  return packed;
}

// Checks needed to empty full buckets with 1500-byte packets (--load=mixed starts from empty buckets).
std::size_t drain_checks(std::size_t meters) {
  if (g_load != Load::mixed) return 0;
  const Rates r = rates_for(meters);
  return static_cast<std::size_t>((r.cbs + std::max({r.ebs, r.pbs})) / 1500 + 2);
}

// `fresh`: the meters were just created (full), not kept from a previous call of the same benchmark.
template <class M, class Check>
void run_checks(benchmark::State& state, M* meters, std::size_t n, bool fresh, Check check) {
  const Workload& w = workload();

  // Untimed: under --load=mixed a meter's steady state is nearly empty buckets, which random visits
  // reach only after many visits per meter (seconds at 1 Mi meters). Get there at once: empty every
  // new meter with a train of 1500-byte packets.
  for (std::size_t m = 0, k = fresh ? drain_checks(n) : 0; m < n && k > 0; ++m) {
    const std::uint64_t now = rte_rdtsc();
    unsigned colors = 0;
    for (std::size_t j = 0; j < k; ++j) colors += check(meters[m], now, 1500, 0);
    benchmark::DoNotOptimize(colors);
  }

  const std::uint32_t* index = indices(n).data();
  const std::uint16_t* length = w.length.data();
  const std::uint8_t* color = w.color.data();

  // Untimed warm-up: one pass over the sequence brings meters and sequences into the caches.
  std::size_t pos = 0;
  for (std::size_t b = 0; b < kSequence / kBurst; ++b, pos += kBurst) {
    std::uint64_t packed = burst(meters, index, length, color, pos, check);
    benchmark::DoNotOptimize(packed);
  }

  std::uint64_t counts[3] = {};
  pos = 0;
  for (auto _ : state) {
    std::uint64_t packed = burst(meters, index, length, color, pos, check);
    benchmark::DoNotOptimize(packed);
    pos = (pos + kBurst) & (kSequence - 1);
    counts[0] += packed & 0xfffff;
    counts[1] += (packed >> 20) & 0xfffff;
    counts[2] += packed >> 40;
  }

  const auto checks = static_cast<double>(state.iterations() * kBurst);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kBurst));
  state.counters["ns_per_check"] = benchmark::Counter(checks, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  const double total = std::max(1.0, checks);
  state.counters["green"] = static_cast<double>(counts[0]) / total;
  state.counters["yellow"] = static_cast<double>(counts[1]) / total;
  state.counters["red"] = static_cast<double>(counts[2]) / total;
}

// ---------------------------------------------------------------------------------------------------
// tricolor

// The limiters (issue 13) get the same load: rate CIR (the windows: CIR * W per window W, W the time
// CIR takes to send CBS, at least 10 ms; the sliding window in 4 sub-windows, the per-key form) and a
// burst of CBS (GCRA's tolerance CBS / CIR; the warm-up's stored permits CBS, at cold-factor 3).
constexpr std::uint64_t kMinWindowNs = 10'000'000;

template <class Algo>
policer::Params params_for(std::size_t meters) {
  const Rates r = rates_for(meters);
  policer::Params p;
  p.algorithm = Algo::algorithm;
  p.unit = policer::Unit::bytes;
  if constexpr (policer::is_limiter(Algo::algorithm)) {
    const std::uint64_t window = std::max(kMinWindowNs, r.cbs * 1'000'000'000 / r.cir);
    p.limit = std::min<std::uint64_t>(static_cast<std::uint64_t>((unsigned __int128)r.cir * window / 1'000'000'000), policer::kMaxBurst);
    if constexpr (Algo::algorithm == policer::Algorithm::fixed_window) p.window = window;
    if constexpr (Algo::algorithm == policer::Algorithm::sliding_window) p.window = window, p.buckets = 4;
    if constexpr (!(Algo::algorithm == policer::Algorithm::fixed_window || Algo::algorithm == policer::Algorithm::sliding_window)) {
      p.limit = 0;
      p.rate = r.cir;
    }
    if constexpr (Algo::algorithm == policer::Algorithm::gcra) p.tolerance = r.cbs * 1'000'000'000 / r.cir;
    if constexpr (Algo::algorithm == policer::Algorithm::smooth) p.max_burst = r.cbs;
    if constexpr (Algo::algorithm == policer::Algorithm::warmup) p.period = r.cbs * 1'000'000'000 / r.cir, p.cold_factor = 3;
    return p;
  }
  p.cir = r.cir;
  p.cbs = r.cbs;
  if constexpr (Algo::algorithm == policer::Algorithm::srtcm) {
    p.ebs = r.ebs;
  } else if constexpr (Algo::algorithm == policer::Algorithm::trtcm) {
    p.pir = r.pir;
    p.pbs = r.pbs;
  } else if constexpr (Algo::algorithm == policer::Algorithm::trtcm_4115) {
    p.eir = r.eir;
    p.ebs = r.ebs;
  }
  return p;
}

struct TricolorMeters {
  policer::Profile profile;  // on the heap, like rte_meter's: a profile lives in a table
  Array<policer::State> states;
};

template <class Algo, bool Aware>
void bm_tricolor(benchmark::State& state) {
  static const char tag = 0;
  const auto n = static_cast<std::size_t>(state.range(0));
  std::string error;
  auto [meters, fresh] = keep<TricolorMeters>(&tag, n, [&]() -> std::shared_ptr<TricolorMeters> {
    auto tick_rate = policer::TickRate::make(tsc_hz());
    if (!tick_rate) {
      error = tick_rate.error().message;
      return nullptr;
    }
    auto profile = policer::Profile::make(params_for<Algo>(n), *tick_rate);
    if (!profile) {
      error = profile.error().message;
      return nullptr;
    }
    return std::make_shared<TricolorMeters>(
        TricolorMeters{*profile, Array<policer::State>(n, policer::full_state(*profile, rte_rdtsc()))});
  });
  if (!meters) {
    state.SkipWithError(error.c_str());
    return;
  }
  const policer::Profile* profile = &meters->profile;
  benchmark::DoNotOptimize(profile);
  run_checks(state, meters->states.data(), n, fresh,
             [profile](policer::State& s, std::uint64_t now, std::uint32_t len, std::uint8_t in) -> unsigned {
               if constexpr (Aware)
                 return static_cast<unsigned>(
                     policer::check_aware<Algo>(s, *profile, now, len, static_cast<policer::Color>(in)));
               else
                 return static_cast<unsigned>(policer::check_blind<Algo>(s, *profile, now, len));
             });
}

// The sliding window's aggregate form, 64 sub-windows (policer::WideWindow, 280 bytes), for scale: it
// is what a rule's aggregate meter of K > 4 would be.
struct WideMeters {
  policer::Profile profile;
  Array<policer::WideWindow> windows;
};

template <bool Aware>
void bm_wide_window(benchmark::State& state) {
  static const char tag = 0;
  const auto n = static_cast<std::size_t>(state.range(0));
  std::string error;
  auto [meters, fresh] = keep<WideMeters>(&tag, n, [&]() -> std::shared_ptr<WideMeters> {
    policer::Params params = params_for<policer::SlidingWindow>(n);
    params.buckets = policer::kMaxWindowBuckets;
    auto profile = policer::Profile::make(params, *policer::TickRate::make(tsc_hz()));
    if (!profile) {
      error = profile.error().message;
      return nullptr;
    }
    return std::make_shared<WideMeters>(WideMeters{*profile, Array<policer::WideWindow>(n, policer::WideWindow(*profile, rte_rdtsc()))});
  });
  if (!meters) {
    state.SkipWithError(error.c_str());
    return;
  }
  const policer::Profile* profile = &meters->profile;
  benchmark::DoNotOptimize(profile);
  run_checks(state, meters->windows.data(), n, fresh,
             [profile](policer::WideWindow& w, std::uint64_t now, std::uint32_t len, std::uint8_t in) -> unsigned {
               w.advance(*profile, now);
               return static_cast<unsigned>(
                   w.decide(*profile, profile->cost(len), Aware ? static_cast<policer::Color>(in) : policer::Color::green));
             });
}

// ---------------------------------------------------------------------------------------------------
// rte_meter

struct RteSrtcm {
  using Meter = rte_meter_srtcm;
  using Profile = rte_meter_srtcm_profile;
  static int profile(Profile* p, const Rates& r) {
    rte_meter_srtcm_params params{r.cir, r.cbs, r.ebs};
    return rte_meter_srtcm_profile_config(p, &params);
  }
  static int config(Meter* m, Profile* p) { return rte_meter_srtcm_config(m, p); }
  static rte_color blind(Meter* m, Profile* p, std::uint64_t t, std::uint32_t len) {
    return rte_meter_srtcm_color_blind_check(m, p, t, len);
  }
  static rte_color aware(Meter* m, Profile* p, std::uint64_t t, std::uint32_t len, rte_color in) {
    return rte_meter_srtcm_color_aware_check(m, p, t, len, in);
  }
};

struct RteTrtcm {
  using Meter = rte_meter_trtcm;
  using Profile = rte_meter_trtcm_profile;
  static int profile(Profile* p, const Rates& r) {
    rte_meter_trtcm_params params{r.cir, r.pir, r.cbs, r.pbs};
    return rte_meter_trtcm_profile_config(p, &params);
  }
  static int config(Meter* m, Profile* p) { return rte_meter_trtcm_config(m, p); }
  static rte_color blind(Meter* m, Profile* p, std::uint64_t t, std::uint32_t len) {
    return rte_meter_trtcm_color_blind_check(m, p, t, len);
  }
  static rte_color aware(Meter* m, Profile* p, std::uint64_t t, std::uint32_t len, rte_color in) {
    return rte_meter_trtcm_color_aware_check(m, p, t, len, in);
  }
};

struct RteTrtcm4115 {
  using Meter = rte_meter_trtcm_rfc4115;
  using Profile = rte_meter_trtcm_rfc4115_profile;
  static int profile(Profile* p, const Rates& r) {
    rte_meter_trtcm_rfc4115_params params{r.cir, r.eir, r.cbs, r.ebs};
    return rte_meter_trtcm_rfc4115_profile_config(p, &params);
  }
  static int config(Meter* m, Profile* p) { return rte_meter_trtcm_rfc4115_config(m, p); }
  static rte_color blind(Meter* m, Profile* p, std::uint64_t t, std::uint32_t len) {
    return rte_meter_trtcm_rfc4115_color_blind_check(m, p, t, len);
  }
  static rte_color aware(Meter* m, Profile* p, std::uint64_t t, std::uint32_t len, rte_color in) {
    return rte_meter_trtcm_rfc4115_color_aware_check(m, p, t, len, in);
  }
};

template <class Rte>
struct RteMeters {
  typename Rte::Profile profile;
  Array<typename Rte::Meter> meters;
};

template <class Rte, bool Aware>
void bm_rte(benchmark::State& state) {
  static const char tag = 0;
  const auto n = static_cast<std::size_t>(state.range(0));
  std::string error;
  auto [meters, fresh] = keep<RteMeters<Rte>>(&tag, n, [&]() -> std::shared_ptr<RteMeters<Rte>> {
    auto made = std::make_shared<RteMeters<Rte>>();
    if (int rc = Rte::profile(&made->profile, rates_for(n)); rc != 0) {
      error = "rte_meter profile config: " + std::to_string(rc);
      return nullptr;
    }
    made->meters.resize(n);
    for (auto& m : made->meters) {
      if (int rc = Rte::config(&m, &made->profile); rc != 0) {
        error = "rte_meter config: " + std::to_string(rc);
        return nullptr;
      }
    }
    return made;
  });
  if (!meters) {
    state.SkipWithError(error.c_str());
    return;
  }
  typename Rte::Profile* p = &meters->profile;
  benchmark::DoNotOptimize(p);
  run_checks(state, meters->meters.data(), n, fresh,
             [p](typename Rte::Meter& m, std::uint64_t now, std::uint32_t len, std::uint8_t in) -> unsigned {
               if constexpr (Aware)
                 return static_cast<unsigned>(Rte::aware(&m, p, now, len, static_cast<rte_color>(in)));
               else
                 return static_cast<unsigned>(Rte::blind(&m, p, now, len));
             });
}

// ---------------------------------------------------------------------------------------------------

using BenchFn = void (*)(benchmark::State&);

struct Family {
  const char* name;
  BenchFn tricolor;
  BenchFn rte;  // nullptr: no rte_meter equivalent
};

void register_benchmarks() {
  using policer::OneRateTwoColor, policer::SrTcm, policer::TrTcm, policer::TrTcm4115;
  const Family families[] = {
      {"BM_1r2c_blind", bm_tricolor<OneRateTwoColor, false>, nullptr},
      {"BM_1r2c_aware", bm_tricolor<OneRateTwoColor, true>, nullptr},
      {"BM_srtcm_blind", bm_tricolor<SrTcm, false>, bm_rte<RteSrtcm, false>},
      {"BM_srtcm_aware", bm_tricolor<SrTcm, true>, bm_rte<RteSrtcm, true>},
      {"BM_trtcm_blind", bm_tricolor<TrTcm, false>, bm_rte<RteTrtcm, false>},
      {"BM_trtcm_aware", bm_tricolor<TrTcm, true>, bm_rte<RteTrtcm, true>},
      // The limiters beside trTCM (two colors; no rte_meter equivalent).
      {"BM_fixed_window_blind", bm_tricolor<policer::FixedWindow, false>, nullptr},
      {"BM_sliding_window_blind", bm_tricolor<policer::SlidingWindow, false>, nullptr},
      {"BM_sliding_window64_blind", bm_wide_window<false>, nullptr},
      {"BM_gcra_blind", bm_tricolor<policer::Gcra, false>, nullptr},
      {"BM_smooth_blind", bm_tricolor<policer::Smooth, false>, nullptr},
      {"BM_warmup_blind", bm_tricolor<policer::Warmup, false>, nullptr},
      {"BM_warmup_aware", bm_tricolor<policer::Warmup, true>, nullptr},
      {"BM_rfc4115_blind", bm_tricolor<TrTcm4115, false>, bm_rte<RteTrtcm4115, false>},
      {"BM_rfc4115_aware", bm_tricolor<TrTcm4115, true>, bm_rte<RteTrtcm4115, true>},
  };
  // Interleaved (tricolor, rte_meter) per size, so that both sides of a comparison run close in time.
  for (const Family& f : families) {
    for (std::size_t n : kSizes) {
      const auto arg = static_cast<std::int64_t>(n);
      benchmark::RegisterBenchmark((std::string(f.name) + "/tricolor").c_str(), f.tricolor)->Arg(arg);
      if (f.rte) benchmark::RegisterBenchmark((std::string(f.name) + "/rte_meter").c_str(), f.rte)->Arg(arg);
    }
  }
}

// EAL in memory only, on the CPU we run on; the process's CPU affinity is restored afterwards (pin the
// benchmark with taskset if wanted).
bool init_eal(const char* argv0) {
  cpu_set_t saved;
  CPU_ZERO(&saved);
  const bool have_affinity = sched_getaffinity(0, sizeof saved, &saved) == 0;
  int cpu = 0;
  if (have_affinity) {
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved)) ++cpu;
    if (cpu == CPU_SETSIZE) cpu = 0;
  }
  std::vector<std::string> args = {
      argv0,
      "-l",
      std::to_string(cpu),
      "--no-huge",
      "-m",
      "64",
      "--no-pci",
      "--no-shconf",
      "--no-telemetry",
      "--log-level=lib.*:error",
      "--file-prefix=tricolor-bench-" + std::to_string(getpid()),
  };
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(argv.size() - 1), argv.data()) < 0) {
    std::fprintf(stderr, "tricolor-bench-meters: rte_eal_init: %s\n", rte_strerror(rte_errno));
    return false;
  }
  if (have_affinity) sched_setaffinity(0, sizeof saved, &saved);
  return true;
}

// Takes our own option out of argv: --load=mixed|light.
bool parse_load(int& argc, char** argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--load=")) {
      const std::string_view value = arg.substr(7);
      if (value == "mixed") {
        g_load = Load::mixed;
      } else if (value == "light") {
        g_load = Load::light;
      } else {
        std::fprintf(stderr, "tricolor-bench-meters: --load must be mixed or light, not '%s'\n", argv[i] + 7);
        return false;
      }
      continue;
    }
    argv[out++] = argv[i];
  }
  argv[out] = nullptr;
  argc = out;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!parse_load(argc, argv)) return 1;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!init_eal(argv[0])) return 1;
  benchmark::AddCustomContext("load", g_load == Load::mixed ? "mixed" : "light");
  benchmark::AddCustomContext("tsc_hz", std::to_string(tsc_hz()));
  benchmark::AddCustomContext("burst", std::to_string(kBurst));
  benchmark::AddCustomContext("prefetch_distance", std::to_string(kPrefetch));
  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // The EAL leaves its (empty, with --no-shconf) runtime directory behind: remove it.
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  rmdir(runtime_dir.c_str());
  return 0;
}
