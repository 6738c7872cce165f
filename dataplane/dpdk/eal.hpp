#pragma once
// DPDK's EAL in memory-only form, for tools and tests that use DPDK libraries (rte_acl, rte_hash)
// without ports: no hugepages, no shared configuration files, no PCI scan, no telemetry socket, and a
// private file prefix whose runtime directory is removed on exit. One per process.
#include <cstddef>
#include <memory>
#include <string>

#include "policer/expected.hpp"

namespace tricolor::dataplane {

class MemoryOnlyEal {
 public:
  // `program` names the process in the file prefix and in errors; `memory_mb` bounds DPDK's heap
  // (anonymous memory, committed only as it is used).
  static Expected<std::unique_ptr<MemoryOnlyEal>> init(const std::string& program, std::size_t memory_mb = 2048);
  ~MemoryOnlyEal();
  MemoryOnlyEal(const MemoryOnlyEal&) = delete;
  MemoryOnlyEal& operator=(const MemoryOnlyEal&) = delete;

  std::uint64_t tsc_hz() const noexcept;

 private:
  MemoryOnlyEal() = default;
  std::string runtime_dir_;
};

}  // namespace tricolor::dataplane
