#include "dataplane/dpdk/daemon_report.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace tricolor::dataplane {
namespace {

constexpr const char* kColorNames[3] = {"green", "yellow", "red"};

std::uint64_t sum(const auto& values) {
  std::uint64_t total = 0;
  for (std::uint64_t v : values) total += v;
  return total;
}

// "1.234 Mpps 630.2 Mbit/s" for packet and byte deltas over `seconds`.
std::string rate_text(std::uint64_t packets, std::uint64_t bytes, double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%7.3f Mpps %9.1f Mbit/s", packets / seconds / 1e6, bytes * 8.0 / seconds / 1e6);
  return text;
}

}  // namespace

void WorkerSnapshot::add(const WorkerSnapshot& w) noexcept {
  polls += w.polls, idle_polls += w.idle_polls, bursts += w.bursts, packets += w.packets;
  policy_drops += w.policy_drops, no_timestamp += w.no_timestamp, vlan_restore_failed += w.vlan_restore_failed;
  handed_out += w.handed_out, handed_in += w.handed_in, handoff_dropped += w.handoff_dropped;
  shape_held_in += w.shape_held_in, shape_released += w.shape_released, shape_overflow += w.shape_overflow;
  shape_flushed += w.shape_flushed, shape_held += w.shape_held;
  flow_cache = flow_cache || w.flow_cache;
  flow_cache_hits += w.flow_cache_hits, flow_cache_misses += w.flow_cache_misses;
}

DaemonSnapshot take_snapshot(const Engine& engine, std::span<const Forwarder* const> forwarders,
                             std::span<const unsigned> lcores, std::span<const std::uint16_t> ports, double elapsed_s,
                             std::uint64_t tick_hz, unsigned sections) {
  DaemonSnapshot s;
  s.elapsed_s = elapsed_s;
  s.tick_hz = tick_hz;
  s.generation = engine.generation();
  for (std::uint16_t port : ports) {
    if ((sections & kReportPorts) == 0) break;
    std::uint64_t tx_dropped = 0;
    for (const Forwarder* f : forwarders) tx_dropped += f->counters().tx_dropped[port].get();
    s.ports.push_back({port, port_name(port), read_port_counters(port), tx_dropped, link_up(port)});
  }
  const Policy& policy = engine.policy();
  for (std::size_t r = 0; r < policy.rules.size(); ++r) {
    if ((sections & kReportRules) == 0) break;
    RuleSnapshot rule;
    rule.name = policy.rules[r].name;
    rule.keyed = policy.rules[r].per_key.kind != KeyKind::none;
    rule.shaping = policy.rules[r].on_color[static_cast<std::size_t>(Color::red)].shape_max_delay_ns.has_value();
    rule.max_flows = policy.rules[r].per_key.max_flows != 0;
    rule.placement = engine.placement(r);
    rule.counters = engine.counters(r);
    if (rule.keyed) {
      rule.worker_capacity = engine.worker_capacity(r);
      rule.live_keys = engine.live_keys(r);
      rule.keys_starved = engine.keys_starved(r);
    }
    for (unsigned w = 0; w < engine.workers(); ++w) {
      const RuleCounters c = engine.counters(r, w);
      rule.workers.push_back({sum(c.packets), rule.keyed ? engine.live_keys(r, w) : 0, c.table_full});
    }
    s.rules.push_back(std::move(rule));
  }
  if (sections & kReportRules) {
    for (const ClusterInfo& cluster : engine.clusters()) {
      const policer::ClusterLease& l = *cluster.lease;
      const auto& record = l.record();
      s.clusters.push_back({cluster.name, cluster.in_use, l.mode(), l.granted(), l.spent(), l.balance(), l.passed(),
                            l.refused(), l.fallback_packets(), record.leases.load(), record.failures.load(),
                            record.fallbacks.load(), record.chunk.load()});
    }
  }
  if (sections & kReportDefault) s.defaults = engine.default_counters();
  s.worker.generation_seen = UINT64_MAX;
  for (std::size_t w = 0; w < forwarders.size(); ++w) {
    if ((sections & kReportWorkers) == 0) break;
    const ForwarderCounters& f = forwarders[w]->counters();
    s.workers.push_back({static_cast<unsigned>(w), lcores[w], f.polls.get(), f.idle_polls.get(), f.bursts.get(),
                         f.packets.get(), f.policy_drops.get(), f.no_timestamp.get(), f.vlan_restore_failed.get(),
                         f.handed_out.get(), f.handed_in.get(), f.handoff_dropped.get(),
                         engine.worker(static_cast<unsigned>(w)).generation_seen()});
    {
      // A packet is counted out after it was counted in: the outs read first (and the difference
      // saturated, the counters being relaxed) keep held >= 0.
      WorkerSnapshot& one = s.workers.back();
      one.shape_released = f.shape_released.get();
      one.shape_flushed = f.shape_flushed.get();
      one.shape_overflow = f.shape_overflow.get();
      one.shape_held_in = f.shape_held_in.get();
      const std::uint64_t out = one.shape_released + one.shape_flushed;
      one.shape_held = one.shape_held_in > out ? one.shape_held_in - out : 0;
    }
    if (const FlowCache* cache = engine.worker(static_cast<unsigned>(w)).flow_cache()) {
      WorkerSnapshot& one = s.workers.back();
      one.flow_cache = true;
      one.flow_cache_hits = cache->counters().hits.load(std::memory_order_relaxed);
      one.flow_cache_misses = cache->counters().misses.load(std::memory_order_relaxed);
    }
    s.worker.add(s.workers.back());
    s.worker.generation_seen = std::min(s.worker.generation_seen, s.workers.back().generation_seen);
  }
  if (s.workers.empty()) s.worker.generation_seen = 0;  // none read, or none running
  return s;
}

