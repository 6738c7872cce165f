#include "control/daemon/tricolord_options.hpp"

#include <algorithm>
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "dataplane/engine/classifier.hpp"
#include "dataplane/engine/flow_cache.hpp"
#include "dataplane/replay/capture.hpp"
#include "policer/quote.hpp"

namespace tricolor::control {
namespace {
static_assert(dataplane::kDefaultScanEntries == 16, "the usage text and --help say 16");

constexpr const char* kUsage = "tricolord [EAL options] -- --policy FILE [options], or tricolord --xdp IFACE --policy FILE [options]";

constexpr const char* kEalHelp = R"(EAL options (before --; DPDK's own, see `dpdk-testpmd --help` for all):
  -l CORES              the lcores: the first is the main lcore (control: sleeps, prints counters),
                        each other one runs a worker (RX, meter, TX), e.g. -l 0,1 or -l 0-4
  -a PCI                use this NIC (bound to vfio-pci: dpdk-devbind.py -b vfio-pci 0000:3b:00.0)
  --vdev DEVICE         a virtual port: net_memif0,role=server,socket=/run/memif.sock
                        net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap   net_af_xdp0,iface=eth1
                        net_af_packet0,iface=eth1   net_ring0   net_null0
  --no-huge -m MB       without huge pages (tricolord adds both when the machine has none free)
  --file-prefix NAME    run beside other DPDK processes

Ports: with --pair A:B packets received on A leave by B and those received on B leave by A (a bump
in the wire); with --one-armed P they leave by P, the port they came in on. Without either, two ports
or more make the pair 0:1 and one port is one-armed. A port is in one pair at most.
)";

constexpr const char* kOptionsHelp = R"(tricolord options (after --):
  --policy FILE         the policy read at startup, in the command language (required)
  --pair A:B            forward between ports A and B, both ways (repeatable)
  --one-armed P         packets leave by the port they came in on (repeatable)
  --clock tsc|rx-timestamp   the meters' clock (default tsc; see below)
  --stats-interval S    print each rule's green/yellow/red rates every S seconds (default 0: off)
  --json                counters as one JSON object per line on standard output
  --duration S          stop by itself after S seconds (default 0: at SIGINT or SIGTERM)
  --mbufs N             mbufs in the pool (default: sized for the ports' queues and bursts)
  --mtu BYTES           the largest IP packet received (default 9000; capped by each port)
  --rx-descriptors N    per RX queue (default 1024)
  --tx-descriptors N    per TX queue (default 1024)
  --burst N             packets each worker takes from an RX queue at once, 1 to 64 (default 32;
                        doc/benchmarks.md, *Bursts of 64*, says what 64 changes)
  --max-classifier-entries N   the policy's limit of classifier entries (default 131072)
  --classifier-scan-entries N  up to N entries: compared in order, no trie (default 16; 0: never scanned)
  --classifier-no-hash  rules that all match the same fields the same way are scanned or put in a trie
                        like any others, not hashed (for comparison; see doc/engine.md)
  --flow-cache-entries N  each worker's exact-match flow cache in front of the classifier: N entries of
                        64 B (a power of two, 2 to 16777216; default 0: none; see doc/benchmarks.md)
  --handoff-ring N      mbufs each ring between two workers holds (default 1024; a power of two)
  --shape-capacity N    packets each worker may hold for shaping rules (`red shape max-delay D`) at once,
                        0 to 16777216 (default 4096; the pool is sized for them; beyond it a held
                        packet is dropped and counted)
  --dump-keys FILE      at the stop, write every live key (JSON lines: rule, key, worker, counters)
  --socket PATH         the control socket tricolorctl talks to (default /run/tricolor/tricolor.sock)
  --socket-group NAME   who may use it besides root (the file is given to the group, mode 0660)
  --socket-idle-timeout S   a control connection with nothing in progress for S seconds is closed
                        (default 60; tricolorctl connects again by itself)
  --audit-log FILE      where accepted and refused changes are logged (default: syslog); created 0640
  --xdp IFACE[,IFACE...]   XDP mode: no EAL and no DPDK port; the policy runs as an XDP program
                        attached to these kernel interfaces (`tricolord --xdp IFACE --policy FILE`,
                        no -- needed; no EAL options)
  --xdp-mode native|skb   native (the driver's XDP, the default; refused where the driver has none)
                        or skb (the kernel's generic XDP, slower, any interface)
  --xdp-force           replace an XDP program some other tool attached to the interface
  --metrics ADDR:PORT   serve the counters to Prometheus over HTTP, GET /metrics (off by default;
                        e.g. 127.0.0.1:9400, [::1]:9400, 0.0.0.0:9400 for every interface)
  --cluster-redis ADDR  lease cluster meters' tokens from Redis at HOST:PORT or unix:PATH (rules with
                        `cluster PROFILE`; without it each box meters its share alone)
  --cluster-boxes N     the boxes that share each cluster budget: a box's share is the budget / N
                        (default 1)
  --cluster-fallback share|open|closed   while Redis cannot be reached: meter at the share (default),
                        pass every green packet, or none
  --cluster-rtt MS      the lease round trip a chunk is sized for: chunk = 2 x CIR x MS (default 5)
  --cluster-timeout MS  each Redis connect and call (default 50); past it, the fallback
  --cluster-retry MS    while Redis is out of reach, how often it is tried again (default 500)
  --cluster-user NAME   the Redis ACL user (with --cluster-password-file)
  --cluster-password-file FILE   the Redis password, the file's first line (AUTH)
  --placement=none      for tests only: each worker meters what it receives on meters of its own,
                        so a key may be metered by two workers (the flaw the default placement prevents)
  --placement=steered   for tests and benchmarks only: take each RX queue's packets as already split
                        by key, as a NIC steering by RSS delivers them (no handoff); inexact otherwise
  --stamp-generation    for tests only: write into each forwarded IPv4 packet's identification field the
                        low 16 bits of the rule set generation it was metered under (alters packets)
  --version             the version, and nothing else
  -h, --help            this text
)";

constexpr const char* kMoreHelp = R"(
Clock: `tsc` (default) reads the CPU's time-stamp counter once per burst (the CPU should have an
invariant TSC; tricolord warns when /proc/cpuinfo does not say so). `rx-timestamp` takes each packet's
time from the port's RX timestamp (net_pcap reading a capture gives its times in microseconds;
tricolord meters at 1e9 ticks per second, as tricolor-replay does); ports that give none are refused.

