// tricolor-bench-xdp: ns per packet of the XDP program, from the kernel's own timing of
// BPF_PROG_TEST_RUN, beside a program that only returns XDP_DROP measured the same way in the same
// run (issue 24, section 4). Rows: the drop program; tricolor with one aggregate rule; tricolor with a
// per-key rule (by source address) holding 4 Ki and 1 Mi live keys. Columns:
//   same frame: one frame run `repeat` times in one call (the kernel's mean per run); the median of
//     `rounds` calls. Caches stay warm: the cost of the code path, one key's lookup included.
//   key per call: each call runs one frame once (repeat 1), the next call the next key's frame,
//     round the table; the mean of the kernel's per-call times. Each lookup finds a key the previous
//     thousands of calls did not touch (at 1 Mi keys the table is far beyond the caches). The
//     kernel's clock reads around one run are in it, and in the drop program's figure too.
// Every meter admits all (CIR and CBS at their maximums): the path of a green packet, XDP_PASS.
//
//   tricolor-bench-xdp [--repeat N] [--rounds N] [--smoke]
//
// Needs root (or CAP_BPF); exits 77 (skipped, for meson) without it. The figures are noisy on a
// shared VM: compare each row with the drop program's in the same run, not across runs.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/xdp/xdp_policy.hpp"
#include "dataplane/xdp/xdp_program.hpp"

namespace {

using namespace tricolor;
using namespace tricolor::dataplane;

constexpr int kSkip = 77;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "tricolor-bench-xdp: %s\n", what.c_str());
  std::exit(1);
}

// Ethernet + IPv4 + UDP, 128 bytes, from 172.16.0.0 + `source` (the per-key rule's key) to
// 10.0.0.1:80. The program does not check the IPv4 checksum; it is left zero.
std::vector<std::uint8_t> frame(std::uint32_t source) {
  std::vector<std::uint8_t> f(128, 0);
  f[12] = 0x08;  // IPv4
  std::uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  const std::uint16_t total = static_cast<std::uint16_t>(f.size() - 14);
  ip[2] = static_cast<std::uint8_t>(total >> 8), ip[3] = static_cast<std::uint8_t>(total);
  ip[8] = 64, ip[9] = 17;  // TTL, UDP
  ip[12] = 172, ip[13] = static_cast<std::uint8_t>(16 + (source >> 16)), ip[14] = static_cast<std::uint8_t>(source >> 8),
  ip[15] = static_cast<std::uint8_t>(source);
  ip[16] = 10, ip[19] = 1;
  std::uint8_t* udp = ip + 20;
  udp[0] = 0x03, udp[1] = 0xe8, udp[3] = 80;
  const std::uint16_t udp_length = static_cast<std::uint16_t>(total - 20);
  udp[4] = static_cast<std::uint8_t>(udp_length >> 8), udp[5] = static_cast<std::uint8_t>(udp_length);
  return f;
}

// The kernel's mean time per run of `repeat` runs of `bytes` (ns), and the verdict.
std::pair<std::uint32_t, std::uint32_t> timed_run(int fd, const std::vector<std::uint8_t>& bytes, std::uint32_t repeat) {
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = bytes.data(), .data_size_in = static_cast<__u32>(bytes.size()),
              .repeat = static_cast<int>(repeat));
  if (bpf_prog_test_run_opts(fd, &opts) != 0) fail(std::string("BPF_PROG_TEST_RUN: ") + std::strerror(errno));
  return {opts.duration, opts.retval};
}

