#include "control/telemetry/prometheus.hpp"

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/parse.hpp"

namespace tricolor::control {
namespace {

using dataplane::DaemonSnapshot;
using dataplane::PortSnapshot;
using dataplane::RuleSnapshot;
using dataplane::WorkerSnapshot;
using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

constexpr std::string_view kColors[3] = {"green", "yellow", "red"};

// Writes families one after the other: HELP and TYPE once, then every sample of the family (the
// format wants a family's samples together).
class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    name_ = name;
    out_.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  }
  void sample(Labels labels, std::uint64_t value) {
    head(labels);
    char digits[24];
    out_.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
    out_.push_back('\n');
  }
  void sample(Labels labels, double value) {
    head(labels);
    char digits[32];
    out_.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);  // shortest exact form
    out_.push_back('\n');
  }
  std::string take() { return std::move(out_); }

 private:
  void head(Labels labels) {
    out_.append(name_);
    if (labels.size() != 0) {
      char separator = '{';
      for (const auto& [label, value] : labels) {
        out_.push_back(separator);
        out_.append(label).append("=\"").append(escape_label_value(value)).push_back('"');
        separator = ',';
      }
      out_.push_back('}');
    }
    out_.push_back(' ');
  }

  std::string out_;
  std::string_view name_;
};

void rules(Exposition& e, const DaemonSnapshot& s) {
  e.family("tricolor_rule_packets_total", "counter", "Packets metered by the rule, by the color the meter gave them.");
  for (const RuleSnapshot& r : s.rules)
    for (std::size_t c = 0; c < 3; ++c) e.sample({{"rule", r.name}, {"color", kColors[c]}}, r.counters.packets[c]);
  e.family("tricolor_rule_bytes_total", "counter", "Bytes (whole frames) metered by the rule, by color.");
  for (const RuleSnapshot& r : s.rules)
    for (std::size_t c = 0; c < 3; ++c) e.sample({{"rule", r.name}, {"color", kColors[c]}}, r.counters.bytes[c]);
  e.family("tricolor_rule_dropped_packets_total", "counter", "Packets the rule's actions dropped.");
  for (const RuleSnapshot& r : s.rules) e.sample({{"rule", r.name}}, r.counters.dropped_packets);
  e.family("tricolor_rule_dropped_bytes_total", "counter", "Bytes the rule's actions dropped.");
  for (const RuleSnapshot& r : s.rules) e.sample({{"rule", r.name}}, r.counters.dropped_bytes);

  // Per-key rules only: an aggregate rule has no key table.
  e.family("tricolor_rule_keys", "gauge", "Live keys (meters) of a per-key rule, over all workers.");
  for (const RuleSnapshot& r : s.rules)
    if (r.keyed) e.sample({{"rule", r.name}}, r.live_keys);
  e.family("tricolor_rule_worker_keys", "gauge", "Live keys of a per-key rule in one worker's table.");
  for (const RuleSnapshot& r : s.rules)
    if (r.keyed)
      for (std::size_t w = 0; w < r.workers.size(); ++w)
        e.sample({{"rule", r.name}, {"worker", std::to_string(w)}}, r.workers[w].live_keys);
  e.family("tricolor_rule_keys_capacity_per_worker", "gauge", "Keys each worker's table of a per-key rule can hold.");
  for (const RuleSnapshot& r : s.rules)
    if (r.keyed) e.sample({{"rule", r.name}}, std::uint64_t{r.worker_capacity});
  e.family("tricolor_rule_keys_created_total", "counter", "Keys a per-key rule created (new meters, full buckets).");
  for (const RuleSnapshot& r : s.rules)
    if (r.keyed) e.sample({{"rule", r.name}}, r.counters.keys_created);
  e.family("tricolor_rule_keys_renewed_total", "counter",
           "Keys of a per-key rule that came back after their timeout: new meters, full buckets.");
  for (const RuleSnapshot& r : s.rules)
    if (r.keyed) e.sample({{"rule", r.name}}, r.counters.keys_renewed);
  e.family("tricolor_rule_shaped_packets_total", "counter",
           "Packets a shaping rule (red shape max-delay D) held to leave later; its late ones are its red packets.");
  for (const RuleSnapshot& r : s.rules)
    if (r.shaping) e.sample({{"rule", r.name}}, r.counters.shaped_packets);
  e.family("tricolor_rule_queue_overflow_packets_total", "counter",
           "Packets a shaping rule dropped because its queue (queue N) was full on their worker; red, like its late ones.");
  for (const RuleSnapshot& r : s.rules)
    if (r.shaping) e.sample({{"rule", r.name}}, r.counters.queue_overflow_packets);
  e.family("tricolor_rule_flows_opened_total", "counter", "Flows a max-flows rule opened (flows per key).");
  for (const RuleSnapshot& r : s.rules)
    if (r.max_flows) e.sample({{"rule", r.name}}, r.counters.flows_opened);
  e.family("tricolor_rule_flows_refused_packets_total", "counter",
           "Packets of new flows a max-flows rule refused: their key had max-flows open, or the flow table was full.");
  for (const RuleSnapshot& r : s.rules)
    if (r.max_flows) e.sample({{"rule", r.name}}, r.counters.flows_refused);
  e.family("tricolor_rule_table_full_packets_total", "counter",
           "Packets of new keys of a per-key rule that found its table full (metered by the rule's overflow meter).");
  for (const RuleSnapshot& r : s.rules)
    if (r.keyed) e.sample({{"rule", r.name}}, r.counters.table_full);
  e.family("tricolor_rule_keys_starved_total", "counter",
           "New keys of a per-key rule refused because the control thread had not yet topped up the table's spare entries.");
  for (const RuleSnapshot& r : s.rules)
    if (r.keyed) e.sample({{"rule", r.name}}, r.keys_starved);
}

