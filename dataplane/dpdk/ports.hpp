#pragma once
// The daemon's ports: whatever the EAL probed (a NIC bound to vfio-pci, net_memif, net_pcap,
// net_af_packet, net_af_xdp, net_ring, net_null), each configured with one RX and one TX queue per
// worker, or as many as it has if fewer (RSS spreads flows over the RX queues when there are several),
// promiscuous and all-multicast, frames up to the MTU asked for (multi-segment mbufs when a frame does
// not fit one buffer), and the offloads the daemon can use when the port has them (VLAN insertion on
// transmit; RX timestamps for the rx-timestamp clock). Slow path only.
#include <rte_mempool.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/dpdk/rss.hpp"
#include "policer/expected.hpp"

namespace tricolor::dataplane {

struct PortOptions {
  std::uint16_t rx_descriptors = 1024;
  std::uint16_t tx_descriptors = 1024;
  std::uint32_t mtu = 9000;     // capped by what the port and the mbufs allow (said in PortFacts)
  bool rx_timestamp = false;    // required: a port that cannot timestamp what it receives is refused
  std::uint16_t queues = 1;     // RX and TX queues wanted: one per worker
  const RssPlan* steering = nullptr;  // an enabled plan: the port steers keys to workers (rss.hpp)
  std::uint16_t burst = 32;     // packets a worker receives at once (ForwarderOptions::burst): mbufs in flight
};

// What a port is and how it was set up, for the operator.
struct PortFacts {
  std::uint16_t id = 0;
  std::string name;    // the EAL's device name (0000:3b:00.0, net_memif0, ...)
  std::string driver;  // net_ixgbe, net_memif, ...
  int socket = 0;      // NUMA socket (0 when the port does not say)
  std::uint32_t mtu = 0;
  std::uint16_t rx_queues = 1, tx_queues = 1;  // as set up (at most PortOptions::queues)
  bool rss = false;           // the port spreads flows over its RX queues by its RSS hash
  bool steered = false;       // ... by the steering plan's hash, key and RETA, read back as asked
  bool scatter = false;       // frames larger than an mbuf arrive as chains
  bool vlan_insert = false;   // the port inserts a stripped VLAN tag again on transmit
  bool promiscuous = false;
  bool allmulticast = false;
  std::vector<std::string> notes;  // what could not be had, and what was done instead
};

struct PortCounters {
  std::uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
  std::uint64_t imissed = 0;    // dropped by the port: RX queue full
  std::uint64_t rx_errors = 0;
  std::uint64_t rx_nombuf = 0;  // RX could not get an mbuf
  std::uint64_t tx_errors = 0;
};

// The ports the EAL probed, in id order.
std::vector<std::uint16_t> probed_ports();
// Whether the EAL made a port of this device (a --vdev's name, e.g. net_af_xdp0).
bool port_exists(const std::string& name);
std::string port_name(std::uint16_t port);
int port_socket(std::uint16_t port);  // its NUMA socket, 0 when it does not say

// The mbuf pool for `ports`, each with up to options.queues RX and TX queues of the given sizes (or
// what its driver holds instead: net_af_xdp's fill queue), plus what the workers hold in flight
// (bursts), the pool's per-lcore caches and `held` more (the rings between workers, net_pcap's
// infinite_rx captures).
// What the lcores hold in flight at most: each one's receive burst per port and its transmit copy.
std::uint64_t mbufs_in_bursts(std::size_t ports, unsigned lcores, unsigned burst);
std::uint32_t mbufs_needed(std::span<const std::uint16_t> ports, const PortOptions& options, unsigned lcores,
                           std::uint64_t held = 0);

struct MempoolDeleter {
  void operator()(rte_mempool* pool) const noexcept { rte_mempool_free(pool); }
};
using Mempool = std::unique_ptr<rte_mempool, MempoolDeleter>;
// Buffers of the default size (2 KiB of data), on `socket`; of one page each when one of `ports` is
// net_af_xdp (dataplane/dpdk/af_xdp_port.hpp says why).
Expected<Mempool> make_mbuf_pool(std::uint32_t mbufs, int socket, std::span<const std::uint16_t> ports);

// Configures and starts `port` on `pool`. Nothing is left half set up on error: the port is closed
// (a net_af_xdp port only once its own XDP program is attached: closing it detaches any).
Expected<PortFacts> start_port(std::uint16_t port, rte_mempool* pool, const PortOptions& options);
// Stops the port (what its queues still hold goes back to the pool) and closes it.
void stop_port(std::uint16_t port) noexcept;

PortCounters read_port_counters(std::uint16_t port) noexcept;
// "up 10000 Mbps full-duplex", "down".
std::string link_text(std::uint16_t port);
bool link_up(std::uint16_t port) noexcept;

}  // namespace tricolor::dataplane
