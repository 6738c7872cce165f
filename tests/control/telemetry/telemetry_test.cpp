// The telemetry pieces without a daemon: the Prometheus exposition of a snapshot made by hand, the
// --metrics address, and ControlCalls (other threads' calls into the control thread; also under TSan).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "control/telemetry/control_calls.hpp"
#include "control/telemetry/metrics_server.hpp"
#include "control/telemetry/prometheus.hpp"

namespace {

using namespace tricolor;
using namespace tricolor::control;
using dataplane::DaemonSnapshot;

DaemonSnapshot sample_snapshot() {
  DaemonSnapshot s;
  s.tick_hz = 2'100'000'000;
  s.generation = 7;
  dataplane::RuleSnapshot web;
  web.name = "web";
  web.counters.packets = {1, 5, 9};
  web.counters.bytes = {100, 500, UINT64_MAX};
  web.counters.dropped_packets = 9;
  web.workers.push_back({15, 0, 0});
  dataplane::RuleSnapshot hosts;
  hosts.name = "a.b-c";
  hosts.keyed = true;
  hosts.live_keys = 3;
  hosts.keys_starved = 2;
  hosts.worker_capacity = 4096;
  hosts.counters.keys_created = 4;
  hosts.counters.table_full = 6;
  hosts.workers.push_back({0, 1, 0});
  hosts.workers.push_back({0, 2, 6});
  s.rules = {web, hosts};
  s.defaults.packets = 10;
  s.defaults.non_ip = 4;
  s.defaults.no_match = 3;
  s.defaults.malformed[static_cast<std::size_t>(dataplane::ParseError::truncated_ipv4)] = 2;
  s.defaults.malformed[static_cast<std::size_t>(dataplane::ParseError::truncated_l4)] = 1;
  dataplane::PortSnapshot port;
  port.id = 3;
  port.name = "we\"ird\\na\nme";
  port.counters.rx_packets = 42;
  port.counters.imissed = 8;
  port.tx_dropped = 5;
  port.link_up = true;
  s.ports = {port};
  dataplane::WorkerSnapshot worker;
  worker.id = 0;
  worker.lcore = 1;
  worker.polls = 10;
  worker.idle_polls = 3;
  worker.handed_out = 11;
  worker.handed_in = 12;
  worker.generation_seen = 6;
  worker.shape_held_in = 20;
  worker.shape_released = 13;
  worker.shape_flushed = 2;
  worker.shape_overflow = 4;
  worker.shape_held = 5;
  s.workers = {worker};
  s.mbufs_in_use = 99;
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has_line(const std::string& text, const std::string& line) {
  const auto lines = lines_of(text);
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

TEST(Prometheus, CountersByRuleAndColorWithTheirValues) {
  const std::string text = prometheus_text(sample_snapshot(), {"1.2.3", 1795437022.25, 1795437100.5});
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_packets_total{rule="web",color="yellow"} 5)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_bytes_total{rule="web",color="red"} 18446744073709551615)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_dropped_packets_total{rule="web"} 9)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_set_generation 7)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_start_time_seconds 1795437022.25)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_set_last_change_timestamp_seconds 1795437100.5)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_build_info{version="1.2.3"} 1)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_mbufs_in_use 99)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rules 2)"));
}

TEST(Prometheus, KeysOnlyForPerKeyRules) {
  const std::string text = prometheus_text(sample_snapshot(), {});
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_keys{rule="a.b-c"} 3)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_worker_keys{rule="a.b-c",worker="1"} 2)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_keys_capacity_per_worker{rule="a.b-c"} 4096)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_keys_created_total{rule="a.b-c"} 4)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_table_full_packets_total{rule="a.b-c"} 6)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_rule_keys_starved_total{rule="a.b-c"} 2)"));
  EXPECT_EQ(text.find(R"(tricolor_rule_keys{rule="web"})"), std::string::npos);
}