Workers: each worker owns an RX queue on every port that has one per worker (else the first workers
do) and a TX queue on every port (shared under a lock where a port has fewer). A per-key rule's keys
are each metered by one worker: the one the NIC's RSS steers them to when every port hashes on fields
of the key, otherwise the one a hash of the key names, to which the receiving worker passes the
packet over a ring. Aggregate and parent meters are shared: each worker checks them for its packets.
tricolord prints each rule's placement at startup.

Signals: SIGINT or SIGTERM stops the workers, prints the final counters and exits 0; SIGHUP reads the
policy file again and installs it whole, or changes nothing when it has an error (as `tricolorctl reload`).
Exit status: 0 stopped cleanly; 1 the command line is wrong; 2 the policy cannot be read or is
refused (its line and token are said); 3 the EAL, a port or memory failed.

Examples:
  tricolord -l 0,1 -a 0000:3b:00.0 -a 0000:3b:00.1 -- --policy /etc/tricolor/policy --stats-interval 1
  tricolord -l 0,1 --no-huge --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap -- --policy p --clock rx-timestamp
)";

bool parse_port(const std::string& text, std::uint16_t& port) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value >= 65535) return false;
  port = static_cast<std::uint16_t>(value);
  return true;
}

int usage_error(const std::string& message) {
  std::cerr << "tricolord: " << message << "\n(usage: " << kUsage << "; tricolord --help says more)\n";
  return kExitUsage;
}

std::string help_text() {
  std::ostringstream out;
  out << "tricolord: the tricolor packet policer's poll-mode daemon. It meters each flow with the policy's\n"
         "token buckets and three-color markers and forwards, drops or remarks packets by color.\n\n"
      << "Usage: " << kUsage << "\n\n"
      << kEalHelp << "\n"
      << kOptionsHelp << kMoreHelp;
  return out.str();
}

}  // namespace

