#pragma once
// Quiescent-state-based reclamation between the control side and the workers, on DPDK's
// rte_rcu_qsbr: the control side replaces what workers read (a rule set) and frees the old one only
// after every online worker has reported a quiescent state (a point where it holds no reference)
// since the replacement. A worker reports once per poll loop; it never waits for the control side,
// and the control side never waits for it either (it asks, and frees later).
#include <cstdint>
#include <memory>

#include "policer/expected.hpp"

struct rte_rcu_qsbr;

namespace tricolor::dataplane {

class Rcu {
 public:
  // For workers numbered 0 .. workers - 1, all registered and offline.
  static Expected<std::unique_ptr<Rcu>> make(unsigned workers);
  ~Rcu();
  Rcu(const Rcu&) = delete;
  Rcu& operator=(const Rcu&) = delete;

  // Worker side. A worker is online while it polls (it may hold references between its quiescent
  // points); offline, it is not waited for (before it blocks or stops).
  void online(unsigned worker) noexcept;
  void offline(unsigned worker) noexcept;
  void quiescent(unsigned worker) noexcept;

  // Control side. start() after replacing what workers read returns a token; passed(token) says,
  // without waiting, whether every worker online at the time has since reported a quiescent state.
  std::uint64_t start() noexcept;
  bool passed(std::uint64_t token) noexcept;

  unsigned workers() const noexcept { return workers_; }

 private:
  Rcu(rte_rcu_qsbr* qsbr, unsigned workers) : qsbr_(qsbr), workers_(workers) {}
  rte_rcu_qsbr* qsbr_;
  unsigned workers_;
};

}  // namespace tricolor::dataplane
