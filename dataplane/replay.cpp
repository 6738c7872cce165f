// tricolor-replay: runs a policy over a capture, offline and deterministically, with the daemon's own
// engine (parse, classify, meter, act). The clock is the packets' timestamps at 1e9 ticks per second.
//
// Outputs: the forwarded packets as a pcap (remarked where the policy says so), a per-packet CSV
// (index,rule,key,in_color,out_color,action), a JSON summary per rule (per-key rules: their keys, the
// top N by red bytes or all), and a table on stdout.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "control/language.hpp"
#include "dataplane/capture.hpp"
#include "dataplane/demo.hpp"
#include "dataplane/eal.hpp"
#include "dataplane/engine.hpp"
#include "dataplane/keys.hpp"
#include "dataplane/parse.hpp"

namespace {

using namespace tricolor;
using namespace tricolor::dataplane;

constexpr std::uint64_t kTicksPerSecond = 1'000'000'000;  // capture timestamps are in ns
constexpr std::size_t kBurst = 32;
constexpr int kExitInput = 2;  // a policy or capture that cannot be used

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "tricolor-replay: " << message << "\n";
  std::exit(kExitInput);
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::string("cannot read the ") + what + " '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string action_text(const Verdict& v) {
  std::string text = v.drop ? "drop" : "forward";
  if (v.dscp_set) text += ";dscp=" + std::to_string(v.dscp);
  if (v.pcp_set) text += ";pcp=" + std::to_string(v.pcp);
  if (v.table_full) text += ";table-full";  // a new key found the rule's key table full: its fallback
  return text;
}

// The meter key of a packet of a per-key rule, read again from the frame (slow path, replay only).
std::string key_of(const PerKey& per, const PacketView& view) {
  MeterKey key;
  make_key(per, parse(view), key);
  return key_text(per, key);
}

nlohmann::ordered_json colors(const KeyCounters& c) {
  nlohmann::ordered_json out;
  for (Color color : {Color::green, Color::yellow, Color::red}) {
    const auto i = static_cast<std::size_t>(color);
    out[std::string(policer::to_string(color))] = {{"packets", c.packets[i]}, {"bytes", c.bytes[i]}};
  }
  return out;
}

nlohmann::ordered_json count(std::uint64_t packets, std::uint64_t bytes) {
  return {{"packets", packets}, {"bytes", bytes}};
}

// Per-key rules: how many keys, and the keys by red bytes (all of them, or the top `top`). Ranking
// works on the key bytes (ties broken by them: a deterministic order); only listed keys become text,
// so the top few of millions of keys cost a pass and a small heap.
nlohmann::ordered_json keys_summary(const Engine& engine, std::size_t rule, std::size_t top, bool all) {
  const RuleCounters& c = engine.counters(rule);
  const PerKey& per = engine.policy().rules[rule].per_key;
  struct Item {
    MeterKey key;
    KeyCounters counters;
  };
  auto before = [](const Item& a, const Item& b) {  // a ranks before b
    if (a.counters.bytes[2] != b.counters.bytes[2]) return a.counters.bytes[2] > b.counters.bytes[2];
    return a.key < b.key;
  };
  std::vector<Item> items;  // all, or a heap of the best `top` with the worst at the front
  engine.for_each_key(rule, [&](const MeterKey& key, const KeyCounters& counters) {
    const Item item{key, counters};
    if (all || items.size() < top) {
      items.push_back(item);
      if (!all) std::push_heap(items.begin(), items.end(), before);
    } else if (top != 0 && before(item, items.front())) {
      std::pop_heap(items.begin(), items.end(), before);
      items.back() = item;
      std::push_heap(items.begin(), items.end(), before);
    }
  });
  std::sort(items.begin(), items.end(), before);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Item& item : items) {
    nlohmann::ordered_json k;
    k["key"] = key_text(per, item.key);
    const nlohmann::ordered_json per_color = colors(item.counters);  // named: items() does not own it
    for (const auto& [name, value] : per_color.items()) k[name] = value;
    list.push_back(k);
  }
  return {{"live", engine.live_keys(rule)},          {"created", c.keys_created},
          {"renewed", c.keys_renewed},               {"table_full_packets", c.table_full},
          {"memory_bytes", engine.key_memory_bytes(rule)}, {all ? "all" : "top_by_red_bytes", list}};
}

