#pragma once
// tricolord's metrics listener (--metrics ADDRESS:PORT): a small HTTP/1.1 server serving GET and HEAD
// of /metrics (Prometheus's text format) and / (a page linking it). It never touches the engine: each
// scrape asks the control thread for the exposition (the Exposition callback) and waits; the workers
// are never involved. Its two threads are started by the main lcore's thread after the EAL, so they
// inherit its CPUs and never run on a worker's:
//   - the listener: one epoll loop over non-blocking sockets (level-triggered), which never blocks on
//     a client nor on the control thread;
//   - the exposition's: calls the callback (which may wait up to 5 s for the control thread) and
//     gzips the text when a scrape asks for it. Scrapes that arrive while an exposition is being made
//     wait for the next one, which serves all of them: each reply's counters were read after its
//     request arrived, and the callback runs at most once per request (once per burst in a storm).
//
// Bounded by construction (MetricsLimits's defaults, each a constant below):
//   - kMaxConnections (64) connections at once. While all are taken, newcomers wait in the listen
//     backlog (kBacklog, 1024), holding no descriptor of the daemon's; once the listener has been full
//     for kFullWait (250 ms), each newcomer is accepted and closed at once, a one-line 503 written
//     first if the socket takes it. (Refusing at once would turn away a burst of 100 scrapers that the
//     listener answers in a few milliseconds.) accept() failing for want of descriptors (EMFILE,
//     ENFILE) stops the listener watching its socket for kAcceptPause (100 ms) instead of spinning.
//   - a request head of at most 8 KiB and 64 header lines (http_request.hpp): else 431 (414 for a
//     request line that alone is too long) and closed. No body (413), no range: a Range header is
//     ignored and the whole exposition sent with 200 (RFC 9110 14.2 allows it).
//   - kRequestTime (5 s): a new connection's first byte must come within it, and a whole head within
//     it of its first byte, however steadily the bytes come (so a first request within 10 s of the
//     connection); else a 408 and the connection closed.
//   - kIdleTime (5 s): a kept-alive connection with no request started is closed after it.
//   - kReplyTime (10 s): a reply must be taken whole within it of being queued, else the connection is
//     closed. So a scraper must read at least size / 10 s: 1 KB/s for 3 rules' 10 KB, 0.46 MB/s
//     (3.7 Mbit/s) for 10 240 rules' 4.6 MB, about 46 MB/s for a million rules' 460 MB; gzip, which
//     Prometheus asks for, divides these by about 18 (2 000 rules: 0.88 MB, 49 KB gzipped). Making
//     the exposition is not counted. Prometheus's own scrape timeout is 10 s by default.
//   - memory: a connection holds its head buffer (at most 8 KiB, pipelined bytes included) and at most
//     one reply; the replies of one exposition share its text. Pipelined requests are answered in
//     order, the next parsed only once the previous reply is written.
//   - after a last reply (Connection: close, or an error), the connection is shut for writing and what
//     the client still sends is read and dropped, for at most kLingerTime (1 s) and kLingerBytes
//     (64 KiB), so that closing with unread bytes does not reset the connection before the client has
//     the reply.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "control/telemetry/http_request.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

struct MetricsAddress {
  std::string host;  // an IPv4 or IPv6 address (no brackets), or a name the resolver knows
  std::uint16_t port = 0;
  std::string text() const;  // "127.0.0.1:9400", "[::1]:9400"
};

// "127.0.0.1:9400", "[::1]:9400", "0.0.0.0:9400", "localhost:9400"; a port from 1 to 65535.
Expected<MetricsAddress> parse_metrics_address(std::string_view text);

inline constexpr std::size_t kMaxConnections = 64;
inline constexpr int kBacklog = 1024;
inline constexpr std::chrono::milliseconds kFullWait{250};
inline constexpr std::chrono::milliseconds kAcceptPause{100};
inline constexpr std::chrono::milliseconds kRequestTime{5000};
inline constexpr std::chrono::milliseconds kIdleTime{5000};
inline constexpr std::chrono::milliseconds kReplyTime{10000};
inline constexpr std::chrono::milliseconds kLingerTime{1000};
inline constexpr std::size_t kLingerBytes = 64 * 1024;

struct MetricsLimits {
  std::size_t max_connections = kMaxConnections;
  int backlog = kBacklog;
  std::chrono::milliseconds full_wait = kFullWait;
  std::chrono::milliseconds accept_pause = kAcceptPause;
  std::size_t max_head_bytes = http::kMaxHeadBytes;
  std::size_t max_header_lines = http::kMaxHeaderLines;
  std::chrono::milliseconds request_time = kRequestTime;
  std::chrono::milliseconds idle_time = kIdleTime;
  std::chrono::milliseconds reply_time = kReplyTime;
  std::chrono::milliseconds linger_time = kLingerTime;
  std::size_t linger_bytes = kLingerBytes;
};

class MetricsServer {
 public:
  // The exposition now, or nothing when the daemon cannot say within the scrape's time (503).
  using Exposition = std::function<std::optional<std::string>()>;

  // Binds the address now (an error names it and why), serves once start() is called.
  static Expected<std::unique_ptr<MetricsServer>> bind(const MetricsAddress& address, Exposition exposition,
                                                       const MetricsLimits& limits = {});
  void start();  // on threads of its own
  ~MetricsServer();  // stops serving, closes every connection, joins its threads

  std::uint16_t port() const noexcept;  // the one bound (port 0 asks the system for one)

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

 private:
  struct Loop;
  explicit MetricsServer(std::unique_ptr<Loop> loop) noexcept;
  std::unique_ptr<Loop> loop_;
};

}  // namespace tricolor::control
