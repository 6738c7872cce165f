#include "control/ctl/ctl_shell.hpp"

#include <editline/readline.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <iostream>
#include <sstream>

#include "control/language/language_internal.hpp"
#include "control/ctl/terminal_text.hpp"
#include "control/language/words.hpp"

namespace tricolor::control {

namespace {

using detail::kAlgorithms;
using detail::kColors;
using detail::kDscpNames;
using detail::kFallbacks;
using detail::kKeyKinds;
using detail::kParams;
using detail::kProtocols;

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> words;
  std::istringstream in{std::string(line)};
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

bool blank_or_comment(std::string_view line) { return detail::tokenize(line).empty(); }

// A name completion may offer: printable ASCII without spaces (the language's names are such).
bool plain_word(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte > ' ' && byte < 0x7f;
  });
}

template <class Range, class Name>
void add_names(std::vector<std::string>& out, const Range& range, Name name) {
  for (const auto& item : range) out.emplace_back(name(item));
}

// ---- the grammar, as far as completion needs it ----------------------------------------------------

// The language's commands, the daemon's, then the shell's own.
const std::vector<std::string> kCommands = [] {
  std::vector<std::string> all(detail::kLanguageCommands.begin(), detail::kLanguageCommands.end());
  all.insert(all.end(), std::begin(protocol::kDaemonCommands), std::end(protocol::kDaemonCommands));
  for (const char* own : {"help", "quit", "exit"}) all.emplace_back(own);
  return all;
}();
const std::vector<std::string> kVerbs(detail::kObjectVerbs.begin(), detail::kObjectVerbs.end());
// The clauses of a rule's body (doc/language.md, "Rules"), in the order show prints them.
const std::vector<std::string> kClauses{"port",     "vlan",     "src",    "dst",    "proto",  "sport",
                                        "dport",    "dscp",     "profile", "per",   "timeout", "capacity",
                                        "fallback", "parent",   "cluster", "input", "length", "green",
                                        "yellow",   "red"};
const std::vector<std::string> kPlaces{"first", "last", "before", "after"};
const std::vector<std::string> kActions{"forward", "drop", "remark", "pcp"};
const std::vector<std::string> kMapClauses{"pcp-map", "dscp-map", "unmapped"};
// Clauses and options whose next word is a value the operator types (no completion).
const std::vector<std::string> kTakesValue{"port", "vlan", "src", "dst", "sport", "dport", "dscp",
                                           "timeout", "capacity", "pcp", "top"};

bool among(const std::vector<std::string>& list, std::string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

bool is_color_word(std::string_view word) {  // green, or a pair such as green>yellow
  const auto arrow = word.find('>');
  const auto is_color = [](std::string_view w) { return std::find(kColors.begin(), kColors.end(), w) != kColors.end(); };
  return arrow == std::string_view::npos ? is_color(word) : is_color(word.substr(0, arrow)) && is_color(word.substr(arrow + 1));
}

// After `rule add|change NAME ...`: what may follow the last word.
std::vector<std::string> rule_body_next(std::span<const std::string> before, const std::function<Names()>& names) {
  const std::string& last = before.back();
  if (last == "before" || last == "after") return names().rules;
  if (last == "profile" || last == "parent" || last == "cluster") return names().profiles;
  if (last == "pcp-map" || last == "dscp-map") return names().color_maps;
  if (last == "unmapped") return {kColors.begin(), kColors.end()};
  std::vector<std::string> out;
  if (last == "proto") add_names(out, kProtocols, [](const auto& p) { return p.name; });
  if (last == "per") add_names(out, kKeyKinds, [](const auto& k) { return k.name; });
  if (last == "fallback") add_names(out, kFallbacks, [](const auto& f) { return f.name; });
  if (last == "remark") add_names(out, kDscpNames, [](const auto& d) { return d.name; });
  if (last == "input") out = {"blind", "dscp", "map"};
  if (last == "length") out = {"l1", "l2", "l3"};
  if (is_color_word(last)) out = kActions;
  if (!out.empty() || among(kTakesValue, last)) return out;
  // A clause may come: those not given yet, the place right after the name, the map's own clauses
  // after `input map`.
  for (const std::string& clause : kClauses)
    if (std::find(before.begin() + 3, before.end(), clause) == before.end()) out.push_back(clause);
  if (before.size() == 3) out.insert(out.end(), kPlaces.begin(), kPlaces.end());
  if (std::find(before.begin(), before.end(), "map") != before.end())
    for (const std::string& clause : kMapClauses)
      if (std::find(before.begin(), before.end(), clause) == before.end()) out.push_back(clause);
  return out;
}

}  // namespace

