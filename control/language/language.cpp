// The API of the command language: execute() one line, load() a text, print() a policy (print.cpp).
#include "control/language/language.hpp"

#include <cstddef>
#include <string>
#include <string_view>

#include "control/language/commands.hpp"
#include "control/language/draft.hpp"
#include "control/language/store.hpp"
#include "control/language/words.hpp"

namespace tricolor::control {

using detail::Draft;
using detail::Output;

// One command, on the policy itself: look-ups scan it, O(size of the policy), nothing copied.
Expected<std::string> execute(Policy& policy, std::string_view line) {
  detail::PolicyStore store(policy);
  return detail::run_command(store, line, Output::produce);
}

// Linear in the text and the base: every command costs the same on a draft however large it grows,
// and the draft becomes a policy once, at the end.
Expected<Policy> load(std::string_view text, const Policy& base) {
  Draft draft(base);
  std::size_t line_number = 1;
  for (std::size_t start = 0;; ++line_number) {
    // A line ends at LF, CR LF or a lone CR (old Mac editors write CR only).
    const std::size_t end = text.find_first_of("\r\n", start);
    const std::string_view line =
        text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (auto result = detail::run_command(draft, line, Output::discard); !result) {
      const Error& error = result.error();
      return Error{error.subject, detail::cat("line ", std::to_string(line_number), ": ", error.message)};
    }
    if (end == std::string_view::npos) break;
    start = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);
  }
  return std::move(draft).finish();
}

}  // namespace tricolor::control
