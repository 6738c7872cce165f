// tricolord: the poll-mode daemon. It reads the policy (before the EAL or any port is touched), starts
// DPDK and the ports, runs one of the engine's workers on each worker lcore (dataplane/dpdk/forwarder.hpp)
// and stays on the main lcore as the control side: it keeps the key tables' pools and frees retired
// rule sets (Engine::maintain), prints counters, reloads its policy file at SIGHUP, and stops at SIGINT,
// SIGTERM or --duration. Under systemd (Type=notify) it tells the service manager when it is ready,
// reloading or stopping, and pings its watchdog from the control loop (service_notify.hpp).
//
// Order of work, and why: options, then the policy (a bad one costs nothing to refuse), then the EAL,
// the engine (it needs the EAL's memory), the mbuf pool, the ports and the rings between workers; at
// the end the workers are stopped first, so that every mbuf is back (the pool's in-use count is said),
// then the ports.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf_dyn.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <fcntl.h>
#include <grp.h>
#include <sys/resource.h>
#include <unistd.h>
#include <cstring>
#include <iostream>
#include <sstream>
#include <sys/stat.h>
#include <syslog.h>
#include <memory>
#include <set>
#include <thread>

#include "control/telemetry/control_calls.hpp"
#include "control/daemon/control_server.hpp"
#include "control/daemon/daemon_commands.hpp"
#include "control/daemon/service_notify.hpp"
#include "control/language/language.hpp"
#include "control/telemetry/metrics_server.hpp"
#include "control/language/policy_file.hpp"
#include "control/telemetry/prometheus.hpp"
#include "control/telemetry/telemetry_endpoints.hpp"
#include "control/daemon/tricolord_options.hpp"
#include "dataplane/dpdk/daemon_report.hpp"
#include "dataplane/dpdk/dpdk_memory.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/engine/engine.hpp"
#include "dataplane/dpdk/forwarder.hpp"
#include "dataplane/engine/memory_text.hpp"
#include "dataplane/dpdk/ports.hpp"
#include "policer/quote.hpp"
#ifdef TRICOLOR_HAVE_XDP
#include "control/daemon/xdp_daemon.hpp"
#include "dataplane/xdp/xdp_policy.hpp"
#endif

#include <nlohmann/json.hpp>

