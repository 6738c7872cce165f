#pragma once
// A MemorySource (dataplane/engine/memory_source.hpp) on DPDK's heap: the daemon's key tables, on the NUMA
// socket of the worker that owns them (its index probes and entry writes then stay on local memory).
// Needs an initialised EAL. Control side only, like every source.
//
// What huge pages change. With the EAL on huge pages (the daemon's normal case), the blocks come from
// hugetlbfs pages that DPDK maps when its heap grows and touches as it maps them: they are resident
// and pinned when rte_zmalloc_socket returns them (commit() finds them present), never swapped, and a
// random probe of a large index costs no page walk (2 MiB or 1 GiB pages). The memory a table can take
// is then bounded by the huge pages reserved for DPDK (and its -m / --socket-mem), not by the
// process's address space: a shortage is a null block, and the table or its chunk is refused as with
// any source. Released blocks go back to DPDK's heap, which returns whole free pages to hugetlbfs
// (dynamic memory mode) or keeps them (legacy mode). Without huge pages (--no-huge, as the tests and
// tools here run), DPDK's heap is anonymous memory reserved by the EAL at start and committed as it is
// first written: commit() makes a block's pages resident as with the heap source.
#include "dataplane/engine/memory_source.hpp"

namespace tricolor::dataplane {

class DpdkMemory final : public MemorySource {
 public:
  // `socket`: the NUMA socket to take memory on (rte_lcore_to_socket_id of the worker), or
  // SOCKET_ID_ANY (-1).
  explicit DpdkMemory(int socket) noexcept : socket_(socket) {}

  void* reserve(std::size_t bytes, std::size_t align) noexcept override;
  bool commit(void* p, std::size_t bytes) noexcept override;
  void release(void* p, std::size_t bytes) noexcept override;

  int socket() const noexcept { return socket_; }

 private:
  int socket_;
};

}  // namespace tricolor::dataplane
