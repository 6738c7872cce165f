#pragma once
// tricolord's counters as an operator reads them: a snapshot taken by the control thread while the
// worker runs (no lock: every counter has one writer), printed as rates since the previous snapshot
// (per rule and color, Mpps and Mbit/s), as final totals, or as one JSON object per line.
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "dataplane/engine.hpp"
#include "dataplane/forwarder.hpp"
#include "dataplane/ports.hpp"

namespace tricolor::dataplane {

struct PortSnapshot {
  std::uint16_t id = 0;
  std::string name;
  PortCounters counters;
  std::uint64_t tx_dropped = 0;  // refused by the TX queue after the retries, freed by the worker
  bool link_up = false;
};

struct RuleSnapshot {
  std::string name;
  bool keyed = false;
  RuleCounters counters;
  std::uint64_t live_keys = 0;
  std::uint64_t keys_starved = 0;
};

struct WorkerSnapshot {
  unsigned lcore = 0;
  std::uint64_t polls = 0, idle_polls = 0, bursts = 0, packets = 0, policy_drops = 0, no_timestamp = 0,
                vlan_restore_failed = 0;
};

struct DaemonSnapshot {
  double elapsed_s = 0;         // since the worker started
  std::uint64_t tick_hz = 0;    // the engine's clock
  std::uint64_t generation = 0; // of the rule set
  std::vector<PortSnapshot> ports;
  std::vector<RuleSnapshot> rules;
  DefaultCounters defaults;
  WorkerSnapshot worker;
  std::uint64_t mbufs_in_use_at_start = 0;  // the pool's, once the ports had started
  std::uint64_t mbufs_in_use = 0;           // now (after a stop: every mbuf the worker had is back)
  double stop_s = 0;                        // final counters: from the stop request to the worker stopped
};

DaemonSnapshot take_snapshot(const Engine& engine, const Forwarder& forwarder, unsigned lcore,
                             std::span<const std::uint16_t> ports, double elapsed_s, std::uint64_t tick_hz);

// One block per interval: totals per port direction, then each rule's green/yellow/red rates.
void print_rates(const DaemonSnapshot& before, const DaemonSnapshot& now, std::ostream& out);
// The final counters: per rule and color (packets, bytes, first and last metered tick), default-action
// reasons, keys, per port rx/tx/imissed/rx_nombuf/tx-dropped, the worker's polls.
void print_totals(const DaemonSnapshot& snapshot, std::ostream& out);
// One line of JSON: {"event": event, ...every counter above...}.
void write_json_line(const DaemonSnapshot& snapshot, const std::string& event, std::ostream& out);

}  // namespace tricolor::dataplane
