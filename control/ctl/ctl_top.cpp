#include "control/ctl/ctl_top.hpp"

#include "control/language/language_internal.hpp"
#include "policer/quote.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "control/ctl/terminal_text.hpp"

namespace tricolor::control {

namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;  // output: fields in the order of the columns

// ---- samples ---------------------------------------------------------------------------------------

enum Counter : std::size_t { kGreen, kYellow, kRed, kDropped, kCounters };
constexpr std::array<std::string_view, kCounters> kCounterNames{"green", "yellow", "red", "dropped"};

enum class Mode { rules, keys };

struct Row {
  std::string name;                // the rule's name, or the key
  std::optional<unsigned> worker;  // keys: the worker whose table holds it
  std::array<std::uint64_t, kCounters> packets{}, bytes{};
  std::optional<std::uint64_t> live_keys;  // per-key rules
  std::string identity() const { return worker ? name + '@' + std::to_string(*worker) : name; }
};

struct Sample {
  double at_s = 0;  // rules: the daemon's elapsed_s; keys: the client's clock
  std::vector<Row> rows;
  std::uint64_t live_keys = 0;  // keys: the rule's live keys, all of them
};

// The daemon's replies are read with accessors that do not throw: a reply that is not what it should
// be is "a broken reply" (exit status 3), never an exception out of top.

// A counter of `object`: absent is 0 (a key's listing has no dropped counters, an older daemon may
// lack one), anything but an unsigned number is a broken reply.
std::optional<Error> read_count(const json& object, std::string_view field, std::string_view what, std::uint64_t& out) {
  const auto it = object.find(field);
  if (it == object.end()) return std::nullopt;
  if (!it->is_number_unsigned())
    return broken_reply(std::string(what) + ": " + std::string(field) + " is not a count");
  out = it->get<std::uint64_t>();
  return std::nullopt;
}

Expected<json> parse_result(const Answer& answer, std::string_view what) {
  json doc = json::parse(answer.reply.result_json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return broken_reply(std::string(what) + " without a JSON result");
  return doc;
}

// The list `field` of the result, or why it is not one.
Expected<const json*> list_of(const json& doc, std::string_view field, std::string_view what) {
  const auto it = doc.find(field);
  if (it == doc.end() || !it->is_array()) return broken_reply(std::string(what) + " without a list of " + std::string(field));
  return &*it;
}

// A row of `item` (a rule of stats, or a key of key list): its name in `label`, the counters of
// `counters` colors.
Expected<Row> parse_row(const json& item, std::string_view label, std::size_t counters, std::string_view what) {
  if (!item.is_object()) return broken_reply(std::string(what) + ": an entry that is not an object");
  const auto name = item.find(label);
  if (name == item.end() || !name->is_string())
    return broken_reply(std::string(what) + ": an entry whose " + std::string(label) + " is not a string");
  Row row;
  row.name = name->get<std::string>();
  for (std::size_t c = 0; c < counters; ++c) {
    const std::string color(kCounterNames[c]);
    if (auto bad = read_count(item, color + "_packets", what, row.packets[c])) return *bad;
    if (auto bad = read_count(item, color + "_bytes", what, row.bytes[c])) return *bad;
  }
  return row;
}

Expected<Sample> parse_stats(const Answer& answer) {
  auto doc = parse_result(answer, "stats");
  if (!doc) return doc.error();
  const auto elapsed = doc->find("elapsed_s");
  if (elapsed == doc->end() || !elapsed->is_number() || !std::isfinite(elapsed->get<double>()))
    return broken_reply("stats without elapsed_s");
  auto rules = list_of(*doc, "rules", "stats");
  if (!rules) return rules.error();
  Sample sample;
  sample.at_s = elapsed->get<double>();
  for (const json& rule : **rules) {
    auto row = parse_row(rule, "name", kCounters, "stats");
    if (!row) return row.error();
    if (const auto keys = rule.find("keys"); keys != rule.end()) {
      std::uint64_t live = 0;
      if (!keys->is_object()) return broken_reply("stats: a rule whose keys is not an object");
      if (auto bad = read_count(*keys, "live", "stats", live)) return *bad;
      row->live_keys = live;
    }
    sample.rows.push_back(std::move(*row));
  }
  return sample;
}

Expected<Sample> parse_keys(const Answer& answer, double at_s) {
  auto doc = parse_result(answer, "key list");
  if (!doc) return doc.error();
  auto keys = list_of(*doc, "keys", "key list");
  if (!keys) return keys.error();
  Sample sample;
  sample.at_s = at_s;
  if (auto bad = read_count(*doc, "live_keys", "key list", sample.live_keys)) return *bad;
  for (const json& key : **keys) {
    // A key's drops are its red packets (or not): not listed.
    auto row = parse_row(key, "key", kDropped, "key list");
    if (!row) return row.error();
    if (const auto worker = key.find("worker"); worker != key.end()) {
      if (!worker->is_number_unsigned() || worker->get<std::uint64_t>() > std::numeric_limits<unsigned>::max())
        return broken_reply("key list: a key whose worker is not a worker's number");
      row->worker = worker->get<unsigned>();
    }
    sample.rows.push_back(std::move(*row));
  }
  return sample;
}

// ---- rates -----------------------------------------------------------------------------------------

struct Rates {
  const Row* row = nullptr;  // of the newer sample
  bool known = false;        // a previous sample of the row, counters not gone back (reset)
  std::array<double, kCounters> pps{}, bps{};
};

std::vector<Rates> rates(const Sample& before, const Sample& now) {
  std::unordered_map<std::string, const Row*> previous;
  for (const Row& row : before.rows) previous.emplace(row.identity(), &row);
  const double seconds = now.at_s - before.at_s;
  std::vector<Rates> out;
  for (const Row& row : now.rows) {
    Rates r{.row = &row};
    const auto it = previous.find(row.identity());
    if (it != previous.end() && seconds > 0) {
      const Row& old = *it->second;
      r.known = true;
      for (std::size_t c = 0; c < kCounters; ++c) {
        if (row.packets[c] < old.packets[c] || row.bytes[c] < old.bytes[c]) r.known = false;
        r.pps[c] = static_cast<double>(row.packets[c] - old.packets[c]) / seconds;
        r.bps[c] = static_cast<double>(row.bytes[c] - old.bytes[c]) * 8 / seconds;
      }
    }
    out.push_back(r);
  }
  return out;
}

// ---- columns ---------------------------------------------------------------------------------------

struct Column {
  std::string name;  // for --sort, and (upper-case) the header
  enum Kind { label, worker, pps, bps, keys } kind;
  Counter counter = kGreen;
};

std::vector<Column> columns(Mode mode) {
  std::vector<Column> out;
  out.push_back({mode == Mode::rules ? "name" : "key", Column::label});
  if (mode == Mode::keys) out.push_back({"worker", Column::worker});
  const std::size_t colors = mode == Mode::rules ? kCounters : kDropped;
  for (std::size_t c = 0; c < colors; ++c) {
    out.push_back({std::string(kCounterNames[c]) + "-pps", Column::pps, static_cast<Counter>(c)});
    out.push_back({std::string(kCounterNames[c]) + "-bps", Column::bps, static_cast<Counter>(c)});
  }
  if (mode == Mode::rules) out.push_back({"keys", Column::keys});
  return out;
}

std::optional<double> number(const Column& column, const Rates& r) {
  switch (column.kind) {
    case Column::pps: return r.known ? std::optional(r.pps[column.counter]) : std::nullopt;
    case Column::bps: return r.known ? std::optional(r.bps[column.counter]) : std::nullopt;
    case Column::worker: return r.row->worker ? std::optional<double>(*r.row->worker) : std::nullopt;
    case Column::keys: return r.row->live_keys ? std::optional<double>(static_cast<double>(*r.row->live_keys)) : std::nullopt;
    case Column::label: return std::nullopt;
  }
  return std::nullopt;
}

std::string cell(const Column& column, const Rates& r) {
  if (column.kind == Column::label) return terminal_text(r.row->name);  // the daemon's text: made safe
  const auto value = number(column, r);
  if (!value) return "-";
  if (column.kind == Column::worker || column.kind == Column::keys) return std::to_string(static_cast<std::uint64_t>(*value));
  return human_rate(*value);
}

// Text ascending; numbers descending, blanks last; ties keep the daemon's order.
void sort_rows(std::vector<Rates>& rows, const Column& column) {
  std::stable_sort(rows.begin(), rows.end(), [&](const Rates& a, const Rates& b) {
    if (column.kind == Column::label) return a.row->name < b.row->name;
    const auto x = number(column, a), y = number(column, b);
    if (!x || !y) return x.has_value() && !y.has_value();
    return *x > *y;
  });
}

std::string valid_columns(Mode mode) {
  std::string out;
  for (const Column& c : columns(mode)) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

const Column* find_column(Mode mode, std::string_view name) {
  static const std::vector<Column> rule_columns = columns(Mode::rules), key_columns = columns(Mode::keys);
  for (const Column& c : mode == Mode::rules ? rule_columns : key_columns)
    if (c.name == name) return &c;
  return nullptr;
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// ---- output ----------------------------------------------------------------------------------------

// A table: a title line, the headers, the rows; columns as wide as their widest cell, labels left.
std::string table(const std::string& title, Mode mode, const std::vector<Rates>& rows, std::size_t max_rows,
                  std::string_view line_end) {
  const std::vector<Column> cols = columns(mode);
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> width(cols.size());
  cells.reserve(rows.size() + 1);
  std::vector<std::string> header;
  for (const Column& c : cols) header.push_back(upper(c.name));
  cells.push_back(std::move(header));
  for (std::size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    std::vector<std::string> line;
    for (const Column& c : cols) line.push_back(cell(c, rows[i]));
    cells.push_back(std::move(line));
  }
  for (const auto& line : cells)
    for (std::size_t c = 0; c < cols.size(); ++c) width[c] = std::max(width[c], line[c].size());
  std::string out = title;
  out += line_end;
  for (const auto& line : cells) {
    std::string text;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const std::string pad(width[c] - line[c].size(), ' ');
      if (c > 0) text += "  ";
      text += cols[c].kind == Column::label ? line[c] + (c + 1 < cols.size() ? pad : "") : pad + line[c];
    }
    out += text;
    out += line_end;
  }
  if (rows.size() > max_rows) out += "(" + std::to_string(rows.size() - max_rows) + " more rows)" + std::string(line_end);
  return out;
}

ordered json_rates(Mode mode, const Rates& r) {
  ordered row;
  row[mode == Mode::rules ? "name" : "key"] = r.row->name;
  if (r.row->worker) row["worker"] = *r.row->worker;
  const std::size_t colors = mode == Mode::rules ? kCounters : kDropped;
  for (std::size_t c = 0; c < colors; ++c) {
    row[std::string(kCounterNames[c]) + "_pps"] = r.known ? ordered(r.pps[c]) : ordered(nullptr);
    row[std::string(kCounterNames[c]) + "_bps"] = r.known ? ordered(r.bps[c]) : ordered(nullptr);
  }
  if (r.row->live_keys) row["live_keys"] = *r.row->live_keys;
  return row;
}

// ---- the terminal ----------------------------------------------------------------------------------

volatile std::sig_atomic_t stop_requested = 0;
void request_stop(int) { stop_requested = 1; }

// The terminal while top runs: the alternate screen, no cursor, keys read one at a time without echo;
// all restored on every way out (the destructor runs at q, Ctrl-C, an error).
class Screen {
 public:
  Screen() {
    if (::tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      keys_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;
  }
  ~Screen() {
    std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
    if (keys_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  bool keys() const noexcept { return keys_; }
  std::size_t rows() const noexcept {
    winsize size{};
    return ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0 ? size.ws_row : 24;
  }

 private:
  termios saved_{};
  bool keys_ = false;
};

// Waits until `deadline`; false if the operator asked to leave meanwhile (q, Ctrl-C).
bool wait_until(std::chrono::steady_clock::time_point deadline, bool read_keys) {
  for (;;) {
    if (stop_requested) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return true;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const int ready = ::poll(&p, read_keys ? 1 : 0, static_cast<int>(left.count()));
    if (ready > 0 && (p.revents & POLLIN)) {
      char key = 0;
      if (::read(STDIN_FILENO, &key, 1) == 1 && (key == 'q' || key == 'Q')) return false;
    }
    if (ready > 0 && (p.revents & (POLLHUP | POLLERR))) read_keys = false;  // stdin gone: time only
  }
}

double client_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string human_rate(double per_second) {
  static constexpr std::array<const char*, 5> kSuffixes{"", "k", "M", "G", "T"};
  std::size_t scale = 0;
  while (per_second >= 999.5 && scale + 1 < kSuffixes.size()) {
    per_second /= 1000;
    ++scale;
  }
  char text[32];
  if (scale == 0) std::snprintf(text, sizeof text, "%.0f", per_second);
  else std::snprintf(text, sizeof text, per_second >= 99.95 ? "%.0f%s" : per_second >= 9.995 ? "%.1f%s" : "%.2f%s",
                     per_second, kSuffixes[scale]);
  return text;
}

std::string check_top_options(const TopOptions& options) {
  const Mode mode = options.rule.empty() ? Mode::rules : Mode::keys;
  if (mode == Mode::rules && options.keys != TopOptions{}.keys) return "--keys goes with --rule NAME (a per-key rule's keys)";
  // The name goes into a command line: one word of the language, nothing more.
  if (mode == Mode::keys) {
    const auto words = detail::tokenize(options.rule);
    if (words.size() != 1 || words[0].text != options.rule)
      return "--rule " + quote(options.rule) + ": a rule's name, one word";
  }
  if (!options.sort.empty() && !find_column(mode, options.sort))
    return "--sort: no column " + quote(options.sort) + (mode == Mode::keys ? " with --rule" : "") +
           "; the columns are " + valid_columns(mode);
  return {};
}

int run_top(CtlClient& client, const TopOptions& options, bool json_output, std::chrono::milliseconds timeout) {
  const Mode mode = options.rule.empty() ? Mode::rules : Mode::keys;
  const Column* sort = options.sort.empty() ? nullptr : find_column(mode, options.sort);
  protocol::Request request{.command = "stats", .text = std::nullopt, .json = true};
  if (mode == Mode::keys) request.command = "key list " + options.rule + " top " + std::to_string(options.keys) + " by red-bytes";

  // One sample; a refusal or a daemon gone ends top with its status. Its message is printed once the
  // terminal is restored (on the alternate screen it would vanish with it).
  int status = kExitDone;
  std::ostringstream failure;
  const auto take = [&]() -> std::optional<Sample> {
    const double sent = client_seconds();
    auto answer = client.call(request, timeout);
    if (!answer) {
      failure << "tricolorctl: " << terminal_text(answer.error().message) << '\n';
      status = kExitUnreachable;
      return std::nullopt;
    }
    if (!answer->reply.ok) {
      status = print_answer(*answer, request.command, false, failure, failure);
      return std::nullopt;
    }
    // A key listing carries no time: the middle of the round trip is the client's best guess of it.
    auto sample = mode == Mode::rules ? parse_stats(*answer) : parse_keys(*answer, (sent + client_seconds()) / 2);
    if (!sample) {
      failure << "tricolorctl: " << terminal_text(sample.error().message) << '\n';
      status = kExitUnreachable;
      return std::nullopt;
    }
    return std::move(*sample);
  };

  stop_requested = 0;
  struct sigaction action{};
  action.sa_handler = request_stop;  // no SA_RESTART: poll() returns at once
  struct sigaction old_int{}, old_term{};
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);
  const bool terminal = !options.batch && !json_output && ::isatty(STDOUT_FILENO);
  std::optional<Screen> screen;
  if (terminal) screen.emplace();

  auto before = take();
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options.interval_s));
  auto next = std::chrono::steady_clock::now() + interval;
  if (terminal && before) std::cout << "\x1b[H\x1b[2Jtricolor top: first sample taken, rates in " << options.interval_s << " s" << std::flush;
  for (std::size_t done = 0; before && (options.iterations == 0 || done < options.iterations); ++done) {
    if (!wait_until(next, screen && screen->keys())) break;
    next += interval;
    auto now = take();
    if (!now) break;
    std::vector<Rates> rows = rates(*before, *now);
    if (sort) sort_rows(rows, *sort);
    const double seconds = now->at_s - before->at_s;
    if (json_output) {
      ordered doc;
      if (mode == Mode::rules) doc["elapsed_s"] = now->at_s;
      else doc["rule"] = options.rule, doc["live_keys"] = now->live_keys;
      doc["interval_s"] = seconds;
      ordered& list = doc[mode == Mode::rules ? "rules" : "keys"] = ordered::array();
      for (const Rates& r : rows) list.push_back(json_rates(mode, r));
      // ASCII only: a name's DEL, C1 or bidi controls as \uXXXX.
      std::cout << doc.dump(-1, ' ', /*ensure_ascii=*/true, ordered::error_handler_t::replace) << '\n' << std::flush;
    } else {
      char title[256];
      if (mode == Mode::rules)
        std::snprintf(title, sizeof title, "tricolor top: %zu rules, rates over %.2f s (tricolord up %.1f s)%s%s",
                      rows.size(), seconds, now->at_s, sort ? ", sorted by " : "", sort ? sort->name.c_str() : "");
      else
        std::snprintf(title, sizeof title, "tricolor top: rule %s, %llu live keys, top %zu by red bytes, rates over %.2f s%s%s",
                      terminal_text(options.rule).c_str(), static_cast<unsigned long long>(now->live_keys), options.keys, seconds,
                      sort ? ", sorted by " : "", sort ? sort->name.c_str() : "");
      if (terminal) {
        const std::size_t fit = screen->rows() > 4 ? screen->rows() - 4 : 1;
        std::cout << "\x1b[H" << table(std::string(title) + "   (q quits)", mode, rows, fit, "\x1b[K\n") << "\x1b[J" << std::flush;
      } else {
        std::cout << table(title, mode, rows, rows.size(), "\n") << '\n' << std::flush;
      }
    }
    before = std::move(now);
  }
  screen.reset();
  std::cerr << failure.str() << std::flush;
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return status;
}

}  // namespace tricolor::control
