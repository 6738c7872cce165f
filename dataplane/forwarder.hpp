#pragma once
// The daemon's poll loop on a worker lcore: RX burst -> packet views over the mbufs -> the engine's
// worker -> TX burst, for each path (a receiving port and the port its packets leave by), then one
// quiescent point per loop (RCU: the control thread may free what an old rule set owned).
//
// Per burst: one clock read (the TSC, or each packet's RX timestamp), no copy, no allocation, no
// system call. Dropped packets go back to the pool at once; a TX queue that takes only part of a burst
// is retried briefly (while it makes progress), and what it still refuses is freed and counted per port (tx_dropped), so that no
// mbuf is ever held across loops or lost.
#include <rte_config.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "dataplane/mbuf_view.hpp"
#include "dataplane/rule_set.hpp"
#include "dataplane/worker.hpp"

namespace tricolor::dataplane {

// Packets received on rx_port (queue 0) leave by tx_port (queue 0): a bump in the wire has two paths
// (A->B, B->A), a one-armed port one (P->P).
struct Path {
  std::uint16_t rx_port = 0;
  std::uint16_t tx_port = 0;
};

struct ForwarderOptions {
  ClockSource clock = ClockSource::tsc;
  RxTimestampField timestamp;                 // with ClockSource::rx_timestamp
  std::array<bool, RTE_MAX_ETHPORTS> vlan_insert{};  // ports that insert a VLAN tag on transmit
};

// What the worker counts, read by the control thread while it runs (one writer each).
struct alignas(64) ForwarderCounters {
  OwnedCounter polls, idle_polls, bursts, packets, policy_drops, no_timestamp, vlan_restore_failed;
  std::array<OwnedCounter, RTE_MAX_ETHPORTS> tx_dropped;  // by egress port: refused by its TX queue
};

class Forwarder {
 public:
  static constexpr unsigned kBurst = 32;
  // A TX queue that takes only part of a burst gets this many more tries, about a microsecond apart,
  // before the rest is freed: long enough for a NIC to free descriptors, short enough that one slow
  // port does not stall the others for long.
  static constexpr unsigned kTxRetries = 16;
  static constexpr unsigned kTxIdleTries = 2;  // tries in a row that sent nothing: give up on the burst

  Forwarder(Worker& worker, std::vector<Path> paths, const ForwarderOptions& options) noexcept
      : worker_(worker), paths_(std::move(paths)), options_(options) {}

  // Polls until `stop` is set, then returns having sent or freed every mbuf it received.
  void run(const std::atomic<bool>& stop) noexcept;

  const ForwarderCounters& counters() const noexcept { return counters_; }
  std::span<const Path> paths() const noexcept { return paths_; }

 private:
  std::uint16_t poll(const Path& path) noexcept;  // one burst; returns the packets received
  void transmit(std::uint16_t port, rte_mbuf** packets, std::uint16_t count) noexcept;

  Worker& worker_;
  std::vector<Path> paths_;
  ForwarderOptions options_;
  std::uint64_t last_timestamp_ = 0;  // the clock of packets without an RX timestamp
  ForwarderCounters counters_;
};

}  // namespace tricolor::dataplane
