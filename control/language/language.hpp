#pragma once
// The command language: one grammar for the startup config file and the control socket. Each line is
// one command. See the doc/language.md for the grammar.
#include <string>
#include <string_view>

#include "dataplane/engine/policy.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

using dataplane::Policy;

// Runs one command line against `policy`. Commands that change the policy change it only when they
// succeed (a failed command leaves it exactly as it was); commands that list or show return their
// output. Blank lines and comments (from '#' to the end of the line) do nothing and return "".
// Errors name the offending token, quoted short and printable (policer/quote.hpp), and what was
// expected, e.g.
//   "'tcpx': expected a protocol: tcp, udp, sctp, icmp, icmpv6 or a number 0-255"
// The error's subject is the token as given. Time in proportion to the size of the policy.
Expected<std::string> execute(Policy& policy, std::string_view line);

// Loads a whole config: every line a command (a line ends at LF, CR LF or a lone CR), run in order on
// a copy of `base`; list and show lines are checked but print nothing. Any error and nothing is
// loaded: the error names the line ("line 7: ..."). Time linear in the text and the base, whatever the
// commands.
Expected<Policy> load(std::string_view text, const Policy& base = Policy{});

// The policy as commands that load back to the same policy (load(print(p)) == p).
std::string print(const Policy& policy);

}  // namespace tricolor::control
