// libFuzzer target for the command language: the input is config text.
//  - load() it; when it loads, print() must load back to the same policy and print the same text;
//  - execute() it line by line (lines end at LF, CR LF or a lone CR, as load() reads them) on one
//    policy: a failed command must leave the policy as it was, every error must name its token, quoted,
//    and be one line of printable ASCII, and the policy reached must print back to itself too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "control/language/language.hpp"
#include "policer/quote.hpp"

namespace {

using tricolor::control::execute;
using tricolor::control::load;
using tricolor::control::print;
using tricolor::quote;
using tricolor::dataplane::Policy;

void check(bool condition) {
  if (!condition) std::abort();
}

void check_prints_back(const Policy& policy) {
  const std::string printed = print(policy);
  const auto reloaded = load(printed);
  check(reloaded.ok());
  check(*reloaded == policy);
  check(print(*reloaded) == printed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Each command copies the policy to compare; long inputs only slow the search down.
  if (size > 8192) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const auto loaded = load(text);
  if (loaded.ok()) check_prints_back(*loaded);

  Policy policy;
  bool all_ok = true;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find_first_of("\r\n", start), text.size());
    const std::string_view line = text.substr(start, end - start);
    const Policy before = policy;
    const auto result = execute(policy, line);
    if (!result.ok()) {
      all_ok = false;
      check(policy == before);
      const auto& error = result.error();
      check(!error.message.empty());
      // "'<subject>': ..." for a token; a missing token has an empty subject.
      if (!error.subject.empty()) check(error.message.rfind(quote(error.subject) + ": ", 0) == 0);
      // At most a few quoted tokens (each at most 64 bytes shown, 4 characters a byte) and fixed text.
      check(error.message.size() < 1024);
      check(std::all_of(error.message.begin(), error.message.end(), [](char c) { return c >= 0x20 && c <= 0x7e; }));
    }
    start = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);
  }
  // Lines that load() runs are the same lines: the same policy when every one succeeded.
  check(all_ok == loaded.ok());
  if (loaded.ok()) check(policy == *loaded);
  check_prints_back(policy);
  return 0;
}
