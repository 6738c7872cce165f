#pragma once
// tricolord's counters as an operator reads them: a snapshot taken by the control thread while the
// workers run (no lock: every counter has one writer), printed as rates since the previous snapshot
// (per rule and color, Mpps and Mbit/s), as final totals, or as one JSON object per line.
// In dataplane/dpdk/ beside the ports and the forwarder it reads; the daemon and telemetry (control/)
// include it, never the reverse.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "dataplane/engine/engine.hpp"
#include "dataplane/dpdk/forwarder.hpp"
#include "dataplane/dpdk/ports.hpp"

namespace tricolor::dataplane {

struct PortSnapshot {
  std::uint16_t id = 0;
  std::string name;
  PortCounters counters;
  std::uint64_t tx_dropped = 0;  // refused by the TX queue after the retries, freed by the worker
  bool link_up = false;
};

// A rule on one worker: what it metered there, and its key table there.
struct RuleOnWorker {
  std::uint64_t packets = 0;     // metered, all colors
  std::uint64_t live_keys = 0;
  std::uint64_t table_full = 0;  // packets of new keys that found this worker's table full
};

struct RuleSnapshot {
  std::string name;
  bool keyed = false;
  bool shaping = false;  // red shape max-delay D: counters.shaped_packets says how many it held
  bool max_flows = false;  // per KEY max-flows N: counters.flows_* say what its flows did
  Placement placement = Placement::shared;
  std::uint32_t worker_capacity = 0;  // per-key rules: each worker's share of the capacity
  RuleCounters counters;              // summed over the workers
  std::uint64_t live_keys = 0;
  std::uint64_t keys_starved = 0;
  std::vector<RuleOnWorker> workers;
};

// A cluster meter (issue 26): how it meters now, what it leased and spent, what it passed and refused.
struct ClusterSnapshot {
  std::string name;
  bool in_use = false;
  policer::ClusterMode mode = policer::ClusterMode::share;
  std::uint64_t granted = 0, spent = 0, balance = 0;  // tokens (bytes or packets) leased from Redis
  std::uint64_t passed = 0, refused = 0;              // green packets kept green, made red
  std::uint64_t fallback_packets = 0;                 // green packets met while in a fallback
  std::uint64_t leases = 0, lease_failures = 0, fallbacks = 0, chunk = 0;
};

struct WorkerSnapshot {
  unsigned id = 0, lcore = 0;
  std::uint64_t polls = 0, idle_polls = 0, bursts = 0, packets = 0, policy_drops = 0, no_timestamp = 0,
                vlan_restore_failed = 0, handed_out = 0, handed_in = 0, handoff_dropped = 0;
  std::uint64_t generation_seen = 0;  // of the rule set of its latest burst (summed: the lowest)
  // Shaping: packets put in its timing wheel, sent at their tick, freed because the wheel was full,
  // sent at the stop; held now (a level: held_in - released - flushed, read so that it is never negative).
  std::uint64_t shape_held_in = 0, shape_released = 0, shape_overflow = 0, shape_flushed = 0, shape_held = 0;
  // Its flow cache (--flow-cache-entries): IP packets classified from it, and by the classifier.
  bool flow_cache = false;
  std::uint64_t flow_cache_hits = 0, flow_cache_misses = 0;
  void add(const WorkerSnapshot& w) noexcept;
};

struct DaemonSnapshot {
  double elapsed_s = 0;         // since the worker started
  std::uint64_t tick_hz = 0;    // the engine's clock
  std::uint64_t generation = 0; // of the rule set
  std::vector<PortSnapshot> ports;
  std::vector<RuleSnapshot> rules;
  std::vector<ClusterSnapshot> clusters;  // with the rules block
  DefaultCounters defaults;
  std::vector<WorkerSnapshot> workers;
  WorkerSnapshot worker;                    // the workers' counters summed
  std::uint64_t handoff_left_at_stop = 0;   // final counters: packets still in the rings, freed
  std::uint64_t mbufs_in_use_at_start = 0;  // the pool's, once the ports had started
  std::uint64_t mbufs_in_use = 0;           // now (after a stop: every mbuf the worker had is back)
  double stop_s = 0;                        // final counters: from the stop request to the worker stopped
};

// The blocks of a snapshot and of a report.
enum ReportSection : unsigned { kReportRules = 1, kReportDefault = 2, kReportPorts = 4, kReportWorkers = 8, kReportAll = 15 };

// forwarders[w] runs worker w on lcores[w]. Only the blocks in `sections` are read (a rule's counters
// are summed over the workers: with 10 Ki rules the rules block is the dear one).
DaemonSnapshot take_snapshot(const Engine& engine, std::span<const Forwarder* const> forwarders,
                             std::span<const unsigned> lcores, std::span<const std::uint16_t> ports, double elapsed_s,
                             std::uint64_t tick_hz, unsigned sections = kReportAll);

// The counters since `baseline` (an earlier snapshot: `reset counters`), matched by port id, rule name
// and worker. A rule deleted and added again since (its counters below the baseline's) counts from its
// new start. Levels, live keys, placements and generations are as now.
DaemonSnapshot since(const DaemonSnapshot& now, const DaemonSnapshot& baseline);

// One block per interval: totals per port direction, then each rule's green/yellow/red rates.
void print_rates(const DaemonSnapshot& before, const DaemonSnapshot& now, std::ostream& out);
// The final counters: per rule and color (packets, bytes, first and last metered tick), default-action
// reasons, keys (per worker too), per port rx/tx/imissed/rx_nombuf/tx-dropped, each worker's polls and
// handoffs.
// `sections` chooses the blocks (the control socket's `stats rules`, `stats ports`, ...).
void print_totals(const DaemonSnapshot& snapshot, std::ostream& out, unsigned sections = kReportAll);
// Every counter above as one JSON object (the fields write_json_line writes, without "event").
nlohmann::json to_json(const DaemonSnapshot& snapshot);
// One line of JSON: {"event": event, ...every counter above...}.
void write_json_line(const DaemonSnapshot& snapshot, const std::string& event, std::ostream& out);

}  // namespace tricolor::dataplane