TEST(Prometheus, DefaultActionByReasonAndMalformedByError) {
  const std::string text = prometheus_text(sample_snapshot(), {});
  EXPECT_TRUE(has_line(text, R"(tricolor_default_packets_total{reason="non_ip"} 4)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_default_packets_total{reason="no_match"} 3)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_default_packets_total{reason="malformed"} 3)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_malformed_packets_total{error="truncated_ipv4"} 2)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_malformed_packets_total{error="bad_ipv6_version"} 0)"));  // there at zero
  EXPECT_EQ(text.find(R"(error="none")"), std::string::npos);
}

TEST(Prometheus, PortsAndWorkers) {
  const std::string text = prometheus_text(sample_snapshot(), {});
  // The port's name escaped: quote, backslash and newline.
  EXPECT_TRUE(has_line(text, R"(tricolor_port_rx_packets_total{port="3",name="we\"ird\\na\nme"} 42)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_port_rx_missed_packets_total{port="3",name="we\"ird\\na\nme"} 8)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_port_tx_dropped_packets_total{port="3",name="we\"ird\\na\nme"} 5)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_port_link_up{port="3",name="we\"ird\\na\nme"} 1)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_worker_polls_total{worker="0",lcore="1",result="busy"} 7)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_worker_polls_total{worker="0",lcore="1",result="idle"} 3)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_worker_handoff_packets_total{worker="0",lcore="1",direction="in"} 12)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_worker_rule_set_generation{worker="0",lcore="1"} 6)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_worker_shape_packets_total{worker="0",lcore="1",event="held"} 20)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_worker_shape_packets_total{worker="0",lcore="1",event="released"} 13)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_worker_shape_packets_total{worker="0",lcore="1",event="flushed"} 2)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_worker_shape_dropped_packets_total{worker="0",lcore="1"} 4)"));
  EXPECT_TRUE(has_line(text, R"(tricolor_worker_shape_held_packets{worker="0",lcore="1"} 5)"));
}

// The format's rules: each family's HELP and TYPE once, before its samples, and its samples together;
// counters end in _total; no line is left without its newline.
TEST(Prometheus, FamiliesAreWholeAndDeclared) {
  const std::string text = prometheus_text(sample_snapshot(), {});
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::set<std::string> finished;
  std::string current, type;
  std::map<std::string, int> helps;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_EQ(++helps[name], 1) << name;
      if (!current.empty()) finished.insert(current);
      current = name;
      EXPECT_EQ(finished.count(name), 0u) << name << " comes back after another family";
    } else if (line.rfind("# TYPE ", 0) == 0) {
      EXPECT_EQ(line.substr(7, current.size() + 1), current + " ") << line;
      type = line.substr(7 + current.size() + 1);
      EXPECT_TRUE(type == "counter" || type == "gauge") << line;
      EXPECT_EQ(type == "counter", current.size() > 6 && current.ends_with("_total")) << current;
    } else {
      const std::string name = line.substr(0, line.find_first_of("{ "));
      EXPECT_EQ(name, current) << "a sample outside its family: " << line;
    }
  }
}

TEST(Prometheus, EscapesLabelValues) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(escape_label_value(""), "");
}

TEST(MetricsAddress, ReadsAddressAndPort) {
  auto v4 = parse_metrics_address("127.0.0.1:9400");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9400);
  EXPECT_EQ(v4->text(), "127.0.0.1:9400");
  auto v6 = parse_metrics_address("[::1]:65535");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 65535);
  EXPECT_EQ(v6->text(), "[::1]:65535");
  auto name = parse_metrics_address("localhost:1");
  ASSERT_TRUE(name);
  EXPECT_EQ(name->host, "localhost");
}

