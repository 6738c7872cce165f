#pragma once
// The pieces of the command language below the commands: the tokenizer, and the parsers and printers
// of single values. Internal to control/, exposed for the tests.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/engine/policy.hpp"
#include "policer/expected.hpp"
#include "policer/profile.hpp"

namespace tricolor::control::detail {

struct Token {
  std::string_view text;  // a view into the line
  std::size_t column;     // 1-based
};

// Splits a line at spaces, tabs, CR, LF, VT and FF; '#' starts a comment that runs to the end.
std::vector<Token> tokenize(std::string_view line);

// Words with a role in the grammar (commands, clauses, algorithms, parameters, colors, actions,
// protocol and DSCP names, key kinds, fallbacks, l1/l2/l3). Profile, color map and rule names may not
// be one of them.
bool is_keyword(std::string_view word);

// An IPv4 (a.b.c.d[/n]) or IPv6 (RFC 4291 text form[/n]) prefix; no /n means a host; host bits must
// be zero. Errors have the text as subject.
Expected<dataplane::Prefix> parse_prefix(std::string_view text);

// Printed forms that parse back to the same value.
std::string format_prefix(const dataplane::Prefix& prefix);         // IPv6 in RFC 5952 form
std::string format_rate(std::uint64_t rate, policer::Unit unit);    // the largest exact unit: 100mbit
std::string format_burst(std::uint64_t burst, policer::Unit unit);  // 64k, 1500, 64pkt
std::string format_dscp(std::uint8_t dscp);                         // by name where it has one
std::string format_duration(std::uint64_t ns);                      // the largest exact unit: 30s, 2m, 1500ms
std::string format_capacity(std::uint32_t keys);                    // 64k, 1m, 1000

}  // namespace tricolor::control::detail
