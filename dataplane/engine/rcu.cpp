#include "dataplane/engine/rcu.hpp"

#include <rte_errno.h>
#include <rte_rcu_qsbr.h>

#include <cstdlib>
#include <string>

namespace tricolor::dataplane {

Expected<std::unique_ptr<Rcu>> Rcu::make(unsigned workers) {
  const std::size_t bytes = rte_rcu_qsbr_get_memsize(workers);
  // The variable is cache-line aligned (its per-thread counters each on a line of their own).
  void* memory = std::aligned_alloc(RTE_CACHE_LINE_SIZE, (bytes + RTE_CACHE_LINE_SIZE - 1) & ~std::size_t{RTE_CACHE_LINE_SIZE - 1});
  if (memory == nullptr) return Error{"rcu", "cannot allocate the workers' quiescent-state variable: out of memory"};
  auto* qsbr = static_cast<rte_rcu_qsbr*>(memory);
  if (rte_rcu_qsbr_init(qsbr, workers) != 0) {
    std::free(memory);
    return Error{"rcu", std::string("cannot initialise the workers' quiescent-state variable: ") + rte_strerror(rte_errno)};
  }
  for (unsigned w = 0; w < workers; ++w) rte_rcu_qsbr_thread_register(qsbr, w);
  return std::unique_ptr<Rcu>(new Rcu(qsbr, workers));
}

Rcu::~Rcu() { std::free(qsbr_); }

void Rcu::online(unsigned worker) noexcept { rte_rcu_qsbr_thread_online(qsbr_, worker); }
void Rcu::offline(unsigned worker) noexcept { rte_rcu_qsbr_thread_offline(qsbr_, worker); }
void Rcu::quiescent(unsigned worker) noexcept { rte_rcu_qsbr_quiescent(qsbr_, worker); }
std::uint64_t Rcu::start() noexcept { return rte_rcu_qsbr_start(qsbr_); }
bool Rcu::passed(std::uint64_t token) noexcept { return rte_rcu_qsbr_check(qsbr_, token, false) == 1; }

}  // namespace tricolor::dataplane