TEST(MetricsAddress, RefusesWithTheReason) {
  const std::pair<const char*, const char*> bad[] = {
      {"127.0.0.1", "expected ADDRESS:PORT"},
      {":9400", "the address is missing"},
      {"127.0.0.1:0", "from 1 to 65535"},
      {"127.0.0.1:65536", "from 1 to 65535"},
      {"127.0.0.1:94x", "from 1 to 65535"},
      {"127.0.0.1:", "from 1 to 65535"},
      {"::1:9400", "an IPv6 address goes in brackets"},
      {"[::1]9400", "expected [IPv6 address]:PORT"},
      {"[::1", "expected [IPv6 address]:PORT"},
      {"[]:9400", "the address is missing"},
  };
  for (const auto& [text, why] : bad) {
    auto parsed = parse_metrics_address(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_NE(parsed.error().message.find(why), std::string::npos) << text << ": " << parsed.error().message;
    EXPECT_NE(parsed.error().message.find("e.g. 127.0.0.1:9400"), std::string::npos) << parsed.error().message;
  }
}

// A control loop on a thread of its own, as tricolord's main lcore runs it.
class ControlLoop {
 public:
  explicit ControlLoop(ControlCalls& calls) : thread_([this, &calls] {
    id_ = std::this_thread::get_id();
    started_.store(true);
    while (!stop_.load()) {
      calls.run_pending();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }) {
    while (!started_.load()) std::this_thread::yield();
  }
  ~ControlLoop() {
    stop_.store(true);
    thread_.join();
  }
  std::thread::id id() const { return id_; }

 private:
  std::atomic<bool> stop_{false}, started_{false};
  std::thread::id id_;
  std::thread thread_;
};

TEST(ControlCalls, RunsTheJobOnTheControlThreadAndWaitsForIt) {
  ControlCalls calls;
  ControlLoop loop(calls);
  std::thread::id ran_on;
  int answer = 0;
  ASSERT_TRUE(calls.call([&] { ran_on = std::this_thread::get_id(), answer = 42; }, std::chrono::milliseconds(5000)));
  EXPECT_EQ(ran_on, loop.id());
  EXPECT_EQ(answer, 42);  // written before call() returned
}

TEST(ControlCalls, AJobNotStartedInTimeNeverRuns) {
  ControlCalls calls;
  bool ran = false;
  EXPECT_FALSE(calls.call([&] { ran = true; }, std::chrono::milliseconds(20)));  // no control loop
  calls.run_pending();  // the loop comes back: the withdrawn job is not there
  EXPECT_FALSE(ran);
}

TEST(ControlCalls, CloseAnswersTheWaitingAndLaterCalls) {
  ControlCalls calls;
  std::atomic<int> refused{0};
  std::thread waiter([&] {
    if (!calls.call([] {}, std::chrono::milliseconds(60'000))) ++refused;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  calls.close();
  waiter.join();  // long before its minute
  EXPECT_EQ(refused.load(), 1);
  bool ran = false;
  EXPECT_FALSE(calls.call([&] { ran = true; }, std::chrono::milliseconds(60'000)));
  calls.run_pending();
  EXPECT_FALSE(ran);
}

TEST(ControlCalls, AJobThatThrowsFailsItsCallerOnly) {
  ControlCalls calls;
  ControlLoop loop(calls);
  EXPECT_FALSE(calls.call([] { throw std::runtime_error("no memory"); }, std::chrono::milliseconds(5000)));
  int after = 0;
  EXPECT_TRUE(calls.call([&] { after = 1; }, std::chrono::milliseconds(5000)));
  EXPECT_EQ(after, 1);
}

// Many callers at once: every job runs once, on the control thread, never two at a time.
TEST(ControlCalls, ManyCallersEachRunOnce) {
  ControlCalls calls;
  ControlLoop loop(calls);
  int total = 0;  // touched by the control thread only: TSan would see two at a time
  std::atomic<int> wrong_thread{0}, failed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int i = 0; i < 300; ++i)
        if (!calls.call([&] { ++total, wrong_thread += std::this_thread::get_id() != loop.id(); },
                        std::chrono::milliseconds(30'000)))
          ++failed;
    });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong_thread.load(), 0);
  int seen = 0;
  ASSERT_TRUE(calls.call([&] { seen = total; }, std::chrono::milliseconds(5000)));
  EXPECT_EQ(seen, 1200);
}

}  // namespace
