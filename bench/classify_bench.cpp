// tricolor-bench-classify: ns per packet to find a packet's first matching rule among 10, 1 Ki and
// 10 Ki rules, with the rte_acl classifier (dataplane/classifier) beside the obvious first-match scan
// (dataplane/match.hpp) as the baseline, in the same binary over the same packets.
//
// Rules look like an operator's: per-customer /24../32 IPv4 and /48../64 IPv6 destinations, some with
// protocol and destination ports or port ranges, a few with DSCP or VLAN. Packets are drawn so that
// about 90% fall inside a random rule (anywhere in the list) and 10% match none. Bursts of 32, as the
// engine classifies them. Build time of the classifier and its entries are reported as counters.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "dataplane/classifier.hpp"
#include "dataplane/eal.hpp"
#include "dataplane/match.hpp"
#include "dataplane/splitmix64.hpp"

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

void BM_classify_acl(benchmark::State& state) {
  const Workload& w = workload(static_cast<std::size_t>(state.range(0)));
  const auto started = std::chrono::steady_clock::now();
  auto classifier = Classifier::build(w.rules);
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

BENCHMARK(BM_classify_acl)->Arg(10)->Arg(1024)->Arg(10240)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_classify_linear)->Arg(10)->Arg(1024)->Arg(10240)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
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