// Cluster meters (issue 26): what each passed and refused, its leases, and whether it is in a fallback.
void clusters(Exposition& e, const DaemonSnapshot& s) {
  if (s.clusters.empty()) return;
  e.family("tricolor_cluster_green_packets_total", "counter",
           "Green packets a cluster meter kept green (passed) or made red (refused: no leased token, or its fallback's).");
  for (const auto& c : s.clusters) {
    e.sample({{"cluster", c.name}, {"result", "passed"}}, c.passed);
    e.sample({{"cluster", c.name}, {"result", "refused"}}, c.refused);
  }
  e.family("tricolor_cluster_fallback_packets_total", "counter", "Green packets a cluster meter met while in a fallback.");
  for (const auto& c : s.clusters) e.sample({{"cluster", c.name}}, c.fallback_packets);
  e.family("tricolor_cluster_leased_tokens_total", "counter", "Tokens (bytes or packets) leased from Redis.");
  for (const auto& c : s.clusters) e.sample({{"cluster", c.name}}, c.granted);
  e.family("tricolor_cluster_spent_tokens_total", "counter", "Leased tokens spent on green packets.");
  for (const auto& c : s.clusters) e.sample({{"cluster", c.name}}, c.spent);
  e.family("tricolor_cluster_leases_total", "counter", "Leases Redis answered.");
  for (const auto& c : s.clusters) e.sample({{"cluster", c.name}}, c.leases);
  e.family("tricolor_cluster_lease_failures_total", "counter", "Lease calls that failed (no answer in time, or a wrong one).");
  for (const auto& c : s.clusters) e.sample({{"cluster", c.name}}, c.lease_failures);
  e.family("tricolor_cluster_fallbacks_total", "counter", "Switches into the fallback (Redis out of reach or wrong).");
  for (const auto& c : s.clusters) e.sample({{"cluster", c.name}}, c.fallbacks);
  e.family("tricolor_cluster_leased", "gauge", "1 while the cluster meter spends leased tokens, 0 while in a fallback.");
  for (const auto& c : s.clusters) e.sample({{"cluster", c.name}}, std::uint64_t{c.mode == policer::ClusterMode::leased});
}

void default_action(Exposition& e, const DaemonSnapshot& s) {
  const dataplane::DefaultCounters& d = s.defaults;
  std::uint64_t malformed = 0;
  for (std::uint64_t m : d.malformed) malformed += m;
  e.family("tricolor_default_packets_total", "counter",
           "Packets given the policy's default action, by why: not IP, matching no rule, or malformed.");
  e.sample({{"reason", "non_ip"}}, d.non_ip);
  e.sample({{"reason", "no_match"}}, d.no_match);
  e.sample({{"reason", "malformed"}}, malformed);
  e.family("tricolor_default_bytes_total", "counter", "Bytes given the policy's default action.");
  e.sample({}, d.bytes);
  e.family("tricolor_default_dropped_packets_total", "counter", "Packets the default action dropped.");
  e.sample({}, d.dropped_packets);
  e.family("tricolor_default_dropped_bytes_total", "counter", "Bytes the default action dropped.");
  e.sample({}, d.dropped_bytes);
  e.family("tricolor_malformed_packets_total", "counter", "Malformed packets (given the default action), by what was wrong.");
  for (std::size_t error = 1; error < dataplane::kParseErrors; ++error)  // 0 is ParseError::none
    e.sample({{"error", dataplane::to_string(static_cast<dataplane::ParseError>(error))}}, d.malformed[error]);
}

