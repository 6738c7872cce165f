#include "control/telemetry/metrics_server.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "control/telemetry/metrics_loop.hpp"
#include "policer/quote.hpp"

namespace tricolor::control {

using namespace metrics;

namespace {

constexpr std::string_view kUnavailable =
    "tricolord: the control thread did not answer in time (a large load, or stopping)\n";

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

// The exposition's thread: makes one whenever the listener asks, then wakes it.
void MetricsServer::Loop::produce() {
  std::unique_lock lock(mutex);
  for (;;) {
    wanted_changed.wait(lock, [&] { return wanted || producer_stops; });
    if (producer_stops) return;
    wanted = false;
    const bool gzip = wanted_gzip;
    lock.unlock();
    auto exposed = std::make_shared<Exposed>();
    try {
      if (auto text = exposition()) {
        exposed->available = true;
        exposed->text = std::move(*text);
        if (gzip) {
          auto packed = http::gzip(exposed->text);
          if (packed) exposed->gzipped = std::move(*packed);  // else the plain text goes to every scrape
        }
      } else {
        exposed->text = std::string(kUnavailable);
      }
    } catch (const std::exception& e) {
      exposed->available = false;
      exposed->text = "tricolord: the exposition failed: " + std::string(e.what()) + "\n";
    }
    lock.lock();
    made = std::move(exposed);
    notify_listener();
  }
}

void MetricsServer::Loop::notify_listener() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto written = ::write(wake.get(), &one, sizeof one);
}

void MetricsServer::Loop::stop() {
  stopping.store(true, std::memory_order_release);
  notify_listener();
  if (listener_thread.joinable()) listener_thread.join();
  {
    const std::lock_guard lock(mutex);
    producer_stops = true;
  }
  wanted_changed.notify_one();
  if (exposition_thread.joinable()) exposition_thread.join();  // within the callback's own bound
}

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

Expected<std::unique_ptr<MetricsServer>> MetricsServer::bind(const MetricsAddress& address, Exposition exposition,
                                                             const MetricsLimits& limits) {
  const std::string where = "--metrics " + address.text() + ": cannot listen there: ";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int status = ::getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &found); status != 0)
    return Error{"metrics", where + ::gai_strerror(status)};
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, ::freeaddrinfo);
  auto loop = std::make_unique<Loop>();
  int error = EADDRNOTAVAIL;
  for (const addrinfo* a = found; a != nullptr && !loop->listener; a = a->ai_next) {
    UniqueFd fd{::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol)};
    // SO_REUSEADDR (a restart need not wait out TIME_WAIT), not SO_REUSEPORT: with it a second daemon
    // given the same address would share the port and answer half the scrapes.
    const int yes = 1;
    if (!fd || ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) != 0 ||
        ::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), limits.backlog) != 0) {
      error = errno;
      continue;
    }
    loop->listener = std::move(fd);
  }
  if (!loop->listener) return Error{"metrics", where + errno_text(error)};
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (::getsockname(loop->listener.get(), reinterpret_cast<sockaddr*>(&bound), &length) == 0)
    loop->port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                                                   : reinterpret_cast<const sockaddr_in&>(bound).sin_port);
  loop->epoll = UniqueFd{::epoll_create1(EPOLL_CLOEXEC)};
  loop->wake = UniqueFd{::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  if (!loop->epoll || !loop->wake) return Error{"metrics", "--metrics " + address.text() + ": " + errno_text(errno)};
  for (const auto& [fd, id] : {std::pair{loop->listener.get(), kListenerId}, std::pair{loop->wake.get(), kWakeId}}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = id;
    if (::epoll_ctl(loop->epoll.get(), EPOLL_CTL_ADD, fd, &event) != 0)
      return Error{"metrics", "--metrics " + address.text() + ": cannot watch its socket: " + errno_text(errno)};
  }
  loop->limits = limits;
  loop->exposition = std::move(exposition);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(loop)));
}

MetricsServer::MetricsServer(std::unique_ptr<Loop> loop) noexcept : loop_(std::move(loop)) {}

void MetricsServer::start() {
  loop_->listener_thread = std::thread([loop = loop_.get()] { loop->run(); });
  loop_->exposition_thread = std::thread([loop = loop_.get()] { loop->produce(); });
  // Named, so that ps and top say what they are (at most 15 characters).
  ::pthread_setname_np(loop_->listener_thread.native_handle(), "metrics-http");
  ::pthread_setname_np(loop_->exposition_thread.native_handle(), "metrics-expose");
}

MetricsServer::~MetricsServer() { loop_->stop(); }

std::uint16_t MetricsServer::port() const noexcept { return loop_->port; }

}  // namespace tricolor::control
