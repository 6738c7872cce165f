#pragma once
// What tricolord must know about DPDK's net_af_xdp ports (DPDK 22.11), which read and write a Linux
// interface through an AF_XDP socket on one of its RX queues. Slow path only.
//
// - The PMD gives the kernel the RX queue's mbuf pool itself as the socket's memory (UMEM): from the
//   page of the pool's first object, (objects x object size) bytes. An mbuf outside that area is
//   refused by the kernel when the PMD puts it in the fill queue, and is lost. DPDK's default pool
//   keeps objects from crossing page boundaries, which leaves gaps (with 4 KiB pages, one 2.3 KiB
//   object per page: 42% of the pool outside): net_af_xdp needs a pool of page-sized mbufs
//   (make_pool), as the PMD's own frame limit assumes.
// - The kernel keeps XDP_PACKET_HEADROOM of each buffer for itself; a frame longer than the rest is
//   dropped by the kernel and counted as imissed. There are no multi-segment frames.
// - It keeps 2048 mbufs in the socket's fill queue whatever the RX ring's size, and its TX ring is as
//   long as its RX ring.
// - Its socket reads one RX queue of the interface (start_queue, default 0): what the NIC steers to
//   the other queues reaches the kernel's stack, not tricolord.
// - Closing the port detaches whatever XDP program the interface has, its own or another process's.
#include <rte_mempool.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policer/expected.hpp"

namespace tricolor::dataplane::af_xdp {

inline constexpr const char* kDriver = "net_af_xdp";
inline constexpr std::uint32_t kKernelHeadroom = 256;   // XDP_PACKET_HEADROOM (linux/bpf.h)
inline constexpr std::uint32_t kFillQueueMbufs = 2048;  // its fill-queue reserve, XSK_RING_CONS__DEFAULT_NUM_DESCS

// A pool of `mbufs` mbufs of one page each (a 4 KiB page: 3776 bytes of data after the headroom), in
// one page-aligned area; nullptr with rte_errno set when it cannot be had. It suits other ports too.
rte_mempool* make_pool(const std::string& name, std::uint32_t mbufs, std::uint32_t cache, int socket);
std::uint32_t pool_bytes_per_mbuf();

// The Linux interface behind a port, as sysfs shows it.
struct Interface {
  std::string name;
  std::uint32_t mtu = 0;
  std::uint32_t rx_queues = 0;
};
std::optional<Interface> interface_of(unsigned if_index);

// Before the RX queue is set up (which attaches the XDP program): a pool the PMD cannot use whole.
std::optional<Error> check_pool(rte_mempool& pool, const std::string& port_text);

// For the operator: an interface MTU that lets the kernel accept frames this port cannot take (at most
// `frame_bytes`; `mtu` is the port's), and RX queues the socket does not read.
std::vector<std::string> notes(const Interface& interface, std::uint32_t mtu, std::uint32_t frame_bytes);

// Appended to "cannot set up RX queue N": the usual causes.
std::string setup_hint(const std::optional<Interface>& interface, const rte_mempool& pool);

}  // namespace tricolor::dataplane::af_xdp