double same_frame(int fd, std::uint32_t repeat, int rounds, std::uint32_t want_verdict) {
  const auto bytes = frame(0);
  std::vector<std::uint32_t> ns;
  for (int r = 0; r < rounds; ++r) {
    const auto [mean, verdict] = timed_run(fd, bytes, repeat);
    if (verdict != want_verdict) fail("unexpected verdict " + std::to_string(verdict));
    ns.push_back(mean);
  }
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

double key_per_call(int fd, std::uint32_t keys, std::uint32_t calls, std::uint32_t want_verdict) {
  std::uint64_t total = 0;
  auto bytes = frame(0);
  for (std::uint32_t c = 0; c < calls; ++c) {
    const std::uint32_t source = c % keys;
    bytes[14 + 13] = static_cast<std::uint8_t>(16 + (source >> 16));
    bytes[14 + 14] = static_cast<std::uint8_t>(source >> 8);
    bytes[14 + 15] = static_cast<std::uint8_t>(source);
    const auto [ns, verdict] = timed_run(fd, bytes, 1);
    if (verdict != want_verdict) fail("unexpected verdict " + std::to_string(verdict));
    total += ns;
  }
  return static_cast<double>(total) / calls;
}

// One rule on 10.0.0.0/8, 1R2C at the largest rate and burst: every packet green, passed.
Policy policy(std::optional<std::uint32_t> keys) {
  policer::Params p;
  p.algorithm = policer::Algorithm::one_rate_two_color;
  p.unit = policer::Unit::bytes;
  p.cir = policer::kMaxByteRate;
  p.cbs = policer::kMaxBurst;
  Policy policy;
  policy.profiles.push_back({"all", p});
  Rule r;
  r.name = "bench";
  r.profile = "all";
  Prefix dst;
  dst.address = {10, 0, 0, 0};
  dst.length = 8;
  r.match.dst = dst;
  if (keys) {
    r.per_key.kind = KeyKind::src;
    r.per_key.capacity = *keys;
  }
  policy.rules.push_back(r);
  return policy;
}

std::unique_ptr<xdp::XdpProgram> load_tricolor(std::optional<std::uint32_t> keys) {
  xdp::LoadOptions options;
  options.max_keys = keys ? *keys : 1024;
  auto program = xdp::XdpProgram::load(options);
  if (!program) fail(program.error().message);
  auto image = xdp::translate(policy(keys));
  if (!image) fail(image.error().message);
  if (auto installed = (*program)->install(*image); !installed) fail(installed.error().message);
  if (keys) {  // every key live before timing: each run a lookup, none an insert
    auto bytes = frame(0);
    for (std::uint32_t k = 0; k < *keys; ++k) {
      bytes[14 + 13] = static_cast<std::uint8_t>(16 + (k >> 16));
      bytes[14 + 14] = static_cast<std::uint8_t>(k >> 8);
      bytes[14 + 15] = static_cast<std::uint8_t>(k);
      timed_run((*program)->program_fd(), bytes, 1);
    }
    const auto counters = (*program)->rule_counters(0);
    if (!counters || (*program)->live_keys(0) != *keys || counters->table_full != 0)
      fail("the key table did not take all " + std::to_string(*keys) + " keys");
  }
  return std::move(*program);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint32_t repeat = 1'000'000;
  int rounds = 5;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--smoke") smoke = true;
    else if (arg == "--repeat" && i + 1 < argc) repeat = static_cast<std::uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    else if (arg == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else fail("usage: tricolor-bench-xdp [--repeat N] [--rounds N] [--smoke]");
  }
  if (repeat == 0 || rounds < 1) fail("--repeat and --rounds must be at least 1");
  // The smoke run (CI): everything once, briefly, 4 Ki keys only.
  if (smoke) repeat = 1'000, rounds = 1;
  if (geteuid() != 0) {
    std::fprintf(stderr, "tricolor-bench-xdp: loading BPF programs needs root (or CAP_BPF): skipped\n");
    return kSkip;
  }

  std::unique_ptr<bpf_object, decltype(&bpf_object__close)> drop(bpf_object__open_file(TXDP_DROP_OBJECT, nullptr),
                                                                 &bpf_object__close);
  if (drop == nullptr) fail(std::string("opening " TXDP_DROP_OBJECT ": ") + std::strerror(errno));
  if (bpf_object__load(drop.get()) != 0) {
    std::fprintf(stderr, "tricolor-bench-xdp: BPF unavailable here (loading " TXDP_DROP_OBJECT " failed): skipped\n");
    return kSkip;
  }
  const int drop_fd = bpf_program__fd(bpf_object__next_program(drop.get(), nullptr));

  const std::uint32_t per_call = smoke ? 4'096 : 65'536;  // calls of the key-per-call column, at least
  std::printf("| program | same frame, repeat %u (ns/packet) | × XDP_DROP | key per call (ns/packet) | × XDP_DROP |\n",
              repeat);
  std::printf("|---|---:|---:|---:|---:|\n");
  const double drop_same = same_frame(drop_fd, repeat, rounds, XDP_DROP);
  const double drop_call = key_per_call(drop_fd, per_call, per_call, XDP_DROP);
  std::printf("| XDP_DROP only | %.1f | 1.00 | %.1f | 1.00 |\n", drop_same, drop_call);
  std::fflush(stdout);

  struct Case {
    const char* name;
    std::optional<std::uint32_t> keys;
  };
  std::vector<Case> cases = {{"tricolor, aggregate rule", std::nullopt}, {"tricolor, per-key, 4 Ki keys", 4'096}};
  if (!smoke) cases.push_back({"tricolor, per-key, 1 Mi keys", 1u << 20});
  for (const Case& c : cases) {
    auto program = load_tricolor(c.keys);
    const int fd = program->program_fd();
    const double same = same_frame(fd, repeat, rounds, XDP_PASS);
    const std::uint32_t keys = c.keys.value_or(1);
    const double call = key_per_call(fd, keys, std::max(keys, per_call), XDP_PASS);
    std::printf("| %s | %.1f | %.2f | %.1f | %.2f |\n", c.name, same, same / drop_same, call, call / drop_call);
    std::fflush(stdout);
  }
  return 0;
}
