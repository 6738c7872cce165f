// tricolor-bench-classify: ns per packet to find a packet's first matching rule among 10, 1 Ki and
// 10 Ki rules, with the rte_acl classifier (dataplane/classifier) beside the obvious first-match scan
// (dataplane/engine/match.hpp) as the baseline, in the same binary over the same packets.
//
// Rules look like an operator's: per-customer /24../32 IPv4 and /48../64 IPv6 destinations, some with
// protocol and destination ports or port ranges, a few with DSCP or VLAN. Packets are drawn so that
// about 90% fall inside a random rule (anywhere in the list) and 10% match none. Bursts of 32, as the
// engine classifies them. Build time of the classifier and its entries are reported as counters.
//
// BM_build/<shape>/<entries>: what building a rule set of that many trie entries costs, per shape
// (the figures behind kDefaultMaxClassifierEntries): build time and peak memory, each build in a
// child process (this program again, its own EAL) so that its peak is its own (build_ms: wall time; build_cpu_ms: the child's CPU time,
// steadier on a busy machine; peak_mib: growth of the child's peak resident set over
// its start, C heap and DPDK heap together; dpdk_mib: DPDK heap taken by the run-time tables, which
// in tricolor-replay come from a 2 GiB heap). Shapes:
//   0 prefixes      rules of one IPv4 /24 destination each: 1 entry a rule (benign)
//   1 port lists    IPv4 /24 destination, TCP, 16 destination ports: 16 entries a rule (benign)
//   2 ranges x dscp IPv4 /8 destination, 2^15 disjoint source ports x 2 DSCP blocks: 65536 a rule
//   3 ranges x ranges IPv4 /8 destination, 256 disjoint source x 256 disjoint destination ports
//   4 no prefix     as 2 without a destination: each rule in both tries (half the ports, same entries)
//   5 overlapping   IPv4 only, any address: rule i has 2^14 two-port source ranges starting at 4k + i % 4
//                   (each overlapping its neighbours' in the other rules) x 4 DSCP blocks: 65536 a rule
// Run (a few minutes):
//   tricolor-bench-classify --benchmark_filter=BM_build
#include <benchmark/benchmark.h>

#include <rte_malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string_view>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/engine/classifier.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/engine/match.hpp"
#include "dataplane/replay/splitmix64.hpp"

namespace {

using namespace tricolor::dataplane;

constexpr std::size_t kBurst = 32;
constexpr std::size_t kPackets = 1u << 16;  // distinct packets cycled through

using Random = tricolor::SplitMix64;

Rule make_rule(Random& r, std::size_t i) {
  Rule rule;
  rule.name = "customer" + std::to_string(i);
  rule.profile = "p";
  Match& m = rule.match;
  Prefix dst;
  dst.ipv6 = r.below(4) == 0;
  if (dst.ipv6) {
    dst.address = {0x20, 0x01, 0x0d, 0xb8, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i)};
    dst.length = static_cast<std::uint8_t>(r.below(2) == 0 ? 48 : 64);
    if (dst.length == 64) dst.address[6] = static_cast<std::uint8_t>(r.below(256));
  } else {
    dst.address = {10, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i), 0};
    dst.length = static_cast<std::uint8_t>(r.below(3) == 0 ? 32 : 24);
    if (dst.length == 32) dst.address[3] = static_cast<std::uint8_t>(1 + r.below(254));
  }
  m.dst = dst;
  switch (r.below(4)) {
    case 0: break;
    case 1: m.protocol = 6, m.dst_ports = {{80, 80}, {443, 443}}; break;
    case 2: m.protocol = 17, m.dst_ports = {{static_cast<std::uint16_t>(1024 + r.below(1000)), 65535}}; break;
    default: m.protocol = 17; break;
  }
  if (r.below(10) == 0) m.dscp = {46};
  if (r.below(10) == 0) m.vlan = static_cast<std::uint16_t>(r.below(4096));
  return rule;
}

struct Workload {
  std::vector<Rule> rules;
  std::vector<PacketView> views;
  std::vector<Parsed> parsed;
};