nlohmann::ordered_json summary(const Engine& engine, std::uint64_t records, bool truncated, std::size_t top, bool all) {
  nlohmann::ordered_json out;
  out["capture"] = {{"packets", records}, {"truncated", truncated}};
  nlohmann::ordered_json rules = nlohmann::ordered_json::array();
  const Policy& policy = engine.policy();
  for (std::size_t r = 0; r < policy.rules.size(); ++r) {
    const RuleCounters& c = engine.counters(r);
    nlohmann::ordered_json rule;
    rule["name"] = policy.rules[r].name;
    rule["profile"] = policy.rules[r].profile;
    for (Color color : {Color::green, Color::yellow, Color::red}) {
      const auto i = static_cast<std::size_t>(color);
      rule[std::string(policer::to_string(color))] = count(c.packets[i], c.bytes[i]);
    }
    rule["dropped"] = count(c.dropped_packets, c.dropped_bytes);
    if (policy.rules[r].per_key.kind != KeyKind::none) rule["keys"] = keys_summary(engine, r, top, all);
    rules.push_back(rule);
  }
  out["rules"] = rules;
  const DefaultCounters& d = engine.default_counters();
  nlohmann::ordered_json malformed = nlohmann::ordered_json::object();
  for (std::size_t e = 0; e < kParseErrors; ++e)
    if (d.malformed[e] != 0) malformed[std::string(to_string(static_cast<ParseError>(e)))] = d.malformed[e];
  out["default"] = {{"packets", d.packets}, {"bytes", d.bytes},     {"non_ip", d.non_ip},
                    {"no_match", d.no_match}, {"malformed", malformed}, {"dropped", count(d.dropped_packets, d.dropped_bytes)}};
  return out;
}

