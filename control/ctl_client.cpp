#include "control/ctl_client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <utility>

#include "control/policy_file.hpp"

namespace tricolor::control {

namespace {

Error unreachable(std::string message) { return Error{"", std::move(message)}; }

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// Milliseconds left until `deadline`, for poll(): 0 once it has passed.
int left_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)) : 0;
}

std::string seconds(std::chrono::milliseconds timeout) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(timeout.count()) / 1000);
  return text;
}

}  // namespace

std::string CtlClient::check_path(const std::string& socket_path) {
  if (socket_path.empty() || socket_path.size() >= sizeof(sockaddr_un::sun_path))
    return "--socket: a path of 1 to " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes";
  return {};
}

Expected<CtlClient> CtlClient::connect(const std::string& socket_path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socket_path.data(), std::min(socket_path.size(), sizeof address.sun_path - 1));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return unreachable(std::string("cannot make a socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const int e = errno;
    ::close(fd);
    return unreachable("cannot reach tricolord at " + socket_path + ": " + std::strerror(e) +
                       (e == ENOENT || e == ECONNREFUSED ? " (is it running? --socket names another socket)"
                        : e == EACCES                    ? " (root, or the daemon's --socket-group, may use it)"
                                                         : ""));
  }
  return CtlClient(fd, socket_path);
}

CtlClient::CtlClient(CtlClient&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      reader_(std::move(other.reader_)),
      unread_(std::move(other.unread_)) {}

CtlClient& CtlClient::operator=(CtlClient&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    reader_ = std::move(other.reader_);
    unread_ = std::move(other.unread_);
  }
  return *this;
}

CtlClient::~CtlClient() { close(); }

void CtlClient::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Expected<Answer> CtlClient::call(const protocol::Request& request, std::chrono::milliseconds timeout) {
  if (fd_ < 0) return unreachable("the connection to tricolord is closed");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A failed send is not the end: a daemon that refuses a peer writes its reason before it closes,
  // and that reply, read below, says more than "broken pipe".
  const std::string bytes = protocol::frame(protocol::request_json(request));
  for (std::size_t sent = 0; sent < bytes.size();) {
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, left_ms(deadline)) == 0) {
      close();
      return unreachable("tricolord took no request within " + seconds(timeout) + " (--timeout)");
    }
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }

  std::optional<std::string> payload;
  const auto feed = [&](std::string_view bytes_in) {
    // The reader stops at a frame's end: what follows is kept for the next call.
    auto rest = std::span(reinterpret_cast<const std::uint8_t*>(bytes_in.data()), bytes_in.size());
    while (!rest.empty() && !payload && !reader_.error()) {
      rest = rest.subspan(reader_.feed(rest));
      payload = reader_.next();
    }
    unread_.append(reinterpret_cast<const char*>(rest.data()), rest.size());
  };
  std::string held = std::exchange(unread_, {});
  feed(held);
  char buffer[64 * 1024];
  while (!payload && !reader_.error()) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, left_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      close();
      return unreachable("no reply from tricolord within " + seconds(timeout) + " (--timeout)");
    }
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      const int e = errno;
      close();
      return unreachable(n == 0 ? "tricolord closed the connection without a reply"
                                : std::string("no reply from tricolord: ") + std::strerror(e));
    }
    feed(std::string_view(buffer, static_cast<std::size_t>(n)));
  }
  if (!payload) {
    close();
    return unreachable("a broken reply from tricolord: " + reader_.error()->message);
  }
  auto reply = protocol::parse_reply(*payload);
  if (!reply) {
    close();
    return unreachable("a broken reply from tricolord: " + reply.error().message);
  }
  return Answer{std::move(*reply), std::move(*payload)};
}

Expected<protocol::Request> request_for_line(std::string_view line, bool json) {
  protocol::Request request;
  request.json = json;
  request.command = std::string(trim(line));
  const std::string_view command = request.command;
  const std::string_view verb = command.substr(0, command.find_first_of(" \t"));
  if (verb != "load") return request;
  const std::string path(trim(command.substr(verb.size())));
  if (path.empty()) return Error{"load", "load FILE: one policy file"};
  auto text = read_policy_file(path);
  if (!text) return text.error();
  request.command = "load";
  request.text = std::move(*text);
  return request;
}

int print_answer(const Answer& answer, const protocol::Request& request, bool json, std::ostream& out,
                 std::ostream& err) {
  const protocol::Reply& reply = answer.reply;
  if (json) {
    out << answer.payload << '\n' << std::flush;
    return reply.ok ? kExitDone : kExitRefused;
  }
  if (reply.ok) {
    out << reply.output;
    if (!reply.output.empty() && reply.output.back() != '\n') out << '\n';
    out << std::flush;
    return kExitDone;
  }
  err << "tricolorctl: " << reply.error.message << '\n';
  const std::string& line = request.command;
  if (reply.error.column && *reply.error.column >= 1 && *reply.error.column <= line.size() + 1 &&
      line.find('\n') == std::string::npos && !request.text) {
    err << "  " << line << "\n  " << std::string(*reply.error.column - 1, ' ') << '^' << '\n';
  }
  err << std::flush;
  return kExitRefused;
}

}  // namespace tricolor::control