Workload make_workload(std::size_t rule_count) {
  Random r{rule_count * 7919};
  Workload w;
  for (std::size_t i = 0; i < rule_count; ++i) w.rules.push_back(make_rule(r, i));
  w.views.resize(kPackets);
  w.parsed.resize(kPackets);
  for (std::size_t k = 0; k < kPackets; ++k) {
    Parsed& p = w.parsed[k];
    const bool miss = r.below(10) == 0;
    const Rule& rule = w.rules[r.below(rule_count)];
    const Match& m = rule.match;
    p.l3 = m.dst->ipv6 ? L3::ipv6 : L3::ipv4;
    p.dst = m.dst->address;
    for (unsigned b = m.dst->length; b < (m.dst->ipv6 ? 128u : 32u); b += 8) p.dst[b / 8] = static_cast<std::uint8_t>(r.below(256));
    if (miss) p.dst[0] = 192;  // outside every rule
    p.src = {172, 16, static_cast<std::uint8_t>(r.below(256)), static_cast<std::uint8_t>(r.below(256))};
    p.protocol = m.protocol.value_or(static_cast<std::uint8_t>(r.below(2) == 0 ? 6 : 17));
    p.src_port = static_cast<std::uint16_t>(1024 + r.below(60000));
    p.dst_port = m.dst_ports.empty() ? static_cast<std::uint16_t>(r.below(65536)) : m.dst_ports[0].first;
    p.dscp = m.dscp.empty() ? 0 : m.dscp[0];
    p.has_vlan = m.vlan.has_value();
    p.vlan_id = m.vlan.value_or(0);
  }
  return w;
}

const Workload& workload(std::size_t rules) {
  static std::map<std::size_t, Workload> made;
  auto it = made.find(rules);
  if (it == made.end()) it = made.emplace(rules, make_workload(rules)).first;
  return it->second;
}

