// `reset counters`: what `stats` reports is the counters since a baseline snapshot (daemon_report's
// since()), matched by port, rule name and worker; counters that started again count from their new
// start rather than wrapping below zero.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dataplane/dpdk/daemon_report.hpp"

namespace tricolor::dataplane {
namespace {

DaemonSnapshot snapshot(std::uint64_t port_rx, std::uint64_t tx_dropped, std::uint64_t web_green, std::uint64_t worker_packets) {
  DaemonSnapshot s;
  PortSnapshot port;
  port.id = 0;
  port.counters.rx_packets = port_rx;
  port.tx_dropped = tx_dropped;
  s.ports.push_back(port);
  RuleSnapshot web;
  web.name = "web";
  web.counters.packets[0] = web_green;
  web.workers.push_back({web_green, 0, 0});
  s.rules.push_back(web);
  WorkerSnapshot w;
  w.packets = worker_packets;
  s.workers.push_back(w);
  s.worker = w;
  return s;
}

TEST(ReportSince, CountsFromTheBaseline) {
  const DaemonSnapshot s = since(snapshot(1000, 7, 300, 900), snapshot(400, 2, 100, 350));
  EXPECT_EQ(s.ports[0].counters.rx_packets, 600u);
  EXPECT_EQ(s.ports[0].tx_dropped, 5u);
  EXPECT_EQ(s.rules[0].counters.packets[0], 200u);
  EXPECT_EQ(s.rules[0].workers[0].packets, 200u);
  EXPECT_EQ(s.workers[0].packets, 550u);
  EXPECT_EQ(s.worker.packets, 550u);
}

TEST(ReportSince, CountersThatStartedAgainCountFromTheirNewStart) {
  // The port's PMD counters restarted (a memif peer reconnected), the rule was deleted and added again.
  const DaemonSnapshot s = since(snapshot(50, 9, 30, 900), snapshot(400, 2, 100, 350));
  EXPECT_EQ(s.ports[0].counters.rx_packets, 50u);
  EXPECT_EQ(s.ports[0].tx_dropped, 7u);  // the daemon's own count never restarts
  EXPECT_EQ(s.rules[0].counters.packets[0], 30u);
}

TEST(ReportSince, ARuleAddedSinceHasNoBaseline) {
  DaemonSnapshot now = snapshot(1000, 0, 300, 900);
  now.rules[0].name = "new";
  EXPECT_EQ(since(now, snapshot(400, 0, 100, 350)).rules[0].counters.packets[0], 300u);
}

TEST(ReportShaping, CountsSinceTheBaselineHeldIsALevel) {
  DaemonSnapshot base = snapshot(0, 0, 0, 0), now = snapshot(0, 0, 0, 0);
  base.workers[0].shape_held_in = 10, base.workers[0].shape_released = 4, base.workers[0].shape_held = 6;
  now.workers[0].shape_held_in = 25, now.workers[0].shape_released = 15, now.workers[0].shape_flushed = 0;
  now.workers[0].shape_overflow = 3, now.workers[0].shape_held = 10;
  const DaemonSnapshot s = since(now, base);
  EXPECT_EQ(s.workers[0].shape_held_in, 15u);
  EXPECT_EQ(s.workers[0].shape_released, 11u);
  EXPECT_EQ(s.workers[0].shape_overflow, 3u);
  EXPECT_EQ(s.workers[0].shape_held, 10u);  // held now, not held since
}

TEST(ReportShaping, InTheJsonPerWorkerAndSummed) {
  DaemonSnapshot s = snapshot(0, 0, 0, 0);
  s.workers[0].shape_held_in = 7, s.workers[0].shape_released = 2, s.workers[0].shape_flushed = 1;
  s.workers[0].shape_overflow = 5, s.workers[0].shape_held = 4;
  s.worker = s.workers[0];
  const nlohmann::json doc = to_json(s);
  for (const nlohmann::json& w : {doc["workers"][0], doc["worker"]}) {
    EXPECT_EQ(w["shape_held_in"], 7u);
    EXPECT_EQ(w["shape_released"], 2u);
    EXPECT_EQ(w["shape_flushed"], 1u);
    EXPECT_EQ(w["shape_overflow"], 5u);
    EXPECT_EQ(w["shape_held"], 4u);
  }
}

}  // namespace
}  // namespace tricolor::dataplane