void ports(Exposition& e, const DaemonSnapshot& s) {
  struct Counter {
    std::string_view name, help;
    std::uint64_t (*value)(const PortSnapshot&);
  };
  static constexpr Counter kCounters[] = {
      {"tricolor_port_rx_packets_total", "Packets the port received.", [](const PortSnapshot& p) { return p.counters.rx_packets; }},
      {"tricolor_port_rx_bytes_total", "Bytes the port received.", [](const PortSnapshot& p) { return p.counters.rx_bytes; }},
      {"tricolor_port_tx_packets_total", "Packets the port sent.", [](const PortSnapshot& p) { return p.counters.tx_packets; }},
      {"tricolor_port_tx_bytes_total", "Bytes the port sent.", [](const PortSnapshot& p) { return p.counters.tx_bytes; }},
      {"tricolor_port_rx_missed_packets_total", "Packets the NIC dropped because the RX queue was full (imissed).",
       [](const PortSnapshot& p) { return p.counters.imissed; }},
      {"tricolor_port_rx_nombuf_total", "RX mbuf allocation failures (rx_nombuf).",
       [](const PortSnapshot& p) { return p.counters.rx_nombuf; }},
      {"tricolor_port_rx_errors_total", "Erroneous packets received (ierrors).", [](const PortSnapshot& p) { return p.counters.rx_errors; }},
      {"tricolor_port_tx_errors_total", "Packets the port failed to send (oerrors).", [](const PortSnapshot& p) { return p.counters.tx_errors; }},
      {"tricolor_port_tx_dropped_packets_total", "Packets the TX queue refused after the retries, freed by the worker.",
       [](const PortSnapshot& p) { return p.tx_dropped; }},
  };
  for (const Counter& counter : kCounters) {
    e.family(counter.name, "counter", counter.help);
    for (const PortSnapshot& p : s.ports) e.sample({{"port", std::to_string(p.id)}, {"name", p.name}}, counter.value(p));
  }
  e.family("tricolor_port_link_up", "gauge", "1 when the port's link is up.");
  for (const PortSnapshot& p : s.ports)
    e.sample({{"port", std::to_string(p.id)}, {"name", p.name}}, std::uint64_t{p.link_up ? 1u : 0u});
}

