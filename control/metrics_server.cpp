#include "control/metrics_server.hpp"

#include <httplib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <sys/socket.h>

#include "control/prometheus.hpp"
#include "policer/quote.hpp"

namespace tricolor::control {
namespace {

// The listener's threads: a scrape takes them a few milliseconds; more would only add waiting on the
// main lcore's CPU they share.
constexpr std::size_t kThreads = 8;
constexpr time_t kIoTimeoutSeconds = 2;
constexpr int kBacklog = 1024;

constexpr std::string_view kIndexPage =
    "<html><head><title>tricolord</title></head><body><h1>tricolord</h1>"
    "<p><a href=\"/metrics\">/metrics</a>: the counters in Prometheus's text format.</p></body></html>\n";

}  // namespace

std::string MetricsAddress::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Expected<MetricsAddress> parse_metrics_address(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return Error{"metrics", "--metrics " + quote(text) + ": " + why + " (e.g. 127.0.0.1:9400 or [::1]:9400)"};
  };
  MetricsAddress address;
  std::string_view port;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad("expected [IPv6 address]:PORT");
    address.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("expected ADDRESS:PORT");
    address.host = std::string(text.substr(0, colon));
    if (address.host.find(':') != std::string::npos) return bad("an IPv6 address goes in brackets");
    port = text.substr(colon + 1);
  }
  if (address.host.empty()) return bad("the address is missing (0.0.0.0 listens on every interface)");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value == 0 || value > 65535)
    return bad("the port must be a number from 1 to 65535");
  address.port = static_cast<std::uint16_t>(value);
  return address;
}

Expected<std::unique_ptr<MetricsServer>> MetricsServer::bind(const MetricsAddress& address, Exposition exposition) {
  std::unique_ptr<MetricsServer> self(new MetricsServer);
  self->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *self->server_;
  server.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  server.set_read_timeout(kIoTimeoutSeconds, 0);
  server.set_write_timeout(kIoTimeoutSeconds, 0);
  server.set_keep_alive_timeout(kIoTimeoutSeconds);
  server.set_payload_max_length(64 * 1024);  // a scrape has no body
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which a second daemon given the
  // same address would share the port and answer half the scrapes.
  int listening = -1;
  server.set_socket_options([&listening](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listening = sock;
  });
  server.Get("/metrics", [exposition = std::move(exposition)](const httplib::Request&, httplib::Response& response) {
    if (auto text = exposition()) {
      response.set_content(std::move(*text), std::string(kPrometheusContentType));
    } else {
      response.status = 503;
      response.set_content("tricolord: the control thread did not answer in time (a large load, or stopping)\n",
                           "text/plain");
    }
  });
  server.Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(std::string(kIndexPage), "text/html");
  });
  errno = 0;
  if (!server.bind_to_port(address.host, address.port))
    return Error{"metrics", "--metrics " + address.text() + ": cannot listen there: " +
                                (errno != 0 ? std::string(std::strerror(errno))
                                            : std::string("no such address here, or the port is taken"))};
  // cpp-httplib listens with a backlog of 5 (built into Debian's library): a burst of scrapers beyond
  // it would see their connections dropped and retried seconds later. Listening again on the same
  // socket only raises the backlog.
  if (listening >= 0) ::listen(listening, kBacklog);
  return self;
}

void MetricsServer::start() {
  listener_ = std::thread([server = server_.get()] { server->listen_after_bind(); });
  // Until it runs: a stop() before that would be missed and the join would wait forever.
  for (int i = 0; i < 1000 && !server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

MetricsServer::~MetricsServer() {
  if (server_) server_->stop();
  if (listener_.joinable()) listener_.join();
}

}  // namespace tricolor::control
