#include "dataplane/dpdk/ports.hpp"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <atomic>
#include <tuple>
#include <utility>

#include "dataplane/dpdk/af_xdp_port.hpp"
#include "dataplane/dpdk/forwarder.hpp"

namespace tricolor::dataplane {
namespace {

constexpr std::uint32_t kMbufCache = 256;           // per lcore (rte_mempool's cache)
constexpr std::uint32_t kFrameOverhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 2 * RTE_VLAN_HLEN;  // QinQ
constexpr std::uint32_t kMinMtu = RTE_ETHER_MIN_MTU;

std::string error_text(int rc) { return rte_strerror(rc < 0 ? -rc : rc); }

Error port_error(std::uint16_t port, const std::string& what, int rc) {
  return Error{"port", "port " + std::to_string(port) + " (" + port_name(port) + "): " + what + ": " + error_text(rc)};
}

// Virtual ports that build mbuf chains for large frames on their own, without the scatter offload.
bool chains_without_scatter(const std::string& driver) { return driver == "net_pcap" || driver == "net_memif"; }

std::string driver_of(std::uint16_t port) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0 || info.driver_name == nullptr) return "?";
  return info.driver_name;
}

// The RX and TX queues a port gets: one per worker, or as many as it has.
std::pair<std::uint16_t, std::uint16_t> queues_of(std::uint16_t port, std::uint16_t wanted) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0) return {1, 1};
  return {std::clamp<std::uint16_t>(info.max_rx_queues, 1, wanted), std::clamp<std::uint16_t>(info.max_tx_queues, 1, wanted)};
}

}  // namespace

std::vector<std::uint16_t> probed_ports() {
  std::vector<std::uint16_t> ports;
  std::uint16_t port;
  RTE_ETH_FOREACH_DEV(port) ports.push_back(port);
  return ports;
}

std::string port_name(std::uint16_t port) {
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  if (rte_eth_dev_get_name_by_port(port, name) != 0) return "?";
  return name;
}

bool port_exists(const std::string& name) {
  std::uint16_t port;
  return rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0;
}

int port_socket(std::uint16_t port) { return std::max(rte_eth_dev_socket_id(port), 0); }

static_assert(PortOptions{}.burst == kDefaultRxBurst, "the pool is sized for the forwarder's default burst");

std::uint64_t mbufs_in_bursts(std::size_t ports, unsigned lcores, unsigned burst) {
  return 2 * ports * std::uint64_t{lcores} * burst;
}

std::uint32_t mbufs_needed(std::span<const std::uint16_t> ports, const PortOptions& options, unsigned lcores,
                           std::uint64_t held) {
  std::uint64_t rings = 0;
  for (std::uint16_t port : ports) {
    std::uint64_t rx = options.rx_descriptors, tx = options.tx_descriptors;
    if (driver_of(port) == af_xdp::kDriver) {  // its fill queue; its TX ring is as long as its RX ring
      rx = std::max<std::uint64_t>(rx, af_xdp::kFillQueueMbufs);
      tx = std::max<std::uint64_t>(tx, options.rx_descriptors);
    }
    const auto [rx_queues, tx_queues] = queues_of(port, options.queues);
    rings += rx * rx_queues + tx * tx_queues;
  }
  // In flight: each worker's receive burst per port and its transmit copy; the caches hold the rest.
  const std::uint64_t in_flight = mbufs_in_bursts(ports.size(), lcores, options.burst);
  const std::uint64_t caches = std::uint64_t{lcores} * kMbufCache * 3 / 2;  // a cache can exceed its size by half
  const std::uint64_t total = rings + in_flight + caches + held;
  // A power of two minus one is rte_mempool's most efficient size.
  std::uint64_t size = 1;
  while (size - 1 < total) size <<= 1;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(size - 1, UINT32_MAX));
}