// Classifies the workload's packets burst after burst with a classifier built with `limits`; its
// ns_per_packet, entries and build time as counters.
void time_classifier(benchmark::State& state, const Workload& w, const ClassifierLimits& limits) {
  const auto started = std::chrono::steady_clock::now();
  auto classifier = Classifier::build(w.rules, limits);
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (!classifier) {
    state.SkipWithError(classifier.error().message.c_str());
    return;
  }
  std::uint32_t result[kBurst];
  std::size_t pos = 0, matched = 0;
  for (auto _ : state) {
    (*classifier)->classify(std::span(w.views).subspan(pos, kBurst), std::span(w.parsed).subspan(pos, kBurst), result);
    for (std::uint32_t r : result) matched += r != kNoRule;
    pos = (pos + kBurst) % kPackets;
  }
  benchmark::DoNotOptimize(matched);
  const auto packets = static_cast<double>(state.iterations() * kBurst);
  state.counters["ns_per_packet"] = benchmark::Counter(packets, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["build_ms"] = build_ms;
  state.counters["entries"] = static_cast<double>((*classifier)->entries());
}

void BM_classify_acl(benchmark::State& state) {
  ClassifierLimits trie;
  trie.scan_entries = 0;  // rte_acl whatever the rule count (BM_scan_or_trie compares the scan)
  time_classifier(state, workload(static_cast<std::size_t>(state.range(0))), trie);
}

void BM_classify_linear(benchmark::State& state) {
  const Workload& w = workload(static_cast<std::size_t>(state.range(0)));
  std::size_t pos = 0, matched = 0;
  for (auto _ : state) {
    for (std::size_t k = 0; k < kBurst; ++k) matched += first_match(w.rules, w.views[pos + k], w.parsed[pos + k]) != UINT32_MAX;
    pos = (pos + kBurst) % kPackets;
  }
  benchmark::DoNotOptimize(matched);
  const auto packets = static_cast<double>(state.iterations() * kBurst);
  state.counters["ns_per_packet"] = benchmark::Counter(packets, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// BM_scan_or_trie/<0 trie, 1 scan>/<rules>: a few rules (1 to 32) put in rte_acl's trie or scanned in
// order (ClassifierLimits::scan_entries): where the scan stops paying sets kDefaultScanEntries.
void BM_scan_or_trie(benchmark::State& state) {
  ClassifierLimits limits;
  limits.scan_entries = state.range(0) == 1 ? SIZE_MAX : 0;
  time_classifier(state, workload(static_cast<std::size_t>(state.range(1))), limits);
}

// BM_hash_or_trie/<0 trie, 1 hash, 2 scan>/<rules>: rules of one shape, as many operator policies are (a /32
// per customer, UDP, one port of four), in rte_acl's trie or in the exact-match hash
// (ClassifierLimits::exact_hash, exact_match.hpp); 90% of packets match a rule anywhere in the list.
const Workload& one_shape_workload(std::size_t rule_count) {
  static std::map<std::size_t, Workload> made;
  if (auto it = made.find(rule_count); it != made.end()) return it->second;
  Random r{rule_count * 104729};
  Workload w;
  const std::uint16_t ports[4] = {53, 123, 443, 4789};
  for (std::size_t i = 0; i < rule_count; ++i) {
    Rule& rule = w.rules.emplace_back();
    rule.name = "r" + std::to_string(i);
    rule.profile = "p";
    Prefix dst;
    dst.address = {10, static_cast<std::uint8_t>(i >> 16), static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i)};
    dst.length = 32;
    rule.match.dst = dst;
    rule.match.protocol = 17;
    rule.match.dst_ports = {{ports[i % 4], ports[i % 4]}};
  }
  w.views.resize(kPackets);
  w.parsed.resize(kPackets);
  for (std::size_t k = 0; k < kPackets; ++k) {
    Parsed& p = w.parsed[k];
    const Rule& rule = w.rules[r.below(rule_count)];
    p.l3 = L3::ipv4;
    p.dst = rule.match.dst->address;
    if (r.below(10) == 0) p.dst[0] = 192;  // outside every rule
    p.src = {172, 16, static_cast<std::uint8_t>(r.below(256)), static_cast<std::uint8_t>(r.below(256))};
    p.protocol = 17;
    p.src_port = static_cast<std::uint16_t>(1024 + r.below(60000));
    p.dst_port = rule.match.dst_ports[0].first;
  }
  return made.emplace(rule_count, std::move(w)).first->second;
}

void BM_hash_or_trie(benchmark::State& state) {
  ClassifierLimits limits;
  limits.scan_entries = state.range(0) == 2 ? SIZE_MAX : 0;
  limits.exact_hash = state.range(0) == 1;
  time_classifier(state, one_shape_workload(static_cast<std::size_t>(state.range(1))), limits);
}

// ---- build cost by shape and size ----

enum Shape : int { kPrefixes, kPortLists, kRangesByDscp, kRangesByRanges, kNoPrefix, kOverlapping, kShapes };

Prefix ipv4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t length) {
  Prefix p;
  p.address = {a, b, c, 0};
  p.length = length;
  return p;
}

// Rules of `shape` adding up to `entries` trie entries (the last rule cut short).
std::vector<Rule> shaped_rules(int shape, std::size_t entries) {
  std::vector<Rule> rules;
  for (std::size_t made = 0, i = 0; made < entries; ++i) {
    Rule& rule = rules.emplace_back();
    rule.name = "r" + std::to_string(i);
    rule.profile = "p";
    Match& m = rule.match;
    const std::size_t left = entries - made;
    switch (shape) {
      case kPrefixes:
        m.dst = ipv4(10, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i), 24);
        made += 1;
        break;
      case kPortLists: {
        m.dst = ipv4(10, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i), 24);
        m.protocol = 6;
        const std::size_t n = std::min<std::size_t>(16, left);
        for (std::size_t k = 0; k < n; ++k) m.dst_ports.push_back({static_cast<std::uint16_t>(20 + 7 * k + i % 5), static_cast<std::uint16_t>(20 + 7 * k + i % 5)});
        made += n;
        break;
      }
      case kRangesByDscp:
      case kNoPrefix: {
        if (shape == kRangesByDscp) m.dst = ipv4(static_cast<std::uint8_t>(i), 0, 0, 8);
        const std::size_t per_port = shape == kNoPrefix ? 4 : 2;  // 2 blocks, x 2 tries without a prefix
        const std::size_t n = std::min<std::size_t>(32768 / (per_port / 2), left / per_port);
        for (std::size_t k = 0; k < n; ++k) m.src_ports.push_back({static_cast<std::uint16_t>(2 * k), static_cast<std::uint16_t>(2 * k)});
        m.dscp = {10, 12};
        made += n * per_port;
        break;
      }
      case kRangesByRanges: {
        m.dst = ipv4(static_cast<std::uint8_t>(i), 0, 0, 8);
        const std::size_t side = left >= 65536 ? 256 : 1;
        const std::size_t other = left >= 65536 ? 256 : std::min<std::size_t>(left, 32768);
        for (std::size_t k = 0; k < side; ++k) m.src_ports.push_back({static_cast<std::uint16_t>(2 * k), static_cast<std::uint16_t>(2 * k)});
        for (std::size_t k = 0; k < other; ++k) m.dst_ports.push_back({static_cast<std::uint16_t>(2 * k), static_cast<std::uint16_t>(2 * k)});
        made += side * other;
        break;
      }
      case kOverlapping: {
        m.src = ipv4(0, 0, 0, 0);  // any IPv4 source: the IPv4 trie only
        const std::size_t n = std::min<std::size_t>(16384, left / 4);
        for (std::size_t k = 0; k < n; ++k) {
          const auto first = static_cast<std::uint16_t>(4 * k + i % 4);
          m.src_ports.push_back({first, static_cast<std::uint16_t>(first + 1)});
        }
        m.dscp = {10, 12, 14, 16};
        made += n * 4;
        break;
      }
      default: return rules;
    }
  }
  return rules;
}