void print_table(const Engine& engine, std::ostream& out) {
  const Policy& policy = engine.policy();
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %-10s %10s %12s %11s %12s %9s %12s %9s\n", "rule", "profile", "green_pkts",
                "green_bytes", "yellow_pkts", "yellow_bytes", "red_pkts", "red_bytes", "dropped");
  out << line;
  for (std::size_t r = 0; r < policy.rules.size(); ++r) {
    const RuleCounters& c = engine.counters(r);
    std::snprintf(line, sizeof line, "%-12s %-10s %10llu %12llu %11llu %12llu %9llu %12llu %9llu\n",
                  policy.rules[r].name.c_str(), policy.rules[r].profile.c_str(),
                  static_cast<unsigned long long>(c.packets[0]), static_cast<unsigned long long>(c.bytes[0]),
                  static_cast<unsigned long long>(c.packets[1]), static_cast<unsigned long long>(c.bytes[1]),
                  static_cast<unsigned long long>(c.packets[2]), static_cast<unsigned long long>(c.bytes[2]),
                  static_cast<unsigned long long>(c.dropped_packets));
    out << line;
  }
  const DefaultCounters& d = engine.default_counters();
  std::uint64_t malformed = 0;
  for (std::uint64_t m : d.malformed) malformed += m;
  std::snprintf(line, sizeof line, "(default)    %llu packets, %llu bytes: %llu not IP, %llu matching no rule, %llu malformed; %llu dropped\n",
                static_cast<unsigned long long>(d.packets), static_cast<unsigned long long>(d.bytes),
                static_cast<unsigned long long>(d.non_ip), static_cast<unsigned long long>(d.no_match),
                static_cast<unsigned long long>(malformed), static_cast<unsigned long long>(d.dropped_packets));
  out << line;
  for (std::size_t r = 0; r < policy.rules.size(); ++r) {
    if (policy.rules[r].per_key.kind == KeyKind::none) continue;
    const RuleCounters& c = engine.counters(r);
    std::snprintf(line, sizeof line, "(keys)       %s: %zu live, %llu created, %llu renewed, %llu packets found the table full\n",
                  policy.rules[r].name.c_str(), engine.live_keys(r), static_cast<unsigned long long>(c.keys_created),
                  static_cast<unsigned long long>(c.keys_renewed), static_cast<unsigned long long>(c.table_full));
    out << line;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tricolor-replay: run a tricolor policy over a pcap or pcapng capture, offline and deterministically"};
  std::string policy_path, capture_path, out_path, csv_path, json_path, demo_dir;
  bool table = false, all_keys = false;
  std::size_t top_keys = 10;
  std::uint64_t demo_seconds = 3, demo_seed = 1;
  app.add_option("-p,--policy", policy_path, "policy file in the command language");
  app.add_option("-i,--in", capture_path, "input capture (pcap or pcapng; the pcapng interface is the ingress port)");
  app.add_option("-o,--out", out_path, "write the forwarded packets (remarked) as a nanosecond pcap");
  app.add_option("--csv", csv_path, "write one line per packet: index,rule,key,in_color,out_color,action");
  app.add_option("--json", json_path, "write the summary per rule as JSON");
  app.add_option("--top-keys", top_keys, "per-key rules: list this many keys in the JSON, by red bytes (default 10)");
  app.add_flag("--all-keys", all_keys, "per-key rules: list every live key in the JSON");
  app.add_flag("--table", table, "print the per-rule table on stdout (the default when no output is asked for)");
  app.add_option("--demo", demo_dir,
                 "generate an example capture and policy into DIR, replay them with every output in DIR, print the table");
  app.add_option("--demo-seconds", demo_seconds, "seconds of generated traffic for --demo")->check(CLI::Range(1, 600));
  app.add_option("--demo-seed", demo_seed, "seed of the generated traffic for --demo");
  CLI11_PARSE(app, argc, argv);

  if (!demo_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(demo_dir, ec);
    if (ec) fail("cannot create '" + demo_dir + "': " + ec.message());
    policy_path = demo_dir + "/demo.policy";
    capture_path = demo_dir + "/demo.pcap";
    out_path = demo_dir + "/forwarded.pcap";
    csv_path = demo_dir + "/packets.csv";
    json_path = demo_dir + "/summary.json";
    table = true;
    if (auto ok = write_demo_policy(policy_path); !ok) fail(ok.error().message);
    auto written = write_demo_capture(capture_path, demo_seconds, demo_seed);
    if (!written) fail(written.error().message);
    std::cout << "tricolor-replay --demo: " << *written << " packets over " << demo_seconds << " s in " << capture_path
              << ", policy " << policy_path << "\n\n"
              << demo_policy() << "\n";
  }
  if (policy_path.empty() || capture_path.empty()) {
    std::cerr << app.help() << "\ntricolor-replay: --policy and --in are required (or --demo DIR)\n";
    return 1;
  }
  if (out_path.empty() && csv_path.empty() && json_path.empty()) table = true;

  auto policy = control::load(read_file(policy_path, "policy"));
  if (!policy) fail("policy '" + policy_path + "': " + policy.error().message);
  auto reader = CaptureReader::open(capture_path);
  if (!reader) fail(reader.error().message);

  std::unique_ptr<CaptureWriter> writer;
  if (!out_path.empty()) {
    auto opened = CaptureWriter::open(out_path);
    if (!opened) fail(opened.error().message);
    writer = std::move(*opened);
  }
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    if (!csv) fail("cannot write '" + csv_path + "'");
    csv << "index,rule,key,in_color,out_color,action\n";
  }

  auto eal = MemoryOnlyEal::init("tricolor-replay");
  if (!eal) fail(eal.error().message);

  std::vector<CaptureRecord> records(kBurst);
  std::size_t pending = 0;
  bool more = (*reader)->next(records[0]);
  pending = more ? 1 : 0;
  const std::uint64_t start = more ? records[0].timestamp_ns : 0;
  auto engine = Engine::create(*policy, *policer::TickRate::make(kTicksPerSecond), start);
  if (!engine) fail("policy '" + policy_path + "': " + engine.error().message);

  std::uint64_t index = 0;
  PacketView views[kBurst];
  Verdict verdicts[kBurst];
  while (pending > 0) {
    while (pending < kBurst && (more = (*reader)->next(records[pending]))) ++pending;
    for (std::size_t i = 0; i < pending; ++i) {
      CaptureRecord& r = records[i];
      views[i] = PacketView{r.data.data(), static_cast<std::uint32_t>(r.data.size()), r.wire_length, r.timestamp_ns,
                            r.interface, 0, false};
    }
    (*engine)->process(std::span<PacketView>(views, pending), std::span<Verdict>(verdicts, pending));
    const Policy& p = (*engine)->policy();
    for (std::size_t i = 0; i < pending; ++i, ++index) {
      const Verdict& v = verdicts[i];
      if (csv.is_open()) {
        const bool ruled = v.rule != kNoRule;
        const bool aware = ruled && p.rules[v.rule].input != InputColor::blind;
        const bool keyed = ruled && p.rules[v.rule].per_key.kind != KeyKind::none;
        const bool metered = !(v.table_full && p.rules[v.rule].per_key.fallback != KeyFallback::aggregate);
        csv << index << ',' << (ruled ? p.rules[v.rule].name : "-") << ','
            << (keyed ? key_of(p.rules[v.rule].per_key, views[i]) : "-") << ','
            << (aware ? policer::to_string(v.in) : "-") << ','
            << (ruled && metered ? policer::to_string(v.out) : "-") << ',' << action_text(v) << '\n';
      }
      if (writer && !v.drop) writer->write(records[i]);
    }
    pending = 0;
    if (more && (more = (*reader)->next(records[0]))) pending = 1;
  }

  const bool truncated = (*reader)->truncated();
  if (truncated)
    std::cerr << "tricolor-replay: '" << capture_path << "': reading stopped after " << index << " packets ("
              << (*reader)->stop_reason() << "); the results cover what was read\n";
  if (writer) {
    if (auto closed = writer->close(); !closed) fail(closed.error().message);
  }
  if (csv.is_open()) {
    csv.close();
    if (!csv) fail("cannot write '" + csv_path + "'");
  }
  if (!json_path.empty()) {
    std::ofstream json(json_path);
    json << summary(**engine, index, truncated, top_keys, all_keys).dump(2) << '\n';
    json.close();
    if (!json) fail("cannot write '" + json_path + "'");
  }
  if (table) print_table(**engine, std::cout);
  return 0;
}
