// tricolorctl: tricolord's command-line client, over the control socket (control/daemon/protocol.hpp):
//   tricolorctl [--socket PATH] [--json] COMMAND...     one command, e.g. tricolorctl rule change web profile silver
//   tricolorctl load FILE                               a whole policy, installed whole or not at all
//   tricolorctl save FILE                               the running policy, written here as the user who runs this
//   tricolorctl reload                                  tricolord's own policy file read again (as SIGHUP)
//   tricolorctl version                                 this client's version and the daemon's
//   tricolorctl                                         an interactive shell (stdin a terminal), or the
//                                                       commands of stdin one a line (tricolorctl < script)
//   tricolorctl top [--rule NAME] [--sort COLUMN] ...   live rates per rule (or per key) and color
// Exit status, for scripts (control/ctl/ctl_client.hpp): 0 done; 1 the command line is wrong; 2 tricolord
// refused the command (the message says why, with a caret under the token at fault); 3 tricolord could
// not be reached or answered nothing that makes sense (not running, no permission, refusing connections,
// gone, a broken reply).
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "control/ctl/ctl_client.hpp"
#include "control/ctl/ctl_shell.hpp"
#include "control/ctl/ctl_top.hpp"
#include "control/ctl/terminal_text.hpp"

namespace {

using namespace tricolor::control;

int unreachable(const std::string& message) {
  std::cerr << "tricolorctl: " << terminal_text(message) << '\n';
  return kExitUnreachable;
}

int usage(const std::string& message) {
  std::cerr << "tricolorctl: " << terminal_text(message) << '\n';
  return kExitUsage;
}

// --timeout: from a millisecond (what poll() counts in) to a day (longer than any reply takes, far
// from where seconds * 1000 stops fitting the milliseconds' integer).
constexpr double kMinTimeoutS = 0.001, kMaxTimeoutS = 86'400;
// top --interval: as its option says.
constexpr double kMinIntervalS = 0.05, kMaxIntervalS = 3'600;

// A finite number of seconds within [min, max], or the usage error that names the range.
std::string check_seconds(const char* option, double value, double min, double max) {
  if (std::isfinite(value) && value >= min && value <= max) return {};
  char text[160];
  std::snprintf(text, sizeof text, "%s: seconds from %g to %g, not %g", option, min, max, value);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tricolorctl: tricolord's client over its control socket. With a command, sends it and prints "
               "the reply; without one, an interactive shell (or, stdin not a terminal, the commands of stdin "
               "one a line); `top`, live rates.\n"
               "Exit status: 0 done, 1 usage, 2 the command was refused, 3 tricolord could not be reached."};
  std::string socket_path = kDefaultSocket;
  bool json = false;
  double timeout_s = 30;
  bool keep_going = false;
  bool prometheus = false;
  std::vector<std::string> words;
  app.set_version_flag("--version", "tricolorctl " TRICOLOR_VERSION, "this client's version (`tricolorctl version`: the daemon's too)");
  app.add_option("--socket", socket_path, "tricolord's control socket (default /run/tricolor/tricolor.sock)");
  app.add_flag("--json", json, "print replies as JSON (for scripts); with top, one JSON object per refresh");
  app.add_option("--timeout", timeout_s, "seconds to wait for a reply, 0.001 to 86400 (default 30)");
  app.add_flag("--prometheus", prometheus,
               "with stats: every counter in Prometheus's text format, from the daemon's start (as its /metrics)");
  app.add_flag("--keep-going", keep_going,
               "commands from stdin: go on after a refused command (the exit status is still 2)");
  app.add_option("command", words, "a command of the language (rule list, rule change NAME ...), ping, version, "
                                    "stats, names, key list RULE, reset counters, save FILE, load FILE, reload "
                                    "(the daemon's policy file read again), or top; none: the shell");
  // top's options sit on the main parser: a subcommand would take the word `top` anywhere on the line,
  // and a rule may be named top (`tricolorctl rule show top`).
  TopOptions top;
  auto* group = app.add_option_group("top", "tricolorctl top: live rates per rule and color, refreshed");
  std::vector<CLI::Option*> top_flags{
      group->add_option("--interval", top.interval_s, "seconds between refreshes, 0.05 to 3600 (default 1)"),
      group->add_option("--rule", top.rule, "a per-key rule: its keys (top --keys by red bytes) instead of the rules"),
      group->add_option("--keys", top.keys, "with --rule: how many keys (default 20)")->check(CLI::Range(1, 100000)),
      group->add_option("--sort", top.sort, "the column to sort by: numbers descending, names ascending (default: the daemon's order)"),
      group->add_option("-n,--iterations", top.iterations, "stop after N refreshes (default: until q or Ctrl-C)")
          ->check(CLI::PositiveNumber),
      group->add_flag("-b,--batch", top.batch, "plain text blocks without escape codes, for scripts (as top -b)")};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  if (const std::string bad = CtlClient::check_path(socket_path); !bad.empty()) return usage(bad);
  if (const std::string bad = check_seconds("--timeout", timeout_s, kMinTimeoutS, kMaxTimeoutS); !bad.empty())
    return usage(bad);
  if (const std::string bad = check_seconds("--interval", top.interval_s, kMinIntervalS, kMaxIntervalS); !bad.empty())
    return usage(bad);
  const auto timeout = std::chrono::milliseconds(std::llround(timeout_s * 1000));

  const bool is_top = !words.empty() && words.front() == "top";
  if (!is_top)
    for (const CLI::Option* flag : top_flags)
      if (flag->count() > 0) return usage(flag->get_name() + " goes with top (tricolorctl top " + flag->get_name() + " ...)");
  if (is_top && words.size() > 1) return usage("top takes options, not words: '" + words[1] + "'");
  if (prometheus) {
    if (words.size() != 1 || words.front() != "stats") return usage("--prometheus goes with stats alone (tricolorctl stats --prometheus)");
    if (json) return usage("--prometheus or --json: one format");
    words.emplace_back("prometheus");  // the daemon's `stats prometheus`
  }

  if (is_top) {
    if (const std::string bad = check_top_options(top); !bad.empty()) return usage(bad);
    auto client = CtlClient::connect(socket_path);
    if (!client) return unreachable(client.error().message);
    return run_top(*client, top, json, timeout);
  }
  if (words.empty()) {
    auto client = CtlClient::connect(socket_path);
    if (!client) return unreachable(client.error().message);
    const ShellOptions options{.json = json, .keep_going = keep_going, .timeout = timeout};
    return ::isatty(STDIN_FILENO) ? run_shell(*client, options) : run_script(*client, std::cin, options);
  }

  // One command. A file to load is read before connecting: a wrong path is the operator's mistake,
  // whatever the daemon's state.
  auto request = request_for_words(words, json);
  if (!request) return usage(request.error().message);
  // `version`: this client's, then the daemon's (as text; --json prints the daemon's reply alone).
  if (words.size() == 1 && words.front() == "version" && !json) std::cout << "tricolorctl " TRICOLOR_VERSION "\n" << std::flush;
  auto client = CtlClient::connect(socket_path);
  if (!client) return unreachable(client.error().message);
  return send_and_print(*client, *request, PrintOptions{.json = json, .timeout = timeout, .where = "", .gone = ""}, std::cout, std::cerr);
}
