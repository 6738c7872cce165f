#pragma once
// tricolord's DPDK telemetry endpoints, beside DPDK's own /ethdev/... ones on the telemetry socket
// (/var/run/dpdk/PREFIX/dpdk_telemetry.v2; `dpdk-telemetry.py -f PREFIX` reads it):
//
//   /tricolor/stats          the daemon in one dictionary: version, rules, generation, last change,
//                            the workers' packets and polls summed, packets by color over every rule,
//                            the default action's packets by reason
//   /tricolor/rules          the rules in policy order, as a table of columns: {"name": [...],
//                            "green_packets": [...], ..., "dropped_packets": [...]}, row i across the
//                            columns (DPDK 22.11 refuses `.` and `-` in a dictionary's names, which
//                            rule names may have); as many rules as a reply holds (16 KB: about 150),
//                            and /tricolor/stats says how many there are
//   /tricolor/rules,NAME     one rule: packets and bytes by color, dropped, and its keys if per-key
//   /tricolor/keys,RULE[,N]  a per-key rule's top N keys (10 unless said, at most 200) by red bytes, as a
//                            table: {"key": [...] as `key list` prints them, "worker": [...], packets
//                            and bytes by color}
//
// DPDK calls these on its telemetry thread; the answers are read on the control thread (ControlCalls),
// which alone may walk the rules, and the workers are never involved. An error (no such rule, a rule
// without keys, a daemon stopping) is the reply's one string, saying what was wrong.
#include <functional>
#include <string>

#include "control/telemetry/control_calls.hpp"
#include "control/telemetry/prometheus.hpp"
#include "dataplane/dpdk/daemon_report.hpp"
#include "dataplane/engine/engine.hpp"

namespace tricolor::control {

struct TelemetrySources {
  ControlCalls* calls = nullptr;
  const dataplane::Engine* engine = nullptr;  // read only inside a ControlCalls job
  std::function<dataplane::DaemonSnapshot(unsigned sections)> snapshot;  // likewise
  std::function<DaemonFacts()> facts;  // likewise: the version, the start, the latest change
};

// Registers the endpoints (once per process: DPDK keeps them until it exits). Between register and
// unregister, `sources` must live.
void register_telemetry_endpoints(const TelemetrySources& sources);
// After this, the endpoints answer that the daemon is stopping; it waits for answers in progress.
void unregister_telemetry_endpoints();

}  // namespace tricolor::control
