// tricolorctl's pieces that need no daemon (issue 21): the text it prints made safe for a terminal
// (control/ctl/terminal_text.hpp), and a policy file written without following a link, opening a FIFO
// or leaving anything behind on a failure (write_policy_file in control/language/policy_file.hpp).
#include "control/language/policy_file.hpp"
#include "control/ctl/terminal_text.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
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

// ---- write_policy_file -----------------------------------------------------------------------------

class WritePolicyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tricolor-policy-file-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    old_umask_ = ::umask(022);
  }
  void TearDown() override {
    ::umask(old_umask_);
    [[maybe_unused]] const int ignored = std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  static std::string read(const std::string& file) {
    std::ifstream in(file);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void write(const std::string& file, const std::string& text) { std::ofstream(file) << text; }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    DIR* d = ::opendir(dir_.c_str());
    while (const dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.insert(e->d_name);
    ::closedir(d);
    return names;
  }

  std::string dir_;
  mode_t old_umask_ = 0;
};

TEST_F(WritePolicyFile, ANewFileHasTheTextAndTheUmasksMode) {
  ASSERT_TRUE(write_policy_file(path("p.policy"), "rule add a profile b\n"));
  EXPECT_EQ(read(path("p.policy")), "rule add a profile b\n");
  struct stat s {};
  ASSERT_EQ(::stat(path("p.policy").c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 07777, 0644u);
  EXPECT_EQ(entries(), std::set<std::string>{"p.policy"});
}

TEST_F(WritePolicyFile, AnExistingFileIsReplacedKeepingItsMode) {
  write(path("p.policy"), "old text, longer than the new one\n");
  ASSERT_EQ(::chmod(path("p.policy").c_str(), 0640), 0);
  ASSERT_TRUE(write_policy_file(path("p.policy"), "new\n"));
  EXPECT_EQ(read(path("p.policy")), "new\n");
  struct stat s {};
  ASSERT_EQ(::stat(path("p.policy").c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 07777, 0640u);
  EXPECT_EQ(entries(), std::set<std::string>{"p.policy"});
}

TEST_F(WritePolicyFile, ASymbolicLinkIsNotFollowed) {
  write(path("target"), "precious\n");
  ASSERT_EQ(::symlink(path("target").c_str(), path("link").c_str()), 0);
  auto written = write_policy_file(path("link"), "evil\n");
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().message.find("is a symbolic link: not replaced"), std::string::npos) << written.error().message;
  EXPECT_EQ(read(path("target")), "precious\n");
  struct stat s {};
  ASSERT_EQ(::lstat(path("link").c_str(), &s), 0);
  EXPECT_TRUE(S_ISLNK(s.st_mode));
  ASSERT_EQ(::symlink(path("nowhere").c_str(), path("dangling").c_str()), 0);
  EXPECT_FALSE(write_policy_file(path("dangling"), "x\n"));
  EXPECT_EQ(::access(path("nowhere").c_str(), F_OK), -1);
  EXPECT_EQ(entries(), (std::set<std::string>{"target", "link", "dangling"}));
}

TEST_F(WritePolicyFile, WhatIsNotARegularFileIsRefused) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  ASSERT_EQ(::mkdir(path("dir").c_str(), 0755), 0);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path("sock").c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  for (const auto& [name, kind] : {std::pair{path("fifo"), "a FIFO"}, std::pair{path("dir"), "a directory"},
                                   std::pair{path("sock"), "a socket"},
                                   std::pair{std::string("/dev/null"), "a character device"}}) {
    auto written = write_policy_file(name, "x\n");  // a FIFO would block an open for writing: never opened
    ASSERT_FALSE(written) << name;
    EXPECT_NE(written.error().message.find("is "s + kind + ": not replaced"), std::string::npos)
        << written.error().message;
  }
  ::close(sock);
  EXPECT_EQ(entries(), (std::set<std::string>{"fifo", "dir", "sock"}));
  auto slash = write_policy_file(path("dir") + "/", "x\n");
  ASSERT_FALSE(slash);
  EXPECT_NE(slash.error().message.find("names a directory"), std::string::npos) << slash.error().message;
}

TEST_F(WritePolicyFile, AFixedTemporaryNameIsNeverUsed) {
  write(path("target"), "precious\n");
  ASSERT_EQ(::symlink(path("target").c_str(), path("p.policy.tmp").c_str()), 0);
  ASSERT_EQ(::mkfifo(path("p.policy~").c_str(), 0644), 0);
  ASSERT_TRUE(write_policy_file(path("p.policy"), "new\n"));
  EXPECT_EQ(read(path("p.policy")), "new\n");
  EXPECT_EQ(read(path("target")), "precious\n");
  EXPECT_EQ(entries(), (std::set<std::string>{"target", "p.policy.tmp", "p.policy~", "p.policy"}));
}

TEST_F(WritePolicyFile, ARelativePathIsInTheWorkingDirectory) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(::chdir(dir_.c_str()), 0);
  const bool written = static_cast<bool>(write_policy_file("rel.policy", "x\n"));
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_TRUE(written);
  EXPECT_EQ(read(path("rel.policy")), "x\n");
}

TEST_F(WritePolicyFile, AMissingDirectoryIsSaid) {
  auto written = write_policy_file(path("no/such/p.policy"), "x\n");
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().message.find("cannot open its directory"), std::string::npos) << written.error().message;
  EXPECT_NE(written.error().message.find("No such file or directory"), std::string::npos) << written.error().message;
}

TEST_F(WritePolicyFile, AFailedWriteLeavesThePathAsItWasAndNothingElse) {
  write(path("p.policy"), "old\n");
  // A file size limit makes the write fail part way (EFBIG, SIGXFSZ ignored).
  struct sigaction ignore {}, old_action {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGXFSZ, &ignore, &old_action);
  rlimit old_limit{};
  ::getrlimit(RLIMIT_FSIZE, &old_limit);
  rlimit small = old_limit;
  small.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  auto written = write_policy_file(path("p.policy"), std::string(5000, 'x'));
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &old_action, nullptr);
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().message.find("cannot write"), std::string::npos) << written.error().message;
  EXPECT_NE(written.error().message.find("File too large; nothing replaced"), std::string::npos)
      << written.error().message;
  EXPECT_EQ(read(path("p.policy")), "old\n");
  EXPECT_EQ(entries(), std::set<std::string>{"p.policy"});
}

}  // namespace
}  // namespace tricolor::control