namespace {

// a - b, or a when b is not below it everywhere (the counter started again since b was taken).
template <std::size_t N>
bool covers(const std::array<std::uint64_t, N>& a, const std::array<std::uint64_t, N>& b) {
  for (std::size_t i = 0; i < N; ++i)
    if (a[i] < b[i]) return false;
  return true;
}

RuleCounters rule_since(const RuleCounters& now, const RuleCounters& base) {
  if (!covers(now.packets, base.packets) || !covers(now.bytes, base.bytes) || now.dropped_packets < base.dropped_packets ||
      now.keys_created < base.keys_created || now.table_full < base.table_full || now.shaped_packets < base.shaped_packets ||
      now.queue_overflow_packets < base.queue_overflow_packets ||
      now.flows_opened < base.flows_opened || now.flows_refused < base.flows_refused)
    return now;
  RuleCounters c = now;
  for (std::size_t k = 0; k < 3; ++k) c.packets[k] -= base.packets[k], c.bytes[k] -= base.bytes[k];
  c.dropped_packets -= base.dropped_packets, c.dropped_bytes -= base.dropped_bytes;
  c.keys_created -= base.keys_created, c.keys_renewed -= base.keys_renewed, c.table_full -= base.table_full;
  c.shaped_packets -= base.shaped_packets, c.queue_overflow_packets -= base.queue_overflow_packets;
  c.flows_opened -= base.flows_opened, c.flows_closed -= base.flows_closed, c.flows_expired -= base.flows_expired;
  c.flows_refused -= base.flows_refused, c.flow_table_full -= base.flow_table_full;
  // first/last tick stay: when the rule first and last metered, not since the reset
  return c;
}

void worker_since(WorkerSnapshot& w, const WorkerSnapshot& base) {
  w.polls -= base.polls, w.idle_polls -= base.idle_polls, w.bursts -= base.bursts, w.packets -= base.packets;
  w.policy_drops -= base.policy_drops, w.no_timestamp -= base.no_timestamp;
  w.vlan_restore_failed -= base.vlan_restore_failed, w.handed_out -= base.handed_out, w.handed_in -= base.handed_in;
  w.handoff_dropped -= base.handoff_dropped;
  w.shape_held_in -= base.shape_held_in, w.shape_released -= base.shape_released;
  w.shape_overflow -= base.shape_overflow, w.shape_flushed -= base.shape_flushed;  // shape_held: a level, as now
  w.flow_cache_hits -= base.flow_cache_hits, w.flow_cache_misses -= base.flow_cache_misses;
}

}  // namespace

