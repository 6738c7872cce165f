#pragma once
// tricolorctl without a command: an interactive shell on one connection (stdin a terminal), or the
// commands of stdin one a line (`tricolorctl < script`).
//
// The shell edits lines with libedit: history kept in ~/.tricolorctl_history (TRICOLORCTL_HISTORY
// names another file), TAB completes the language's keywords where they may come and the names of
// rules, profiles and color maps where a name belongs (asked of the daemon at each TAB, so they are
// never stale; names that are not plain printable words are not offered). Each line is sent as
// tricolorctl sends one command (`load FILE` reads the file here, `save FILE` writes it here); a
// refused one prints its error and caret and the shell goes on. quit, exit or Ctrl-D leave (status
// 0); a daemon gone, or a broken reply (one to a TAB's question included), leaves with status 3.
#include <chrono>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "control/ctl/ctl_client.hpp"

namespace tricolor::control {

struct ShellOptions {
  bool json = false;        // print replies as JSON
  bool keep_going = false;  // script mode: go on after a refused line (the status is still 2)
  std::chrono::milliseconds timeout{30'000};
};

// The interactive shell. Returns the exit status: 0 (quit, exit, Ctrl-D) or 3 (tricolord gone).
int run_shell(CtlClient& client, const ShellOptions& options);

// The lines of `in`, each a command; blank lines and comments ('#' first) are skipped. Stops at the
// first refused line (status 2) or unreadable file to load (1) unless keep_going; 3 when tricolord is
// gone. Errors name their line.
int run_script(CtlClient& client, std::istream& in, const ShellOptions& options);

// ---- completion (exposed for tests) ----------------------------------------------------------------

struct Names {
  std::vector<std::string> rules, profiles, color_maps;
};

struct Candidates {
  std::vector<std::string> words;  // keywords and names that may come next
  bool files = false;              // a file name comes next (save, load): the line editor completes files
};

// What may come after `before` (the line's whole words before the one being completed). `names` is
// called only when a name may come next.
Candidates next_words(std::span<const std::string> before, const std::function<Names()>& names);

// The names the daemon has: from the command `names`, or, from a daemon without it, from the
// listings (rule list, profile list, color-map list). An error when it cannot be asked or its reply is
// broken (a result that is not lists of strings). Names that hold anything but printable ASCII other
// than spaces are left out: a completion would put them on the operator's terminal and line.
Expected<Names> fetch_names(CtlClient& client, std::chrono::milliseconds timeout);

}  // namespace tricolor::control
