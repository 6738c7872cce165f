#pragma once
// tricolord's command line, DPDK's way: `tricolord [EAL options] -- [tricolord options]`. The EAL's
// part goes to rte_eal_init as given, with `--no-huge` (and a heap size) added when the machine has
// no huge pages to give; the daemon's part is read here, before the EAL or any port is touched.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/telemetry/metrics_server.hpp"
#include "control/cluster/cluster_leases.hpp"
#include "dataplane/dpdk/forwarder.hpp"
#include "dataplane/dpdk/mbuf_view.hpp"
#include "dataplane/engine/placement.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

inline constexpr int kExitUsage = 1;    // the command line is wrong
inline constexpr int kExitPolicy = 2;   // the startup policy cannot be read or is refused
inline constexpr int kExitRuntime = 3;  // the EAL, a port or memory failed

// The most packets --shape-capacity lets a worker hold (each one an mbuf of the pool and 24 bytes of
// the wheel's).
inline constexpr std::uint32_t kMaxShapeCapacity = std::uint32_t{1} << 24;

// How the XDP program is attached: by the driver (native), or by the kernel's generic path (skb).
enum class XdpMode { native, skb };

struct PortPair {
  std::uint16_t a = 0, b = 0;  // a == b: one-armed
};

struct DaemonOptions {
  std::vector<std::string> eal_args;  // argv[0] first
  std::string policy_path;
  std::vector<PortPair> pairs;        // empty: chosen from the ports found (see --help)
  dataplane::ClockSource clock = dataplane::ClockSource::tsc;
  double stats_interval_s = 0;        // 0: only the final counters
  double duration_s = 0;              // 0: until SIGINT or SIGTERM
  bool json = false;
  std::uint32_t mbufs = 0;            // 0: sized from the ports
  std::uint32_t mtu = 9000;
  std::uint16_t rx_descriptors = 1024, tx_descriptors = 1024;
  std::uint16_t burst = dataplane::kDefaultRxBurst;  // packets a worker takes from a queue or ring at once
  std::uint64_t max_classifier_entries = 0;  // 0: the engine's default
  std::optional<std::uint64_t> classifier_scan_entries;  // none: the engine's default
  bool classifier_no_hash = false;    // rule sets of one shape scanned or in a trie, not hashed
  std::uint64_t flow_cache_entries = 0;  // each worker's flow cache (a power of two); 0: none
  std::uint32_t handoff_ring = 1024;  // mbufs each ring between two workers holds
  std::uint32_t shape_capacity = 4096;  // packets shaping may hold per worker (their mbufs are the pool's)
  dataplane::PlacementMode placement = dataplane::PlacementMode::keys_by_hash;  // none: a test switch
  bool stamp_generation = false;      // a test switch: the generation in each IPv4 packet's ID
  std::string dump_keys_path;         // at the stop: every live key, with the worker that meters it
  std::string socket_path = "/run/tricolor/tricolor.sock";  // the control socket
  std::string socket_group;           // besides root, who may use it (a group name); empty: root only
  double socket_idle_timeout_s = 60;  // a control connection with nothing in progress is closed after it
  std::string audit_log_path;         // accepted and refused changes; empty: syslog
  std::optional<MetricsAddress> metrics;  // the metrics listener's address; none: off
  // Cluster meters (issue 26): Redis, the boxes, the fallback, the times; the password read from
  // cluster_password_file at startup (never on the command line, where ps shows it).
  ClusterOptions cluster;
  std::string cluster_password_file;
  // XDP mode (--xdp): the policy runs as an XDP program on these kernel interfaces; no EAL, no port.
  std::vector<std::string> xdp_interfaces;  // empty: the DPDK daemon
  XdpMode xdp_mode = XdpMode::native;
  bool xdp_force = false;  // replace a foreign XDP program attached without a link
};

// What parse_command_line decided: run, or exit at once with a status (help printed, or an error
// already said on stderr).
struct ParsedCommandLine {
  std::optional<DaemonOptions> options;
  int exit_status = 0;
};

ParsedCommandLine parse_command_line(int argc, char** argv);

// The ports asked for with --vdev (`--vdev DEVARGS` or `--vdev=DEVARGS`), in order: the option as given
// and the device's name (DEVARGS up to its first comma), for drivers that make ports (net_*, or their
// eth_* aliases).
struct RequestedPort {
  std::string devargs;
  std::string name;
};
std::vector<RequestedPort> requested_vdev_ports(const std::vector<std::string>& eal_args);

// A capture a net_pcap port replays with infinite_rx=1: the PMD copies every packet of it into mbufs
// of the daemon's pool when its RX queue is set up and keeps them as long as the port runs (one mbuf a
// packet; a frame longer than an mbuf's data room takes several).
struct ReplayedCapture {
  std::string port;        // the --vdev's name, e.g. net_pcap0
  std::string path;        // its rx_pcap=
  std::uint64_t mbufs = 0;  // what its packets hold
};
// Each rx_pcap= of each net_pcap --vdev with infinite_rx=1, counted (read once, before the EAL starts);
// an error names the port and the capture that cannot be read.
Expected<std::vector<ReplayedCapture>> replayed_captures(const std::vector<std::string>& eal_args,
                                                         std::uint32_t mbuf_data_room);

// Huge pages: the EAL uses them when hugetlbfs is mounted and pages are free. Otherwise `--no-huge`
// and `-m` (the heap the mbufs and the engine need) are added, unless the operator chose. Returns a
// sentence for the operator saying which.
std::string choose_memory(DaemonOptions& options, std::uint64_t heap_mb);

}  // namespace tricolor::control
