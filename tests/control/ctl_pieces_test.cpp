// tricolorctl's pieces that need no daemon (issue 21): the text it prints made safe for a terminal
// (control/terminal_text.hpp).
#include "control/terminal_text.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace tricolor::control {
namespace {

using namespace std::string_literals;

// ---- terminal_text ---------------------------------------------------------------------------------

TEST(TerminalText, KeepsPrintableTextLineEndsAndTabs) {
  EXPECT_EQ(terminal_text("rule add web profile gold\n\tx\r\n"), "rule add web profile gold\n\tx\r\n");
  EXPECT_EQ(terminal_text("back\\slash 'quote'"), "back\\slash 'quote'");
  EXPECT_EQ(terminal_text(""), "");
}

TEST(TerminalText, EscapesControlsAsQuoteDoes) {
  EXPECT_EQ(terminal_text("\x1b]0;title\x07\x1b[2J"), "\\x1b]0;title\\x07\\x1b[2J");
  EXPECT_EQ(terminal_text("a\0b"s), "a\\x00b");
  EXPECT_EQ(terminal_text("over\rwrite"), "over\\x0dwrite");  // a lone CR: the line would overwrite itself
  EXPECT_EQ(terminal_text("end\r"), "end\\x0d");
  EXPECT_EQ(terminal_text("\x7f\x08\x0b\x0c"), "\\x7f\\x08\\x0b\\x0c");
}

TEST(TerminalText, KeepsValidUtf8OfPrintableCodePoints) {
  for (const char* text : {"caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x9a\xa6", "\xc2\xa0no-break",
                           "\xef\xbb\xbf", "\xf4\x8f\xbf\xbf"})
    EXPECT_EQ(terminal_text(text), text);
}

TEST(TerminalText, EscapesC1AndBidiControls) {
  EXPECT_EQ(terminal_text("\xc2\x9b" "31m"), "\\xc2\\x9b31m");  // U+009B, a CSI
  EXPECT_EQ(terminal_text("\xc2\x80\xc2\x9f"), "\\xc2\\x80\\xc2\\x9f");
  EXPECT_EQ(terminal_text("a\xe2\x80\xae" "cba"), "a\\xe2\\x80\\xaecba");  // U+202E RIGHT-TO-LEFT OVERRIDE
  for (const char* control : {"\xe2\x80\xaa", "\xe2\x80\xac", "\xe2\x81\xa6", "\xe2\x81\xa9", "\xe2\x80\x8e",
                              "\xe2\x80\x8f", "\xd8\x9c"}) {
    const std::string out = terminal_text(control);
    EXPECT_EQ(out.size(), 4 * std::string(control).size()) << out;
    EXPECT_EQ(out.find_first_not_of("\\x0123456789abcdef"), std::string::npos) << out;
  }
  EXPECT_EQ(terminal_text("\xe2\x81\xa5"), "\xe2\x81\xa5");  // U+2065, unassigned, next to the isolates: kept
}

TEST(TerminalText, EscapesWhatIsNotUtf8ByteByByte) {
  EXPECT_EQ(terminal_text("\xff"), "\\xff");
  EXPECT_EQ(terminal_text("\xc0\x80"), "\\xc0\\x80");                // an overlong NUL
  EXPECT_EQ(terminal_text("\xe0\x80\x80"), "\\xe0\\x80\\x80");        // overlong
  EXPECT_EQ(terminal_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");        // a surrogate
  EXPECT_EQ(terminal_text("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(terminal_text("x\xe2\x80"), "x\\xe2\\x80");              // cut short
  EXPECT_EQ(terminal_text("\xe2\x80\xc3\xa9"), "\\xe2\\x80\xc3\xa9");  // a valid sequence after a broken one
}

TEST(TerminalText, WrittenToAStreamAsMade) {
  const std::string text = "a\x1b[31mb\xc2\x9b\xe2\x80\xae\ttail\n";
  std::ostringstream out;
  write_terminal_text(out, text);
  EXPECT_EQ(out.str(), terminal_text(text));
}

}  // namespace
}  // namespace tricolor::control