void workers(Exposition& e, const DaemonSnapshot& s) {
  struct Counter {
    std::string_view name, help;
    std::uint64_t (*value)(const WorkerSnapshot&);
  };
  static constexpr Counter kCounters[] = {
      {"tricolor_worker_packets_total", "Packets the worker handled.", [](const WorkerSnapshot& w) { return w.packets; }},
      {"tricolor_worker_bursts_total", "Non-empty bursts the worker handled.", [](const WorkerSnapshot& w) { return w.bursts; }},
      {"tricolor_worker_policy_dropped_packets_total", "Packets the worker dropped by the policy (rules and default action).",
       [](const WorkerSnapshot& w) { return w.policy_drops; }},
      {"tricolor_worker_handoff_dropped_packets_total", "Packets dropped because a ring to another worker was full.",
       [](const WorkerSnapshot& w) { return w.handoff_dropped; }},
      {"tricolor_worker_no_timestamp_packets_total", "Packets that came without an RX timestamp (--clock rx-timestamp).",
       [](const WorkerSnapshot& w) { return w.no_timestamp; }},
      {"tricolor_worker_vlan_restore_failed_packets_total", "Packets dropped: their stripped VLAN tag could not be put back.",
       [](const WorkerSnapshot& w) { return w.vlan_restore_failed; }},
      {"tricolor_worker_shape_dropped_packets_total",
       "Packets a shaping rule held, dropped because the worker's timing wheel was full (--shape-capacity).",
       [](const WorkerSnapshot& w) { return w.shape_overflow; }},
  };
  const auto labels = [](const WorkerSnapshot& w, std::string& id, std::string& lcore) {
    id = std::to_string(w.id);
    lcore = std::to_string(w.lcore);
  };
  std::string id, lcore;
  for (const Counter& counter : kCounters) {
    e.family(counter.name, "counter", counter.help);
    for (const WorkerSnapshot& w : s.workers) {
      labels(w, id, lcore);
      e.sample({{"worker", id}, {"lcore", lcore}}, counter.value(w));
    }
  }
  e.family("tricolor_worker_polls_total", "counter",
           "The worker's polls of its RX queues: busy when one brought packets, idle when none did.");
  for (const WorkerSnapshot& w : s.workers) {
    labels(w, id, lcore);
    e.sample({{"worker", id}, {"lcore", lcore}, {"result", "busy"}}, w.polls - w.idle_polls);
    e.sample({{"worker", id}, {"lcore", lcore}, {"result", "idle"}}, w.idle_polls);
  }
  e.family("tricolor_worker_handoff_packets_total", "counter",
           "Packets passed to another worker (out) or taken from one (in): keys metered by another worker.");
  for (const WorkerSnapshot& w : s.workers) {
    labels(w, id, lcore);
    e.sample({{"worker", id}, {"lcore", lcore}, {"direction", "out"}}, w.handed_out);
    e.sample({{"worker", id}, {"lcore", lcore}, {"direction", "in"}}, w.handed_in);
  }
  e.family("tricolor_worker_shape_packets_total", "counter",
           "Shaping: packets put in the worker's timing wheel (held), sent at their tick (released), sent at the stop "
           "while still held (flushed).");
  for (const WorkerSnapshot& w : s.workers) {
    labels(w, id, lcore);
    e.sample({{"worker", id}, {"lcore", lcore}, {"event", "held"}}, w.shape_held_in);
    e.sample({{"worker", id}, {"lcore", lcore}, {"event", "released"}}, w.shape_released);
    e.sample({{"worker", id}, {"lcore", lcore}, {"event", "flushed"}}, w.shape_flushed);
  }
  e.family("tricolor_worker_shape_held_packets", "gauge", "Packets the worker's timing wheel holds now (shaping).");
  for (const WorkerSnapshot& w : s.workers) {
    labels(w, id, lcore);
    e.sample({{"worker", id}, {"lcore", lcore}}, w.shape_held);
  }
  if (!s.workers.empty() && s.workers.front().flow_cache) {
    e.family("tricolor_worker_flow_cache_packets_total", "counter",
             "IP packets the worker classified from its flow cache (hit) or with the classifier (miss).");
    for (const WorkerSnapshot& w : s.workers) {
      labels(w, id, lcore);
      e.sample({{"worker", id}, {"lcore", lcore}, {"result", "hit"}}, w.flow_cache_hits);
      e.sample({{"worker", id}, {"lcore", lcore}, {"result", "miss"}}, w.flow_cache_misses);
    }
  }
  e.family("tricolor_worker_rule_set_generation", "gauge", "The rule set generation of the worker's latest burst.");
  for (const WorkerSnapshot& w : s.workers) {
    labels(w, id, lcore);
    e.sample({{"worker", id}, {"lcore", lcore}}, w.generation_seen);
  }
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string escaped;
  escaped.reserve(value.size());
  for (char c : value) {
    if (c == '\\') escaped += "\\\\";
    else if (c == '"') escaped += "\\\"";
    else if (c == '\n') escaped += "\\n";
    else escaped += c;
  }
  return escaped;
}

std::string prometheus_text(const DaemonSnapshot& s, const DaemonFacts& facts) {
  Exposition e;
  e.family("tricolor_build_info", "gauge", "Always 1; the version in a label.");
  e.sample({{"version", facts.version}}, std::uint64_t{1});
  e.family("tricolor_start_time_seconds", "gauge", "When the daemon started, in seconds since the Unix epoch.");
  e.sample({}, facts.start_time_s);
  e.family("tricolor_rule_set_generation", "gauge", "The running rule set's generation: 1 at the start, one more per accepted change.");
  e.sample({}, s.generation);
  e.family("tricolor_rule_set_last_change_timestamp_seconds", "gauge",
           "When the running policy was installed (at the start, or by the latest accepted change), in seconds since the Unix epoch.");
  e.sample({}, facts.last_change_time_s);
  e.family("tricolor_rules", "gauge", "Rules in the running policy.");
  e.sample({}, std::uint64_t{s.rules.size()});
  e.family("tricolor_clock_hz", "gauge", "Ticks per second of the meters' clock (the TSC's, or 1e9 for RX timestamps).");
  e.sample({}, s.tick_hz);
  rules(e, s);
  clusters(e, s);
  default_action(e, s);
  ports(e, s);
  workers(e, s);
  e.family("tricolor_mbufs_in_use", "gauge", "Mbufs of the pool in use (the ports' RX rings hold most of them).");
  e.sample({}, s.mbufs_in_use);
  return e.take();
}

}  // namespace tricolor::control