Expected<Mempool> make_mbuf_pool(std::uint32_t mbufs, int socket, std::span<const std::uint16_t> ports) {
  static std::atomic<unsigned> pools{0};
  const std::string name = "tricolor_mbufs" + std::to_string(pools++);
  const bool af_xdp_ports =
      std::any_of(ports.begin(), ports.end(), [](std::uint16_t port) { return driver_of(port) == af_xdp::kDriver; });
  rte_mempool* pool =
      af_xdp_ports ? af_xdp::make_pool(name, mbufs, kMbufCache, socket)
                   : rte_pktmbuf_pool_create(name.c_str(), mbufs, kMbufCache, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
  const std::uint64_t mbuf_bytes = af_xdp_ports ? af_xdp::pool_bytes_per_mbuf() : RTE_MBUF_DEFAULT_BUF_SIZE + 128;
  if (pool == nullptr)
    return Error{"memory", "cannot create a pool of " + std::to_string(mbufs) + " mbufs (" +
                               std::to_string(std::uint64_t{mbufs} * mbuf_bytes >> 20) +
                               " MiB) on socket " + std::to_string(socket) + ": " + rte_strerror(rte_errno)};
  return Mempool(pool);
}

Expected<PortFacts> start_port(std::uint16_t port, rte_mempool* pool, const PortOptions& options) {
  if (!rte_eth_dev_is_valid_port(port)) return Error{"port", "port " + std::to_string(port) + " does not exist"};
  PortFacts facts;
  facts.id = port;
  facts.name = port_name(port);
  rte_eth_dev_info info{};
  if (const int rc = rte_eth_dev_info_get(port, &info); rc != 0) return port_error(port, "cannot read its capabilities", rc);
  facts.driver = info.driver_name != nullptr ? info.driver_name : "?";
  facts.socket = port_socket(port);
  const bool af_xdp_port = facts.driver == af_xdp::kDriver;
  const auto interface = af_xdp_port ? af_xdp::interface_of(info.if_index) : std::nullopt;
  if (af_xdp_port)  // before its interface is touched
    if (auto refused = af_xdp::check_pool(*pool, "port " + std::to_string(port) + " (" + facts.name + ")"))
      return *refused;

  rte_eth_conf conf{};
  // Frames up to the MTU: in one mbuf when they fit, else in chains if the port can scatter. AF_XDP's
  // kernel keeps the start of each mbuf's room for itself.
  const std::uint32_t data_room =
      rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM - (af_xdp_port ? af_xdp::kKernelHeadroom : 0);
  // ethdev's own rule for the bytes a frame adds to its MTU: what the port says, or Ethernet + CRC.
  const std::uint32_t port_overhead = info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu
                                          ? info.max_rx_pktlen - info.max_mtu
                                          : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  std::uint32_t mtu = std::min({options.mtu, static_cast<std::uint32_t>(info.max_mtu),
                                info.max_rx_pktlen > port_overhead ? info.max_rx_pktlen - port_overhead : kMinMtu});
  if (mtu + kFrameOverhead > data_room) {
    if ((info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) != 0) {
      conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
      facts.scatter = true;
    } else if (info.max_rx_pktlen > data_room && !chains_without_scatter(facts.driver)) {
      // A port that cannot chain but could receive more than a buffer holds: cap the MTU instead.
      mtu = data_room - kFrameOverhead;
      facts.notes.push_back("cannot receive frames in several mbufs: MTU capped at " + std::to_string(mtu));
    }
  }
  if (info.max_mtu >= kMinMtu) conf.rxmode.mtu = std::max(mtu, kMinMtu);
  facts.mtu = std::max(mtu, kMinMtu);
  if ((info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  if ((info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_VLAN_INSERT) != 0) {
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_VLAN_INSERT;
    facts.vlan_insert = true;
  }
  if (options.rx_timestamp) {
    // DPDK 22.11's net_pcap stamps every packet it reads from a file (microseconds) without announcing
    // the offload; other ports must announce it.
    const bool announced = (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_TIMESTAMP) != 0;
    if (!announced && facts.driver != "net_pcap")
      return Error{"port", "port " + std::to_string(port) + " (" + facts.name + ", " + facts.driver +
                               ") does not timestamp the packets it receives: --clock rx-timestamp needs a port that "
                               "does (net_pcap reading a file does)"};
    if (announced) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_TIMESTAMP;
  }

  // Queues: one RX and one TX per worker, as far as the port has them. Several RX queues need a hash
  // to spread flows over them (a flow stays on one queue, so in order); where a port has none, its
  // queues are its own (net_pcap: one per file).
  std::tie(facts.rx_queues, facts.tx_queues) = queues_of(port, options.queues);
  if (options.steering != nullptr && fill_rss_conf(*options.steering, port, conf)) {
    facts.rss = facts.steered = true;
  } else if (facts.rx_queues > 1 && info.flow_type_rss_offloads != 0) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP);
    facts.rss = conf.rx_adv_conf.rss_conf.rss_hf != 0;
  }
  if (const int rc = rte_eth_dev_configure(port, facts.rx_queues, facts.tx_queues, &conf); rc != 0)
    return port_error(port, "cannot configure it", rc);
  // Closing a net_af_xdp port detaches whatever XDP program its interface has: before its RX queue
  // (which attaches ours) is set up, that program may be another process's.
  bool may_close = !af_xdp_port;
  auto close_on_error = [port, &may_close](Error e) {
    if (may_close) rte_eth_dev_close(port);
    return e;
  };
  std::uint16_t rx_desc = options.rx_descriptors, tx_desc = options.tx_descriptors;
  if (const int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rx_desc, &tx_desc); rc != 0)
    return close_on_error(port_error(port, "cannot size its queues", rc));
  rte_eth_rxconf rxconf = info.default_rxconf;
  rxconf.offloads = conf.rxmode.offloads;
  for (std::uint16_t q = 0; q < facts.rx_queues; ++q) {
    if (const int rc = rte_eth_rx_queue_setup(port, q, rx_desc, facts.socket, &rxconf, pool); rc != 0) {
      Error error = port_error(port, "cannot set up RX queue " + std::to_string(q), rc);
      if (af_xdp_port) error.message += af_xdp::setup_hint(interface, *pool);
      return close_on_error(error);
    }
    may_close = true;
  }
  rte_eth_txconf txconf = info.default_txconf;
  txconf.offloads = conf.txmode.offloads;
  for (std::uint16_t q = 0; q < facts.tx_queues; ++q)
    if (const int rc = rte_eth_tx_queue_setup(port, q, tx_desc, facts.socket, &txconf); rc != 0)
      return close_on_error(port_error(port, "cannot set up TX queue " + std::to_string(q), rc));
  if (const int rc = rte_eth_dev_start(port); rc != 0) return close_on_error(port_error(port, "cannot start it", rc));
  // The steering plan again, now that the port runs (some drivers ignore the key given at configure),
  // and read back. A port that will not take it spreads flows by whatever hash it now has; the
  // caller turns steering off for every port (rss.hpp: all or none).
  if (facts.steered)
    if (auto refused = apply_rss(port, *options.steering)) {
      facts.steered = false;
      facts.notes.push_back("RSS steering refused (" + refused->message + ")");
    }

  // A bump in the wire sees every frame, whatever its destination address.
  facts.promiscuous = rte_eth_promiscuous_enable(port) == 0 && rte_eth_promiscuous_get(port) == 1;
  if (!facts.promiscuous) facts.notes.push_back("promiscuous mode not available");
  facts.allmulticast = rte_eth_allmulticast_enable(port) == 0 && rte_eth_allmulticast_get(port) == 1;
  if (!facts.allmulticast) facts.notes.push_back("all-multicast mode not available");
  if (interface)
    for (std::string& note : af_xdp::notes(*interface, facts.mtu, data_room)) facts.notes.push_back(std::move(note));
  rte_eth_stats_reset(port);
  return facts;
}

void stop_port(std::uint16_t port) noexcept {
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
}

PortCounters read_port_counters(std::uint16_t port) noexcept {
  rte_eth_stats stats{};
  PortCounters c;
  if (rte_eth_stats_get(port, &stats) != 0) return c;
  c.rx_packets = stats.ipackets;
  c.rx_bytes = stats.ibytes;
  c.tx_packets = stats.opackets;
  c.tx_bytes = stats.obytes;
  c.imissed = stats.imissed;
  c.rx_errors = stats.ierrors;
  c.rx_nombuf = stats.rx_nombuf;
  c.tx_errors = stats.oerrors;
  return c;
}

std::string link_text(std::uint16_t port) {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port, &link) != 0) return "unknown";
  if (link.link_status == RTE_ETH_LINK_DOWN) return "down";
  std::string text = "up";
  if (link.link_speed != RTE_ETH_SPEED_NUM_NONE && link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN)
    text += " " + std::to_string(link.link_speed) + " Mbps";
  text += link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX ? " full-duplex" : " half-duplex";
  return text;
}

bool link_up(std::uint16_t port) noexcept {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

}  // namespace tricolor::dataplane
