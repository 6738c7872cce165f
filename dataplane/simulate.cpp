// tricolor-simulate: drives the meter library with generated traffic for a few flows of each
// algorithm and prints, per flow, the green/yellow/red packets and bytes.
//
// Time is simulated at 1e9 ticks per second, so the run is deterministic for a given seed. Each flow
// offers more than its committed rate (otherwise everything would be green), with its own packet-size
// mix and arrival pattern.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policer/meter.hpp"
#include "policer/units.hpp"

namespace {

using namespace tricolor;
using namespace tricolor::policer;

constexpr std::uint64_t kHz = 1'000'000'000;

// splitmix64: small, fast, and the same sequence everywhere.
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

enum class Sizes { fixed, imix };
enum class Pattern { constant, poisson, on_off };

struct FlowSpec {
  const char* name;
  const char* profile;  // "<algorithm> <param> <value> ..." in operator units
  bool color_aware;     // input color: every 4th packet arrives yellow, every 16th red
  const char* offered;  // offered load, a rate in operator units
  Sizes sizes;
  std::uint32_t fixed_size;
  Pattern pattern;
};

// The embedded default: each algorithm in byte and packet mode, one color-aware flow.
constexpr std::array kDefaultFlows{
    FlowSpec{"voice", "1r2c cir 2mbit cbs 16k", false, "4mbit", Sizes::fixed, 200, Pattern::constant},
    FlowSpec{"syn-guard", "1r2c cir 500pps cbs 20pkt", false, "2kpps", Sizes::fixed, 60, Pattern::poisson},
    FlowSpec{"web", "srtcm cir 10mbit cbs 64k ebs 128k", false, "20mbit", Sizes::imix, 0, Pattern::poisson},
    FlowSpec{"dns", "srtcm cir 1kpps cbs 64pkt ebs 128pkt", false, "3kpps", Sizes::fixed, 90, Pattern::poisson},
    FlowSpec{"bulk", "trtcm cir 50mbit cbs 64k pir 100mbit pbs 128k", false, "150mbit", Sizes::fixed, 1500,
             Pattern::on_off},
    FlowSpec{"video", "trtcm cir 2kpps cbs 100pkt pir 4kpps pbs 200pkt", false, "6kpps", Sizes::fixed, 1200,
             Pattern::constant},
    FlowSpec{"tenant", "trtcm4115 cir 20mbit cbs 32k eir 20mbit ebs 32k", false, "60mbit", Sizes::imix, 0,
             Pattern::poisson},
    FlowSpec{"tenant-aware", "trtcm4115 cir 20mbit cbs 32k eir 20mbit ebs 32k", true, "60mbit", Sizes::imix, 0,
             Pattern::poisson},
    FlowSpec{"iot", "trtcm4115 cir 0pps cbs 0pkt eir 300pps ebs 30pkt", false, "1kpps", Sizes::fixed, 100,
             Pattern::poisson},
};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "tricolor-simulate: %s\n", message.c_str());
  std::exit(2);
}

// "trtcm cir 50mbit cbs 64k pir 100mbit pbs 128k" -> Params (the full command language comes later).
Params parse_profile(std::string_view text) {
  std::vector<std::string_view> words;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = std::min(text.find(' ', pos), text.size());
    if (end > pos) words.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  Params p;
  const std::string_view algorithm = words.at(0);
  if (algorithm == "1r2c") p.algorithm = Algorithm::one_rate_two_color;
  else if (algorithm == "srtcm") p.algorithm = Algorithm::srtcm;
  else if (algorithm == "trtcm") p.algorithm = Algorithm::trtcm;
  else if (algorithm == "trtcm4115") p.algorithm = Algorithm::trtcm_4115;
  else fail("unknown algorithm '" + std::string(algorithm) + "'");
  std::optional<Unit> unit;
  for (std::size_t i = 1; i + 1 < words.size(); i += 2) {
    const std::string_view key = words[i];
    const bool is_rate = key.back() == 'r';  // cir eir pir
    auto quantity = is_rate ? parse_rate(words[i + 1]) : parse_burst(words[i + 1]);
    if (!quantity) fail(quantity.error().message);
    if (unit && *unit != quantity->unit) fail("'" + std::string(text) + "' mixes bytes and packets");
    unit = quantity->unit;
    std::uint64_t* field = key == "cir" ? &p.cir : key == "cbs" ? &p.cbs : key == "eir" ? &p.eir
                         : key == "ebs" ? &p.ebs : key == "pir" ? &p.pir : key == "pbs" ? &p.pbs : nullptr;
    if (!field) fail("unknown parameter '" + std::string(key) + "'");
    *field = quantity->value;
  }
  p.unit = unit.value_or(Unit::bytes);
  return p;
}

struct Flow {
  const FlowSpec* spec;
  Profile profile;
  Meter meter;
  std::uint64_t offered_per_second;  // bytes/s or packets/s
  Random random;
  std::uint64_t next_arrival = 0;
  std::uint64_t sent = 0;  // packets offered so far, for the color-aware input pattern
  std::uint64_t packets[3] = {};
  std::uint64_t bytes[3] = {};
};