std::size_t status_kib(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string word;
  while (status >> word) {
    if (word == key) {
      std::size_t kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(4096, '\n');
  }
  return 0;
}

struct BuildFigures {
  double ms = 0;
  double cpu_ms = 0;
  double peak_mib = 0;
  double dpdk_mib = 0;
  double entries = 0;
  double rules = 0;
  char error[1024] = {};
};

// CPU time of this process (user + system): less disturbed than wall time by other work on the machine.
double cpu_ms() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

std::size_t dpdk_heap_bytes() {
  rte_malloc_socket_stats stats{};
  rte_malloc_get_socket_stats(0, &stats);
  return stats.heap_allocsz_bytes;
}

constexpr std::string_view kBuildChild = "--build-child=";  // SHAPE:ENTRIES, see build_child()

// The child: its own EAL, the rules made, then one build measured, the figures written to stdout as
// raw bytes. A fresh process, not a fork: DPDK's heap (a shared memfd with --no-huge) would be shared
// with the parent while its bookkeeping is not, and the peak is the child's own.
int build_child(std::string_view spec) {
  const int shape = std::atoi(std::string(spec.substr(0, spec.find(':'))).c_str());
  const auto entries = static_cast<std::size_t>(std::atoll(std::string(spec.substr(spec.find(':') + 1)).c_str()));
  auto eal = MemoryOnlyEal::init("tricolor-bench-classify-build");
  if (!eal) return 1;
  const auto rules = shaped_rules(shape, entries);
  { std::ofstream("/proc/self/clear_refs") << "5"; }  // VmHWM := VmRSS
  BuildFigures f;
  const std::size_t rss = status_kib("VmRSS:"), dpdk = dpdk_heap_bytes();
  const double cpu_before = cpu_ms();
  const auto started = std::chrono::steady_clock::now();
  auto classifier = Classifier::build(rules, ClassifierLimits{SIZE_MAX});
  f.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  f.cpu_ms = cpu_ms() - cpu_before;
  f.peak_mib = static_cast<double>(status_kib("VmHWM:") - rss) / 1024;
  f.dpdk_mib = (static_cast<double>(dpdk_heap_bytes()) - static_cast<double>(dpdk)) / (1 << 20);
  f.rules = static_cast<double>(rules.size());
  if (classifier) f.entries = static_cast<double>((*classifier)->entries());
  else std::snprintf(f.error, sizeof f.error, "%s", classifier.error().message.c_str());
  return std::fwrite(&f, sizeof f, 1, stdout) == 1 ? 0 : 1;
}

// One build in a child process (this program again, with kBuildChild).
BuildFigures build_in_child(int shape, std::size_t entries) {
  BuildFigures figures;
  std::snprintf(figures.error, sizeof figures.error, "the child failed");
  int fds[2];
  if (pipe(fds) != 0) return figures;
  const std::string spec = std::string(kBuildChild) + std::to_string(shape) + ":" + std::to_string(entries);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl("/proc/self/exe", "tricolor-bench-classify", spec.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  BuildFigures f;
  if (read(fds[0], &f, sizeof f) == sizeof f) figures = f;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return figures;
}

void BM_build(benchmark::State& state) {
  BuildFigures f;
  for (auto _ : state) f = build_in_child(static_cast<int>(state.range(0)), static_cast<std::size_t>(state.range(1)));
  if (f.error[0] != 0) {
    state.SkipWithError(f.error);
    return;
  }
  state.counters["build_ms"] = f.ms;
  state.counters["build_cpu_ms"] = f.cpu_ms;
  state.counters["peak_mib"] = f.peak_mib;
  state.counters["dpdk_mib"] = f.dpdk_mib;
  state.counters["entries"] = f.entries;
  state.counters["rules"] = f.rules;
}

BENCHMARK(BM_classify_acl)->Arg(10)->Arg(1024)->Arg(10240)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_classify_linear)->Arg(10)->Arg(1024)->Arg(10240)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_scan_or_trie)->ArgsProduct({{0, 1}, {1, 2, 4, 8, 16, 32}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_hash_or_trie)->ArgsProduct({{0, 1}, {16, 1024, 10240, 102400}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_hash_or_trie)->ArgsProduct({{1, 2}, {1, 2, 4, 8, 16}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_build)
    ->ArgsProduct({{kPrefixes, kPortLists, kRangesByDscp, kRangesByRanges, kNoPrefix, kOverlapping}, {1 << 14, 1 << 16, 1 << 17, 1 << 18, 1 << 20}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]).starts_with(kBuildChild)) return build_child(std::string_view(argv[1]).substr(kBuildChild.size()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  auto eal = MemoryOnlyEal::init("tricolor-bench-classify");
  if (!eal) {
    std::fprintf(stderr, "tricolor-bench-classify: %s\n", eal.error().message.c_str());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
