// tricolord: the poll-mode daemon. It reads the policy (before the EAL or any port is touched), starts
// DPDK and the ports, runs the engine's worker on a worker lcore (dataplane/forwarder.hpp) and stays
// on the main lcore as the control side: it keeps the key tables' pools and frees retired rule sets
// (Engine::maintain), prints counters, and stops at SIGINT, SIGTERM or --duration.
//
// Order of work, and why: options, then the policy (a bad one costs nothing to refuse), then the EAL,
// the engine (it needs the EAL's memory), the mbuf pool and the ports; at the end the worker is
// stopped first, so that every mbuf is back (the pool's in-use count is said), then the ports.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf_dyn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "control/language.hpp"
#include "control/policy_file.hpp"
#include "control/tricolord_options.hpp"
#include "dataplane/daemon_report.hpp"
#include "dataplane/dpdk_memory.hpp"
#include "dataplane/engine.hpp"
#include "dataplane/forwarder.hpp"
#include "dataplane/memory_text.hpp"
#include "dataplane/ports.hpp"
#include "policer/quote.hpp"

namespace {

using namespace tricolor;
using namespace tricolor::dataplane;
using control::DaemonOptions;

std::atomic<bool> g_stop_requested{false};  // set by the signal handler
std::atomic<bool> g_worker_stop{false};     // read by the worker

extern "C" void on_stop_signal(int) { g_stop_requested.store(true, std::memory_order_relaxed); }

void say(const std::string& message) { std::cerr << "tricolord: " << message << std::endl; }

[[noreturn]] void fail(int status, const std::string& message) {
  say(message);
  std::exit(status);
}

// The engine's heap besides the mbufs: the classifier's build and tables and the key tables' indexes.
constexpr std::uint64_t kEngineHeapMb = 1024;
constexpr std::uint64_t kMbufBytes = RTE_MBUF_DEFAULT_BUF_SIZE + 192;  // data room, mbuf header, pool overhead
// The control side's pace: the key tables' spare chunks (2 x 4096 keys) must not run out between two
// turns (at 1 ms, 8 Mi new keys per second; at 10 ms a flood of new flows starved), and a stop or a
// change is seen within this. The main lcore sleeps between turns.
constexpr auto kControlPeriod = std::chrono::milliseconds(1);

// An invariant TSC ticks at one rate whatever the core's frequency or sleep state; without it the
// meters' rates would follow the CPU's clock.
void warn_without_invariant_tsc() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("flags", 0) == 0) {
      const bool constant = line.find(" constant_tsc") != std::string::npos;
      const bool nonstop = line.find(" nonstop_tsc") != std::string::npos;
      if (!constant || !nonstop)
        say("warning: this CPU does not report an invariant TSC (constant_tsc and nonstop_tsc in /proc/cpuinfo): "
            "rates are exact only while the TSC keeps its rate; consider --clock rx-timestamp on ports that stamp");
      return;
    }
}

// The paths the worker polls, from --pair / --one-armed or from the ports found.
std::vector<Path> choose_paths(const DaemonOptions& o, const std::vector<std::uint16_t>& probed) {
  auto known = [&](std::uint16_t port) { return std::find(probed.begin(), probed.end(), port) != probed.end(); };
  std::string found;
  for (std::uint16_t p : probed) found += (found.empty() ? "" : ", ") + std::to_string(p) + " " + port_name(p);
  if (probed.empty())
    fail(control::kExitRuntime, "the EAL found no ports: give a NIC (-a PCI, bound to vfio-pci) or a virtual one (--vdev)");
  std::vector<control::PortPair> pairs = o.pairs;
  if (pairs.empty()) pairs.push_back(probed.size() >= 2 ? control::PortPair{probed[0], probed[1]}
                                                         : control::PortPair{probed[0], probed[0]});
  std::set<std::uint16_t> used;
  std::vector<Path> paths;
  for (const control::PortPair& pair : pairs) {
    for (std::uint16_t port : {pair.a, pair.b})
      if (!known(port)) fail(control::kExitRuntime, "port " + std::to_string(port) + " does not exist; the EAL found " +
                                                        std::to_string(probed.size()) + ": " + found);
    if (!used.insert(pair.a).second || (pair.a != pair.b && !used.insert(pair.b).second))
      fail(control::kExitUsage, "a port may be in one pair only (port " + std::to_string(pair.a) + " or " +
                                    std::to_string(pair.b) + " is in two)");
    paths.push_back({pair.a, pair.b});
    if (pair.a != pair.b) paths.push_back({pair.b, pair.a});
  }
  return paths;
}

