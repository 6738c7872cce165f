#include "dataplane/replay/replay_report.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/engine/key_query.hpp"
#include "dataplane/engine/keys.hpp"

namespace tricolor::dataplane {
namespace {

// JSON written as it goes, laid out as nlohmann's dump(2) lays out a document (two spaces a level):
// numbers, booleans and strings, which is all a summary holds.
class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  void begin_object() { open('{', '}'); }
  void begin_array() { open('[', ']'); }
  void begin_object(std::string_view name) { key(name), begin_object(); }
  void begin_array(std::string_view name) { key(name), begin_array(); }
  void end() {
    const Level level = levels_.back();
    levels_.pop_back();
    if (!level.empty) {
      out_ << '\n';
      indent();
    }
    out_ << level.closer;
    if (levels_.empty()) out_ << '\n';
  }
  void field(std::string_view name, std::uint64_t value) {
    key(name);
    separate();  // ends the key
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
    out_.write(digits, end - digits);
  }
  void boolean(std::string_view name, bool value) {  // not an overload: a pointer would become a bool
    key(name);
    separate();
    out_ << (value ? "true" : "false");
  }
  void field(std::string_view name, std::string_view value) {
    key(name);
    separate();
    string(value);
  }

 private:
  struct Level {
    char closer;
    bool empty;
  };

  void open(char opener, char closer) {
    separate();
    out_ << opener;
    levels_.push_back({closer, true});
  }
  void key(std::string_view name) {
    separate();
    string(name);
    out_ << ": ";
    after_key_ = true;
  }
  // A JSON string: quotes, backslashes and control characters escaped (RFC 8259); other bytes as they
  // are (names and keys are ASCII).
  void string(std::string_view text) {
    out_ << '"';
    for (const char c : text) {
      if (c == '"' || c == '\\') {
        out_ << '\\' << c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
        out_ << escaped;
      } else {
        out_ << c;
      }
    }
    out_ << '"';
  }
  // Before an element: a comma after the previous one, a new line, the indentation; nothing between a
  // key and its value.
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (levels_.empty()) return;
    Level& level = levels_.back();
    out_ << (level.empty ? "\n" : ",\n");
    level.empty = false;
    indent();
  }
  void indent() { out_ << std::string_view(kSpaces).substr(0, std::min(2 * levels_.size(), kSpaces.size())); }

  static constexpr std::string_view kSpaces = "                    ";  // 10 levels: deeper than we go

  std::ostream& out_;
  std::vector<Level> levels_;
  bool after_key_ = false;
};

void write_count(JsonWriter& json, std::string_view name, std::uint64_t packets, std::uint64_t bytes) {
  json.begin_object(name);
  json.field("packets", packets);
  json.field("bytes", bytes);
  json.end();
}

void write_colors(JsonWriter& json, const std::array<std::uint64_t, 3>& packets,
                  const std::array<std::uint64_t, 3>& bytes) {
  for (Color color : {Color::green, Color::yellow, Color::red}) {
    const auto i = static_cast<std::size_t>(color);
    write_count(json, policer::to_string(color), packets[i], bytes[i]);
  }
}

// Per-key rules: how many keys, their memory, and the keys by red bytes (all of them, or the top
// `top`; key_query.hpp ranks them).
void write_keys(JsonWriter& json, const Engine& engine, std::size_t rule, std::size_t top, bool all) {
  const RuleCounters& c = engine.counters(rule);
  const PerKey& per = engine.policy().rules[rule].per_key;
  const std::vector<RankedKey> items =
      rank_keys(engine, rule, KeyOrder::red_bytes, all ? std::nullopt : std::optional<std::size_t>(top));

  json.begin_object("keys");
  json.field("live", engine.live_keys(rule));
  json.field("created", c.keys_created);
  json.field("renewed", c.keys_renewed);
  json.field("table_full_packets", c.table_full);
  json.field("memory_bytes", engine.key_memory_bytes(rule));
  json.field("index_bytes", engine.key_index_bytes(rule));  // fixed from the rule's installation
  json.field("entry_bytes", engine.key_entry_bytes(rule));  // follows the live keys
  json.field("spare_bytes", engine.key_spare_bytes(rule));  // chunks kept ready for new keys
  json.field("starved_packets", engine.keys_starved(rule));  // new keys no ready chunk could take
  if (per.max_flows != 0) {
    // Flows per key: the open ones (summed over the live keys), and what happened to flows so far.
    std::uint64_t open = 0;
    engine.for_each_key(rule, [&](const Engine::LiveKey& live) { open += live.counters.open_flows; });
    json.begin_object("flows");
    json.field("max_per_key", std::uint64_t{per.max_flows});
    json.field("open", open);
    json.field("opened", c.flows_opened);
    json.field("closed", c.flows_closed);    // by a TCP FIN or RST
    json.field("expired", c.flows_expired);  // idle past flow-timeout
    json.field("refused_packets", c.flows_refused);
    json.field("table_full_packets", c.flow_table_full);
    json.end();
  }
  json.begin_array(all ? "all" : "top_by_red_bytes");
  for (const RankedKey& item : items) {
    json.begin_object();
    json.field("key", std::string_view(key_text(per, item.key)));
    if (per.max_flows != 0) json.field("open_flows", std::uint64_t{item.counters.open_flows});
    write_colors(json, item.counters.packets, item.counters.bytes);
    json.end();
  }
  json.end();
  json.end();
}

