// tricolor-bench-language: time per command of control::load() over configs of N profiles and N rules,
// N = 1 Ki .. 1 Mi. Loading must be linear: the time per command stays flat as N grows (issue 7).
//
//   append:   N profiles, then N rules each added last, each naming one of the profiles;
//   anywhere: the same, with rules added first, last, before or after a random earlier rule, one in
//             eight changed (half of them moved), one in sixteen deleted, one profile in eight changed,
//             and a `rule list` and a `show` every 64 commands (a loaded file formats no output).
// The text is built before timing; a timed iteration is one load() of it.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "control/language/language.hpp"
#include "dataplane/replay/splitmix64.hpp"

namespace {

using Random = tricolor::SplitMix64;

struct Config {
  std::string text;
  std::size_t commands = 0;
};

void line(Config& config, const std::string& command) {
  config.text.append(command).append("\n");
  ++config.commands;
}

std::string profile_line(std::string_view verb, std::size_t i, std::uint64_t kbit) {
  return std::string("profile ").append(verb).append(" p").append(std::to_string(i)).append(" trtcm cir ")
      .append(std::to_string(kbit)).append("kbit cbs 64k pir ").append(std::to_string(2 * kbit))
      .append("kbit pbs 128k");
}

// A customer rule: its own /24 or /32, sometimes a protocol and ports, a remark for yellow.
std::string rule_body(Random& r, std::size_t i, std::size_t profiles) {
  std::string body = " dst 10." + std::to_string(i >> 16 & 0xff) + "." + std::to_string(i >> 8 & 0xff) + "." +
                     std::to_string(i & 0xff);
  if (r.chance(50)) body += " proto tcp dport 80,443";
  body += " profile p" + std::to_string(r.below(profiles)) + " yellow remark af12";
  return body;
}

Config make_config(std::size_t n, bool anywhere) {
  Random r{n * 31 + (anywhere ? 1 : 0)};
  Config config;
  config.text.reserve(n * 160);
  for (std::size_t i = 0; i < n; ++i) line(config, profile_line("add", i, 1000 + r.below(1'000'000)));
  std::vector<std::size_t> live;  // rule numbers that exist, for anchors
  live.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::string position;
    if (anywhere && !live.empty()) {
      switch (r.below(4)) {
        case 0: position = " first"; break;
        case 1: position = " last"; break;
        case 2: position = " before r" + std::to_string(live[r.below(live.size())]); break;
        default: position = " after r" + std::to_string(live[r.below(live.size())]); break;
      }
    }
    line(config, "rule add r" + std::to_string(i) + position + rule_body(r, i, n));
    live.push_back(i);
    if (!anywhere) continue;
    if (r.chance(12)) {
      const std::size_t which = live[r.below(live.size())];
      line(config, "rule change r" + std::to_string(which) + (r.chance(50) ? " first" : "") + rule_body(r, which, n));
    }
    if (r.chance(6) && live.size() > 1) {
      const std::size_t at = r.below(live.size());
      line(config, "rule delete r" + std::to_string(live[at]));
      live[at] = live.back();
      live.pop_back();
    }
    if (r.chance(12)) line(config, profile_line("change", r.below(n), 1000 + r.below(1'000'000)));
    if (i % 64 == 0) {
      line(config, "rule list");
      line(config, "show");
    }
  }
  return config;
}

void BM_load(benchmark::State& state, bool anywhere) {
  const Config config = make_config(static_cast<std::size_t>(state.range(0)), anywhere);
  for (auto _ : state) {
    auto policy = tricolor::control::load(config.text);
    if (!policy) {
      std::fprintf(stderr, "load failed: %s\n", policy.error().message.c_str());
      std::abort();
    }
    benchmark::DoNotOptimize(policy->rules.data());
  }
  // Seconds per command, shown as ns: flat when loading is linear.
  state.counters["per_command"] = benchmark::Counter(static_cast<double>(config.commands),
                                                     benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
  state.counters["commands"] = static_cast<double>(config.commands);
  state.counters["MB"] = static_cast<double>(config.text.size()) / 1e6;
}

// N = 1 Ki, 10 Ki, 100 Ki, 1 Mi.
BENCHMARK_CAPTURE(BM_load, append, false)
    ->Arg(1 << 10)->Arg(10 << 10)->Arg(100 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_load, anywhere, true)
    ->Arg(1 << 10)->Arg(10 << 10)->Arg(100 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
