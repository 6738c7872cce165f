#include "control/control_server.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "policer/quote.hpp"

namespace tricolor::control {

namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kMaxEvents = 64;

std::string errno_text(int error) { return std::strerror(error); }

Expected<sockaddr_un> address_of(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path))
    return Error{"socket", "socket path " + quote(path, kQuotePathMaxBytes) + ": expected 1 to " +
                               std::to_string(sizeof(address.sun_path) - 1) + " bytes"};
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

// Whether a daemon answers on the socket file (a stale file from a daemon that is gone refuses).
bool someone_listens(const sockaddr_un& address) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool answered = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return answered;
}

// The peer's supplementary groups, from /proc (SO_PEERCRED gives only the primary one).
bool in_group(pid_t pid, gid_t group) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Groups:", 0) == 0) {
      std::istringstream groups(line.substr(7));
      for (gid_t g; groups >> g;)
        if (g == group) return true;
      return false;
    }
  return false;
}

}  // namespace

struct ControlServer::Client {
  int fd = -1;
  Peer peer;
  protocol::FrameReader reader;
  std::string out;            // reply bytes not yet written
  std::size_t written = 0;    // of `out`
  bool closing = false;       // close once `out` is written
  bool want_write = false;    // EPOLLOUT registered
};

protocol::Reply error_reply(std::string message, std::string token, std::optional<std::size_t> column) {
  protocol::Reply reply;
  reply.ok = false;
  reply.error = {std::move(message), std::move(token), column};
  return reply;
}

Expected<std::unique_ptr<ControlServer>> ControlServer::listen(const ServerOptions& options, Log log) {
  auto address = address_of(options.path);
  if (!address) return address.error();
  const std::string where = quote(options.path, kQuotePathMaxBytes);
  struct stat existing {};
  if (::lstat(options.path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) return Error{"socket", where + " exists and is not a socket: not replaced"};
    if (someone_listens(*address)) return Error{"socket", "another tricolord serves " + where};
    ::unlink(options.path.c_str());  // left by a daemon that is gone
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{"socket", "cannot make a socket: " + errno_text(errno)};
  // The file is made with no permission at all and opened up to `mode` once its group is set, so that
  // nobody connects in between.
  const mode_t before = ::umask(0777);
  const int bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof *address);
  const int bind_errno = errno;
  ::umask(before);
  if (bound != 0) {
    ::close(fd);
    return Error{"socket", "cannot bind " + where + ": " + errno_text(bind_errno)};
  }
  auto fail = [&](const std::string& what) {
    const int e = errno;
    ::close(fd);
    ::unlink(options.path.c_str());
    return Error{"socket", what + " " + where + ": " + errno_text(e)};
  };
  if (options.group && ::chown(options.path.c_str(), static_cast<uid_t>(-1), *options.group) != 0)
    return fail("cannot give the group of");
  if (::chmod(options.path.c_str(), options.mode) != 0) return fail("cannot set the mode of");
  if (::listen(fd, 64) != 0) return fail("cannot listen on");
  const int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return fail("cannot watch");
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event);
  return std::unique_ptr<ControlServer>(new ControlServer(fd, epoll_fd, options, std::move(log)));
}

ControlServer::ControlServer(int listen_fd, int epoll_fd, ServerOptions options, Log log) noexcept
    : listen_fd_(listen_fd), epoll_fd_(epoll_fd), options_(std::move(options)), log_(std::move(log)) {}

ControlServer::~ControlServer() {
  for (auto& [fd, client] : clients_) ::close(fd);
  ::close(epoll_fd_);
  ::close(listen_fd_);
  ::unlink(options_.path.c_str());
}

bool ControlServer::allowed(const Peer& peer) const {
  if (peer.uid == 0) return true;
  return options_.group && (peer.gid == *options_.group || in_group(peer.pid, *options_.group));
}

void ControlServer::poll(std::chrono::milliseconds timeout, const Handler& handler) {
  epoll_event events[kMaxEvents];
  const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, static_cast<int>(timeout.count()));
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd == listen_fd_) accept_all();
    else serve(events[i].data.fd, events[i].events, handler);
  }
}

