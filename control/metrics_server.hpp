#pragma once
// tricolord's metrics listener (--metrics ADDRESS:PORT): an HTTP server (cpp-httplib) on threads of its
// own, serving GET /metrics in Prometheus's text format. It never touches the engine: each scrape asks
// the control thread for the exposition (ControlCalls) and waits; the workers are never involved.
// The threads are started by the main lcore's thread after the EAL, so they inherit its CPUs and
// never run on a worker's.
//
// A slow or stalled client holds one of the listener's threads for at most the read and write
// timeouts (2 s per read or write); connections beyond the threads wait in line, accepted.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "policer/expected.hpp"

namespace httplib {
class Server;
}

namespace tricolor::control {

struct MetricsAddress {
  std::string host;  // an IPv4 or IPv6 address (no brackets), or a name the resolver knows
  std::uint16_t port = 0;
  std::string text() const;  // "127.0.0.1:9400", "[::1]:9400"
};

// "127.0.0.1:9400", "[::1]:9400", "0.0.0.0:9400", "localhost:9400"; a port from 1 to 65535.
Expected<MetricsAddress> parse_metrics_address(std::string_view text);

class MetricsServer {
 public:
  // The exposition now, or nothing when the daemon cannot say within the scrape's time (503).
  using Exposition = std::function<std::optional<std::string>()>;

  // Binds the address now (an error names it and why), serves once start() is called.
  static Expected<std::unique_ptr<MetricsServer>> bind(const MetricsAddress& address, Exposition exposition);
  void start();  // on a thread of its own
  ~MetricsServer();  // stops serving and joins its threads

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

 private:
  MetricsServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
};

}  // namespace tricolor::control
