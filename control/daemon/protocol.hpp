#pragma once
// The control socket's wire format, between tricolord's control thread and tricolorctl (or any client
// a script writes): a byte stream of frames, each a 4-byte length in network byte order followed by
// that many bytes of UTF-8 JSON, one object.
//
// It serves two parts: it lives in control/daemon/ and tricolorctl (control/ctl/) includes it, so the
// arrow runs ctl -> daemon only; this header and protocol.cpp include nothing of the daemon, and the
// layout test lets ctl/ take this one file of daemon/ and nothing else (no DPDK reaches tricolorctl).
//
//   request  {"command": "rule change web profile silver"}     one line of the command language
//            {"command": "load", "text": "profile add ...\n"}  a policy given inline
//            "json": true (optional) asks for structured data in the reply's "result"
//   reply    {"ok": true, "output": "..."}                     "result": {...} with "json"
//            {"ok": false, "error": {"message": "...", "token": "...", "column": 17}}
//            "closing": "idle" (or another reason) when the daemon closes the connection after this
//            reply; such a reply answers no request (nothing was run) and may come unasked (idle)
//
// Why length-prefixed JSON: a client knows where a reply ends without parsing it, the server never
// scans a stream for a delimiter, a policy travels inline without escaping rules of our own, and
// every language has a JSON parser. Why limits, and why these: a request frame is at most
// kMaxRequestFrameBytes, room for a `load` of the largest policy file (kMaxPolicyFileBytes, 64 MiB)
// with every byte escaped to two (a quote, a backslash, a line end); a reply frame is at most
// kMaxReplyFrameBytes (1 GiB: the exposition or `stats --json` of about a million rules). A longer
// length is refused as soon as its 4 bytes arrive, before any of it is read or any memory is
// reserved, and a frame's buffer grows only with the bytes that arrive, so a peer cannot make the
// other side reserve memory it does not send.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policer/expected.hpp"

namespace tricolor::control::protocol {

// The daemon's own commands, besides the command language's (control/daemon/daemon_commands.hpp says what
// each does): one list for the daemon and tricolorctl's completion.
inline constexpr std::string_view kDaemonCommands[] = {"key",   "stats", "reset", "ping",  "version",
                                                       "names", "save",  "load",  "reload"};

inline constexpr std::size_t kHeaderBytes = 4;
inline constexpr std::uint32_t kMaxRequestFrameBytes = (128u << 20) + (64u << 10);
inline constexpr std::uint32_t kMaxReplyFrameBytes = 1u << 30;

// A frame: the header and the payload, ready to write.
std::string frame(std::string_view payload);

// Reassembles frames from a byte stream delivered in pieces of any size.
class FrameReader {
 public:
  explicit FrameReader(std::uint32_t max_frame_bytes) noexcept : max_(max_frame_bytes) {}

  // Takes the next bytes of the stream; returns how many it used (it stops after a whole frame, so
  // that the caller handles one request before reading the next, and at an error). Then next()
  // gives the frame, once.
  std::size_t feed(std::span<const std::uint8_t> bytes);
  std::optional<std::string> next();

  // The stream cannot go on: a frame's length is 0 or over the limit (the message says which). What
  // follows cannot be trusted to be a frame boundary, so the connection should be closed after the
  // error reply.
  const std::optional<Error>& error() const noexcept { return error_; }
  // Bytes held of a frame not yet complete (its header included).
  std::size_t pending() const noexcept { return header_got_ + payload_.size(); }

 private:
  std::uint32_t max_;
  std::uint8_t header_[kHeaderBytes] = {};
  std::size_t header_got_ = 0;
  std::uint32_t length_ = 0;  // of the frame being read, once its header is complete
  std::string payload_;
  std::optional<std::string> ready_;
  std::optional<Error> error_;
};

struct Request {
  std::string command;              // a line of the command language, or "load"
  std::optional<std::string> text;  // with "load": the policy
  bool json = false;                // structured data wanted in the reply
};

// Reads a request from a frame's payload; an error says what was wrong (not JSON, not an object, a
// missing or mistyped field, a field it does not know), quoting short.
Expected<Request> parse_request(std::string_view payload);
std::string request_json(const Request& request);

// A reply repeats at most this much of the token at fault.
inline constexpr std::size_t kMaxReplyTokenBytes = 256;

struct ReplyError {
  std::string message;
  std::string token;                  // the token at fault, as given (its first 256 bytes); empty when none
  std::optional<std::size_t> column;  // 1-based, in the command line, when known
};

// Why the daemon closes a connection after a reply that answered no request.
enum class Closing {
  none,
  permission,        // the peer may not use the socket
  too_many_clients,  // every connection slot is taken
  idle,              // no request for the idle time: connect again to go on
  request_timeout,   // a request begun was not complete within the request time
  frame,             // a frame's length is 0 or over the limit: the stream cannot go on
  busy,              // the daemon holds as many incomplete requests as it may
  other,             // a reason this side does not know (from a newer peer)
};
std::string_view to_string(Closing closing) noexcept;  // "idle", "too-many-clients", ...

struct Reply {
  bool ok = true;
  std::string output;       // text for a person (ok)
  std::string result_json;  // with Request::json: a JSON value (ok), or empty
  ReplyError error;         // when !ok
  Closing closing = Closing::none;
};

std::string reply_json(const Reply& reply);
Expected<Reply> parse_reply(std::string_view payload);

}  // namespace tricolor::control::protocol