DaemonSnapshot since(const DaemonSnapshot& now, const DaemonSnapshot& baseline) {
  DaemonSnapshot s = now;
  for (PortSnapshot& p : s.ports)
    for (const PortSnapshot& b : baseline.ports)
      if (b.id == p.id) {
        p.tx_dropped -= b.tx_dropped;  // the daemon's own count: never starts again
        PortCounters& c = p.counters;
        const PortCounters& o = b.counters;
        // A PMD's counters may start again (a memif port's, when its peer reconnects): then from there.
        if (c.rx_packets < o.rx_packets || c.tx_packets < o.tx_packets || c.rx_bytes < o.rx_bytes ||
            c.tx_bytes < o.tx_bytes || c.imissed < o.imissed || c.rx_errors < o.rx_errors ||
            c.rx_nombuf < o.rx_nombuf || c.tx_errors < o.tx_errors)
          continue;
        c.rx_packets -= o.rx_packets, c.rx_bytes -= o.rx_bytes, c.tx_packets -= o.tx_packets, c.tx_bytes -= o.tx_bytes;
        c.imissed -= o.imissed, c.rx_errors -= o.rx_errors, c.rx_nombuf -= o.rx_nombuf, c.tx_errors -= o.tx_errors;
      }
  for (RuleSnapshot& r : s.rules)
    for (const RuleSnapshot& b : baseline.rules)
      if (b.name == r.name) {
        r.counters = rule_since(r.counters, b.counters);
        for (std::size_t w = 0; w < r.workers.size() && w < b.workers.size(); ++w)
          if (r.workers[w].packets >= b.workers[w].packets && r.workers[w].table_full >= b.workers[w].table_full) {
            r.workers[w].packets -= b.workers[w].packets;
            r.workers[w].table_full -= b.workers[w].table_full;
          }
      }
  // A cluster meter's lease lives as long as the engine: its counters never start again. The balance
  // and the mode are as now.
  for (ClusterSnapshot& c : s.clusters)
    for (const ClusterSnapshot& b : baseline.clusters)
      if (b.name == c.name) {
        c.granted -= b.granted, c.spent -= b.spent, c.passed -= b.passed, c.refused -= b.refused;
        c.fallback_packets -= b.fallback_packets, c.leases -= b.leases, c.lease_failures -= b.lease_failures;
        c.fallbacks -= b.fallbacks;
      }
  DefaultCounters& d = s.defaults;
  const DefaultCounters& o = baseline.defaults;
  d.packets -= o.packets, d.bytes -= o.bytes, d.non_ip -= o.non_ip, d.no_match -= o.no_match;
  d.dropped_packets -= o.dropped_packets, d.dropped_bytes -= o.dropped_bytes;
  for (std::size_t e = 0; e < kParseErrors; ++e) d.malformed[e] -= o.malformed[e];
  for (std::size_t w = 0; w < s.workers.size() && w < baseline.workers.size(); ++w) worker_since(s.workers[w], baseline.workers[w]);
  worker_since(s.worker, baseline.worker);
  return s;
}

void print_rates(const DaemonSnapshot& before, const DaemonSnapshot& now, std::ostream& out) {
  const double seconds = now.elapsed_s - before.elapsed_s;
  if (seconds <= 0) return;
  char head[96];
  std::snprintf(head, sizeof head, "[%7.1f s]", now.elapsed_s);
  out << head;
  for (std::size_t p = 0; p < now.ports.size() && p < before.ports.size(); ++p) {
    const PortCounters& a = before.ports[p].counters;
    const PortCounters& b = now.ports[p].counters;
    out << "  port " << now.ports[p].id << " rx " << rate_text(b.rx_packets - a.rx_packets, b.rx_bytes - a.rx_bytes, seconds)
        << ", tx " << rate_text(b.tx_packets - a.tx_packets, b.tx_bytes - a.tx_bytes, seconds) << ";";
  }
  out << '\n';
  for (std::size_t r = 0; r < now.rules.size(); ++r) {
    const RuleCounters& b = now.rules[r].counters;
    // A rule added since the previous snapshot starts from zero.
    const bool same = r < before.rules.size() && before.rules[r].name == now.rules[r].name;
    const RuleCounters a = same ? before.rules[r].counters : RuleCounters{};
    char name[40];
    std::snprintf(name, sizeof name, "  %-16s", now.rules[r].name.c_str());
    out << name;
    for (std::size_t c = 0; c < 3; ++c)
      out << ' ' << kColorNames[c] << ' ' << rate_text(b.packets[c] - a.packets[c], b.bytes[c] - a.bytes[c], seconds);
    if (now.rules[r].keyed) out << "  keys " << now.rules[r].live_keys;
    out << '\n';
  }
  const DefaultCounters& a = before.defaults;
  const DefaultCounters& b = now.defaults;
  char name[40];
  std::snprintf(name, sizeof name, "  %-16s", "(default)");
  out << name << "       " << rate_text(b.packets - a.packets, b.bytes - a.bytes, seconds) << '\n';
  out.flush();
}

