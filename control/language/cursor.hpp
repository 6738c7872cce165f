#pragma once
// Cursor: walks the tokens of one command line. Internal to control/.
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "control/language/language_internal.hpp"
#include "control/language/words.hpp"
#include "policer/expected.hpp"

namespace tricolor::control::detail {

class Cursor {
 public:
  explicit Cursor(const std::vector<Token>& tokens) : tokens_(tokens) {}

  bool done() const { return next_ == tokens_.size(); }
  std::string_view peek() const { return done() ? std::string_view() : tokens_[next_].text; }
  std::string_view take() { return tokens_[next_++].text; }
  std::string_view previous() const { return next_ == 0 ? std::string_view() : tokens_[next_ - 1].text; }

  // The next token, or an error saying what should have followed the previous one.
  Expected<std::string_view> expect(std::string_view what) {
    if (done()) return missing_after(previous(), what);
    return take();
  }

  // Takes the next token when it is `keyword`.
  bool accept(std::string_view keyword) {
    if (done() || tokens_[next_].text != keyword) return false;
    ++next_;
    return true;
  }

  // An error when anything follows the end of the command.
  std::optional<Error> expect_end() const {
    if (done()) return std::nullopt;
    return at(peek(), cat("unexpected after ", quote(previous()), ": the command ends there"));
  }

 private:
  const std::vector<Token>& tokens_;
  std::size_t next_ = 0;
};

}  // namespace tricolor::control::detail
