#include "control/telemetry/telemetry_endpoints.hpp"

#include <rte_telemetry.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string_view>
#include <vector>

#include "dataplane/engine/key_query.hpp"
#include "dataplane/engine/keys.hpp"

namespace tricolor::control {
namespace {

using dataplane::DaemonSnapshot;

// The longest a telemetry client waits for the control thread (a large `load` may hold it).
constexpr auto kAnswerTimeout = std::chrono::milliseconds(2000);
// A telemetry reply holds 16 KB of JSON; what we add is counted against a little less, so that DPDK
// never cuts a reply short without saying.
constexpr std::size_t kReplyBudget = 15 * 1024;
constexpr std::size_t kDefaultKeys = 10;
constexpr std::size_t kMaxKeys = 200;  // about what a reply holds
constexpr const char* kColors[3] = {"green", "yellow", "red"};

std::shared_mutex g_lock;                  // held shared by a callback, exclusively by unregister
const TelemetrySources* g_sources = nullptr;

// DPDK 22.11 takes only letters, digits, `_` and `/` in a dictionary's names, and nests dictionaries
// in a dictionary, not in an array. Rule names (`.`, `-`) and keys ("10.2.0.1") are values, then: a
// list of rules or keys is a table of columns, {"name": [...], "green_packets": [...], ...}, row i
// across the columns. Built as plain data on the control thread, turned into rte_tel_data on DPDK's,
// with the JSON's size counted as it grows.
struct Dict {
  std::vector<std::pair<std::string, std::uint64_t>> numbers;
  std::vector<std::pair<std::string, std::string>> strings;
  void add(std::string name, std::uint64_t value) { numbers.emplace_back(std::move(name), value); }
  void add(std::string name, std::string value) { strings.emplace_back(std::move(name), std::move(value)); }
  void into(rte_tel_data* d) const {
    rte_tel_data_start_dict(d);
    for (const auto& [name, value] : strings) rte_tel_data_add_dict_string(d, name.c_str(), value.c_str());
    for (const auto& [name, value] : numbers) rte_tel_data_add_dict_u64(d, name.c_str(), value);
  }
};

class Table {
 public:
  // `label`: the column of names ("name", "key"); `columns`: the numbers' columns, in order.
  Table(std::string label, std::vector<std::string> columns) : label_(std::move(label)), columns_(std::move(columns)) {
    values_.resize(columns_.size());
    bytes_ = 2 + label_.size() + 6;
    for (const std::string& c : columns_) bytes_ += c.size() + 6;
  }
  // A row, unless the reply would grow past the budget or the arrays past DPDK's limit.
  bool add(std::string name, const std::vector<std::uint64_t>& row) {
    const std::size_t grows = name.size() + 4 + row.size() * 22;
    if (bytes_ + grows > kReplyBudget || names_.size() == RTE_TEL_MAX_ARRAY_ENTRIES) return false;
    bytes_ += grows;
    names_.push_back(std::move(name));
    for (std::size_t c = 0; c < row.size(); ++c) values_[c].push_back(row[c]);
    return true;
  }
  int into(rte_tel_data* d) const {
    rte_tel_data_start_dict(d);
    rte_tel_data* names = rte_tel_data_alloc();
    if (names == nullptr) return -ENOMEM;
    rte_tel_data_start_array(names, RTE_TEL_STRING_VAL);
    for (const std::string& name : names_) rte_tel_data_add_array_string(names, name.c_str());
    rte_tel_data_add_dict_container(d, label_.c_str(), names, 0);  // d owns it now
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      rte_tel_data* column = rte_tel_data_alloc();
      if (column == nullptr) return -ENOMEM;
      rte_tel_data_start_array(column, RTE_TEL_U64_VAL);
      for (std::uint64_t v : values_[c]) rte_tel_data_add_array_u64(column, v);
      rte_tel_data_add_dict_container(d, columns_[c].c_str(), column, 0);
    }
    return 0;
  }