Candidates next_words(std::span<const std::string> before, const std::function<Names()>& names) {
  const std::size_t n = before.size();
  if (n == 0) return {kCommands};
  const std::string& command = before[0];
  if (command == "save" || command == "load") return {{}, n == 1};
  if (command == "reset") return {n == 1 ? std::vector<std::string>{"counters"} : std::vector<std::string>{}};
  if (command == "default") return {n == 1 ? kActions : std::vector<std::string>{}};
  if (command == "key") {
    if (n == 1) return {{"list", "show"}};
    if (n == 2) return {names().rules};  // the per-key ones among them: the daemon says if not
    // key list RULE [top N | all] [by ORDER] (the orders: dataplane/engine/key_query.hpp)
    if (before[1] != "list" || n < 3) return {};
    if (before[n - 1] == "by")
      return {{"red-bytes", "red-packets", "yellow-bytes", "yellow-packets", "green-bytes", "green-packets", "bytes",
               "packets"}};
    if (before[n - 1] == "top") return {};
    std::vector<std::string> next;
    const auto given = [&](const char* word) { return std::find(before.begin() + 3, before.end(), word) != before.end(); };
    if (!given("top") && !given("all")) next = {"top", "all"};
    if (!given("by")) next.push_back("by");
    return {next};
  }
  const bool profile = command == "profile", color_map = command == "color-map", rule = command == "rule";
  if (!profile && !color_map && !rule) return {};
  if (n == 1) return {kVerbs};
  const std::string& verb = before[1];
  if (n == 2) {
    if (verb != "change" && verb != "delete" && verb != "show") return {};  // add: a new name
    const Names all = names();
    return {rule ? all.rules : profile ? all.profiles : all.color_maps};
  }
  if (verb != "add" && verb != "change") return {};
  if (rule) return {rule_body_next(before, names)};
  if (profile) {
    if (n == 3) {
      Candidates c;
      add_names(c.words, kAlgorithms, [](const auto& a) { return a.name; });
      return c;
    }
    if ((n - 4) % 2 != 0) return {};  // a parameter's value
    Candidates c;
    for (const auto& a : kAlgorithms)
      if (a.name == before[3])
        for (std::string_view param : a.params)
          if (!param.empty() && std::find(before.begin() + 4, before.end(), param) == before.end())
            c.words.emplace_back(param);
    return c;
  }
  // color-map add|change NAME dscp|pcp COLOR VALUES ...
  if (n == 3) return {{"dscp", "pcp"}};
  if (is_color_word(before.back())) return {};
  Candidates c;
  for (std::string_view color : kColors)
    if (std::find(before.begin() + 4, before.end(), color) == before.end()) c.words.emplace_back(color);
  return c;
}

Expected<Names> fetch_names(CtlClient& client, std::chrono::milliseconds timeout) {
  Names names;
  protocol::Request request{.command = "names", .text = std::nullopt, .json = true};
  auto answer = client.call(request, timeout);
  if (!answer) return answer.error();
  if (answer->reply.ok) {
    const auto result = nlohmann::json::parse(answer->reply.result_json, nullptr, /*allow_exceptions=*/false);
    if (!result.is_object()) return broken_reply("names without a JSON object");
    for (const auto& [key, out] : {std::pair{"rules", &names.rules}, std::pair{"profiles", &names.profiles},
                                   std::pair{"color_maps", &names.color_maps}}) {
      const auto list = result.find(key);
      if (list == result.end()) continue;  // a daemon without color maps, say
      if (!list->is_array()) return broken_reply(std::string("names: ") + key + " is not a list");
      for (const auto& name : *list) {
        if (!name.is_string()) return broken_reply(std::string("names: ") + key + " holds a name that is not a string");
        if (plain_word(name.get_ref<const std::string&>())) out->push_back(name.get<std::string>());
      }
    }
    return names;
  }
  // A daemon without `names`: the listings print `KIND add NAME ...`, one a line.
  std::optional<Error> failed;
  const auto listed = [&](const char* command, std::vector<std::string>& out) {
    if (failed) return;
    auto listing = client.call(protocol::Request{.command = command, .text = std::nullopt, .json = false}, timeout);
    if (!listing) failed = listing.error();
    if (!listing || !listing->reply.ok) return;
    std::istringstream lines(listing->reply.output);
    for (std::string line; std::getline(lines, line);)
      if (const auto words = split(line); words.size() >= 3 && words[1] == "add" && plain_word(words[2]))
        out.push_back(words[2]);
  };
  listed("rule list", names.rules);
  listed("profile list", names.profiles);
  listed("color-map list", names.color_maps);
  if (failed) return *failed;
  return names;
}

