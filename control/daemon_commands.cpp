#include "control/daemon_commands.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <fstream>

#include "control/language.hpp"
#include "policer/quote.hpp"

namespace tricolor::control {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string first_word(std::string_view line) {
  line = trim(line);
  return std::string(line.substr(0, line.find_first_of(" \t")));
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

protocol::Reply ok(std::string output, std::string result_json = {}) {
  protocol::Reply reply;
  reply.output = std::move(output);
  reply.result_json = std::move(result_json);
  return reply;
}

}  // namespace

DaemonCommands::DaemonCommands(dataplane::Engine& engine, std::string source, Log audit, Stats stats)
    : engine_(engine),
      source_(std::move(source)),
      loaded_at_(std::chrono::system_clock::now()),
      audit_(std::move(audit)),
      stats_(std::move(stats)) {}

protocol::Reply DaemonCommands::handle(const protocol::Request& request, const Peer& peer) {
  const std::string& line = request.command;
  const std::string verb = first_word(line);
  if (verb == "ping") return ok("pong");
  if (verb == "version") {
    const nlohmann::json version = {{"version", TRICOLOR_VERSION},
                                    {"policy_source", source_},
                                    {"policy_loaded", time_text(loaded_at_)},
                                    {"generation", engine_.generation()}};
    return ok("tricolord " TRICOLOR_VERSION "; policy from " + source_ + ", loaded " + time_text(loaded_at_) +
                  ", rule set generation " + std::to_string(engine_.generation()),
              request.json ? version.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : std::string());
  }
  if (verb == "stats") return request.json ? ok("", stats_(true)) : ok(stats_(false));
  if (verb == "save") {
    const std::string path(trim(trim(line).substr(4)));
    if (path.empty()) return refuse(line, Error{"save", "save: expected a file name"}, line, peer);
    return save(path, peer);
  }
  if (verb == "load") {
    if (!request.text) return refuse(line, Error{"load", "load: the policy's text goes in the request's \"text\""}, line, peer);
    auto next = control::load(*request.text);
    if (!next) return refuse("", next.error(), "load", peer);
    auto reply = install(std::move(*next), "load", peer);
    if (reply.ok) source_ = "the control socket (load, " + who(peer) + ")";
    return reply;
  }
  // The command language, on a copy of the running policy.
  dataplane::Policy next = engine_.policy();
  auto output = control::execute(next, line);
  if (!output) return refuse(line, output.error(), line, peer);
  if (next == engine_.policy()) return ok(std::move(*output));  // list, show, or no change
  auto reply = install(std::move(next), line, peer);
  if (reply.ok) reply.output = std::move(*output);
  return reply;
}

protocol::Reply DaemonCommands::install(dataplane::Policy next, const std::string& what, const Peer& peer) {
  auto installed = engine_.update(next);
  if (!installed) return refuse("", installed.error(), what, peer);
  loaded_at_ = std::chrono::system_clock::now();
  audit_(who(peer) + ": accepted: " + quote(what, 200) + " (rule set generation " +
         std::to_string(engine_.generation()) + ")");
  return ok("");
}

protocol::Reply DaemonCommands::refuse(const std::string& line, const Error& error, const std::string& what,
                                       const Peer& peer) {
  audit_(who(peer) + ": refused: " + quote(what, 200) + ": " + error.message);
  std::optional<std::size_t> column;
  if (!line.empty() && !error.subject.empty())
    if (const auto at = line.find(error.subject); at != std::string::npos) column = at + 1;
  return error_reply(error.message, error.subject, column);
}

protocol::Reply DaemonCommands::save(const std::string& path, const Peer& peer) {
  // Written aside and renamed: a reader never sees half a policy, a failure leaves the old file.
  const std::string text = control::print(engine_.policy());
  const std::string aside = path + ".tmp";
  {
    std::ofstream out(aside, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      ::unlink(aside.c_str());
      return refuse("", Error{path, "save: cannot write " + quote(path, kQuotePathMaxBytes)}, "save " + path, peer);
    }
  }
  if (std::rename(aside.c_str(), path.c_str()) != 0) {
    ::unlink(aside.c_str());
    return refuse("", Error{path, "save: cannot replace " + quote(path, kQuotePathMaxBytes)}, "save " + path, peer);
  }
  audit_(who(peer) + ": saved the policy to " + quote(path, kQuotePathMaxBytes));
  return ok("saved " + std::to_string(engine_.policy().rules.size()) + " rules to " + path);
}

}  // namespace tricolor::control
