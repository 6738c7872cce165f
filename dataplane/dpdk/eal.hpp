#pragma once
// DPDK's EAL in memory-only form, for tools and tests that use DPDK libraries (rte_acl, rte_hash)
// without ports: no hugepages, no shared configuration files, no PCI scan, no telemetry socket, and a
// private file prefix whose runtime directory, left empty, is removed as soon as the EAL is up. One per
// process.
#include <cstddef>
#include <memory>
#include <string>

#include "policer/expected.hpp"

namespace tricolor::dataplane {

// The runtime directory of this process's EAL (/var/run/dpdk/<file-prefix>), removed when the guard
// goes. What a primary process leaves there (its shared configuration, the memory's arrays, the
// multi-process and telemetry sockets) serves no one once it has stopped, and a prefix per run (tests,
// benchmarks) would leave a directory of several megabytes each. Made right after rte_eal_init, so
// that it goes after everything that uses the EAL, rte_eal_cleanup() included; a secondary process,
// whose directory is its primary's, removes nothing. Entries that are not its own files (a directory
// someone put there) are left, and the directory with them.
class EalRuntimeDirectory {
 public:
  EalRuntimeDirectory();
  ~EalRuntimeDirectory();
  EalRuntimeDirectory(const EalRuntimeDirectory&) = delete;
  EalRuntimeDirectory& operator=(const EalRuntimeDirectory&) = delete;

 private:
  std::string dir_;  // empty: nothing to remove
};

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
};

}  // namespace tricolor::dataplane
