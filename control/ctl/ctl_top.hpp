#pragma once
// tricolorctl top: live rates, per rule or per key and color, as operators know them from top and
// VPP's `show policer`. Each refresh asks tricolord for its counters (`stats` as JSON, or `key list
// RULE top N by red-bytes` with --rule) and shows, per row, the packets and bits per second of each
// color (and dropped, per rule) between this sample and the previous one: the difference of the
// counters over the difference of the daemon's elapsed_s (of the client's clock for keys, whose
// listing carries no time). A row without a previous sample (a rule just added, a key just seen or
// just back in the top N, counters reset) shows blanks, never a guess.
//
// Modes: the terminal (clear and redraw every --interval s; q or Ctrl-C leaves, the terminal
// restored), --batch (plain blocks, no escape codes, as top -b), --json (one object per refresh with
// the raw rates).
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/ctl/ctl_client.hpp"

namespace tricolor::control {

struct TopOptions {
  double interval_s = 1;
  std::string rule;          // show this per-key rule's keys instead of the rules
  std::size_t keys = 20;     // with rule: the top N by red bytes
  std::string sort;          // a column's name; empty: the daemon's order (rules in policy order)
  std::size_t iterations = 0;  // refreshes before leaving; 0: until q or Ctrl-C
  bool batch = false;
};

// A usage error in the options (a --sort column not shown, --keys without --rule): the message, which
// lists the valid columns; empty when they are right.
std::string check_top_options(const TopOptions& options);

// Runs top until the iterations are done (0), q or Ctrl-C (0), tricolord refuses the request (2), or
// it is gone (3).
int run_top(CtlClient& client, const TopOptions& options, bool json, std::chrono::milliseconds timeout);

// ---- the pieces, exposed for tests -----------------------------------------------------------------

// A rate for people: three significant digits and k, M, G (1000s): 0, 999, 1.23k, 45.6M.
std::string human_rate(double per_second);

}  // namespace tricolor::control
