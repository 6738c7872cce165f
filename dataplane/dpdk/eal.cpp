#include "dataplane/dpdk/eal.hpp"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <system_error>
#include <vector>

namespace tricolor::dataplane {
namespace {
std::atomic<bool> g_initialised{false};

// The first CPU this process may run on: the EAL's main lcore, so that it does not move the process.
int first_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) return cpu;
  return 0;
}
}  // namespace

EalRuntimeDirectory::EalRuntimeDirectory() {
  if (rte_eal_process_type() == RTE_PROC_PRIMARY) dir_ = rte_eal_get_runtime_dir();
}

EalRuntimeDirectory::~EalRuntimeDirectory() {
  if (dir_.empty()) return;
  namespace fs = std::filesystem;
  std::error_code error;
  for (fs::directory_iterator it(dir_, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    if (!it->is_directory(ignored)) fs::remove(it->path(), ignored);
  }
  rmdir(dir_.c_str());  // fails, harmlessly, if something was left in it
}

Expected<std::unique_ptr<MemoryOnlyEal>> MemoryOnlyEal::init(const std::string& program, std::size_t memory_mb) {
  if (g_initialised.exchange(true)) return Error{"eal", "the EAL is already initialised in this process"};
  cpu_set_t saved;
  CPU_ZERO(&saved);
  const bool have_affinity = sched_getaffinity(0, sizeof saved, &saved) == 0;
  std::vector<std::string> args = {
      program,          "-l",          std::to_string(first_allowed_cpu()),
      "--no-huge",      "-m",          std::to_string(memory_mb),
      "--no-pci",       "--no-shconf", "--no-telemetry",
      "--log-level=lib.*:error",  // keep tools' output clean; errors still show
      "--file-prefix=" + program + "-" + std::to_string(getpid()),
  };
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(argv.size() - 1), argv.data()) < 0) {
    g_initialised = false;
    return Error{"eal", std::string("DPDK EAL initialisation failed: ") + rte_strerror(rte_errno)};
  }
  // The EAL pins the calling thread to the main lcore; a tool should keep the affinity it was given.
  if (have_affinity) sched_setaffinity(0, sizeof saved, &saved);
  // With --no-shconf the runtime directory is created but nothing is put in it: removed now, so that a
  // process that ends without its destructors (a death test's child, a tool's exit()) leaves none.
  rmdir(rte_eal_get_runtime_dir());
  return std::unique_ptr<MemoryOnlyEal>(new MemoryOnlyEal());
}

MemoryOnlyEal::~MemoryOnlyEal() { rte_eal_cleanup(); }

std::uint64_t MemoryOnlyEal::tsc_hz() const noexcept { return rte_get_tsc_hz(); }

}  // namespace tricolor::dataplane
