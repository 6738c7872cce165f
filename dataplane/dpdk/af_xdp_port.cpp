#include "dataplane/dpdk/af_xdp_port.hpp"

#include <linux/capability.h>
#include <net/if.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memzone.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tricolor::dataplane::af_xdp {
namespace {

// Without RTE_MEMPOOL_F_NO_SPREAD DPDK pads objects to spread them over memory channels (a 4 KiB
// object would take 4160 bytes).
constexpr unsigned kPoolFlags = RTE_MEMPOOL_F_NO_SPREAD;

std::uint32_t page_bytes() { return static_cast<std::uint32_t>(getpagesize()); }

std::uint32_t object_header_bytes() {
  rte_mempool_objsz size{};
  rte_mempool_calc_obj_size(sizeof(rte_mbuf), kPoolFlags, &size);
  return size.header_size;
}

void free_zone(rte_mempool_memhdr*, void* zone) { rte_memzone_free(static_cast<const rte_memzone*>(zone)); }

// The memory the PMD registers with the kernel (rte_eth_af_xdp.c, xdp_umem_configure): from the page
// of the pool's first memory chunk, populated objects x object size, plus the chunk's offset in it.
struct Registered {
  std::uintptr_t begin = 0, end = 0;
  std::size_t object_bytes = 0;
  std::size_t header_bytes = 0;  // before each mbuf
};

Registered registered(const rte_mempool& pool) {
  Registered area;
  area.object_bytes = rte_mempool_calc_obj_size(pool.elt_size, pool.flags, nullptr);
  area.header_bytes = pool.header_size;
  if (const rte_mempool_memhdr* first = STAILQ_FIRST(&pool.mem_list); first != nullptr) {
    const auto start = reinterpret_cast<std::uintptr_t>(first->addr);
    area.begin = start & ~std::uintptr_t{page_bytes() - 1};
    area.end = start + std::uint64_t{pool.populated_size} * area.object_bytes;
  }
  return area;
}

bool has_capability(int capability) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> capability & 1) != 0;
  return false;
}

}  // namespace

std::uint32_t pool_bytes_per_mbuf() { return page_bytes(); }

rte_mempool* make_pool(const std::string& name, std::uint32_t mbufs, std::uint32_t cache, int socket) {
  const std::uint32_t page = page_bytes();
  const std::uint32_t element = page - object_header_bytes();  // the mbuf, its headroom and its data
  if (rte_mempool_calc_obj_size(element, kPoolFlags, nullptr) != page) {
    rte_errno = EINVAL;  // a layout this code does not know
    return nullptr;
  }
  rte_pktmbuf_pool_private private_part{};
  private_part.mbuf_data_room_size = static_cast<std::uint16_t>(element - sizeof(rte_mbuf));
  rte_mempool* pool =
      rte_mempool_create_empty(name.c_str(), mbufs, element, cache, sizeof private_part, socket, kPoolFlags);
  if (pool == nullptr) return nullptr;
  auto give_up = [pool](int error) -> rte_mempool* {
    rte_mempool_free(pool);
    rte_errno = error;
    return nullptr;
  };
  if (const int rc = rte_mempool_set_ops_byname(pool, rte_mbuf_best_mempool_ops(), nullptr); rc != 0)
    return give_up(-rc);
  rte_pktmbuf_pool_init(pool, &private_part);
  // One page-aligned area of whole pages: objects follow each other with no gap whatever the pages
  // under it (4 KiB, or huge pages, which 4 KiB divides), and each object stays within one page, as
  // DMA by a NIC sharing the pool needs.
  const std::string zone_name = name + "_zone";
  const std::size_t bytes = std::size_t{mbufs} * page;
  const rte_memzone* zone = rte_memzone_reserve_aligned(zone_name.c_str(), bytes, socket, 0, page);
  if (zone == nullptr) return give_up(rte_errno);
  const int added = rte_mempool_populate_virt(pool, static_cast<char*>(zone->addr), bytes, page, free_zone,
                                              const_cast<rte_memzone*>(zone));
  if (added != static_cast<int>(mbufs)) {
    // The zone goes with the pool's first memory chunk when there is one; otherwise here.
    if (pool->nb_mem_chunks == 0 && rte_memzone_lookup(zone_name.c_str()) != nullptr) rte_memzone_free(zone);
    return give_up(added < 0 ? -added : ENOMEM);
  }
  rte_mempool_obj_iter(pool, rte_pktmbuf_init, nullptr);
  return pool;
}

