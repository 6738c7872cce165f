#include "dataplane/dpdk/dpdk_memory.hpp"

#include <rte_malloc.h>

namespace tricolor::dataplane {

// Zeroed by DPDK (which may skip the memset for memory it has never handed out: fresh pages are zero,
// and then committed only by commit()).
void* DpdkMemory::reserve(std::size_t bytes, std::size_t align) noexcept {
  if (bytes == 0 || align == 0 || align > kMaxAlign || (align & (align - 1)) != 0) return nullptr;
  return rte_zmalloc_socket("tricolor_keys", bytes, static_cast<unsigned>(align), socket_);
}

bool DpdkMemory::commit(void* p, std::size_t bytes) noexcept { return commit_pages(p, bytes); }

void DpdkMemory::release(void* p, std::size_t) noexcept { rte_free(p); }

}  // namespace tricolor::dataplane