void print_totals(const DaemonSnapshot& s, std::ostream& out, unsigned sections) {
  char line[512];
  std::snprintf(line, sizeof line, "tricolord: counters after %.1f s (rule set generation %llu, clock %llu Hz)\n",
                s.elapsed_s, static_cast<unsigned long long>(s.generation), static_cast<unsigned long long>(s.tick_hz));
  out << line;
  for (const RuleSnapshot& rule : s.rules) {
    if ((sections & kReportRules) == 0) break;
    const RuleCounters& c = rule.counters;
    out << "  rule " << rule.name << ":";
    for (std::size_t k = 0; k < 3; ++k) out << ' ' << kColorNames[k] << ' ' << c.packets[k] << " packets " << c.bytes[k] << " bytes;";
    out << " dropped " << c.dropped_packets << " packets " << c.dropped_bytes << " bytes";
    if (c.metered) {
      std::snprintf(line, sizeof line, "; metered from tick %llu to %llu (%.6f s)",
                    static_cast<unsigned long long>(c.first_tick), static_cast<unsigned long long>(c.last_tick),
                    static_cast<double>(c.last_tick - c.first_tick) / static_cast<double>(s.tick_hz));
      out << line;
    } else {
      out << "; nothing metered";
    }
    if (rule.shaping)
      out << "; shaping: " << c.shaped_packets << " held, " << c.packets[2] - c.queue_overflow_packets
          << " late (dropped), " << c.queue_overflow_packets << " queue overflow (dropped)";
    if (rule.max_flows)
      out << "; flows: " << c.flows_opened << " opened, " << c.flows_closed << " closed, " << c.flows_expired
          << " expired, " << c.flows_refused << " refused (" << c.flow_table_full << " table full)";
    if (rule.keyed)
      out << "; keys " << rule.live_keys << " live, " << c.keys_created << " created, " << c.keys_renewed << " renewed, "
          << c.table_full << " packets found the table full, " << rule.keys_starved << " starved";
    out << '\n';
    if (rule.keyed && rule.workers.size() > 1) {
      out << "    keys by worker (" << placement_name(rule.placement) << ", " << rule.worker_capacity << " each):";
      for (std::size_t w = 0; w < rule.workers.size(); ++w)
        out << " worker " << w << " " << rule.workers[w].live_keys << " live, " << rule.workers[w].table_full
            << " found its table full;";
      out << '\n';
    }
  }
  const DefaultCounters& d = s.defaults;
  for (const ClusterSnapshot& c : s.clusters) {
    if ((sections & kReportRules) == 0) break;
    out << "  cluster " << c.name << (c.in_use ? "" : " (no rule names it)") << ": " << policer::to_string(c.mode)
        << "; green passed " << c.passed << ", made red " << c.refused << " (" << c.fallback_packets
        << " while in a fallback); leased " << c.granted << " in " << c.leases << " leases of up to " << c.chunk
        << ", spent " << c.spent << ", balance " << c.balance << "; " << c.lease_failures << " failed calls, "
        << c.fallbacks << " fallbacks\n";
  }
  if (sections & kReportDefault) {
    out << "  default action: " << d.packets << " packets " << d.bytes << " bytes: " << d.non_ip << " not IP, "
        << d.no_match << " matching no rule, " << sum(d.malformed) << " malformed";
    for (std::size_t e = 0; e < kParseErrors; ++e)
      if (d.malformed[e] != 0) out << " (" << to_string(static_cast<ParseError>(e)) << " " << d.malformed[e] << ")";
    out << "; " << d.dropped_packets << " dropped\n";
  }
  for (const PortSnapshot& p : s.ports) {
    if ((sections & kReportPorts) == 0) break;
    const PortCounters& c = p.counters;
    out << "  port " << p.id << " (" << p.name << "): rx " << c.rx_packets << " packets " << c.rx_bytes << " bytes, tx "
        << c.tx_packets << " packets " << c.tx_bytes << " bytes, imissed " << c.imissed << ", rx_nombuf " << c.rx_nombuf
        << ", rx errors " << c.rx_errors << ", tx errors " << c.tx_errors << ", tx-dropped " << p.tx_dropped << '\n';
  }
  for (const WorkerSnapshot& w : s.workers) {
    if ((sections & kReportWorkers) == 0) break;
    out << "  worker " << w.id << " on lcore " << w.lcore << ": " << w.packets << " packets in " << w.bursts << " bursts, "
        << w.polls << " polls (" << w.idle_polls << " idle), " << w.policy_drops << " dropped by the policy";
    if (s.workers.size() > 1)
      out << ", " << w.handed_out << " passed to other workers, " << w.handed_in << " taken from them, "
          << w.handoff_dropped << " dropped: a handoff ring was full";
    if (w.flow_cache)
      out << ", flow cache " << w.flow_cache_hits << " hits " << w.flow_cache_misses << " misses";
    if (w.shape_held_in != 0 || w.shape_overflow != 0)
      out << ", shaping: " << w.shape_held_in << " held, " << w.shape_released << " released at their tick, "
          << w.shape_flushed << " sent at the stop, " << w.shape_overflow << " dropped: the wheel was full, "
          << w.shape_held << " held now";
    if (w.no_timestamp != 0) out << ", " << w.no_timestamp << " without an RX timestamp";
    if (w.vlan_restore_failed != 0) out << ", " << w.vlan_restore_failed << " dropped: their stripped VLAN tag could not be put back";
    out << "; its latest burst saw rule set generation " << w.generation_seen << '\n';
  }
  if ((sections & kReportWorkers) == 0) {
    out.flush();
    return;
  }
  if (s.handoff_left_at_stop != 0) out << "  " << s.handoff_left_at_stop << " packets were still in the handoff rings at the stop (freed)\n";
  out << "  mbufs in use: " << s.mbufs_in_use_at_start << " once the ports had started, " << s.mbufs_in_use << " now";
  if (s.stop_s > 0) {
    std::snprintf(line, sizeof line, "; the worker stopped %.3f s after the request", s.stop_s);
    out << line;
  }
  out << '\n';
  out.flush();
}

