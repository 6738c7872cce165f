#pragma once
// tricolorctl's side of the control socket (protocol.hpp): one connection to tricolord that carries
// any number of requests, each answered in turn (the daemon answers in the order requests came), and
// the translation of a command line into a request and of a reply into what the operator reads.
//
// Every failure of a call is "tricolord cannot be reached or said nothing that makes sense": the
// caller exits with kExitUnreachable. The messages say what to check (is it running, who may use it).
// Whatever the daemon sends is printed through terminal_text.hpp (no escape sequence reaches the
// terminal), and a reply that is not what it should be is "a broken reply from tricolord: ...", never
// a crash.
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

#include "control/daemon/protocol.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

// tricolorctl's exit statuses, for scripts (the README lists them).
enum ExitStatus : int {
  kExitDone = 0,
  kExitUsage = 1,        // the command line is wrong, a file to load cannot be read or one to save written
  kExitRefused = 2,      // tricolord refused the command; the message says why
  kExitUnreachable = 3,  // tricolord not running, not ours to use, refusing connections, gone, or its reply broken
};

inline constexpr const char* kDefaultSocket = "/run/tricolor/tricolor.sock";

// A reply and the frame it came in (printed, made safe, with --json).
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

  // Sends a request (or its JSON, made once by the caller: a load's may be 128 MiB) and waits up to
  // `timeout` for its reply. A reply with "closing" answered nothing (the daemon ran no request with
  // it and closes the connection): after "idle" (a connection kept too long without a request, as the
  // shell and top keep theirs) this connects again and sends the request once more, silently; after
  // any other reason it is an error with the daemon's message. Before sending on a connection kept
  // from an earlier call it checks, without waiting, whether the daemon has closed it meanwhile (an
  // idle notice, or the end of the stream), and connects again first. A request is never sent again
  // after a reply that was not "closing" (a change must not be applied twice), nor after none.
  // After an error the connection is closed: the caller gives up with exit status 3.
  Expected<Answer> call(const protocol::Request& request, std::chrono::milliseconds timeout);
  Expected<Answer> call(std::string_view request_json, std::chrono::milliseconds timeout);

  const std::string& path() const noexcept { return path_; }

 private:
  enum class Kept { open, closed_by_daemon };
  CtlClient(int fd, std::string path) noexcept : fd_(fd), path_(std::move(path)) {}
  void close() noexcept;
  Expected<Kept> check_kept();
  Expected<bool> reconnect();
  Expected<Answer> exchange(std::string_view request_json, std::chrono::steady_clock::time_point deadline,
                            std::chrono::milliseconds timeout);
  // Feeds bytes received to the reader: a whole frame goes to `payload`, the bytes after it to unread_.
  void feed(std::string_view bytes, std::optional<std::string>& payload);

  int fd_ = -1;
  std::string path_;
  protocol::FrameReader reader_{protocol::kMaxReplyFrameBytes};
  std::string unread_;  // bytes received after the last reply's end (a reply of the next request)
};

// What one line (or the command line's words) makes tricolorctl do: a request to send, and for `save
// FILE` the file to write the policy's text to. Built before connecting, so that a wrong command line
// is a usage error whatever the daemon's state.
struct CtlRequest {
  protocol::Request request;  // for load, its text is in `json` only
  std::string json;           // the request as sent (protocol::request_json), made once
  std::string caret_line;     // the line the daemon's error column points into; empty: no caret
  std::string save_path;      // save FILE: where tricolorctl writes the text (the request is `save`)
};

// A line as the operator wrote it, in the shell or a script: its words are the language's tokens
// (control/language/language_internal.hpp: spaces, tabs, CR, LF, VT, FF; '#' starts a comment). `load FILE`
// reads the file here (the daemon may not be able to read the operator's files) and sends its text;
// `save FILE` asks for the running policy's text, which tricolorctl writes (write_policy_file). Each
// takes exactly one word. An error is a usage error: a missing or second word, a file that cannot be
// read, a load whose request would exceed protocol::kMaxRequestFrameBytes.
Expected<CtlRequest> request_for_line(std::string_view line, bool json);
// The words of tricolorctl's command line: `load FILE` and `save FILE` take the file name as given
// (it may hold spaces); other commands are their words joined by spaces, as a line.
Expected<CtlRequest> request_for_words(std::span<const std::string> words, bool json);

// How send_and_print prints: `where` goes before every message ("line 4: "), `gone` before the
// message of a call that failed ("tricolord is gone: " in the shell).
struct PrintOptions {
  bool json = false;
  std::chrono::milliseconds timeout{30'000};
  std::string_view where;
  std::string_view gone;
};

// Sends the request and prints its reply (print_answer), or, for save FILE, writes the file and says
// so ("saved N rules to FILE"). Returns the exit status: kExitDone, kExitUsage (a file that cannot be
// written), kExitRefused or kExitUnreachable.
int send_and_print(CtlClient& client, const CtlRequest& request, const PrintOptions& options, std::ostream& out,
                   std::ostream& err);

// Prints a reply: the output on `out` (or the reply's JSON with `json`, ASCII only when it holds more),
// or the error on `err` with a caret under the token at fault when the daemon gave its column in
// `caret_line`. Returns kExitDone, kExitRefused, or kExitUnreachable for a reply that makes no sense
// (said on `err`).
int print_answer(const Answer& answer, std::string_view caret_line, bool json, std::ostream& out, std::ostream& err,
                 std::string_view where = {});

// "a broken reply from tricolord: WHAT", the error of every reply that is not what it should be.
Error broken_reply(std::string_view what);

}  // namespace tricolor::control
