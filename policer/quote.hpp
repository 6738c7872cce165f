#pragma once
// quote(): user text (a token, a name, a path) as error messages show it. Every message that repeats
// what a user typed goes through it, so that a message stays one short line of printable ASCII
// whatever the input: a 10 MB token does not make a 10 MB message, a terminal escape sequence in a
// config file does not reach the operator's terminal, and a NUL, a UTF-8 byte order mark or a no-break
// space shows instead of vanishing.
//
// The form, exactly:
//   - the text between single quotes: 'gold';
//   - printable ASCII (0x20-0x7e) as itself, except the quote and the backslash, written \' and \\;
//   - every other byte (controls, DEL, each byte >= 0x80, so each byte of a UTF-8 sequence) as \xNN,
//     two lower-case hex digits: a NUL is '\x00', ESC ] 0 ; t BEL is '\x1b]0;t\x07', a no-break space
//     '\xc2\xa0';
//   - at most kQuoteMaxBytes bytes of the text (kQuotePathMaxBytes for a path); a longer text is cut there and the closing quote is
//     followed by "... (N bytes)", N its whole length: 'aaaa...a'... (10485760 bytes).
// So a quoted text that ends in its closing quote is the whole text, and the result is at most
// 2 + 4 * 64 + 30 characters.
#include <cstddef>
#include <string>
#include <string_view>

namespace tricolor {

// The longest name the command language accepts (64) shows whole.
inline constexpr std::size_t kQuoteMaxBytes = 64;
// A file path shows whole up to this length (paths are longer than names, and an operator needs the
// file name at their end).
inline constexpr std::size_t kQuotePathMaxBytes = 256;

inline std::string quote(std::string_view text, std::size_t max_bytes = kQuoteMaxBytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string_view shown = text.substr(0, max_bytes);
  std::string out;
  out.reserve(shown.size() + 2);
  out += '\'';
  for (const char c : shown) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte >= 0x20 && byte <= 0x7e) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  out += '\'';
  if (shown.size() < text.size()) out.append("... (").append(std::to_string(text.size())).append(" bytes)");
  return out;
}

}  // namespace tricolor