namespace {

using namespace tricolor;
using namespace tricolor::dataplane;
using control::DaemonOptions;

std::atomic<bool> g_stop_requested{false};    // set by the signal handler
std::atomic<bool> g_reload_requested{false};  // SIGHUP: the control loop reloads the policy file
std::atomic<unsigned> g_ignored_signals{0};   // a bit per signal ignored, said by the control loop
StopState g_worker_stop;                      // read by the workers
control::ServiceNotifier g_service;           // the service manager, when under systemd (else silent)

extern "C" void on_stop_signal(int) { g_stop_requested.store(true, std::memory_order_relaxed); }
extern "C" void on_reload_signal(int) { g_reload_requested.store(true, std::memory_order_relaxed); }
extern "C" void on_ignored_signal(int signal) {
  g_ignored_signals.fetch_or(1u << signal, std::memory_order_relaxed);
}

// Signals whose default would end the daemon without its final counters and leave its socket and
// runtime files behind: INT and TERM stop it cleanly, HUP reloads the policy file (every daemon's
// reload, systemd's ExecReload); these are ignored and said; PIPE is ignored silently (a client that
// went away).
constexpr int kIgnoredSignals[] = {SIGUSR1, SIGUSR2, SIGALRM};

void install_signal_handlers() {
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = on_stop_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  action.sa_handler = on_reload_signal;
  sigaction(SIGHUP, &action, nullptr);
  action.sa_handler = on_ignored_signal;
  for (const int signal : kIgnoredSignals) sigaction(signal, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

void say_ignored_signals() {
  const unsigned seen = g_ignored_signals.exchange(0, std::memory_order_relaxed);
  for (const int signal : kIgnoredSignals)
    if ((seen & (1u << signal)) != 0)
      std::cerr << "tricolord: SIG" << sigabbrev_np(signal)
                << " received: ignored (SIGINT or SIGTERM stops; SIGHUP reloads the policy file)" << std::endl;
}

void say(const std::string& message) { std::cerr << "tricolord: " << message << std::endl; }

// A start that cannot go on: thrown to main, so that what the daemon made so far (its socket file, the
// metrics listener, the engine) is undone by the destructors on the way out; its status is the exit's.
struct StartFailure {
  int status;
};

[[noreturn]] void fail(int status, const std::string& message) {
  say(message);
  g_service.status("failed: " + message);
  throw StartFailure{status};
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

std::string lcore_list(const std::vector<unsigned>& lcores) {
  std::string text;
  for (unsigned lcore : lcores) text += (text.empty() ? "" : ",") + std::to_string(lcore);
  return text;
}

// Every live key of the per-key rules, one JSON object per line, with the worker that meters it.
void dump_keys(const Engine& engine, const std::string& path) {
  std::ofstream out(path);
  if (!out) {
    say("cannot write the keys to " + quote(path, kQuotePathMaxBytes));
    return;
  }
  const Policy& policy = engine.policy();
  for (std::size_t r = 0; r < policy.rules.size(); ++r) {
    const Rule& rule = policy.rules[r];
    if (rule.per_key.kind == KeyKind::none) continue;
    engine.for_each_key(r, [&](const Engine::LiveKey& live) {
      nlohmann::json line = {{"rule", rule.name},
                             {"key", key_text(rule.per_key, live.key)},
                             {"worker", live.worker},
                             {"packets", live.counters.packets},
                             {"bytes", live.counters.bytes}};
      out << line.dump() << '\n';
    });
  }
  if (!out) say("the keys could not all be written to " + quote(path, kQuotePathMaxBytes));
}

// The control side (the socket, publishing changes, topping up key tables) runs on the main lcore. A
// worker polls without pause: on a CPU it shares with the main lcore, the control side gets only what
// the scheduler gives it, and a command may wait for seconds.
void warn_shared_control_core(const std::vector<unsigned>& worker_lcores) {
  const rte_cpuset_t main_cpus = rte_lcore_cpuset(rte_get_main_lcore());
  for (unsigned lcore : worker_lcores) {
    rte_cpuset_t both;
    const rte_cpuset_t worker_cpus = rte_lcore_cpuset(lcore);
    CPU_AND(&both, &main_cpus, &worker_cpus);
    if (CPU_COUNT(&both) != 0)
      say("warning: worker lcore " + std::to_string(lcore) + " shares a CPU with the main lcore " +
          std::to_string(rte_get_main_lcore()) + ", which serves the control socket and publishes changes: " +
          "commands will wait for the scheduler (give the main lcore a CPU of its own, e.g. -l 0-4 or --lcores)");
  }
}

// The kernel may run any other process on a worker's CPU unless the CPU is isolated (isolcpus=, or a
// cpuset for everything else). `nice` is no shelter: with autogroups (most distributions), a nice 19
// loop in another session took half a worker's CPU here (14.6 -> 7.0 Mpps).
void note_unisolated_worker_cpus(const std::vector<unsigned>& worker_lcores) {
  std::ifstream file("/sys/devices/system/cpu/isolated");
  std::string list;
  std::getline(file, list);
  rte_cpuset_t isolated;
  CPU_ZERO(&isolated);
  for (std::size_t at = 0; at < list.size();) {  // "1,3-5"
    const std::size_t end = std::min(list.find(',', at), list.size());
    const std::string range = list.substr(at, end - at);
    unsigned first = 0, last = 0;
    if (std::sscanf(range.c_str(), "%u-%u", &first, &last) == 2 || std::sscanf(range.c_str(), "%u", &first) == 1) {
      if (last < first) last = first;
      for (unsigned cpu = first; cpu <= last && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &isolated);
    }
    at = end + 1;
  }
  std::string shared;
  unsigned count = 0;
  for (unsigned lcore : worker_lcores) {
    const rte_cpuset_t cpus = rte_lcore_cpuset(lcore);
    for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &cpus) && !CPU_ISSET(cpu, &isolated))
        shared += (count++ == 0 ? "" : ",") + std::to_string(cpu);
  }
  if (count != 0)
    say(std::string("note: ") + (count == 1 ? "the worker's CPU " + shared + " is" : "the workers' CPUs " + shared + " are") +
        " not isolated: the kernel may run other processes there (nice does not prevent it across sessions), and a "
        "worker then loses its rate; isolcpus= on the kernel command line, or a cpuset for everything else, keeps "
        "them for the workers");
}

struct RingDeleter {
  void operator()(rte_ring* ring) const noexcept { rte_ring_free(ring); }
};
using Ring = std::unique_ptr<rte_ring, RingDeleter>;

// A TX queue several workers share, on a line of its own.
struct alignas(64) TxLock {
  rte_spinlock_t lock = RTE_SPINLOCK_INITIALIZER;
};

// How each rule's meters are placed, and why, for the operator.
std::string placement_text(const Engine& engine, std::size_t r, bool assumed_steered) {
  const Rule& rule = engine.policy().rules[r];
  const unsigned workers = engine.workers();
  std::string text = "rule " + rule.name + ": ";
  switch (engine.placement(r)) {
    case Placement::shared:
      text += workers == 1 ? "one meter" : "one meter, shared: each worker checks it for the packets it receives "
                                           "(one critical section per burst)";
      break;
    case Placement::by_key_hash:
      text += "each key metered by one worker, chosen by a hash of the key; a packet received by another worker is "
              "passed to it (the ports do not hash on the key's fields); capacity " +
              std::to_string(engine.worker_capacity(r)) +
              " keys per worker; a passed packet costs more than one metered where it arrived, so that more workers "
              "may police fewer packets than one (doc/tricolord.md, Several workers)";
      break;
    case Placement::steered:
      text += assumed_steered ? "ASSUMED STEERED (--placement=steered, a test switch): each key metered by the worker "
                                "whose RX queue it arrives on, as if the ports steered keys; capacity "
                              : "each key metered by the worker the ports' RSS hash steers it to (the hash covers only "
                                "fields of the key); capacity ";
      text += std::to_string(engine.worker_capacity(r)) + " keys per worker";
      break;
    case Placement::local:
      text += workers == 1 ? "keys metered by the one worker"
                           : "PLACEMENT OFF (--placement=none, a test switch): each worker meters what it receives "
                             "on meters of its own, so a key or the rule may be metered twice";
      break;
  }
  if (rule.parent && engine.placement(r) != Placement::local)
    text += workers == 1 ? "; parent meter" : "; its parent meter is shared by the workers";
  return text;
}

// A port as started, for the operator: driver, MTU, link and, with several workers, its queues.
std::string port_text(const PortFacts& facts, unsigned workers) {
  std::string line = "port " + std::to_string(facts.id) + " " + facts.name + " (" + facts.driver + ", socket " +
                     std::to_string(facts.socket) + "): MTU " + std::to_string(facts.mtu) +
                     (facts.scatter ? ", multi-segment RX" : "") + ", link " + link_text(facts.id);
  if (workers > 1) {
    line += "; " + std::to_string(facts.rx_queues) + " RX queue" + (facts.rx_queues > 1 ? "s" : "") +
            (facts.steered ? " (RSS steering keys)" : facts.rss ? " (RSS)" : "") + ", " +
            std::to_string(facts.tx_queues) + " TX queue" + (facts.tx_queues > 1 ? "s" : "");
    if (facts.rx_queues < workers)
      line += facts.rx_queues == 1 ? "; only worker 0 receives from it"
                                   : "; only workers 0-" + std::to_string(facts.rx_queues - 1) + " receive from it";
    if (facts.tx_queues < workers)
      line += facts.tx_queues == 1 ? "; the workers share its TX queue under a lock"
                                   : "; the workers share its TX queues under locks";
  }
  for (const std::string& note : facts.notes) line += "; " + note;
  return line;
}

// Each worker's share of a started port: RX queue q is worker q's; TX queue w is worker w's, or, on a
// port with fewer TX queues than workers, shared under a lock (returned: it must outlive the workers).
std::unique_ptr<TxLock[]> share_queues(const PortFacts& facts, std::vector<ForwarderPlan>& plans) {
  const auto workers = static_cast<unsigned>(plans.size());
  auto locks = facts.tx_queues < workers ? std::make_unique<TxLock[]>(facts.tx_queues) : nullptr;
  for (std::uint16_t q = 0; q < facts.rx_queues; ++q) plans[q].rx.push_back({facts.id, q});
  for (unsigned w = 0; w < workers; ++w) {
    const auto queue = static_cast<std::uint16_t>(w % facts.tx_queues);
    plans[w].tx[facts.id] = {queue, locks ? &locks[queue].lock : nullptr};
  }
  return locks;
}

// The rings between workers: one per ordered pair, single producer and single consumer, of `size`
// HandedPacket elements, on the consumer's socket.
Expected<std::vector<Ring>> make_handoff_rings(std::vector<ForwarderPlan>& plans, const std::vector<unsigned>& lcores,
                                               std::uint32_t size) {
  const auto workers = static_cast<unsigned>(plans.size());
  std::vector<Ring> rings;
  if (workers == 1) return rings;
  for (ForwarderPlan& plan : plans) plan.to.assign(workers, nullptr);
  for (unsigned to = 0; to < workers; ++to)
    for (unsigned from = 0; from < workers; ++from) {
      if (from == to) continue;
      const std::string name = "tricolor_handoff_" + std::to_string(from) + "_" + std::to_string(to);
      rte_ring* ring = rte_ring_create_elem(name.c_str(), sizeof(HandedPacket), size,
                                            static_cast<int>(rte_lcore_to_socket_id(lcores[to])),
                                            RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
      if (ring == nullptr)
        return Error{"memory", "cannot create the handoff ring " + name + ": " + rte_strerror(rte_errno)};
      rings.emplace_back(ring);
      plans[from].to[to] = ring;
      plans[to].from.push_back(ring);
    }
  return rings;
}

// The descriptors the daemon may need at once: the control socket's clients, the metrics listener's
// connections, and a margin for DPDK (its telemetry, ports, memory files) and the files it opens.
// The soft limit is raised to the hard one (a shell's default soft limit is 1024).
void raise_descriptor_limit(std::size_t needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed)
    say("warning: the descriptor limit is " + std::to_string(limit.rlim_cur) + ", below the " + std::to_string(needed) +
        " the control socket's and the metrics listener's connections and DPDK may take at once (ulimit -n, or "
        "LimitNOFILE= under systemd)");
}

// The audit log: appended to, created 0640 (it says who changed what), a regular file only (a FIFO
// would block the daemon, a device is not a log). A file others may read is said, not changed.
Expected<int> open_audit_log(const std::string& path) {
  const std::string where = "--audit-log " + quote(path, kQuotePathMaxBytes);
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0640);
  if (fd < 0) return Error{"audit-log", where + ": cannot open it: " + std::strerror(errno)};
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    return Error{"audit-log", where + ": not a regular file"};
  }
  ::fcntl(fd, F_SETFL, O_WRONLY | O_APPEND);  // blocking writes from here on: a line is never cut short
  if ((status.st_mode & S_IRWXO) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(status.st_mode & 07777));
    say("warning: " + where + " has mode " + mode + ": others may read who changed what (chmod o-rwx)");
  }
  return fd;
}

