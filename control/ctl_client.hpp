#pragma once
// tricolorctl's side of the control socket (protocol.hpp): one connection to tricolord that carries
// any number of requests, each answered in turn (the daemon answers in the order requests came), and
// the translation of a command line into a request and of a reply into what the operator reads.
//
// Every failure here is "tricolord cannot be reached or said nothing that makes sense": the caller
// exits with kExitUnreachable. The messages say what to check (is it running, who may use it).
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include "control/protocol.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

// tricolorctl's exit statuses, for scripts (the README lists them).
enum ExitStatus : int {
  kExitDone = 0,
  kExitUsage = 1,        // the command line is wrong, or a file to load cannot be read
  kExitRefused = 2,      // tricolord refused the command; the message says why
  kExitUnreachable = 3,  // tricolord not running, not ours to use, gone, or its reply broken
};

inline constexpr const char* kDefaultSocket = "/run/tricolor/tricolor.sock";

// A reply and the frame it came in (printed as is with --json).
struct Answer {
  protocol::Reply reply;
  std::string payload;
};

class CtlClient {
 public:
  // A socket path that cannot be one (empty, too long for sockaddr_un): the message, for a usage error.
  static std::string check_path(const std::string& socket_path);

  static Expected<CtlClient> connect(const std::string& socket_path);
  CtlClient(CtlClient&& other) noexcept;
  CtlClient& operator=(CtlClient&& other) noexcept;
  CtlClient(const CtlClient&) = delete;
  CtlClient& operator=(const CtlClient&) = delete;
  ~CtlClient();

  // Sends `request` and waits up to `timeout` for its reply. After an error the connection is
  // useless (closed, timed out mid-reply, or out of step): the caller gives up with exit status 3.
  Expected<Answer> call(const protocol::Request& request, std::chrono::milliseconds timeout);

  const std::string& path() const noexcept { return path_; }

 private:
  CtlClient(int fd, std::string path) noexcept : fd_(fd), path_(std::move(path)) {}
  void close() noexcept;

  int fd_ = -1;
  std::string path_;
  protocol::FrameReader reader_{protocol::kMaxReplyFrameBytes};
  std::string unread_;  // bytes received after the last reply's end (a reply of the next request)
};

// A command line as the operator wrote it, made a request. `load FILE` reads the file here (the
// daemon may not be able to read the operator's files) and sends its text. An error is a usage error:
// `load` without a file, or a file that cannot be read.
Expected<protocol::Request> request_for_line(std::string_view line, bool json);

// Prints a reply: the output on `out` (or the whole reply's JSON with `json`), or the error on `err`
// with a caret under the token at fault when the daemon gave its column in `line`. Returns
// kExitDone or kExitRefused.
int print_answer(const Answer& answer, const protocol::Request& request, bool json, std::ostream& out,
                 std::ostream& err);

}  // namespace tricolor::control
