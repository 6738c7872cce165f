#pragma once
// HTTP/1.1 request heads (RFC 9110, 9112) for tricolord's metrics listener: bytes in, requests or an
// error with the status to send out. No sockets: the listener (metrics_server.cpp) reads, this parses,
// so that the parsing can be tested byte by byte and fuzzed.
//
// What a head may be (each limit a constant below, and a field of HeadLimits):
//   - kMaxHeadBytes (8 KiB): the request line, the header lines and the empty line that ends them, all
//     their CRs and LFs counted. A head that has not ended when its buffer holds that many bytes is
//     refused: 414 when the request line alone has not ended, 431 otherwise. The buffer never holds
//     more (feed() takes at most room() bytes), so a client cannot make it grow.
//   - kMaxHeaderLines (64) header lines; the 65th is refused with 431 as soon as it ends.
//   - No body: a Content-Length other than 0 or any Transfer-Encoding is refused with 413 (a scrape
//     has no body, and one not read would be taken for the next request); a Content-Length that is not
//     a number is 400.
//   - HTTP/1.0 and HTTP/1.1; any other HTTP/d.d is 505; anything else where the version goes is 400.
//     An HTTP/1.1 request without exactly one Host is 400 (RFC 9112 3.2 says it must be).
//   - Lines end in CRLF or a bare LF (RFC 9112 2.2 lets a recipient take LF alone; nc and shell
//     scripts send it); a CR not followed by LF is 400. Obsolete line folding (a header line starting
//     with a space or tab) is 400, as RFC 9112 5.2 allows, and so is whitespace before a field's colon.
//   - A NUL, any other control byte (a tab is allowed in field values only) or DEL is 400, refused as
//     soon as it arrives. Bytes >= 0x80 are allowed in field values only (obs-text).
// Every error message names what was wrong and where, quoting the client's text (quote()).
//
// Keep-alive: HTTP/1.1 keeps the connection unless Connection says close; HTTP/1.0 closes it unless
// Connection says keep-alive. Pipelined requests: next() returns one request and keeps the bytes that
// follow it for the next call, so the listener answers them in order, one at a time.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace tricolor::control::http {

inline constexpr std::size_t kMaxHeadBytes = 8 * 1024;
inline constexpr std::size_t kMaxHeaderLines = 64;

// The statuses the listener sends, by their RFC 9110 names.
enum class Status : int {
  ok = 200,
  bad_request = 400,
  not_found = 404,
  method_not_allowed = 405,
  request_timeout = 408,
  content_too_large = 413,
  uri_too_long = 414,
  header_fields_too_large = 431,
  service_unavailable = 503,
  version_not_supported = 505,
};
int code(Status status) noexcept;
std::string_view reason(Status status) noexcept;  // "OK", "Not Found", ...

enum class Method { get, head, other };
enum class Version { http_1_0, http_1_1 };

struct Request {
  Method method = Method::other;
  std::string method_name;  // as sent: "GET", "POST", ...
  std::string target;       // as sent: "/metrics?x=1", or absolute: "http://host:9400/metrics"
  std::string path;         // the target's path, without the query: "/metrics"
  Version version = Version::http_1_1;
  bool keep_alive = true;   // the connection stays open after the reply
  bool accepts_gzip = false;  // Accept-Encoding allows gzip
};

struct HeadError {
  Status status = Status::bad_request;
  std::string message;  // what was wrong, for the reply's body
};

struct HeadLimits {
  std::size_t max_head_bytes = kMaxHeadBytes;
  std::size_t max_header_lines = kMaxHeaderLines;
};

struct NeedMore {};
using Parsed = std::variant<NeedMore, Request, HeadError>;

class RequestParser {
 public:
  explicit RequestParser(HeadLimits limits = {});

  // Takes the next bytes of the stream into the head buffer: at most room() of them; returns how many.
  std::size_t feed(std::string_view bytes);
  // Bytes the buffer can take now: what the head limit leaves (0 once an error is found).
  std::size_t room() const noexcept;

  // The next request from what was fed: NeedMore, a Request (its bytes leave the buffer; what follows
  // stays for the next call), or a HeadError (the same one from then on: the stream cannot go on).
  Parsed next();

  // Bytes held: of the request being read, and of those pipelined after it.
  std::size_t buffered() const noexcept { return buffer_.size(); }

 private:
  std::optional<HeadError> take_request_line(std::string_view line);
  std::optional<HeadError> take_header(std::string_view line);
  std::optional<HeadError> finish_head();
  HeadError fail(Status status, std::string message);
  void reset_head();

  HeadLimits limits_;
  std::string buffer_;
  std::size_t scanned_ = 0;     // bytes of buffer_ checked so far
  std::size_t line_start_ = 0;  // where the line being scanned starts
  std::size_t header_lines_ = 0;
  bool request_line_done_ = false;
  Request request_;
  std::size_t hosts_ = 0;
  bool connection_close_ = false;
  bool connection_keep_alive_ = false;
  std::string accept_encoding_;  // every Accept-Encoding line's value, joined
  std::optional<HeadError> error_;
};

// Whether an Accept-Encoding value allows gzip: "gzip", "x-gzip" or "*" with a q-value above 0, gzip
// not refused by name (RFC 9110 12.5.3).
bool accepts_gzip(std::string_view accept_encoding);

}  // namespace tricolor::control::http