#ifdef TRICOLOR_HAVE_XDP
// The control side's pace in XDP mode: the kernel meters, so the loop only answers requests, reloads
// and stops; a request wakes it at once.
constexpr auto kXdpControlPeriod = std::chrono::milliseconds(50);
// How often idle keys are looked for (the program renews an idle key in place at its next packet; the
// sweep gives the places of keys that send nothing more back to their rule's capacity).
constexpr auto kXdpSweepPeriod = std::chrono::milliseconds(500);

// tricolord --xdp: the policy as an XDP program on kernel interfaces; no EAL, no DPDK port. The same
// socket, commands, audit log, metrics and final counters as the DPDK daemon (DaemonCommands over the
// XdpDataplane). Ends by detaching (the links closed), also when a start fails half way.
// SIGHUP, in either daemon's control loop: the policy file again, whole or not at all, as `tricolorctl
// reload`; systemd is told RELOADING=1 and then READY=1 (Debian 12's systemd 252 has no
// Type=notify-reload to do it), with the refusal in STATUS= when there is one. `status()`: the
// STATUS= line of a daemon that runs.
template <class Status>
void reload_if_asked(control::DaemonCommands& commands, const std::string& policy_path, Status&& status) {
  if (!g_reload_requested.exchange(false, std::memory_order_relaxed)) return;
  g_service.reloading("reloading " + policy_path);
  const control::protocol::Reply reply = commands.reload("SIGHUP");
  say("SIGHUP: " + (reply.ok ? reply.output : "reload refused: " + reply.error.message));
  g_service.ready(reply.ok ? status() : status() + "; the last reload was refused: " + reply.error.message);
}

