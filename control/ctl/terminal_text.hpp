#pragma once
// Text that came from tricolord (a reply's output, an error's message, a rule's or a key's name), as
// tricolorctl prints it on the operator's terminal. The daemon, or whoever owns the socket's path,
// could otherwise send what a terminal acts on instead of showing it: ESC ] 0 ; title BEL sets the
// window's title, ESC [ 2 J clears the screen, a C1 CSI (U+009B) does the same on some terminals, a
// lone CR lets a line overwrite itself, a bidi control shows text in another order than it is.
//
// The form, decided once for every place tricolorctl prints such text:
//   - kept as is: printable ASCII, line feeds, tabs, a CR right before a line feed (a line end), and
//     valid UTF-8 of printable code points (a policy's names are ASCII, but a message may quote more);
//   - written \xNN, each byte, as quote.hpp writes what it escapes: the other C0 controls (NUL, ESC,
//     BEL, a lone CR, ...), DEL, bytes that are not valid UTF-8 (overlong forms and surrogates
//     included), and the code points that control rather than show: the C1 controls U+0080-U+009F and
//     the bidi controls U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069.
// A backslash is not doubled: this is text for a person, not a quoted value that must read back.
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

namespace tricolor::control {

namespace terminal_detail {

// The length of the valid UTF-8 sequence (2 to 4 bytes) at the start of `text` and its code point;
// 0 when it is not one (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
struct Utf8 {
  std::size_t length = 0;
  char32_t code_point = 0;
};

inline Utf8 decode_utf8(std::string_view text) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (lead >= 0xc2 && lead <= 0xdf) length = 2;
  else if (lead == 0xe0) length = 3, low = 0xa0;
  else if (lead == 0xed) length = 3, high = 0x9f;  // not the surrogates
  else if (lead >= 0xe1 && lead <= 0xef) length = 3;
  else if (lead == 0xf0) length = 4, low = 0x90;
  else if (lead >= 0xf1 && lead <= 0xf3) length = 4;
  else if (lead == 0xf4) length = 4, high = 0x8f;
  if (length == 0 || text.size() < length || byte(1) < low || byte(1) > high) return {};
  char32_t code_point = lead & (0xff >> (length + 1));
  for (std::size_t i = 1; i < length; ++i) {
    if (i > 1 && (byte(i) < 0x80 || byte(i) > 0xbf)) return {};
    code_point = (code_point << 6) | (byte(i) & 0x3f);
  }
  return {length, code_point};
}

inline bool controls_display(char32_t c) noexcept {
  return (c >= 0x80 && c <= 0x9f) || c == 0x61c || c == 0x200e || c == 0x200f || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069);
}

// Calls `emit` with the pieces of the safe form of `text`, in order: runs of text kept as is, and
// escapes.
template <class Emit>
void escape_for_terminal(std::string_view text, Emit&& emit) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::size_t run = 0;  // where the run of bytes kept as is began
  std::size_t i = 0;
  const auto escape_bytes = [&](std::size_t count) {
    emit(text.substr(run, i - run));
    for (std::size_t k = 0; k < count; ++k) {
      const auto byte = static_cast<unsigned char>(text[i + k]);
      const char escaped[4] = {'\\', 'x', kHex[byte >> 4], kHex[byte & 0xf]};
      emit(std::string_view(escaped, sizeof escaped));
    }
    i += count;
    run = i;
  };
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if ((byte >= 0x20 && byte < 0x7f) || byte == '\n' || byte == '\t' ||
        (byte == '\r' && i + 1 < text.size() && text[i + 1] == '\n')) {
      ++i;
    } else if (byte < 0x80) {
      escape_bytes(1);  // the other controls, DEL
    } else if (const Utf8 sequence = decode_utf8(text.substr(i)); sequence.length == 0) {
      escape_bytes(1);  // not UTF-8: this byte; the next may begin a valid sequence
    } else if (controls_display(sequence.code_point)) {
      escape_bytes(sequence.length);
    } else {
      i += sequence.length;
    }
  }
  emit(text.substr(run));
}

}  // namespace terminal_detail

// The safe form of `text` (above).
inline std::string terminal_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  terminal_detail::escape_for_terminal(text, [&](std::string_view piece) { out.append(piece); });
  return out;
}

// Writes the safe form of `text` to `out` without a copy of it all (a reply may be hundreds of MB).
inline void write_terminal_text(std::ostream& out, std::string_view text) {
  terminal_detail::escape_for_terminal(text, [&](std::string_view piece) {
    out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
  });
}

}  // namespace tricolor::control