ParsedCommandLine parse_command_line(int argc, char** argv) {
  ParsedCommandLine result;
  DaemonOptions o;
  std::vector<std::string> app_args;
  int separator = -1;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) {
      separator = i;
      break;
    }
  o.eal_args.push_back(argv[0]);
  if (separator < 0) {
    // Without `--` only a request for help makes sense: everything else is the daemon's part misplaced.
    for (int i = 1; i < argc; ++i) app_args.push_back(argv[i]);
    const bool help = app_args.size() == 1 && (app_args[0] == "--help" || app_args[0] == "-h" || app_args[0] == "--version");
    // XDP mode has no EAL part: `tricolord --xdp IFACE --policy FILE` needs no `--`.
    const bool xdp = std::any_of(app_args.begin(), app_args.end(),
                                 [](const std::string& a) { return a == "--xdp" || a.rfind("--xdp=", 0) == 0; });
    if (!help && !xdp) {
      result.exit_status = usage_error(argc == 1 ? "no options: at least -- --policy FILE is needed"
                                                 : "tricolord's own options go after `--` (EAL options before it)");
      return result;
    }
  } else {
    for (int i = 1; i < separator; ++i) o.eal_args.push_back(argv[i]);
    for (int i = separator + 1; i < argc; ++i) app_args.push_back(argv[i]);
  }

  CLI::App app{"tricolord"};
  app.set_help_flag();  // help is ours (it covers the EAL's part too)
  bool help = false, version = false;
  std::string clock = "tsc";
  std::vector<std::string> pairs, one_armed;
  app.add_flag("-h,--help", help, "this text");
  app.add_flag("--version", version, "the version");
  app.add_option("--policy", o.policy_path, "the policy file read at startup (the command language)");
  app.add_option("--pair", pairs, "A:B  forward between ports A and B, both ways (repeatable)");
  app.add_option("--one-armed", one_armed, "P  packets leave by the port they came in on (repeatable)");
  app.add_option("--clock", clock, "tsc | rx-timestamp  (default tsc)");
  app.add_option("--stats-interval", o.stats_interval_s,
                 "S  print rates per rule and color every S seconds (default 0: only at the end)");
  app.add_flag("--json", o.json, "counters as one JSON object per line on standard output");
  app.add_option("--duration", o.duration_s, "S  stop by itself after S seconds (default 0: at SIGINT/SIGTERM)");
  app.add_option("--mbufs", o.mbufs, "N  mbufs in the pool (default: sized for the ports' queues and bursts)");
  app.add_option("--mtu", o.mtu, "BYTES  the largest IP packet received (default 9000; capped by each port)");
  app.add_option("--rx-descriptors", o.rx_descriptors, "N  per RX queue (default 1024)");
  app.add_option("--tx-descriptors", o.tx_descriptors, "N  per TX queue (default 1024)");
  const CLI::Option* burst = app.add_option("--burst", o.burst, "N  packets each worker takes from an RX queue at once (default 32)")
      ->check(CLI::Range(std::uint16_t{1}, static_cast<std::uint16_t>(dataplane::kMaxRxBurst)));
  std::string placement = "keys";
  app.add_option("--handoff-ring", o.handoff_ring, "N  mbufs each ring between two workers holds (default 1024)")
      ->check(CLI::Range(std::uint32_t{32}, std::uint32_t{1} << 20));
  app.add_option("--shape-capacity", o.shape_capacity, "N  packets each worker may hold for shaping (default 4096)")
      ->check(CLI::Range(std::uint32_t{0}, kMaxShapeCapacity));
  app.add_option("--socket", o.socket_path, "PATH  the control socket (default /run/tricolor/tricolor.sock)");
  app.add_option("--socket-group", o.socket_group, "NAME  who may use the socket besides root");
  app.add_option("--audit-log", o.audit_log_path, "FILE  accepted and refused changes (default: syslog)");
  app.add_option("--socket-idle-timeout", o.socket_idle_timeout_s, "S  close control connections idle this long (default 60)");
  std::string metrics;
  app.add_option("--metrics", metrics, "ADDR:PORT  serve GET /metrics (Prometheus) there");
  std::string cluster_fallback = "share";
  double cluster_rtt_ms = 5, cluster_timeout_ms = 50, cluster_retry_ms = 500;
  app.add_option("--cluster-redis", o.cluster.redis, "HOST:PORT | unix:PATH  lease cluster meters' tokens from Redis");
  app.add_option("--cluster-boxes", o.cluster.boxes, "N  the boxes sharing each cluster budget (default 1)")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--cluster-fallback", cluster_fallback, "share | open | closed  while Redis cannot be reached");
  app.add_option("--cluster-rtt", cluster_rtt_ms, "MS  the lease round trip chunks are sized for (default 5)")
      ->check(CLI::Range(0.01, 10000.0));
  app.add_option("--cluster-timeout", cluster_timeout_ms, "MS  each Redis connect and call (default 50)")
      ->check(CLI::Range(0.1, 60000.0));
  app.add_option("--cluster-retry", cluster_retry_ms, "MS  how often an unreachable Redis is tried again (default 500)")
      ->check(CLI::Range(1.0, 3600000.0));
  app.add_option("--cluster-user", o.cluster.user, "NAME  the Redis ACL user");
  app.add_option("--cluster-password-file", o.cluster_password_file, "FILE  the Redis password (its first line)");
  app.add_option("--dump-keys", o.dump_keys_path, "FILE  every live key at the stop, with its worker (JSON lines)");
  app.add_option("--placement", placement, "keys | none | steered  (none, steered: for tests only)");
  app.add_flag("--stamp-generation", o.stamp_generation, "for tests only: the rule set generation in each IPv4 ID");
  app.add_option("--max-classifier-entries", o.max_classifier_entries,
                 "N  the policy's limit of classifier entries (default 131072)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{UINT32_MAX}));
  app.add_option("--classifier-scan-entries", o.classifier_scan_entries,
                 "N  a policy of at most N classifier entries is compared with each packet in rule order, no trie "
                 "(default 16; 0: never scanned)")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{dataplane::kMaxScanEntries}));
  app.add_flag("--classifier-no-hash", o.classifier_no_hash,
               "rules of one shape are scanned or put in a trie like any others, not hashed");
  app.add_option("--flow-cache-entries", o.flow_cache_entries,
                 "N  each worker's flow cache in front of the classifier, N entries (default 0: none)")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{dataplane::kMaxFlowCacheEntries}));
  std::string xdp_list, xdp_mode = "native";
  app.add_option("--xdp", xdp_list, "IFACE[,IFACE...]  XDP mode on these interfaces");
  app.add_option("--xdp-mode", xdp_mode, "native | skb  (default native)");
  app.add_flag("--xdp-force", o.xdp_force, "replace a foreign XDP program");
  try {
    std::vector<std::string> reversed(app_args.rbegin(), app_args.rend());  // CLI11 takes them reversed
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    result.exit_status = usage_error(e.what());
    return result;
  }
  if (help) {
    std::cout << help_text();
    return result;
  }
  if (version) {
    std::cout << "tricolord " TRICOLOR_VERSION "\n";
    return result;
  }
  if (o.policy_path.empty()) {
    result.exit_status = usage_error("--policy FILE is required: the policy to run");
    return result;
  }
  if (placement == "none") o.placement = dataplane::PlacementMode::none;
  else if (placement == "steered") o.placement = dataplane::PlacementMode::assume_steered;
  else if (placement != "keys") {
    result.exit_status =
        usage_error("--placement " + quote(placement) + ": expected keys (the default), or none or steered (tests only)");
    return result;
  }
  if ((o.handoff_ring & (o.handoff_ring - 1)) != 0) {
    result.exit_status = usage_error("--handoff-ring " + std::to_string(o.handoff_ring) + ": expected a power of two");
    return result;
  }
  if (o.flow_cache_entries == 1 || (o.flow_cache_entries & (o.flow_cache_entries - 1)) != 0) {
    result.exit_status = usage_error("--flow-cache-entries " + std::to_string(o.flow_cache_entries) +
                                     ": expected a power of two from 2 to " +
                                     std::to_string(dataplane::kMaxFlowCacheEntries) + ", or 0 for no cache");
    return result;
  }
  if (clock == "tsc") o.clock = dataplane::ClockSource::tsc;
  else if (clock == "rx-timestamp") o.clock = dataplane::ClockSource::rx_timestamp;
  else {
    result.exit_status = usage_error("--clock " + quote(clock) + ": expected tsc or rx-timestamp");
    return result;
  }
  for (const std::string& text : pairs) {
    const auto colon = text.find(':');
    PortPair pair;
    if (colon == std::string::npos || !parse_port(text.substr(0, colon), pair.a) ||
        !parse_port(text.substr(colon + 1), pair.b) || pair.a == pair.b) {
      result.exit_status = usage_error("--pair " + quote(text) + ": expected two different port numbers, A:B");
      return result;
    }
    o.pairs.push_back(pair);
  }
  for (const std::string& text : one_armed) {
    PortPair pair;
    if (!parse_port(text, pair.a)) {
      result.exit_status = usage_error("--one-armed " + quote(text) + ": expected a port number");
      return result;
    }
    pair.b = pair.a;
    o.pairs.push_back(pair);
  }
  if (o.stats_interval_s < 0 || o.duration_s < 0) {
    result.exit_status = usage_error("--stats-interval and --duration take seconds, 0 or more");
    return result;
  }
  if (!(o.socket_idle_timeout_s >= 0.1 && o.socket_idle_timeout_s <= 86400)) {
    result.exit_status = usage_error("--socket-idle-timeout takes seconds from 0.1 to 86400");
    return result;
  }
  if (o.mtu < 68 || o.rx_descriptors == 0 || o.tx_descriptors == 0) {
    result.exit_status = usage_error("--mtu is at least 68, and a queue has at least one descriptor");
    return result;
  }
  if (cluster_fallback == "share") o.cluster.fallback = policer::ClusterMode::share;
  else if (cluster_fallback == "open") o.cluster.fallback = policer::ClusterMode::open;
  else if (cluster_fallback == "closed") o.cluster.fallback = policer::ClusterMode::closed;
  else {
    result.exit_status = usage_error("--cluster-fallback " + quote(cluster_fallback) + ": expected share, open or closed");
    return result;
  }
  o.cluster.rtt = std::chrono::microseconds(static_cast<std::int64_t>(cluster_rtt_ms * 1000));
  o.cluster.timeout = std::chrono::microseconds(static_cast<std::int64_t>(cluster_timeout_ms * 1000));
  o.cluster.retry = std::chrono::microseconds(static_cast<std::int64_t>(cluster_retry_ms * 1000));
  if (!o.cluster.redis.empty()) {
    if (auto checked = check_redis_address(o.cluster.redis); !checked) {
      result.exit_status = usage_error(checked.error().message);
      return result;
    }
  }
  if ((!o.cluster.user.empty() || !o.cluster_password_file.empty()) && o.cluster.redis.empty()) {
    result.exit_status = usage_error("--cluster-user and --cluster-password-file need --cluster-redis");
    return result;
  }
  if (!o.cluster.user.empty() && o.cluster_password_file.empty()) {
    result.exit_status = usage_error("--cluster-user needs --cluster-password-file (the user's password)");
    return result;
  }
  for (std::size_t at = 0; !xdp_list.empty() && at <= xdp_list.size();) {
    const std::size_t end = std::min(xdp_list.find(',', at), xdp_list.size());
    const std::string name = xdp_list.substr(at, end - at);
    if (name.empty() || name.size() >= 16 || name.find_first_of("/ \t") != std::string::npos) {
      result.exit_status = usage_error("--xdp " + quote(xdp_list) + ": expected interface names separated by commas");
      return result;
    }
    if (std::find(o.xdp_interfaces.begin(), o.xdp_interfaces.end(), name) != o.xdp_interfaces.end()) {
      result.exit_status = usage_error("--xdp: interface " + quote(name) + " given twice");
      return result;
    }
    o.xdp_interfaces.push_back(name);
    at = end + 1;
  }
  if (xdp_mode == "native") o.xdp_mode = XdpMode::native;
  else if (xdp_mode == "skb") o.xdp_mode = XdpMode::skb;
  else {
    result.exit_status = usage_error("--xdp-mode " + quote(xdp_mode) + ": expected native or skb");
    return result;
  }
  if (o.xdp_interfaces.empty() && (o.xdp_force || xdp_mode != "native")) {
    result.exit_status = usage_error("--xdp-mode and --xdp-force go with --xdp IFACE");
    return result;
  }
  if (!o.xdp_interfaces.empty() && (o.eal_args.size() > 1 || !o.pairs.empty())) {
    result.exit_status = usage_error("--xdp runs without the EAL and DPDK ports: no EAL options before --, no --pair or --one-armed");
    return result;
  }
  if (!o.xdp_interfaces.empty() && burst->count() != 0) {
    result.exit_status = usage_error("--burst: the XDP program (--xdp) takes each packet as the kernel hands it over");
    return result;
  }
  if (!o.xdp_interfaces.empty() && !o.cluster.redis.empty()) {
    result.exit_status = usage_error("--cluster-redis: cluster meters are not in the XDP dataplane (--xdp)");
    return result;
  }
  if (!metrics.empty()) {
    auto address = parse_metrics_address(metrics);
    if (!address) {
      result.exit_status = usage_error(address.error().message);
      return result;
    }
    o.metrics = *address;
  }
  result.options = std::move(o);
  return result;
}

