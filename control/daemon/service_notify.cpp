#include "control/daemon/service_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <utility>

namespace tricolor::control {

namespace {

std::optional<std::uint64_t> number(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  std::uint64_t value = 0;
  const char* end = text + std::strlen(text);
  const auto [at, error] = std::from_chars(text, end, value);
  if (error != std::errc() || at != end) return std::nullopt;
  return value;
}

}  // namespace

ServiceNotifier ServiceNotifier::from_environment() {
  ServiceNotifier n;
  const char* socket = std::getenv("NOTIFY_SOCKET");
  const auto watchdog_usec = number(std::getenv("WATCHDOG_USEC"));
  const auto watchdog_pid = number(std::getenv("WATCHDOG_PID"));
  const std::string address = socket != nullptr ? socket : "";
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  // A path or an abstract name ('@'); anything else (systemd 252 also knows vsock: not for a daemon on
  // this host) is said and ignored.
  if (address.empty()) return n;
  if (address[0] != '/' && address[0] != '@') {
    std::cerr << "tricolord: NOTIFY_SOCKET " << address << ": not a path or an abstract socket name: not notifying"
              << std::endl;
    return n;
  }
  if (address.size() >= sizeof(sockaddr_un{}.sun_path)) {
    std::cerr << "tricolord: NOTIFY_SOCKET is longer than a socket address: not notifying" << std::endl;
    return n;
  }
  n.fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (n.fd_ < 0) {
    std::cerr << "tricolord: cannot make a socket to notify the service manager: " << std::strerror(errno) << std::endl;
    return n;
  }
  n.address_ = address;
  if (n.address_[0] == '@') n.address_[0] = '\0';
  if (watchdog_usec && *watchdog_usec > 0 && (!watchdog_pid || *watchdog_pid == static_cast<std::uint64_t>(::getpid())))
    n.watchdog_interval_ = std::chrono::microseconds(*watchdog_usec / 2);
  return n;
}

ServiceNotifier::ServiceNotifier(ServiceNotifier&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      address_(std::move(other.address_)),
      watchdog_interval_(other.watchdog_interval_),
      last_ping_(other.last_ping_),
      said_failure_(other.said_failure_) {}

ServiceNotifier& ServiceNotifier::operator=(ServiceNotifier&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    address_ = std::move(other.address_);
    watchdog_interval_ = other.watchdog_interval_;
    last_ping_ = other.last_ping_;
    said_failure_ = other.said_failure_;
  }
  return *this;
}

ServiceNotifier::~ServiceNotifier() {
  if (fd_ >= 0) ::close(fd_);
}

void ServiceNotifier::reloading(std::string_view status) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const std::uint64_t usec = static_cast<std::uint64_t>(now.tv_sec) * 1'000'000 + static_cast<std::uint64_t>(now.tv_nsec) / 1000;
  send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec) + "\nSTATUS=" + one_line(status));
}

void ServiceNotifier::watchdog(std::chrono::steady_clock::time_point now) {
  if (!enabled() || !watchdog_interval_) return;
  if (last_ping_ && now - *last_ping_ < *watchdog_interval_) return;
  last_ping_ = now;
  send("WATCHDOG=1");
}

std::string ServiceNotifier::one_line(std::string_view text) {
  std::string line(text);
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  return line;
}

void ServiceNotifier::send(const std::string& message) {
  if (fd_ < 0) return;
  sockaddr_un to{};
  to.sun_family = AF_UNIX;
  std::memcpy(to.sun_path, address_.data(), address_.size());
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size() + (address_[0] == '\0' ? 0 : 1));
  // MSG_DONTWAIT: a service manager that does not read never holds the control loop.
  if (::sendto(fd_, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to),
               length) < 0 &&
      !said_failure_) {
    said_failure_ = true;
    std::cerr << "tricolord: cannot notify the service manager (NOTIFY_SOCKET): " << std::strerror(errno)
              << " (said once; the daemon goes on)" << std::endl;
  }
}

}  // namespace tricolor::control