namespace {

constexpr const char* kPrompt = "tricolor> ";
constexpr int kHistoryLines = 1000;

constexpr std::string_view kHelp =
    "Commands: the command language (profile, color-map, rule: add, change, delete, list, show; default;\n"
    "show), key list RULE [top N by COLUMN], key show RULE KEY, stats, reset counters, names, version, ping,\n"
    "save FILE (written here, as you), load FILE (read here, installed whole or not at all).\n"
    "TAB completes keywords and names; up and down recall earlier lines; quit, exit or Ctrl-D leave.\n";

// One line sent and its reply printed. Returns the status of that line.
int run_line(CtlClient& client, std::string_view line, const ShellOptions& options, std::string_view where) {
  auto request = request_for_line(line, options.json);
  if (!request) {
    std::cerr << "tricolorctl: " << where << terminal_text(request.error().message) << '\n';
    return kExitUsage;
  }
  const PrintOptions printing{.json = options.json, .timeout = options.timeout, .where = where, .gone = "tricolord is gone: "};
  return send_and_print(client, *request, printing, std::cout, std::cerr);
}

bool leaves(std::string_view line) {
  const auto words = split(line);
  return words.size() == 1 && (words[0] == "quit" || words[0] == "exit");
}

// readline calls plain functions: they reach the shell's connection through this.
struct Completion {
  CtlClient* client = nullptr;
  std::chrono::milliseconds timeout{};
  std::vector<std::string> matches;  // of the word being completed, for the generator
  std::optional<Error> failed;       // asking for names failed: the shell ends once the line is read
} completion;

char* next_match(const char* /*text*/, int state) {
  static std::size_t index;
  if (state == 0) index = 0;
  if (index >= completion.matches.size()) return nullptr;
  return ::strdup(completion.matches[index++].c_str());
}

char** complete(const char* text, int start, int /*end*/) {
  const std::string word = text;
  const auto before = split(std::string_view(rl_line_buffer, static_cast<std::size_t>(std::max(start, 0))));
  const Candidates candidates = next_words(before, [] {
    if (completion.failed) return Names{};
    auto names = fetch_names(*completion.client, completion.timeout);
    if (!names) {
      completion.failed = names.error();
      return Names{};
    }
    return std::move(*names);
  });
  if (candidates.files) return nullptr;  // the line editor's own completion: file names
  rl_attempted_completion_over = 1;
  completion.matches.clear();
  for (const std::string& candidate : candidates.words)
    if (candidate.starts_with(word) && !among(completion.matches, candidate)) completion.matches.push_back(candidate);
  if (completion.matches.empty()) return nullptr;
  return rl_completion_matches(text, next_match);
}

std::string history_file() {
  if (const char* path = std::getenv("TRICOLORCTL_HISTORY"); path && *path) return path;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.tricolorctl_history";
  return {};
}

}  // namespace

int run_shell(CtlClient& client, const ShellOptions& options) {
  completion = Completion{&client, options.timeout, {}, std::nullopt};
  rl_readline_name = const_cast<char*>("tricolorctl");
  rl_attempted_completion_function = complete;
  using_history();
  stifle_history(kHistoryLines);
  const std::string history = history_file();
  if (!history.empty()) read_history(history.c_str());  // none yet is fine
  std::string previous;
  int status = kExitDone;
  for (;;) {
    char* raw = readline(kPrompt);
    if (raw == nullptr) {  // Ctrl-D
      std::cout << '\n';
      break;
    }
    std::string line = raw;
    std::free(raw);
    if (completion.failed) {  // a TAB's question went unanswered: the connection is gone or broken
      std::cerr << "tricolorctl: tricolord is gone: " << terminal_text(completion.failed->message) << '\n';
      status = kExitUnreachable;
      break;
    }
    line.erase(line.find_last_not_of(" \t") + 1);  // a completion's trailing space is not kept in history
    if (blank_or_comment(line)) continue;
    if (line != previous) {
      add_history(line.c_str());
      // Written at each line: a session that ends with the daemon gone keeps its history too.
      if (!history.empty()) write_history(history.c_str());
      previous = line;
    }
    if (leaves(line)) break;
    if (split(line) == std::vector<std::string>{"help"}) {
      std::cout << kHelp << std::flush;
      continue;
    }
    if (run_line(client, line, options, "") == kExitUnreachable) {
      status = kExitUnreachable;
      break;
    }
  }
  completion = Completion{};
  return status;
}

int run_script(CtlClient& client, std::istream& in, const ShellOptions& options) {
  int status = kExitDone;
  std::size_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (blank_or_comment(line)) continue;
    if (leaves(line)) break;
    const int result = run_line(client, line, options, "line " + std::to_string(number) + ": ");
    if (result == kExitUnreachable) return result;
    if (result != kExitDone) {
      status = std::max(status, result);
      if (!options.keep_going) return result;
    }
  }
  return status;
}

}  // namespace tricolor::control