std::vector<RequestedPort> requested_vdev_ports(const std::vector<std::string>& eal_args) {
  std::vector<RequestedPort> ports;
  for (std::size_t i = 1; i < eal_args.size(); ++i) {
    std::string devargs;
    if (eal_args[i] == "--vdev" && i + 1 < eal_args.size()) devargs = eal_args[++i];
    else if (eal_args[i].rfind("--vdev=", 0) == 0) devargs = eal_args[i].substr(7);
    else continue;
    std::string name = devargs.substr(0, devargs.find(','));
    if (name.rfind("net_", 0) == 0 || name.rfind("eth_", 0) == 0) ports.push_back({devargs, name});
  }
  return ports;
}

Expected<std::vector<ReplayedCapture>> replayed_captures(const std::vector<std::string>& eal_args,
                                                         std::uint32_t mbuf_data_room) {
  std::vector<ReplayedCapture> captures;
  for (const RequestedPort& port : requested_vdev_ports(eal_args)) {
    if (port.name.rfind("net_pcap", 0) != 0 && port.name.rfind("eth_pcap", 0) != 0) continue;
    std::vector<std::string> rx_pcaps;
    bool infinite = false;
    std::string_view rest = port.devargs;
    while (!rest.empty()) {
      const std::string_view item = rest.substr(0, rest.find(','));
      rest.remove_prefix(std::min(rest.size(), item.size() + 1));
      if (item.rfind("rx_pcap=", 0) == 0) rx_pcaps.emplace_back(item.substr(8));
      if (item == "infinite_rx=1") infinite = true;
    }
    if (!infinite) continue;
    for (const std::string& path : rx_pcaps) {
      auto reader = dataplane::CaptureReader::open(path);
      if (!reader) return Error{"vdev", "--vdev " + port.name + ": " + reader.error().message};
      ReplayedCapture capture{port.name, path, 0};
      dataplane::CaptureRecord record;
      while ((*reader)->next(record))
        capture.mbufs += std::max<std::uint64_t>(1, (record.data.size() + mbuf_data_room - 1) / mbuf_data_room);
      captures.push_back(std::move(capture));
    }
  }
  return captures;
}

