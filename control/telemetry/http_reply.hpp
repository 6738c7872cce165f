#pragma once
// HTTP/1.1 replies for tricolord's metrics listener: the status line and header fields, and the body's
// gzip form. Every reply has a Content-Length (no chunked encoding): the body is whole before the
// reply is written.
#include <cstddef>
#include <string>
#include <string_view>

#include "control/telemetry/http_request.hpp"
#include "policer/expected.hpp"

namespace tricolor::control::http {

struct ReplyHead {
  Status status = Status::ok;
  std::string_view content_type = "text/plain; charset=utf-8";
  std::size_t content_length = 0;  // of the body a GET gets (a HEAD gets the same head, no body)
  bool gzip = false;               // Content-Encoding: gzip
  bool varies_by_encoding = false; // Vary: Accept-Encoding (/metrics, gzip or not)
  bool allow = false;              // Allow: GET, HEAD (a 405)
  Version version = Version::http_1_1;  // the request's (an HTTP/1.0 client is told keep-alive)
  bool keep_alive = true;          // else Connection: close
};

// "HTTP/1.1 200 OK\r\nDate: ...\r\nContent-Type: ...\r\nContent-Length: N\r\n...\r\n\r\n".
std::string reply_head(const ReplyHead& head);

// What a client beyond the connection limit is sent before its connection is closed.
inline constexpr std::string_view kBusyReply =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 40\r\n"
    "Connection: close\r\n\r\ntricolord: too many metrics connections\n";

// The text as a gzip member (RFC 1952), zlib's fastest level: Prometheus's text shrinks about
// tenfold at it, and the time is the main lcore's CPU's.
Expected<std::string> gzip(std::string_view text);

}  // namespace tricolor::control::http