// Every --stats-interval seconds: the rates since the previous report, or one JSON line.
template <class Snapshot>
void report_if_due(const DaemonOptions& o, double now, double& next_stats, DaemonSnapshot& previous, Snapshot&& snapshot) {
  if (o.stats_interval_s <= 0 || now < next_stats) return;
  next_stats += o.stats_interval_s;
  DaemonSnapshot current = snapshot();
  if (o.json) write_json_line(current, "stats", std::cout);
  else print_rates(previous, current, std::cout);
  previous = std::move(current);
}

int run_xdp(const DaemonOptions& o, const Policy& policy, control::ControlServer& server,
            const std::function<void(const std::string&)>& audit, control::ControlCalls& control_calls,
            std::unique_ptr<control::MetricsServer>& metrics,
            std::function<std::pair<DaemonSnapshot, control::DaemonFacts>()>& metrics_source, int audit_fd) {
  // Refused before anything is loaded or attached, naming the rule.
  if (auto image = xdp::translate(policy); !image)
    fail(control::kExitPolicy, "policy " + quote(o.policy_path, kQuotePathMaxBytes) + ": " + image.error().message +
                                   " (the XDP dataplane cannot run it)");
  auto dataplane = control::XdpDataplane::start(policy, o.xdp_interfaces, o.xdp_mode, o.xdp_force);
  if (!dataplane) fail(control::kExitRuntime, dataplane.error().message);
  control::XdpDataplane& xdp = **dataplane;
  const char* mode = o.xdp_mode == control::XdpMode::skb ? "skb (generic)" : "native";
  for (const control::XdpAttachment& a : xdp.attachments())
    say("XDP program attached to " + a.interface + " (ifindex " + std::to_string(a.ifindex) + ", " + mode +
        " mode, by a bpf_link: the kernel detaches it when tricolord ends)");
  say("policy " + quote(o.policy_path, kQuotePathMaxBytes) + ": " + std::to_string(policy.rules.size()) +
      " rules; XDP dataplane, clock bpf_ktime_get_ns");
  const auto started_at = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count(); };
  auto snapshot = [&](unsigned sections = kReportAll) { return xdp.snapshot(elapsed(), sections); };
  control::DaemonCommands commands(xdp, o.policy_path, audit, snapshot);
  const auto handle = [&](const control::protocol::Request& r, const control::Peer& p) { return commands.handle(r, p); };
  say("control socket: " + o.socket_path);
  metrics_source = [&] { return std::pair{snapshot(), commands.facts()}; };
  if (metrics) {
    metrics->start();
    say("metrics: http://" + o.metrics->text() + "/metrics");
  }
  say("running; SIGINT or SIGTERM stops, SIGHUP reloads the policy file");
  const auto service_status = [&] {
    return std::to_string(xdp.policy().rules.size()) + " rules (generation " + std::to_string(xdp.generation()) +
           "), XDP on " + std::to_string(xdp.attachments().size()) + " interface(s); socket " + o.socket_path;
  };
  g_service.ready("policing: " + service_status());
  DaemonSnapshot previous = snapshot();
  double next_stats = o.stats_interval_s;
  auto next_sweep = std::chrono::steady_clock::now() + kXdpSweepPeriod;
  bool sweep_failed = false;
  while (!g_stop_requested.load(std::memory_order_relaxed)) {
    server.poll(kXdpControlPeriod, handle);
    if (std::chrono::steady_clock::now() >= next_sweep) {
      next_sweep += kXdpSweepPeriod;
      auto swept = xdp.sweep();
      if (!swept && !sweep_failed) say("the sweep of idle keys failed: " + swept.error().message);
      sweep_failed = !swept;
    }
    control_calls.run_pending();
    g_service.watchdog(std::chrono::steady_clock::now());
    say_ignored_signals();
    reload_if_asked(commands, o.policy_path, [&] { return "policing: " + service_status(); });
    const double now = elapsed();
    if (o.duration_s > 0 && now >= o.duration_s) break;
    report_if_due(o, now, next_stats, previous, snapshot);
  }
  g_service.stopping("stopping: detaching the XDP program");
  control_calls.close();
  metrics.reset();
  const DaemonSnapshot final_counters = snapshot();
  if (o.json) write_json_line(final_counters, "final", std::cout);
  else print_totals(final_counters, std::cout);
  dataplane->reset();  // detached and unloaded
  say("XDP program detached");
  if (audit_fd >= 0) ::close(audit_fd);
  return 0;
}
#endif

}  // namespace