int worker_main(void* forwarder) {
  static_cast<Forwarder*>(forwarder)->run(g_worker_stop);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = control::parse_command_line(argc, argv);
  if (!parsed.options) return parsed.exit_status;
  DaemonOptions& o = *parsed.options;

  // The policy first: refused before the EAL or any port is touched.
  auto text = control::read_policy_file(o.policy_path);
  if (!text) fail(control::kExitPolicy, text.error().message);
  auto policy = control::load(*text);
  if (!policy) fail(control::kExitPolicy, "policy " + quote(o.policy_path, kQuotePathMaxBytes) + ": " + policy.error().message);

  // DPDK's log goes to standard error: standard output carries the counters (and JSON with --json).
  rte_openlog_stream(stderr);
  const std::uint64_t pool_mb_guess =
      (o.mbufs != 0 ? o.mbufs : 65536) * kMbufBytes / (1 << 20);  // before the ports are known
  const std::string memory = control::choose_memory(o, kEngineHeapMb + pool_mb_guess);
  std::vector<char*> eal_argv;
  for (std::string& arg : o.eal_args) eal_argv.push_back(arg.data());
  eal_argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(eal_argv.size() - 1), eal_argv.data()) < 0)
    fail(control::kExitRuntime, std::string("DPDK's EAL could not start: ") + rte_strerror(rte_errno) +
                                    " (its messages above say why)");
  say(memory + (rte_eal_has_hugepages() ? "" : "; running without huge pages"));
  // The EAL only logs a --vdev it could not create (rte_eal_init succeeds): a port that was asked for
  // and is missing stops the daemon here, rather than it running with the ports that remain.
  for (const control::RequestedPort& asked : control::requested_vdev_ports(o.eal_args))
    if (!port_exists(asked.name))
      fail(control::kExitRuntime, "--vdev " + quote(asked.devargs) + ": the EAL could not create port " + asked.name +
                                      " (its messages above say why)");

  // The worker: the first worker lcore. This version runs one.
  const unsigned worker_lcore = rte_get_next_lcore(-1, 1, 0);
  if (worker_lcore >= RTE_MAX_LCORE)
    fail(control::kExitUsage, "no worker lcore: give the main lcore and one for the worker, e.g. -l 0,1");
  if (rte_lcore_count() > 2) say("warning: this version runs one worker, on lcore " + std::to_string(worker_lcore) +
                                 "; the other worker lcores stay idle");

  const std::vector<std::uint16_t> probed = probed_ports();
  const std::vector<Path> paths = choose_paths(o, probed);
  std::vector<std::uint16_t> ports;
  for (const Path& path : paths)
    if (std::find(ports.begin(), ports.end(), path.rx_port) == ports.end()) ports.push_back(path.rx_port);

  const bool tsc_clock = o.clock == ClockSource::tsc;
  if (tsc_clock) warn_without_invariant_tsc();
  const std::uint64_t tick_hz = tsc_clock ? rte_get_tsc_hz() : 1'000'000'000;
  auto tick_rate = policer::TickRate::make(tick_hz);
  if (!tick_rate) fail(control::kExitRuntime, "the clock's rate cannot be used: " + tick_rate.error().message);

  DpdkMemory worker_memory(static_cast<int>(rte_lcore_to_socket_id(worker_lcore)));
  EngineOptions engine_options;
  engine_options.memory = {&worker_memory};
  if (o.max_classifier_entries != 0) engine_options.limits.max_classifier_entries = o.max_classifier_entries;
  auto engine = Engine::create(*policy, *tick_rate, engine_options);
  if (!engine) {
    std::string message = "policy " + quote(o.policy_path, kQuotePathMaxBytes) + ": " + engine.error().message;
    if (const auto at = message.find("raise the limit"); at != std::string::npos)
      message.replace(at, 15, "raise the limit with --max-classifier-entries");
    fail(control::kExitPolicy, message);
  }
  const Policy& running = (*engine)->policy();
  for (std::size_t r = 0; r < running.rules.size(); ++r)
    if (running.rules[r].per_key.kind != KeyKind::none)
      say("rule " + running.rules[r].name + ": key index " + bytes_text((*engine)->key_index_bytes(r)) +
          " for capacity " + capacity_text(running.rules[r].per_key.capacity) + ", " +
          bytes_text((*engine)->key_spare_bytes(r)) + " of entries kept ready");

  PortOptions port_options;
  port_options.rx_descriptors = o.rx_descriptors;
  port_options.tx_descriptors = o.tx_descriptors;
  port_options.mtu = o.mtu;
  port_options.rx_timestamp = !tsc_clock;
  const std::uint32_t mbufs = o.mbufs != 0 ? o.mbufs : mbufs_needed(ports, port_options, rte_lcore_count());
  const int socket = port_socket(ports.front());
  auto pool = make_mbuf_pool(mbufs, socket, ports);
  if (!pool) fail(control::kExitRuntime, pool.error().message + " (--mbufs sets the size)");

  ForwarderOptions forwarder_options;
  forwarder_options.clock = o.clock;
  if (!tsc_clock) {
    if (rte_mbuf_dyn_rx_timestamp_register(&forwarder_options.timestamp.offset, &forwarder_options.timestamp.flag) != 0)
      fail(control::kExitRuntime, std::string("cannot register the mbuf RX timestamp field: ") + rte_strerror(rte_errno));
  }
  std::vector<std::uint16_t> started;
  auto stop_ports = [&] {
    for (std::uint16_t port : started) stop_port(port);
    started.clear();
  };
  for (std::uint16_t port : ports) {
    auto facts = start_port(port, pool->get(), port_options);
    if (!facts) {
      stop_ports();
      fail(control::kExitRuntime, facts.error().message);
    }
    started.push_back(port);
    forwarder_options.vlan_insert[port] = facts->vlan_insert;
    std::string line = "port " + std::to_string(port) + " " + facts->name + " (" + facts->driver + ", socket " +
                       std::to_string(facts->socket) + "): MTU " + std::to_string(facts->mtu) +
                       (facts->scatter ? ", multi-segment RX" : "") + ", link " + link_text(port);
    for (const std::string& note : facts->notes) line += "; " + note;
    say(line);
  }
  for (const Path& path : paths)
    say("path: port " + std::to_string(path.rx_port) + " -> port " + std::to_string(path.tx_port));
  const unsigned mbufs_at_start = rte_mempool_in_use_count(pool->get());
  say("policy " + quote(o.policy_path, kQuotePathMaxBytes) + ": " + std::to_string(running.rules.size()) +
      " rules; clock " + (tsc_clock ? "TSC at " + std::to_string(tick_hz) + " Hz" : std::string("RX timestamps")) +
      "; worker on lcore " + std::to_string(worker_lcore) + "; " + std::to_string(mbufs) + " mbufs on socket " +
      std::to_string(socket));

  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  Forwarder forwarder((*engine)->worker(0), paths, forwarder_options);
  const auto started_at = std::chrono::steady_clock::now();
  if (const int rc = rte_eal_remote_launch(worker_main, &forwarder, worker_lcore); rc != 0) {
    stop_ports();
    fail(control::kExitRuntime, "cannot start the worker on lcore " + std::to_string(worker_lcore) + ": " +
                                    rte_strerror(-rc));
  }
  say("running; SIGINT or SIGTERM stops");

  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count(); };
  auto snapshot = [&] {
    DaemonSnapshot s = take_snapshot(**engine, forwarder, worker_lcore, ports, elapsed(), tick_hz);
    s.mbufs_in_use_at_start = mbufs_at_start;
    s.mbufs_in_use = rte_mempool_in_use_count(pool->get());
    return s;
  };
  DaemonSnapshot previous = snapshot();
  double next_stats = o.stats_interval_s;
  while (!g_stop_requested.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(kControlPeriod);
    (*engine)->maintain();
    const double now = elapsed();
    if (o.duration_s > 0 && now >= o.duration_s) break;
    if (o.stats_interval_s > 0 && now >= next_stats) {
      next_stats += o.stats_interval_s;
      DaemonSnapshot current = snapshot();
      if (o.json) write_json_line(current, "stats", std::cout);
      else print_rates(previous, current, std::cout);
      previous = std::move(current);
    }
  }

  // Stop: the worker finishes its burst (it holds no mbuf between bursts), then the counters, then the ports.
  const auto stopping_at = std::chrono::steady_clock::now();
  g_worker_stop.store(true, std::memory_order_relaxed);
  rte_eal_wait_lcore(worker_lcore);
  (*engine)->maintain();
  DaemonSnapshot final_counters = snapshot();
  final_counters.stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping_at).count();
  if (o.json) write_json_line(final_counters, "final", std::cout);
  else print_totals(final_counters, std::cout);
  stop_ports();
  pool->reset();
  engine->reset();
  rte_eal_cleanup();
  return 0;
}