std::string choose_memory(DaemonOptions& options, std::uint64_t heap_mb) {
  bool sized = false, no_huge = false;
  for (const std::string& arg : options.eal_args) {
    sized = sized || arg == "-m" || arg.rfind("--socket-mem", 0) == 0;
    no_huge = no_huge || arg == "--no-huge";
  }
  if (no_huge) {
    if (sized) return "memory: without huge pages (--no-huge, as asked)";
    // DPDK's own default without huge pages is 64 MB: too little for a pool and key tables.
    options.eal_args.push_back("-m");
    options.eal_args.push_back(std::to_string(heap_mb));
    return "memory: without huge pages (--no-huge, as asked), -m " + std::to_string(heap_mb) + " added";
  }
  std::uint64_t free_pages = 0, page_kb = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("HugePages_Free:", 0) == 0) free_pages = std::strtoull(line.c_str() + 15, nullptr, 10);
    if (line.rfind("Hugepagesize:", 0) == 0) page_kb = std::strtoull(line.c_str() + 13, nullptr, 10);
  }
  bool mounted = false;
  std::ifstream mounts("/proc/mounts");
  for (std::string line; std::getline(mounts, line);)
    if (line.find(" hugetlbfs ") != std::string::npos) mounted = true;
  if (free_pages > 0 && mounted)
    return "memory: huge pages (" + std::to_string(free_pages) + " free pages of " + std::to_string(page_kb) + " kB)";
  const std::string why = !mounted ? "no hugetlbfs mounted" : "no huge pages free";
  options.eal_args.push_back("--no-huge");
  if (!sized) {
    options.eal_args.push_back("-m");
    options.eal_args.push_back(std::to_string(heap_mb));
  }
  return "memory: without huge pages (" + why + "): --no-huge" + (sized ? "" : " -m " + std::to_string(heap_mb)) +
         " added; reserve some for speed: echo 1024 > /proc/sys/vm/nr_hugepages";
}

}  // namespace tricolor::control