void write_json_line(const DaemonSnapshot& s, const std::string& event, std::ostream& out) {
  nlohmann::json doc = {{"event", event}};
  doc.update(to_json(s));
  out << doc.dump() << '\n';
  out.flush();
}

nlohmann::json to_json(const DaemonSnapshot& s) {
  using nlohmann::json;
  json doc;
  doc["elapsed_s"] = s.elapsed_s;
  doc["tick_hz"] = s.tick_hz;
  doc["generation"] = s.generation;
  json& ports = doc["ports"] = json::array();
  for (const PortSnapshot& p : s.ports) {
    const PortCounters& c = p.counters;
    ports.push_back({{"port", p.id},           {"name", p.name},           {"rx_packets", c.rx_packets},
                     {"rx_bytes", c.rx_bytes}, {"tx_packets", c.tx_packets}, {"tx_bytes", c.tx_bytes},
                     {"imissed", c.imissed},   {"rx_errors", c.rx_errors},   {"rx_nombuf", c.rx_nombuf},
                     {"tx_errors", c.tx_errors}, {"tx_dropped", p.tx_dropped}, {"link_up", p.link_up}});
  }
  json& rules = doc["rules"] = json::array();
  for (const RuleSnapshot& rule : s.rules) {
    const RuleCounters& c = rule.counters;
    json r = {{"name", rule.name}, {"dropped_packets", c.dropped_packets}, {"dropped_bytes", c.dropped_bytes}};
    for (std::size_t k = 0; k < 3; ++k) {
      r[std::string(kColorNames[k]) + "_packets"] = c.packets[k];
      r[std::string(kColorNames[k]) + "_bytes"] = c.bytes[k];
    }
    r["first_tick"] = c.metered ? json(c.first_tick) : json(nullptr);
    r["last_tick"] = c.metered ? json(c.last_tick) : json(nullptr);
    r["placement"] = placement_name(rule.placement);
    if (rule.shaping) {
      r["shaped_packets"] = c.shaped_packets;  // held to leave later; the late ones are red
      r["queue_overflow_packets"] = c.queue_overflow_packets;  // red too: its queue N was full
    }
    if (rule.max_flows)
      r["flows"] = {{"opened", c.flows_opened}, {"closed", c.flows_closed}, {"expired", c.flows_expired},
                    {"refused_packets", c.flows_refused}, {"table_full_packets", c.flow_table_full}};
    if (rule.keyed)
      r["keys"] = {{"live", rule.live_keys},     {"created", c.keys_created}, {"renewed", c.keys_renewed},
                   {"table_full", c.table_full}, {"starved", rule.keys_starved}, {"capacity_per_worker", rule.worker_capacity}};
    json& by_worker = r["workers"] = json::array();
    for (const RuleOnWorker& w : rule.workers)
      by_worker.push_back({{"packets", w.packets}, {"live_keys", w.live_keys}, {"table_full", w.table_full}});
    rules.push_back(std::move(r));
  }
  json& clusters = doc["clusters"] = json::array();
  for (const ClusterSnapshot& c : s.clusters)
    clusters.push_back({{"name", c.name},         {"in_use", c.in_use},       {"mode", policer::to_string(c.mode)},
                        {"granted", c.granted},   {"spent", c.spent},         {"balance", c.balance},
                        {"passed", c.passed},     {"refused", c.refused},     {"fallback_packets", c.fallback_packets},
                        {"leases", c.leases},     {"lease_failures", c.lease_failures},
                        {"fallbacks", c.fallbacks}, {"chunk", c.chunk}});
  const DefaultCounters& d = s.defaults;
  json malformed = json::object();
  for (std::size_t e = 0; e < kParseErrors; ++e)
    if (d.malformed[e] != 0) malformed[std::string(to_string(static_cast<ParseError>(e)))] = d.malformed[e];
  doc["default"] = {{"packets", d.packets},   {"bytes", d.bytes},
                    {"non_ip", d.non_ip},     {"no_match", d.no_match},
                    {"malformed", malformed}, {"dropped_packets", d.dropped_packets},
                    {"dropped_bytes", d.dropped_bytes}};
  auto worker_json = [](const WorkerSnapshot& w) {
    return json{{"polls", w.polls},
                {"idle_polls", w.idle_polls},
                {"bursts", w.bursts},
                {"packets", w.packets},
                {"policy_drops", w.policy_drops},
                {"no_timestamp", w.no_timestamp},
                {"vlan_restore_failed", w.vlan_restore_failed},
                {"handed_out", w.handed_out},
                {"handed_in", w.handed_in},
                {"handoff_dropped", w.handoff_dropped},
                {"flow_cache_hits", w.flow_cache_hits},
                {"flow_cache_misses", w.flow_cache_misses},
                {"shape_held_in", w.shape_held_in},
                {"shape_released", w.shape_released},
                {"shape_overflow", w.shape_overflow},
                {"shape_flushed", w.shape_flushed},
                {"shape_held", w.shape_held},
                {"generation_seen", w.generation_seen}};
  };
  doc["worker"] = worker_json(s.worker);  // summed over the workers
  json& workers = doc["workers"] = json::array();
  for (const WorkerSnapshot& w : s.workers) {
    json one = worker_json(w);
    one["worker"] = w.id;
    one["lcore"] = w.lcore;
    workers.push_back(std::move(one));
  }
  doc["handoff_left_at_stop"] = s.handoff_left_at_stop;
  doc["mbufs_in_use_at_start"] = s.mbufs_in_use_at_start;
  doc["mbufs_in_use"] = s.mbufs_in_use;
  if (s.stop_s > 0) doc["stop_s"] = s.stop_s;
  return doc;
}

}  // namespace tricolor::dataplane