void ControlServer::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: all taken; anything else: the next turn tries again
    auto client = std::make_unique<Client>();
    client->fd = fd;
    ucred credentials{};
    socklen_t length = sizeof credentials;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0)
      client->peer = {credentials.pid, credentials.uid, credentials.gid};
    else
      client->peer = {0, static_cast<uid_t>(-1), static_cast<gid_t>(-1)};
    Client& c = *client;
    clients_.emplace(fd, std::move(client));
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
    const std::string who = "uid " + std::to_string(c.peer.uid) + " pid " + std::to_string(c.peer.pid);
    if (!allowed(c.peer)) {
      log_("refused a connection from " + who + ": not root" +
           (options_.group ? " nor in group " + std::to_string(*options_.group) : std::string()));
      answer(c, error_reply("permission denied: uid " + std::to_string(c.peer.uid) +
                            " may not use this socket (root" +
                            (options_.group ? " or group " + std::to_string(*options_.group) : std::string()) +
                            " only)"));
      c.closing = true;
    } else if (clients_.size() > options_.max_clients) {
      log_("refused a connection from " + who + ": " + std::to_string(options_.max_clients) + " clients already");
      answer(c, error_reply("too many clients: " + std::to_string(options_.max_clients) + " are connected"));
      c.closing = true;
    }
    if (c.closing && !write_replies(c)) close_client(fd);
  }
}

void ControlServer::serve(int fd, std::uint32_t events, const Handler& handler) {
  const auto found = clients_.find(fd);
  if (found == clients_.end()) return;
  Client& client = *found->second;
  if ((events & (EPOLLERR | EPOLLHUP)) != 0) return close_client(fd);
  if ((events & EPOLLOUT) != 0 && !write_replies(client)) return close_client(fd);
  if ((events & (EPOLLIN | EPOLLRDHUP)) != 0 && !client.closing) read_requests(client, handler);
  if (clients_.contains(fd) && !write_replies(client)) close_client(fd);
}

void ControlServer::read_requests(Client& client, const Handler& handler) {
  std::uint8_t buffer[kReadChunk];
  // A client whose replies pile up is not read until it takes them.
  while (!client.closing && client.out.size() - client.written < options_.max_reply_backlog) {
    const ssize_t got = ::recv(client.fd, buffer, sizeof buffer, 0);
    if (got == 0) {  // it will send no more: what it sent of a request is dropped, replies still go
      client.closing = true;
      return;
    }
    if (got < 0 && errno != EAGAIN && errno != EINTR) {  // gone
      client.closing = true;
      client.out.clear();
      client.written = 0;
      return;
    }
    if (got < 0) return;  // nothing more for now
    std::span<const std::uint8_t> bytes(buffer, static_cast<std::size_t>(got));
    while (!bytes.empty()) {
      bytes = bytes.subspan(client.reader.feed(bytes));
      if (client.reader.error()) {
        answer(client, error_reply(client.reader.error()->message));
        client.closing = true;
        return;
      }
      if (auto frame = client.reader.next()) {
        auto request = protocol::parse_request(*frame);
        answer(client, request ? handler(*request, client.peer)
                               : error_reply(request.error().message, request.error().subject));
      }
    }
  }
}

void ControlServer::answer(Client& client, const protocol::Reply& reply) {
  client.out += protocol::frame(protocol::reply_json(reply));
}

bool ControlServer::write_replies(Client& client) {
  while (client.written < client.out.size()) {
    const ssize_t sent = ::send(client.fd, client.out.data() + client.written, client.out.size() - client.written,
                                MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      return false;  // the peer is gone
    }
    client.written += static_cast<std::size_t>(sent);
  }
  if (client.written == client.out.size()) {
    client.out.clear();
    client.written = 0;
    if (client.closing) return false;
  }
  watch(client);
  return true;
}

// EPOLLOUT only while replies wait (else every turn would wake for a writable socket).
void ControlServer::watch(Client& client) {
  const bool want = client.written < client.out.size();
  if (want == client.want_write) return;
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP | (want ? EPOLLOUT : 0u);
  event.data.fd = client.fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, client.fd, &event);
  client.want_write = want;
}

void ControlServer::close_client(int fd) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  clients_.erase(fd);
}

}  // namespace tricolor::control