std::uint32_t packet_size(Flow& f) {
  if (f.spec->sizes == Sizes::fixed) return f.spec->fixed_size;
  // Simple IMIX: 64, 576 and 1500-byte packets in the ratio 7:4:1.
  const std::uint64_t r = f.random.below(12);
  return r < 7 ? 64 : r < 11 ? 576 : 1500;
}

// Mean gap between packets so that the flow offers its load; average size for byte-mode loads.
std::uint64_t mean_gap_ticks(const Flow& f) {
  const bool byte_load = f.profile.unit() == Unit::bytes;
  const double mean_size = f.spec->sizes == Sizes::fixed ? f.spec->fixed_size : (7 * 64 + 4 * 576 + 1500) / 12.0;
  const double packets_per_second = byte_load ? f.offered_per_second / mean_size : f.offered_per_second;
  return static_cast<std::uint64_t>(kHz / packets_per_second);
}

void schedule_next(Flow& f) {
  const std::uint64_t gap = mean_gap_ticks(f);
  switch (f.spec->pattern) {
    case Pattern::constant: f.next_arrival += gap; break;
    case Pattern::poisson: {
      // Exponential gaps from a uniform draw; the simulation's only floating point, never in the meter.
      const double u = (static_cast<double>(f.random.next() >> 11) + 0.5) / 9007199254740992.0;
      f.next_arrival += static_cast<std::uint64_t>(-std::log(u) * static_cast<double>(gap)) + 1;
      break;
    }
    case Pattern::on_off: {
      // 10 ms at twice the mean rate, then 10 ms of silence.
      const std::uint64_t period = kHz / 100;
      f.next_arrival += gap / 2;
      if (f.next_arrival % (2 * period) >= period) f.next_arrival += period - f.next_arrival % period;
      break;
    }
  }
}

Color input_color(Flow& f) {
  if (f.sent % 16 == 15) return Color::red;
  if (f.sent % 4 == 3) return Color::yellow;
  return Color::green;
}

void usage() {
  std::puts(
      "usage: tricolor-simulate [--seconds N] [--seed N]\n"
      "Meters generated traffic for the embedded flows and prints green/yellow/red packets and bytes.");
}

std::uint64_t parse_number(const char* option, const char* text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-')
    fail(std::string(option) + " expects a whole number, got '" + text + "'");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seconds = 2, seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage();
      return 0;
    }
    if ((arg == "--seconds" || arg == "--seed") && i + 1 < argc) {
      (arg == "--seconds" ? seconds : seed) = parse_number(argv[i], argv[i + 1]);
      ++i;
      continue;
    }
    usage();
    fail("unknown or incomplete option '" + std::string(arg) + "'");
  }
  if (seconds == 0 || seconds > 3600) fail("--seconds must be 1 to 3600");

  const auto tick_rate = TickRate::make(kHz);
  std::vector<Flow> flows;
  flows.reserve(kDefaultFlows.size());
  for (std::size_t i = 0; i < kDefaultFlows.size(); ++i) {
    const FlowSpec& spec = kDefaultFlows[i];
    auto profile = Profile::make(parse_profile(spec.profile), *tick_rate);
    if (!profile) fail(std::string(spec.name) + ": " + profile.error().message);
    auto offered = parse_rate(spec.offered);
    if (!offered) fail(offered.error().message);
    flows.push_back(Flow{&spec, *profile, Meter(*profile, 0), offered->value, Random{seed * 1000 + i}});
    flows.back().meter = Meter(flows.back().profile, 0);  // refer to the Flow's own copy of the profile
  }

  const std::uint64_t end = seconds * kHz;
  for (;;) {
    auto next = std::min_element(flows.begin(), flows.end(),
                                 [](const Flow& a, const Flow& b) { return a.next_arrival < b.next_arrival; });
    if (next->next_arrival >= end) break;
    Flow& f = *next;
    const std::uint32_t size = packet_size(f);
    const Color color = f.spec->color_aware ? f.meter.check_aware(f.next_arrival, size, input_color(f))
                                            : f.meter.check_blind(f.next_arrival, size);
    ++f.packets[static_cast<int>(color)];
    f.bytes[static_cast<int>(color)] += size;
    ++f.sent;
    schedule_next(f);
  }

  std::printf("tricolor-simulate: %" PRIu64 " s of generated traffic, seed %" PRIu64 "\n\n", seconds, seed);
  std::printf("%-13s %-10s %-7s %-5s %10s %12s %10s %12s %10s %12s\n", "flow", "algorithm", "unit", "input",
              "green_pkts", "green_bytes", "yellow_pkts", "yellow_bytes", "red_pkts", "red_bytes");
  for (const Flow& f : flows) {
    std::printf("%-13s %-10s %-7s %-5s %10" PRIu64 " %12" PRIu64 " %10" PRIu64 " %12" PRIu64 " %10" PRIu64
                " %12" PRIu64 "\n",
                f.spec->name, std::string(to_string(f.profile.algorithm())).c_str(),
                std::string(to_string(f.profile.unit())).c_str(), f.spec->color_aware ? "aware" : "blind",
                f.packets[0], f.bytes[0], f.packets[1], f.bytes[1], f.packets[2], f.bytes[2]);
  }
  std::printf("\nprofiles:\n");
  for (const Flow& f : flows) std::printf("  %-13s %s, offered %s\n", f.spec->name, f.spec->profile, f.spec->offered);
  return 0;
}