std::optional<Interface> interface_of(unsigned if_index) {
  char name[IF_NAMESIZE] = {};
  if (if_index == 0 || if_indextoname(if_index, name) == nullptr) return std::nullopt;
  Interface interface;
  interface.name = name;
  const std::filesystem::path sysfs = std::filesystem::path("/sys/class/net") / name;
  std::ifstream(sysfs / "mtu") >> interface.mtu;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(sysfs / "queues", error))
    if (entry.path().filename().string().rfind("rx-", 0) == 0) ++interface.rx_queues;
  return interface;
}

std::optional<Error> check_pool(rte_mempool& pool, const std::string& port_text) {
  struct Count {
    Registered area;
    unsigned outside = 0;
  } count{registered(pool)};
  rte_mempool_obj_iter(
      &pool,
      [](rte_mempool*, void* arg, void* mbuf, unsigned) {
        auto& c = *static_cast<Count*>(arg);
        const std::uintptr_t object = reinterpret_cast<std::uintptr_t>(mbuf) - c.area.header_bytes;
        if (object < c.area.begin || object + c.area.object_bytes > c.area.end) ++c.outside;
      },
      &count);
  if (count.outside != 0)
    return Error{"mbufs", port_text + ": " + std::to_string(count.outside) + " of the pool's " +
                              std::to_string(pool.populated_size) +
                              " mbufs lie outside the memory net_af_xdp gives the kernel (the pool is not one run of "
                              "page-sized mbufs); the kernel would refuse them and they would be lost"};
  const unsigned free_mbufs = rte_mempool_avail_count(&pool);
  if (free_mbufs < kFillQueueMbufs)
    return Error{"mbufs", port_text + ": net_af_xdp keeps " + std::to_string(kFillQueueMbufs) +
                              " mbufs in its fill queue and the pool has " + std::to_string(free_mbufs) +
                              " free: give more --mbufs (or leave it out: the default counts them)"};
  return std::nullopt;
}

std::vector<std::string> notes(const Interface& interface, std::uint32_t mtu, std::uint32_t frame_bytes) {
  std::vector<std::string> said;
  if (interface.mtu > mtu)
    said.push_back("interface " + interface.name + " has MTU " + std::to_string(interface.mtu) +
                   ": frames longer than " + std::to_string(frame_bytes) +
                   " bytes are dropped by the kernel (counted as imissed); `ip link set dev " + interface.name +
                   " mtu " + std::to_string(mtu) + "` avoids it");
  if (interface.rx_queues > 1)
    said.push_back("interface " + interface.name + " has " + std::to_string(interface.rx_queues) +
                   " RX queues and this port reads one (start_queue, default 0): what arrives on the others goes "
                   "to the kernel, not through tricolord; `ethtool -L " + interface.name +
                   " combined 1`, or steer the traffic to that queue");
  return said;
}

std::string setup_hint(const std::optional<Interface>& interface, const rte_mempool& pool) {
  const std::string name = interface ? interface->name : "IFACE";
  std::string hint = " (net_af_xdp: is another XDP program or AF_XDP user on interface " + name +
                     "? `ip link show dev " + name + "` shows prog/xdp, and a stale one goes with `ip link set dev " +
                     name + " xdp off`; does the queue given by start_queue exist?";
  // The kernel charges the memory it maps (the whole pool, once per port) to the user's locked-memory
  // limit, unless the process has CAP_IPC_LOCK.
  rlimit limit{};
  if (!has_capability(CAP_IPC_LOCK) && getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const Registered area = registered(pool);
    hint += " is the locked-memory limit (ulimit -l: " + std::to_string(limit.rlim_cur >> 10) +
            " KiB) below what AF_XDP locks, the mbuf pool (" + std::to_string((area.end - area.begin) >> 10) +
            " KiB) for each port? raise it, or give tricolord CAP_IPC_LOCK";
  }
  return hint + ")";
}

}  // namespace tricolor::dataplane::af_xdp