int run(int argc, char** argv) {
  install_signal_handlers();  // first: from now on INT and TERM stop cleanly, HUP and the like do not kill
  auto parsed = control::parse_command_line(argc, argv);
  if (!parsed.options) return parsed.exit_status;
  g_service = control::ServiceNotifier::from_environment();
  DaemonOptions& o = *parsed.options;

  if (!o.cluster_password_file.empty()) {
    std::string warning;
    auto password = control::read_password_file(o.cluster_password_file, warning);
    if (!password) fail(control::kExitUsage, password.error().message);
    if (!warning.empty()) say("warning: " + warning);
    o.cluster.password = std::move(*password);
  }

  // The policy first: refused before the EAL or any port is touched.
  auto text = control::read_policy_file(o.policy_path);
  if (!text) fail(control::kExitPolicy, text.error().message);
  auto policy = control::load(*text);
  if (!policy) fail(control::kExitPolicy, "policy " + quote(o.policy_path, kQuotePathMaxBytes) + ": " + policy.error().message);

  // The control socket, before the EAL: a second daemon on the same socket is refused before it
  // touches a port. Clients that connect now wait until the control loop runs.
  int audit_fd = -1;
  if (!o.audit_log_path.empty()) {
    auto opened = open_audit_log(o.audit_log_path);
    if (!opened) fail(control::kExitUsage, opened.error().message);
    audit_fd = *opened;
  } else {
    openlog("tricolord", LOG_PID, LOG_DAEMON);
  }
  auto audit = [&](const std::string& line) {
    if (audit_fd >= 0) {
      const std::string text = line + '\n';  // one write: lines of two daemons never interleave
      if (::write(audit_fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        say("cannot append to the audit log " + quote(o.audit_log_path, kQuotePathMaxBytes) + ": " + std::strerror(errno));
    } else {
      syslog(LOG_NOTICE, "%s", line.c_str());
    }
    say("audit: " + line);
  };
  control::ServerOptions socket_options;
  socket_options.path = o.socket_path;
  socket_options.idle_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.socket_idle_timeout_s * 1000));
  raise_descriptor_limit(socket_options.max_clients + socket_options.reserved_clients +
                         control::kMaxConnections + 512);
  if (!o.socket_group.empty()) {
    const group* g = getgrnam(o.socket_group.c_str());
    if (g == nullptr) fail(control::kExitUsage, "--socket-group " + quote(o.socket_group) + ": no such group");
    socket_options.group = g->gr_gid;
  }
  if (o.socket_path == "/run/tricolor/tricolor.sock") ::mkdir("/run/tricolor", 0755);  // the default's folder
  auto server = control::ControlServer::listen(socket_options, audit);
  if (!server) fail(control::kExitRuntime, server.error().message + " (--socket chooses another)");

  // The metrics listener binds now, for the same reason; it serves once the control loop runs. A scrape
  // reads the counters on the control thread (the only one that may walk the rules) and is written out
  // on the listener's thread, so that a large policy's exposition does not hold the control loop.
  control::ControlCalls control_calls;
  std::function<std::pair<DaemonSnapshot, control::DaemonFacts>()> metrics_source;  // set before serving
  std::unique_ptr<control::MetricsServer> metrics;
  if (o.metrics) {
    auto bound = control::MetricsServer::bind(*o.metrics, [&]() -> std::optional<std::string> {
      std::optional<std::pair<DaemonSnapshot, control::DaemonFacts>> sample;
      if (!control_calls.call([&] { sample = metrics_source(); }, std::chrono::milliseconds(5000))) return std::nullopt;
      return control::prometheus_text(sample->first, sample->second);
    });
    if (!bound) fail(control::kExitUsage, bound.error().message);
    metrics = std::move(*bound);
  }

  if (!o.xdp_interfaces.empty()) {
#ifdef TRICOLOR_HAVE_XDP
    return run_xdp(o, *policy, **server, audit, control_calls, metrics, metrics_source, audit_fd);
#else
    fail(control::kExitUsage, "--xdp: this tricolord was built without the XDP dataplane (it needs clang, bpftool "
                              "and libbpf-dev at build time)");
#endif
  }

  // Captures that net_pcap ports replay from memory (infinite_rx=1) hold an mbuf a packet for as long
  // as they run: counted now, so that the pool is sized for them, or a --mbufs too small for them is
  // refused in our words before any port is set up.
  auto captures = control::replayed_captures(o.eal_args, RTE_MBUF_DEFAULT_DATAROOM);
  if (!captures) fail(control::kExitUsage, captures.error().message);
  std::uint64_t capture_mbufs = 0;
  for (const control::ReplayedCapture& c : *captures) capture_mbufs += c.mbufs;

  // DPDK's log goes to standard error: standard output carries the counters (and JSON with --json).
  rte_openlog_stream(stderr);
  const std::uint64_t pool_mb_guess =
      (o.mbufs != 0 ? o.mbufs : 65536 + capture_mbufs) * kMbufBytes / (1 << 20);  // before the ports are known
  const std::string memory = control::choose_memory(o, kEngineHeapMb + pool_mb_guess);
  std::vector<char*> eal_argv;
  for (std::string& arg : o.eal_args) eal_argv.push_back(arg.data());
  eal_argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(eal_argv.size() - 1), eal_argv.data()) < 0) {
    const std::string why = rte_strerror(rte_errno);
    // The EAL leaves the directory it made, emptied; one that is not empty is another process's.
    if (const char* dir = rte_eal_get_runtime_dir(); dir != nullptr && *dir != '\0') rmdir(dir);
    fail(control::kExitRuntime, "DPDK's EAL could not start: " + why + " (its messages above say why)");
  }
  // Gone last, after rte_eal_cleanup() at a stop, or on the way out of a start that failed from here.
  const EalRuntimeDirectory runtime_directory;
  say(memory + (rte_eal_has_hugepages() ? "" : "; running without huge pages"));
  // The EAL only logs a --vdev it could not create (rte_eal_init succeeds): a port that was asked for
  // and is missing stops the daemon here, rather than it running with the ports that remain.
  for (const control::RequestedPort& asked : control::requested_vdev_ports(o.eal_args))
    if (!port_exists(asked.name))
      fail(control::kExitRuntime, "--vdev " + quote(asked.devargs) + ": the EAL could not create port " + asked.name +
                                      " (its messages above say why)");

  // The workers: every worker lcore.
  std::vector<unsigned> worker_lcores;
  for (unsigned lcore = rte_get_next_lcore(-1, 1, 0); lcore < RTE_MAX_LCORE; lcore = rte_get_next_lcore(lcore, 1, 0))
    worker_lcores.push_back(lcore);
  if (worker_lcores.empty())
    fail(control::kExitUsage, "no worker lcore: give the main lcore and one per worker, e.g. -l 0,1");
  const auto workers = static_cast<unsigned>(worker_lcores.size());
  warn_shared_control_core(worker_lcores);
  note_unisolated_worker_cpus(worker_lcores);

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

  std::vector<std::unique_ptr<DpdkMemory>> worker_memory;
  EngineOptions engine_options;
  engine_options.workers = workers;
  engine_options.placement = o.placement;
  for (unsigned lcore : worker_lcores) {
    worker_memory.push_back(std::make_unique<DpdkMemory>(static_cast<int>(rte_lcore_to_socket_id(lcore))));
    engine_options.memory.push_back(worker_memory.back().get());
  }
  if (o.max_classifier_entries != 0) engine_options.limits.max_classifier_entries = o.max_classifier_entries;
  if (o.classifier_scan_entries) engine_options.limits.classifier_scan_entries = *o.classifier_scan_entries;
  engine_options.limits.classifier_exact_hash = !o.classifier_no_hash;
  engine_options.limits.flow_cache_entries = o.flow_cache_entries;
  engine_options.limits.shape_capacity = o.shape_capacity;
  // Cluster meters start in the fallback until their first lease (a box that cannot reach Redis at
  // startup meters as it would if Redis went away later); without Redis, at the box's share.
  engine_options.cluster_boxes = o.cluster.boxes;
  engine_options.cluster_start_mode = o.cluster.redis.empty() ? policer::ClusterMode::share : o.cluster.fallback;
  // NIC steering (dataplane/dpdk/rss.hpp): on when every RX port hashes on address fields that every
  // per-key rule's key holds; then those keys need no handoff.
  RssPlan steering;
  if (workers > 1 && o.placement == PlacementMode::keys_by_hash) {
    std::vector<RssCapabilities> capabilities;
    for (std::uint16_t port : ports)
      if (auto c = rss_capabilities(port)) capabilities.push_back(*c);
    steering = plan_rss(policy->rules, workers, capabilities);
    if (steering.enabled) {
      engine_options.steering.src = steering.fields == HashedFields::src || steering.fields == HashedFields::src_and_dst;
      engine_options.steering.dst = steering.fields == HashedFields::dst || steering.fields == HashedFields::src_and_dst;
    }
  }
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
  port_options.queues = static_cast<std::uint16_t>(workers);
  port_options.burst = o.burst;
  if (steering.enabled) port_options.steering = &steering;
  const std::uint64_t handoff_slots = workers > 1 ? std::uint64_t{workers} * (workers - 1) * o.handoff_ring : 0;
  // Shaping holds up to --shape-capacity packets per worker, each in an mbuf of the pool, for up to
  // kMaxShapeDelayNs: a pool without room for them would starve the ports while rules shape.
  const std::uint64_t shape_mbufs = std::uint64_t{workers} * o.shape_capacity;
  const std::uint64_t bursts = mbufs_in_bursts(ports.size(), rte_lcore_count(), o.burst);
  const std::uint32_t default_mbufs =
      mbufs_needed(ports, port_options, rte_lcore_count(), handoff_slots + capture_mbufs + shape_mbufs);
  // What the captures and shaping hold is certain; the queues of virtual ports (net_pcap's have no
  // descriptors) may take far less than a NIC's, so only those and the workers' bursts are required here.
  const std::uint64_t least = capture_mbufs + shape_mbufs + bursts;
  if (o.mbufs != 0 && o.mbufs < least) {
    std::string held;
    for (const control::ReplayedCapture& c : *captures)
      held += (held.empty() ? "" : ", ") + c.port + "'s capture " + quote(c.path, kQuotePathMaxBytes) + " holds " +
              std::to_string(c.mbufs);
    std::string needs;
    if (capture_mbufs != 0)
      needs = "infinite_rx keeps every packet of a capture in an mbuf for as long as the port runs (" + held + "), ";
    needs += "shaping may hold " + std::to_string(workers) + (workers == 1 ? " worker" : " workers") +
             " x --shape-capacity " + std::to_string(o.shape_capacity) + " = " + std::to_string(shape_mbufs) +
             " packets, and the workers' bursts need " + std::to_string(bursts);
    fail(control::kExitUsage, "--mbufs " + std::to_string(o.mbufs) + " is too few: " + needs + ": give at least " +
                                  std::to_string(least) + " (the ports' queues want more: " +
                                  std::to_string(default_mbufs) +
                                  " is what the daemon takes without --mbufs), lower --shape-capacity, or leave --mbufs out");
  }
  const std::uint32_t mbufs = o.mbufs != 0 ? o.mbufs : default_mbufs;
  const int socket = port_socket(ports.front());
  auto pool = make_mbuf_pool(mbufs, socket, ports);
  if (!pool)
    fail(control::kExitRuntime,
         pool.error().message +
             (o.mbufs != 0 ? std::string(" (--mbufs sets the size)")
                           : " (its size: the ports' queues and bursts, and " + std::to_string(workers) +
                                 " x --shape-capacity " + std::to_string(o.shape_capacity) +
                                 " packets shaping may hold; lower --shape-capacity, or set --mbufs)"));

  ForwarderOptions forwarder_options;
  forwarder_options.stamp_generation = o.stamp_generation;
  if (o.stamp_generation)
    say("STAMPING GENERATIONS (--stamp-generation, a test switch): each forwarded IPv4 packet's identification "
        "field is overwritten with the rule set generation it was metered under");
  forwarder_options.clock = o.clock;
  forwarder_options.burst = o.burst;
  forwarder_options.shape_capacity = o.shape_capacity;
  forwarder_options.shape_geometry = WheelGeometry::for_clock(tick_hz, kMaxShapeDelayNs);

  if (!tsc_clock) {
    if (rte_mbuf_dyn_rx_timestamp_register(&forwarder_options.timestamp.offset, &forwarder_options.timestamp.flag) != 0)
      fail(control::kExitRuntime, std::string("cannot register the mbuf RX timestamp field: ") + rte_strerror(rte_errno));
  }
  std::vector<std::uint16_t> started;
  auto stop_ports = [&] {
    for (std::uint16_t port : started) stop_port(port);
    started.clear();
  };
  // Each worker's share of the ports (share_queues) and its rings to the others.
  std::vector<ForwarderPlan> plans(workers);
  bool all_steered = true;
  std::vector<std::unique_ptr<TxLock[]>> tx_locks;
  for (const Path& path : paths)
    for (ForwarderPlan& plan : plans) plan.egress[path.rx_port] = path.tx_port;
  for (std::uint16_t port : ports) {
    auto facts = start_port(port, pool->get(), port_options);
    if (!facts) {
      stop_ports();
      fail(control::kExitRuntime, facts.error().message);
    }
    started.push_back(port);
    all_steered = all_steered && facts->steered;
    forwarder_options.vlan_insert[port] = facts->vlan_insert;
    say(port_text(*facts, workers));
    tx_locks.push_back(share_queues(*facts, plans));
  }
  for (const Path& path : paths)
    say("path: port " + std::to_string(path.rx_port) + " -> port " + std::to_string(path.tx_port));
  if (workers > 1 && o.placement == PlacementMode::keys_by_hash) {
    if (steering.enabled && !all_steered) {
      steering.enabled = false;
      steering.reason = "a port would not take the plan (said above)";
      if (auto replanned = (*engine)->set_steering({}); !replanned)
        fail(control::kExitRuntime, "cannot place the keys without steering: " + replanned.error().message);
    }
    say(steering.enabled ? "RSS steering on: the ports hash on the keys' addresses; per-key rules need no handoff"
                         : "RSS steering off: " + steering.reason);
  }
  auto rings = make_handoff_rings(plans, worker_lcores, o.handoff_ring);
  if (!rings) {
    stop_ports();
    fail(control::kExitRuntime, rings.error().message);
  }
  for (std::size_t r = 0; r < running.rules.size(); ++r)
    say(placement_text(**engine, r, o.placement == PlacementMode::assume_steered));
  const unsigned mbufs_at_start = rte_mempool_in_use_count(pool->get());
  say("policy " + quote(o.policy_path, kQuotePathMaxBytes) + ": " + std::to_string(running.rules.size()) +
      " rules; clock " + (tsc_clock ? "TSC at " + std::to_string(tick_hz) + " Hz" : std::string("RX timestamps")) +
      "; " + std::to_string(workers) + (workers == 1 ? " worker on lcore " : " workers on lcores ") +
      lcore_list(worker_lcores) + "; " + std::to_string(mbufs) + " mbufs on socket " + std::to_string(socket));

  std::vector<std::unique_ptr<Forwarder>> forwarders;
  std::vector<const Forwarder*> forwarder_views;
  for (unsigned w = 0; w < workers; ++w) {
    try {
      forwarders.push_back(std::make_unique<Forwarder>((*engine)->worker(w), std::move(plans[w]), forwarder_options, workers));
    } catch (const std::bad_alloc&) {
      stop_ports();
      fail(control::kExitRuntime, "cannot allocate worker " + std::to_string(w) + "'s shaping wheel for " +
                                      std::to_string(o.shape_capacity) + " packets (--shape-capacity)");
    }
    forwarder_views.push_back(forwarders.back().get());
  }
  const auto started_at = std::chrono::steady_clock::now();
  for (unsigned w = 0; w < workers; ++w)
    if (const int rc = rte_eal_remote_launch(worker_main, forwarders[w].get(), worker_lcores[w]); rc != 0) {
      g_worker_stop.requested.store(true);
      rte_eal_mp_wait_lcore();
      stop_ports();
      fail(control::kExitRuntime, "cannot start worker " + std::to_string(w) + " on lcore " +
                                      std::to_string(worker_lcores[w]) + ": " + rte_strerror(-rc));
    }
  say("running; SIGINT or SIGTERM stops, SIGHUP reloads the policy file");
  const auto service_status = [&] {
    return std::to_string((*engine)->policy().rules.size()) + " rules (generation " +
           std::to_string((*engine)->generation()) + "), " + std::to_string(workers) +
           (workers == 1 ? " worker, " : " workers, ") + std::to_string(ports.size()) +
           (ports.size() == 1 ? " port; socket " : " ports; socket ") + o.socket_path;
  };

  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count(); };
  auto snapshot = [&](unsigned sections = kReportAll) {
    DaemonSnapshot s = take_snapshot(**engine, forwarder_views, worker_lcores, ports, elapsed(), tick_hz, sections);
    s.mbufs_in_use_at_start = mbufs_at_start;
    s.mbufs_in_use = rte_mempool_in_use_count(pool->get());
    return s;
  };
  DaemonSnapshot previous = snapshot();
  double next_stats = o.stats_interval_s;
  control::DaemonCommands commands(**engine, o.policy_path, audit, snapshot);
  const auto handle = [&](const control::protocol::Request& r, const control::Peer& p) { return commands.handle(r, p); };
  say("control socket: " + o.socket_path);
  metrics_source = [&] { return std::pair{snapshot(), commands.facts()}; };
  if (metrics) {
    metrics->start();  // its threads inherit this thread's CPUs: the main lcore's, never a worker's
    say("metrics: http://" + o.metrics->text() + "/metrics");
  }
  // The lease side of cluster meters: a thread of its own (a slow Redis never holds the control loop).
  std::unique_ptr<control::ClusterLeases> leases;
  if (!o.cluster.redis.empty()) {
    leases = std::make_unique<control::ClusterLeases>(**engine, o.cluster, [](const std::string& line) { say(line); });
    leases->start();
  } else {
    for (const dataplane::ClusterInfo& cluster : (*engine)->clusters())
      say("cluster " + cluster.name + ": no --cluster-redis: this box meters its share alone (1/" +
          std::to_string(o.cluster.boxes) + " of the budget)");
  }
  const control::TelemetrySources telemetry{&control_calls, engine->get(), snapshot, [&] { return commands.facts(); }};
  control::register_telemetry_endpoints(telemetry);
  // Ready: the ports forward, the socket answers (systemd starts what is ordered after the unit now).
  g_service.ready("forwarding: " + service_status());
  while (!g_stop_requested.load(std::memory_order_relaxed)) {
    (*server)->poll(kControlPeriod, handle);  // waits up to a period for requests, answers them
    control_calls.run_pending();              // scrapes and telemetry requests
    (*engine)->maintain();
    g_service.watchdog(std::chrono::steady_clock::now());  // the control loop turns: systemd's watchdog fed
    say_ignored_signals();
    reload_if_asked(commands, o.policy_path, [&] { return "forwarding: " + service_status(); });
    const double now = elapsed();
    if (o.duration_s > 0 && now >= o.duration_s) break;
    report_if_due(o, now, next_stats, previous, snapshot);
  }

  // Stop: each worker finishes its burst and what the others pass it, and sends what shaping still
  // holds (nothing else stays in a worker between bursts), then the counters, then the ports. A packet passed on at the very end (placed again under a newer
  // rule set) may remain in a ring: freed and counted.
  const auto stopping_at = std::chrono::steady_clock::now();
  g_service.stopping("stopping: the workers finish their bursts, then the final counters");
  control_calls.close();  // scrapes and telemetry requests from now on are told the daemon is stopping
  control::unregister_telemetry_endpoints();
  metrics.reset();
  leases.reset();
  g_worker_stop.requested.store(true, std::memory_order_relaxed);
  rte_eal_mp_wait_lcore();
  std::uint64_t left_in_rings = 0;
  for (const Ring& ring : *rings) {
    HandedPacket left[Forwarder::kBurst];
    while (const unsigned n = rte_ring_dequeue_burst_elem(ring.get(), left, sizeof(HandedPacket), Forwarder::kBurst, nullptr)) {
      for (unsigned i = 0; i < n; ++i) rte_pktmbuf_free(left[i].mbuf);
      left_in_rings += n;
    }
  }
  (*engine)->maintain();
  DaemonSnapshot final_counters = snapshot();
  final_counters.handoff_left_at_stop = left_in_rings;
  if (!o.dump_keys_path.empty()) dump_keys(**engine, o.dump_keys_path);
  final_counters.stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping_at).count();
  if (o.json) write_json_line(final_counters, "final", std::cout);
  else print_totals(final_counters, std::cout);
  stop_ports();
  rings->clear();
  pool->reset();
  engine->reset();
  rte_eal_cleanup();
  if (audit_fd >= 0) ::close(audit_fd);
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const StartFailure& failure) {
    return failure.status;  // said by fail(); what was made is undone on the way here
  }
}
