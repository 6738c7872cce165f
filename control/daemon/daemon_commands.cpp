#include "control/daemon/daemon_commands.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

#include "control/language/language.hpp"
#include "control/language/language_internal.hpp"
#include "control/language/policy_file.hpp"
#include "control/language/words.hpp"
#include "dataplane/engine/key_query.hpp"
#include "dataplane/engine/keys.hpp"
#include "policer/quote.hpp"
#include "policer/state.hpp"

namespace tricolor::control {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string who(const Peer& peer) { return "uid " + std::to_string(peer.uid) + " pid " + std::to_string(peer.pid); }

std::string time_text(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// The line's words, each with its column (the language's tokenizer).
using detail::Token;
std::vector<Token> words_of(std::string_view line) { return detail::tokenize(line); }

// A refusal pointing at one word of the line.
protocol::Reply refused_at(const std::string& message, const Token& token) {
  return error_reply(message, std::string(token.text), token.column);
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

nlohmann::json colors_json(const dataplane::KeyCounters& c) {
  constexpr const char* kColors[3] = {"green", "yellow", "red"};
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t k = 0; k < 3; ++k) {
    j[std::string(kColors[k]) + "_packets"] = c.packets[k];
    j[std::string(kColors[k]) + "_bytes"] = c.bytes[k];
  }
  return j;
}

// A bucket's level in tokens (bytes or packets), from 1/hz tokens: exact to the printed digits.
std::string tokens_text(std::uint64_t level, std::uint64_t hz) {
  const std::uint64_t whole = level / hz, part = level % hz;
  char text[48];
  std::snprintf(text, sizeof text, "%llu.%03llu", static_cast<unsigned long long>(whole),
                static_cast<unsigned long long>(static_cast<unsigned __int128>(part) * 1000 / hz));
  return text;
}

// Bucket 1's name for the algorithm (bucket 0 is always C).
const char* second_bucket(policer::Algorithm algorithm) {
  switch (algorithm) {
    case policer::Algorithm::srtcm:
    case policer::Algorithm::trtcm_4115: return "E";
    case policer::Algorithm::trtcm: return "P";
    default: return nullptr;  // 1R2C and the limiters: one bucket, or state of their own
  }
}

// A span of time, rounded down to the printed digits: "820 ns", "2.500 ms", "1.250 s".
std::string span_text(std::uint64_t ns) {
  struct Unit {
    std::uint64_t ns;
    const char* name;
  };
  for (const Unit u : {Unit{1'000'000'000, "s"}, Unit{1'000'000, "ms"}, Unit{1'000, "us"}}) {
    if (ns < u.ns) continue;
    char text[48];
    std::snprintf(text, sizeof text, "%llu.%03llu %s", static_cast<unsigned long long>(ns / u.ns),
                  static_cast<unsigned long long>(ns % u.ns * 1000 / u.ns), u.name);
    return text;
  }
  return std::to_string(ns) + " ns";
}

// Nanoseconds (rounded down) for `ticks` of the meter table's clock.
std::uint64_t ticks_ns(std::uint64_t ticks, std::uint64_t hz) {
  return static_cast<std::uint64_t>(static_cast<unsigned __int128>(ticks) * 1'000'000'000 / hz);
}

// Nanoseconds (rounded down) that `owed` 1/hz tokens take to pay off at `rate` tokens/s: the GCRA's
// lead, the smooth and warm-up meters' next free time. Below 2^63 * 10^9 / 1: no overflow in 128 bits.
std::uint64_t owed_ns(std::uint64_t owed, std::uint64_t rate, std::uint64_t hz) {
  if (rate == 0) return 0;
  const unsigned __int128 ns = static_cast<unsigned __int128>(owed) * 1'000'000'000 /
                               (static_cast<unsigned __int128>(rate) * hz);
  return ns > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(ns);
}

// A limiter's per-key state in the words of its algorithm (policer/limiters.hpp, "State"), at the
// key's latest packet: the text after "state at its latest packet (tick N): " and its JSON. The
// windows count whole tokens; the others keep 1/hz tokens, as the buckets do.
struct StateWords {
  std::string text;
  nlohmann::json json;
};
StateWords limiter_state(const policer::Params& p, const policer::State& s, std::uint64_t hz,
                         const std::string& unit) {
  using policer::Algorithm;
  switch (p.algorithm) {
    case Algorithm::fixed_window: {
      if (s.level[1] == 0) return {"no window open (the next packet opens one)", {{"left", 0}, {"closes_in_ns", 0}}};
      const std::uint64_t closes = ticks_ns(s.level[1], hz);
      return {std::to_string(s.level[0]) + " " + unit + " left in the open window, which closes " + span_text(closes) +
                  " after that packet",
              {{"left", s.level[0]}, {"closes_in_ns", closes}}};
    }
    case Algorithm::sliding_window: {
      // Four 32-bit counters, the newest (the sub-window of the latest packet) in the low half of level[0].
      const std::uint64_t counts[policer::kMaxStateWindowBuckets] = {s.level[0] & 0xffffffff, s.level[0] >> 32,
                                                                     s.level[1] & 0xffffffff, s.level[1] >> 32};
      const std::uint32_t k = std::min(p.buckets, policer::kMaxStateWindowBuckets);
      std::uint64_t sum = 0;
      std::string list;
      nlohmann::json sub = nlohmann::json::array();
      for (std::uint32_t i = 0; i < k; ++i) {
        sum += counts[i];
        list += (i ? ", " : "") + std::to_string(counts[i]);
        sub.push_back(counts[i]);
      }
      return {std::to_string(sum) + " " + unit + " counted in the window (its " + std::to_string(k) +
                  " sub-windows, newest first: " + list + ")",
              {{"counted", sum}, {"sub_windows", sub}}};
    }
    case Algorithm::gcra: {
      const std::uint64_t ahead = owed_ns(s.level[0], p.rate, hz);
      return {"the theoretical arrival time is " + span_text(ahead) + " ahead of that packet (" +
                  tokens_text(s.level[0], hz) + " " + unit + " not yet paid off)",
              {{"tat_ahead_ns", ahead}, {"tat_ahead", tokens_text(s.level[0], hz)}}};
    }
    case Algorithm::smooth:
    case Algorithm::warmup: {
      const std::uint64_t ahead = owed_ns(s.level[1], p.rate, hz);
      const std::string next = s.level[1] == 0 ? "the next free time has come (nothing owed)"
                                               : "the next free time is " + span_text(ahead) + " ahead of that packet (" +
                                                     tokens_text(s.level[1], hz) + " " + unit + " owed)";
      return {tokens_text(s.level[0], hz) + " " + unit + " stored; " + next,
              {{"stored", tokens_text(s.level[0], hz)}, {"owed", tokens_text(s.level[1], hz)},
               {"next_free_ahead_ns", ahead}}};
    }
    default: return {"", nlohmann::json::object()};
  }
}

protocol::Reply ok(std::string output, std::string result_json = {}) {
  protocol::Reply reply;
  reply.output = std::move(output);
  reply.result_json = std::move(result_json);
  return reply;
}

}  // namespace

DaemonCommands::DaemonCommands(dataplane::Engine& engine, std::string policy_path, Log audit, Snapshot snapshot)
    : DaemonCommands(std::make_unique<EnginePolicyHost>(engine), &engine, std::move(policy_path), std::move(audit),
                     std::move(snapshot)) {}

DaemonCommands::DaemonCommands(PolicyHost& host, std::string policy_path, Log audit, Snapshot snapshot)
    : DaemonCommands(nullptr, nullptr, std::move(policy_path), std::move(audit), std::move(snapshot), &host) {}

DaemonCommands::DaemonCommands(std::unique_ptr<PolicyHost> own, dataplane::Engine* engine, std::string policy_path,
                               Log audit, Snapshot snapshot, PolicyHost* host)
    : own_host_(std::move(own)),
      host_(host != nullptr ? *host : *own_host_),
      engine_(engine),
      policy_path_(std::move(policy_path)),
      source_("file " + quote(policy_path_, kQuotePathMaxBytes)),
      started_at_(std::chrono::system_clock::now()),
      loaded_at_(started_at_),
      audit_(std::move(audit)),
      snapshot_(std::move(snapshot)) {}

DaemonFacts DaemonCommands::facts() const {
  const auto unix_seconds = [](std::chrono::system_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  };
  return {TRICOLOR_VERSION, unix_seconds(started_at_), unix_seconds(loaded_at_)};
}

protocol::Reply DaemonCommands::handle(const protocol::Request& request, const Peer& peer) {
  const std::string& line = request.command;
  const auto words = words_of(line);
  const std::string_view verb = words.empty() ? std::string_view() : words[0].text;
  // The daemon's commands without arguments take none: a word more is a mistake worth saying.
  if ((verb == "ping" || verb == "version" || verb == "names" || verb == "reload") && words.size() > 1)
    return refused_at(std::string(verb) + ": takes nothing after it", words[1]);
  if (verb == "ping") return ok("pong");
  if (verb == "version") {
    const nlohmann::json version = {{"version", TRICOLOR_VERSION},
                                    {"policy_source", source_},
                                    {"policy_loaded", time_text(loaded_at_)},
                                    {"generation", host_.generation()}};
    return ok("tricolord " TRICOLOR_VERSION "; policy from " + source_ + ", loaded " + time_text(loaded_at_) +
                  ", rule set generation " + std::to_string(host_.generation()),
              request.json ? version.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : std::string());
  }
  if (verb == "names") return names(request.json);
  if (verb == "reload") return reload(who(peer));
  if (verb == "stats") return stats(line, request.json);
  if (verb == "key") return keys(line, request.json);
  if (verb == "reset") {
    if (words.size() != 2 || words[1].text != "counters")
      return refuse(line, Error{std::string(words[words.size() > 1 ? 1 : 0].text), "reset: expected `reset counters`"},
                    line, who(peer));
    baseline_ = snapshot_(dataplane::kReportAll);
    reset_at_ = std::chrono::system_clock::now();
    audit_(who(peer) + ": reset the counters");
    return ok("counters reset at " + time_text(reset_at_));
  }
  if (verb == "save") {
    // The daemon writes no file: tricolorctl writes the text it returns, as the user who runs it (a
    // path named here would be written as root, wherever the client says).
    if (words.size() > 1)
      return refused_at("save: tricolord writes no files; `tricolorctl save FILE` writes the policy as the user who "
                        "runs it (the request `save` alone returns the text)",
                        words[1]);
    return save();
  }
  if (verb == "load") {
    if (words.size() > 1)
      return refused_at("load: the policy's text goes in the request's \"text\", not after `load` (tricolorctl load FILE "
                        "reads the file and sends it)",
                        words[1]);
    if (!request.text) return refuse(line, Error{"load", "load: the policy's text goes in the request's \"text\""}, line, who(peer));
    auto next = control::load(*request.text);
    if (!next) return refuse("", next.error(), "load", who(peer));
    auto reply = install(std::move(*next), "load", who(peer));
    if (reply.ok) source_ = "the control socket (load, " + who(peer) + ")";
    return reply;
  }
  // The command language, on a copy of the running policy; a word that is no command of either is
  // named with both lists.
  if (!verb.empty() && !verb.starts_with('#') &&
      std::find(detail::kLanguageCommands.begin(), detail::kLanguageCommands.end(), verb) ==
          detail::kLanguageCommands.end()) {
    std::string daemon;
    for (std::string_view command : protocol::kDaemonCommands) daemon += (daemon.empty() ? "" : ", ") + std::string(command);
    return refuse(line,
                  Error{std::string(verb), quote(verb) + ": unknown command; expected " +
                                               std::string(detail::kExpectCommand) + " (the language) or " + daemon +
                                               " (the daemon)"},
                  line, who(peer));
  }
  dataplane::Policy next = host_.policy();
  auto output = control::execute(next, line);
  if (!output) return refuse(line, output.error(), line, who(peer));
  if (next == host_.policy()) return ok(std::move(*output));  // list, show, or no change
  auto reply = install(std::move(next), line, who(peer));
  if (reply.ok) reply.output = std::move(*output);
  return reply;
}

protocol::Reply DaemonCommands::reload(const std::string& by) {
  const std::string what = "reload " + policy_path_;
  auto text = read_policy_file(policy_path_);
  if (!text) return refuse("", text.error(), what, by);
  auto next = control::load(*text);
  if (!next) {
    Error error = next.error();
    error.message = source_of_file() + ": " + error.message + "; the running policy is unchanged";
    return refuse("", error, what, by);
  }
  if (*next == host_.policy()) {
    source_ = source_of_file();
    audit_(by + ": " + what + ": the same policy as running, nothing to install");
    return ok(source_of_file() + ": the same policy as running; nothing changed",
              dump({{"generation", host_.generation()}, {"changed", false}}));
  }
  auto reply = install(std::move(*next), what, by);
  if (!reply.ok) {
    reply.error.message += "; the running policy is unchanged";
    return reply;
  }
  source_ = source_of_file();
  reply.output = source_of_file() + ": installed, rule set generation " + std::to_string(host_.generation());
  reply.result_json = dump({{"generation", host_.generation()}, {"changed", true}});
  return reply;
}

std::string DaemonCommands::source_of_file() const { return "file " + quote(policy_path_, kQuotePathMaxBytes); }

protocol::Reply DaemonCommands::install(dataplane::Policy next, const std::string& what, const std::string& by) {
  auto installed = host_.update(next);
  if (!installed) return refuse("", installed.error(), what, by);
  loaded_at_ = std::chrono::system_clock::now();
  audit_(by + ": accepted: " + quote(what, 200) + " (rule set generation " +
         std::to_string(host_.generation()) + ")");
  // The generation lets a client see the change take effect: each worker's `generation_seen` in
  // `stats workers` reaches it at the worker's first burst under the new set.
  return ok("", dump({{"generation", host_.generation()}}));
}

// `key list` and `key show` over a dataplane that lists its keys itself (XDP): each key with its
// meter's levels and the tick of its latest packet (the program keeps no per-key counters).
protocol::Reply DaemonCommands::host_keys(const std::string& line, std::size_t rule, bool json) {
  const auto words = words_of(line);
  const dataplane::Rule& def = host_.policy().rules[rule];
  auto listed = host_.keys_of(rule);
  if (!listed) return refused_at("key: this dataplane cannot list its keys", words[0]);
  if (!*listed) return refused_at("key: " + listed->error().message, words[0]);
  std::vector<PolicyHost::HostKey> keys = std::move(**listed);
  if (words[1].text == "show") {
    if (words.size() < 4) return refused_at("key show: expected the key after the rule's name", words[2]);
    const std::string text(trim(std::string_view(line).substr(words[3].column - 1)));
    const auto key = dataplane::parse_key_text(def.per_key, text);
    if (!key) return refused_at("key show: " + quote(text, 200) + " is not a key of rule " + def.name, words[3]);
    std::erase_if(keys, [&](const PolicyHost::HostKey& k) { return k.key != *key; });
    if (keys.empty()) return refused_at("key show: rule " + def.name + " has no live key " + quote(text, 200), words[3]);
  } else if (words.size() > 3) {
    return refused_at("key list: the XDP dataplane lists all of a rule's keys (no top or order: it keeps no per-key "
                      "counters)", words[3]);
  }
  nlohmann::json j = {{"rule", def.name}, {"live", keys.size()}, {"keys", nlohmann::json::array()}};
  std::string text = "rule " + def.name + ": " + std::to_string(keys.size()) + " live keys\n";
  for (const PolicyHost::HostKey& k : keys) {
    const std::string name = dataplane::key_text(def.per_key, k.key);
    j["keys"].push_back({{"key", name}, {"levels", {k.levels[0], k.levels[1]}}, {"last_tick", k.last_tick}});
    text += "  " + name + "  levels " + std::to_string(k.levels[0]) + " " + std::to_string(k.levels[1]) +
            " (in 1e-9 tokens: bytes or packets)  latest packet at tick " + std::to_string(k.last_tick) + "\n";
  }
  return json ? ok("", dump(j)) : ok(text);
}

protocol::Reply DaemonCommands::names(bool json) const {
  const dataplane::Policy& policy = host_.policy();
  nlohmann::json j = {{"rules", nlohmann::json::array()}, {"profiles", nlohmann::json::array()},
                      {"color_maps", nlohmann::json::array()}};
  std::string text;
  for (const auto& r : policy.rules) j["rules"].push_back(r.name), text += "rule " + r.name + "\n";
  for (const auto& p : policy.profiles) j["profiles"].push_back(p.name), text += "profile " + p.name + "\n";
  for (const auto& m : policy.color_maps) j["color_maps"].push_back(m.name), text += "color-map " + m.name + "\n";
  return json ? ok("", dump(j)) : ok(text);
}

protocol::Reply DaemonCommands::stats(const std::string& line, bool json) {
  using namespace dataplane;
  const auto words = words_of(line);
  unsigned sections = kReportAll;
  const char* part = nullptr;
  std::optional<std::string> rule_name;
  const std::string_view block = words.size() > 1 ? words[1].text : std::string_view();
  if (words.size() == 2 && block == "rules") sections = kReportRules, part = "rules";
  else if (words.size() == 2 && block == "ports") sections = kReportPorts, part = "ports";
  else if (words.size() == 2 && block == "workers") sections = kReportWorkers, part = "workers";
  else if (words.size() == 2 && block == "default") sections = kReportDefault, part = "default";
  else if (words.size() == 3 && block == "rule") rule_name = words[2].text, sections = kReportRules, part = "rules";
  else if (words.size() == 2 && block == "prometheus") {
    // From the start, as Prometheus's counters must be: no baseline.
    std::string text = prometheus_text(snapshot_(kReportAll), facts());
    return json ? ok("", dump({{"content_type", kPrometheusContentType}, {"text", text}})) : ok(std::move(text));
  } else if (words.size() != 1)
    return refused_at("stats: expected nothing, rules, rule NAME, default, ports, workers or prometheus", words[1]);
  DaemonSnapshot s = snapshot_(sections);  // only the block asked for is read
  if (baseline_) s = since(s, *baseline_);
  if (rule_name) {
    std::erase_if(s.rules, [&](const RuleSnapshot& r) { return r.name != *rule_name; });
    if (s.rules.empty())
      return refused_at("stats: no rule named " + quote(*rule_name, 200), words[2]);
  }
  nlohmann::json doc = to_json(s);
  if (baseline_) doc["since_reset"] = time_text(reset_at_);
  if (json) {
    if (part == nullptr) return ok("", dump(doc));
    nlohmann::json subset = {{"elapsed_s", doc["elapsed_s"]}, {"generation", doc["generation"]}, {part, doc[part]}};
    if (sections == kReportWorkers) subset["worker"] = doc["worker"];
    if (sections == kReportRules) subset["clusters"] = doc["clusters"];  // the rules' cluster meters
    if (baseline_) subset["since_reset"] = doc["since_reset"];
    return ok("", dump(subset));
  }
  std::ostringstream out;
  print_totals(s, out, sections);
  if (baseline_) out << "  (counters since the reset at " << time_text(reset_at_) << ")\n";
  return ok(out.str());
}

protocol::Reply DaemonCommands::keys(const std::string& line, bool json) {
  using namespace dataplane;
  const auto words = words_of(line);
  const auto fail = refused_at;
  if (words.size() < 3 || (words[1].text != "list" && words[1].text != "show"))
    return fail("key: expected `key list RULE [top N | all] [by ORDER]` or `key show RULE KEY`",
                words[words.size() > 1 ? 1 : 0]);
  const Policy& policy = host_.policy();
  std::size_t rule = policy.rules.size();
  for (std::size_t r = 0; r < policy.rules.size(); ++r)
    if (policy.rules[r].name == words[2].text) rule = r;
  if (rule == policy.rules.size()) return fail("key: no rule named " + quote(words[2].text, 200), words[2]);
  const Rule& def = policy.rules[rule];
  if (def.per_key.kind == KeyKind::none) return fail("key: rule " + def.name + " has no per-key meters", words[2]);
  if (engine_ == nullptr) return host_keys(line, rule, json);
  const std::uint64_t hz = engine_->tick_rate().hz();

  if (words[1].text == "show") {
    if (words.size() < 4) return fail("key show: expected the key after the rule's name", words[2]);
    // The key is the rest of the line: a five-tuple has a blank in it.
    const std::string text(trim(std::string_view(line).substr(words[3].column - 1)));
    const auto key = parse_key_text(def.per_key, text);
    if (!key) return fail("key show: " + quote(text, 200) + " is not a key of rule " + def.name, words[3]);
    const auto found = find_key(*engine_, rule, *key);
    const std::string name = key_text(def.per_key, *key);
    if (!found) return fail("key show: rule " + def.name + " has no live key " + name, words[3]);
    const dataplane::ProfileDef* profile = policy.find_profile(def.profile);
    const char* second = profile ? second_bucket(profile->params.algorithm) : "1";
    const std::string unit = profile && profile->params.unit == policer::Unit::packets ? "packets" : "bytes";
    nlohmann::json j = {{"rule", def.name}, {"key", name}, {"worker", found->worker},
                        {"last_tick", found->state.last}, {"unit", unit}};
    std::string text_out = "rule " + def.name + " key " + name + ": metered by worker " + std::to_string(found->worker);
    if (profile && policer::is_limiter(profile->params.algorithm)) {
      // A limiter keeps no buckets: its state in its own words.
      StateWords words = limiter_state(profile->params, found->state, hz, unit);
      j["algorithm"] = std::string(policer::to_string(profile->params.algorithm));
      j["levels"] = std::move(words.json);  // the same key as the buckets' levels, in the algorithm's words
      text_out += "\n  " + std::string(policer::to_string(profile->params.algorithm)) + " at its latest packet (tick " +
                  std::to_string(found->state.last) + "): " + words.text;
    } else {
      j["levels"] = {{"C", tokens_text(found->state.level[0], hz)}};
      if (second) j["levels"][second] = tokens_text(found->state.level[1], hz);
      text_out += "\n  levels at its latest packet (tick " + std::to_string(found->state.last) + "): C " +
                  tokens_text(found->state.level[0], hz) + " " + unit;
      if (second) text_out += ", " + std::string(second) + " " + tokens_text(found->state.level[1], hz) + " " + unit;
    }
    if (def.per_key.max_flows != 0) {  // flows per key: its open flows against its limit
      j["open_flows"] = found->counters.open_flows;
      j["max_flows"] = def.per_key.max_flows;
      text_out += "\n  open flows: " + std::to_string(found->counters.open_flows) + " of max-flows " +
                  std::to_string(def.per_key.max_flows);
    }
    j.update(colors_json(found->counters));
    if (json) return ok("", dump(j));
    text_out += "\n  since the key was created:";
    constexpr const char* kColors[3] = {"green", "yellow", "red"};
    for (std::size_t k = 0; k < 3; ++k)
      text_out += std::string(" ") + kColors[k] + " " + std::to_string(found->counters.packets[k]) + " packets " +
                  std::to_string(found->counters.bytes[k]) + " bytes" + (k < 2 ? ";" : "\n");
    return ok(text_out);
  }

  // key list RULE [top N | all] [by ORDER]
  std::optional<std::size_t> top = 10;
  KeyOrder order = KeyOrder::red_bytes;
  bool counted = false, ordered = false;  // each part at most once: `top 5 top 6` is a mistake
  for (std::size_t i = 3; i < words.size(); i += 2) {
    const std::string_view part = words[i].text;
    if ((part == "all" || part == "top") && counted)
      return fail("key list: `top N` or `all`, once", words[i]);
    if (part == "by" && ordered) return fail("key list: `by ORDER`, once", words[i]);
    if (part == "all") {
      top.reset();
      counted = true;
      --i;
      continue;
    }
    if (i + 1 >= words.size() || (part != "top" && part != "by"))
      return fail("key list: expected `top N`, `all` or `by ORDER` here", words[i]);
    (part == "top" ? counted : ordered) = true;
    if (words[i].text == "top") {
      std::size_t n = 0;
      const std::string_view count = words[i + 1].text;
      const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
      if (ec != std::errc{} || end != count.data() + count.size() || n == 0 || n > 1'000'000)
        return fail("key list: top: a count from 1 to 1000000", words[i + 1]);
      top = n;
    } else {
      const auto named = key_order_named(words[i + 1].text);
      if (!named) {
        std::string valid;
        for (KeyOrder o : kKeyOrders) valid += (valid.empty() ? "" : ", ") + std::string(to_string(o));
        return fail("key list: by: one of " + valid, words[i + 1]);
      }
      order = *named;
    }
  }
  const auto ranked = rank_keys(*engine_, rule, order, top);
  const std::size_t live = engine_->live_keys(rule);
  if (json) {
    nlohmann::json j = {{"rule", def.name}, {"live_keys", live}, {"sorted_by", to_string(order)},
                        {"keys", nlohmann::json::array()}};
    for (const RankedKey& k : ranked) {
      nlohmann::json one = {{"key", key_text(def.per_key, k.key)}, {"worker", k.worker}};
      one.update(colors_json(k.counters));
      j["keys"].push_back(std::move(one));
    }
    return ok("", dump(j));
  }
  std::string out = "rule " + def.name + ": " + std::to_string(live) + " live keys; " +
                    (top ? "top " + std::to_string(ranked.size()) : std::string("all")) + " by " +
                    std::string(to_string(order)) + " (counters since each key was created)\n";
  char row[256];
  std::snprintf(row, sizeof row, "  %-40s %6s %12s %14s %12s %14s %12s %14s\n", "key", "worker", "green pkts",
                "green bytes", "yellow pkts", "yellow bytes", "red pkts", "red bytes");
  out += row;
  for (const RankedKey& k : ranked) {
    const auto& c = k.counters;
    std::snprintf(row, sizeof row, "  %-40s %6u %12llu %14llu %12llu %14llu %12llu %14llu\n",
                  key_text(def.per_key, k.key).c_str(), k.worker, static_cast<unsigned long long>(c.packets[0]),
                  static_cast<unsigned long long>(c.bytes[0]), static_cast<unsigned long long>(c.packets[1]),
                  static_cast<unsigned long long>(c.bytes[1]), static_cast<unsigned long long>(c.packets[2]),
                  static_cast<unsigned long long>(c.bytes[2]));
    out += row;
  }
  return ok(out);
}

protocol::Reply DaemonCommands::refuse(const std::string& line, const Error& error, const std::string& what,
                                       const std::string& by) {
  audit_(by + ": refused: " + quote(what, 200) + ": " + error.message);
  std::optional<std::size_t> column;
  if (!line.empty() && !error.subject.empty())
    if (const auto at = line.find(error.subject); at != std::string::npos) column = at + 1;
  return error_reply(error.message, error.subject, column);
}

protocol::Reply DaemonCommands::save() const {
  const dataplane::Policy& policy = host_.policy();
  return ok(control::print(policy),
            dump({{"rules", policy.rules.size()}, {"profiles", policy.profiles.size()},
                  {"color_maps", policy.color_maps.size()}, {"generation", host_.generation()}}));
}

}  // namespace tricolor::control
