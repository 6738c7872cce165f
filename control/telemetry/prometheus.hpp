#pragma once
// tricolord's counters in Prometheus's text exposition format (version 0.0.4), for the metrics
// listener's /metrics and `tricolorctl stats --prometheus`.
//
// Names follow Prometheus's conventions: a `tricolor_` prefix, the unit in the name (bytes, packets,
// seconds), `_total` on counters; one family per quantity, what differs (rule, color, port, worker)
// in labels. Counters count from the daemon's start and never go back: `reset counters` moves only
// what `stats` reports, as rate() and increase() expect. Every family has HELP and TYPE, and the
// per-reason and per-error series are there at zero before anything happens, so that a query sees
// them from the first scrape.
#include <string>
#include <string_view>

#include "dataplane/dpdk/daemon_report.hpp"

namespace tricolor::control {

inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// What the snapshot does not hold: about the daemon, not its counters.
struct DaemonFacts {
  std::string version;
  double start_time_s = 0;        // Unix time of the start
  double last_change_time_s = 0;  // Unix time the running policy was installed: the startup's or the latest change's
};

std::string prometheus_text(const dataplane::DaemonSnapshot& snapshot, const DaemonFacts& facts);

// A label value as the format wants it: backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view value);

}  // namespace tricolor::control