// A shaping rule: its packets held, late (dropped: they would have waited past max-delay) and the
// delays of those it forwarded, as nearest-rank percentiles (ns; 0 for a packet that left at once).
void write_shaping(JsonWriter& json, const Rule& rule, const RuleCounters& c, const std::vector<std::uint32_t>* delays) {
  json.begin_object("shaping");
  const Action& red = rule.on_color[static_cast<std::size_t>(Color::red)];
  json.field("max_delay_ns", *red.shape_max_delay_ns);
  if (red.shape_queue) json.field("queue_packets", std::uint64_t{*red.shape_queue});  // queue N, when given
  json.field("held_packets", c.shaped_packets);
  json.field("late_packets", c.packets[static_cast<std::size_t>(Color::red)] - c.queue_overflow_packets);
  json.field("queue_overflow_packets", c.queue_overflow_packets);  // red too: its queue N was full
  std::vector<std::uint32_t> sorted = delays != nullptr ? *delays : std::vector<std::uint32_t>{};
  std::sort(sorted.begin(), sorted.end());
  json.begin_object("delay_ns");
  for (const auto& [name, percent] : {std::pair<std::string_view, std::uint64_t>{"p50", 50}, {"p90", 90}, {"p99", 99}, {"max", 100}}) {
    const std::size_t rank = (percent * sorted.size() + 99) / 100;  // nearest rank, 1-based
    json.field(name, sorted.empty() ? 0 : std::uint64_t{sorted[std::max<std::size_t>(rank, 1) - 1]});
  }
  json.end();
  json.end();
}

}  // namespace

void write_summary_json(const Engine& engine, const SummaryOptions& options, std::ostream& out) {
  JsonWriter json(out);
  json.begin_object();
  json.begin_object("capture");
  json.field("packets", options.records);
  json.boolean("truncated", options.truncated);
  json.end();

  json.begin_array("rules");
  const Policy& policy = engine.policy();
  for (std::size_t r = 0; r < policy.rules.size(); ++r) {
    const RuleCounters& c = engine.counters(r);
    json.begin_object();
    json.field("name", policy.rules[r].name);
    json.field("profile", policy.rules[r].profile);
    write_colors(json, c.packets, c.bytes);
    write_count(json, "dropped", c.dropped_packets, c.dropped_bytes);
    if (policy.rules[r].on_color[static_cast<std::size_t>(Color::red)].shape_max_delay_ns) {
      const std::vector<std::uint32_t>* delays = nullptr;
      if (options.shaped_delays != nullptr)
        if (const auto found = options.shaped_delays->find(policy.rules[r].name); found != options.shaped_delays->end())
          delays = &found->second;
      write_shaping(json, policy.rules[r], c, delays);
    }
    if (policy.rules[r].per_key.kind != KeyKind::none) write_keys(json, engine, r, options.top_keys, options.all_keys);
    json.end();
  }
  json.end();

  const DefaultCounters& d = engine.default_counters();
  json.begin_object("default");
  json.field("packets", d.packets);
  json.field("bytes", d.bytes);
  json.field("non_ip", d.non_ip);
  json.field("no_match", d.no_match);
  json.begin_object("malformed");
  for (std::size_t e = 0; e < kParseErrors; ++e)
    if (d.malformed[e] != 0) json.field(to_string(static_cast<ParseError>(e)), d.malformed[e]);
  json.end();
  write_count(json, "dropped", d.dropped_packets, d.dropped_bytes);
  json.end();
  json.end();
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

}  // namespace tricolor::dataplane