 private:
  std::string label_;
  std::vector<std::string> columns_;
  std::vector<std::string> names_;
  std::vector<std::vector<std::uint64_t>> values_;
  std::size_t bytes_ = 0;
};

// A reply: one string (an error), one dictionary, or a table.
struct Answer {
  std::optional<std::string> error;
  Dict dict;
  std::optional<Table> table;
};

int reply(const Answer& answer, rte_tel_data* d) {
  if (answer.error) return rte_tel_data_string(d, answer.error->c_str());
  if (answer.table) return answer.table->into(d);
  answer.dict.into(d);
  return 0;
}

// Runs `fill` on the control thread, then replies with what it filled.
template <typename Fill>
int answer_with(rte_tel_data* d, Fill fill) {
  std::shared_lock lock(g_lock);
  Answer answer;
  if (g_sources == nullptr || !g_sources->calls->call([&] { fill(*g_sources, answer); }, kAnswerTimeout))
    answer.error = "tricolord is stopping, or its control thread is busy (a large load): try again";
  return reply(answer, d);
}

// A name the client gave, for an error: DPDK 22.11 does not escape strings in its JSON, so only a name
// a rule could have is repeated.
std::string named(std::string_view name) {
  const bool plain = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
  return plain ? std::string(name) : std::string("by that name");
}

void add_colors(Dict& dict, const std::array<std::uint64_t, 3>& packets, const std::array<std::uint64_t, 3>* bytes) {
  for (std::size_t c = 0; c < 3; ++c) dict.add(std::string(kColors[c]) + "_packets", packets[c]);
  if (bytes)
    for (std::size_t c = 0; c < 3; ++c) dict.add(std::string(kColors[c]) + "_bytes", (*bytes)[c]);
}

int stats(const char*, const char*, rte_tel_data* d) {
  return answer_with(d, [](const TelemetrySources& sources, Answer& a) {
    const DaemonSnapshot s = sources.snapshot(dataplane::kReportAll);
    Dict& out = a.dict;
    const DaemonFacts facts = sources.facts();
    out.add("version", facts.version);
    out.add("uptime_s", static_cast<std::uint64_t>(s.elapsed_s));
    out.add("rules", s.rules.size());
    out.add("generation", s.generation);
    out.add("last_change_unix_s", static_cast<std::uint64_t>(facts.last_change_time_s));
    out.add("workers", s.workers.size());
    out.add("packets", s.worker.packets);
    out.add("policy_dropped_packets", s.worker.policy_drops);
    out.add("busy_polls", s.worker.polls - s.worker.idle_polls);
    out.add("idle_polls", s.worker.idle_polls);
    std::array<std::uint64_t, 3> by_color{};
    std::uint64_t dropped = 0, queue_overflow = 0;
    for (const auto& rule : s.rules) {
      for (std::size_t c = 0; c < 3; ++c) by_color[c] += rule.counters.packets[c];
      dropped += rule.counters.dropped_packets;
      queue_overflow += rule.counters.queue_overflow_packets;
    }
    add_colors(out, by_color, nullptr);
    out.add("rules_dropped_packets", dropped);
    std::uint64_t malformed = 0;
    for (std::uint64_t m : s.defaults.malformed) malformed += m;
    out.add("default_packets", s.defaults.packets);
    out.add("default_non_ip_packets", s.defaults.non_ip);
    out.add("default_no_match_packets", s.defaults.no_match);
    out.add("default_malformed_packets", malformed);
    out.add("default_dropped_packets", s.defaults.dropped_packets);
    out.add("shape_held_packets", s.worker.shape_held);
    out.add("shape_held_in_packets", s.worker.shape_held_in);
    out.add("shape_released_packets", s.worker.shape_released);
    out.add("shape_flushed_packets", s.worker.shape_flushed);
    out.add("shape_dropped_packets", s.worker.shape_overflow);
    out.add("shape_queue_overflow_packets", queue_overflow);  // over the rules: their queue N was full
    out.add("mbufs_in_use", s.mbufs_in_use);
  });
}

Dict rule_dict(const dataplane::RuleSnapshot& rule) {
  Dict dict;
  dict.add("name", rule.name);
  add_colors(dict, rule.counters.packets, &rule.counters.bytes);
  dict.add("dropped_packets", rule.counters.dropped_packets);
  dict.add("dropped_bytes", rule.counters.dropped_bytes);
  if (rule.shaping) {
    dict.add("shaped_packets", rule.counters.shaped_packets);
    dict.add("queue_overflow_packets", rule.counters.queue_overflow_packets);
  }
  if (rule.max_flows) {
    dict.add("flows_opened", rule.counters.flows_opened);
    dict.add("flows_refused", rule.counters.flows_refused);
  }
  if (rule.keyed) {
    dict.add("live_keys", rule.live_keys);
    dict.add("keys_created", rule.counters.keys_created);
    dict.add("keys_renewed", rule.counters.keys_renewed);
    dict.add("table_full_packets", rule.counters.table_full);
    dict.add("keys_starved", rule.keys_starved);
  }
  return dict;
}

int rules(const char*, const char* params, rte_tel_data* d) {
  const std::string name = params ? params : "";
  return answer_with(d, [&](const TelemetrySources& sources, Answer& a) {
    const DaemonSnapshot s = sources.snapshot(dataplane::kReportRules);
    if (!name.empty()) {
      for (const auto& rule : s.rules)
        if (rule.name == name) {
          a.dict = rule_dict(rule);
          return;
        }
      a.error = "no rule named " + named(name);
      return;
    }
    a.table.emplace("name", std::vector<std::string>{"green_packets", "yellow_packets", "red_packets", "dropped_packets"});
    for (const auto& rule : s.rules) {
      const auto& c = rule.counters;
      if (!a.table->add(rule.name, {c.packets[0], c.packets[1], c.packets[2], c.dropped_packets})) break;  // /tricolor/stats counts them
    }
  });
}

int keys(const char*, const char* params, rte_tel_data* d) {
  const std::string_view text = params ? params : "";
  const auto comma = text.find(',');
  const std::string name(text.substr(0, comma));
  std::size_t top = kDefaultKeys;
  if (comma != std::string_view::npos) {
    const std::string_view count = text.substr(comma + 1);
    const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), top);
    if (ec != std::errc{} || end != count.data() + count.size() || top == 0 || top > kMaxKeys)
      return rte_tel_data_string(d, "usage: /tricolor/keys,RULE[,N] with N from 1 to 200");
  }
  if (name.empty()) return rte_tel_data_string(d, "usage: /tricolor/keys,RULE[,N]: a per-key rule's top N keys (10) by red bytes");
  return answer_with(d, [&](const TelemetrySources& sources, Answer& a) {
    const dataplane::Policy& policy = sources.engine->policy();
    for (std::size_t r = 0; r < policy.rules.size(); ++r) {
      if (policy.rules[r].name != name) continue;
      const dataplane::PerKey& per = policy.rules[r].per_key;
      if (per.kind == dataplane::KeyKind::none) {
        a.error = "rule " + name + " has no per-key meters";
        return;
      }
      a.table.emplace("key", std::vector<std::string>{"worker", "green_packets", "yellow_packets", "red_packets",
                                                      "green_bytes", "yellow_bytes", "red_bytes"});
      for (const auto& k : dataplane::rank_keys(*sources.engine, r, dataplane::KeyOrder::red_bytes, top)) {
        const auto& c = k.counters;
        if (!a.table->add(dataplane::key_text(per, k.key), {k.worker, c.packets[0], c.packets[1], c.packets[2], c.bytes[0],
                                                            c.bytes[1], c.bytes[2]}))
          break;
      }
      return;
    }
    a.error = "no rule named " + named(name);
  });
}

}  // namespace

void register_telemetry_endpoints(const TelemetrySources& sources) {
  {
    std::unique_lock lock(g_lock);
    g_sources = &sources;
  }
  static const bool registered = [] {
    rte_telemetry_register_cmd("/tricolor/stats", stats,
                               "tricolord: version, rules, generation, last change, packets by color and default reason");
    rte_telemetry_register_cmd("/tricolor/rules", rules,
                               "tricolord's rules: packets by color and dropped. Parameter: a rule's name for that rule in full");
    rte_telemetry_register_cmd("/tricolor/keys", keys,
                               "A per-key rule's top keys by red bytes. Parameters: RULE[,N] (N keys, 10 unless said)");
    return true;
  }();
  (void)registered;
}

void unregister_telemetry_endpoints() {
  std::unique_lock lock(g_lock);
  g_sources = nullptr;
}

}  // namespace tricolor::control
