#include "control/daemon/control_server.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <vector>

#include "policer/quote.hpp"

namespace tricolor::control {

namespace {

using protocol::Closing;

constexpr std::size_t kReadChunk = 64 * 1024;
// A large request (a `load`) is read this much per turn, so that it arrives in a few hundred turns
// while the other clients are still served at each.
constexpr std::size_t kReadPerTurn = std::size_t{1} << 20;
constexpr int kMaxEvents = 64;
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr auto kExpiryPeriod = std::chrono::milliseconds(50);
// The same kind of refusal is logged at most this often; the ones in between are counted.
constexpr auto kNoteEvery = std::chrono::seconds(10);

std::string errno_text(int error) { return std::strerror(error); }

std::string seconds_text(std::chrono::milliseconds ms) {
  const auto n = ms.count();
  return n % 1000 == 0 ? std::to_string(n / 1000) + " s" : std::to_string(n) + " ms";
}

std::string mib_text(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

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

std::string who(const Peer& peer) { return "uid " + std::to_string(peer.uid) + " pid " + std::to_string(peer.pid); }

}  // namespace

struct ControlServer::Client {
  int fd = -1;
  Peer peer;
  bool privileged = false;  // root or the daemon's user: the reserved slots
  protocol::FrameReader reader{protocol::kMaxRequestFrameBytes};
  std::size_t pending_counted = 0;  // reader.pending() as counted in pending_total_
  std::string in;                   // bytes received, not yet given to the reader
  std::size_t in_used = 0;
  std::string out;                  // reply bytes not yet written
  std::size_t written = 0;          // of `out`
  bool eof = false;                 // the peer sends no more
  bool gone = false;                // the peer takes no more: its replies are dropped
  bool closing = false;             // refused: nothing more is read, closed once `out` is written
  std::uint32_t watched = 0;        // the epoll events registered
  bool registered = true;           // in the epoll set
  Clock::time_point last_active;    // connected, a request answered, a reply byte taken
  Clock::time_point last_written;   // a reply byte taken (or the reply queued)
  std::optional<Clock::time_point> request_began;  // the first byte of an incomplete request

  std::size_t unsent() const noexcept { return out.size() - written; }
  std::size_t unread() const noexcept { return in.size() - in_used; }
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
  struct stat made {};
  if (::lstat(options.path.c_str(), &made) != 0) return fail("cannot find the socket file");
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
  return std::unique_ptr<ControlServer>(
      new ControlServer(fd, epoll_fd, options, std::move(log), made.st_dev, made.st_ino));
}

ControlServer::ControlServer(int listen_fd, int epoll_fd, ServerOptions options, Log log, dev_t dev, ino_t ino) noexcept
    : listen_fd_(listen_fd),
      epoll_fd_(epoll_fd),
      options_(std::move(options)),
      log_(std::move(log)),
      socket_dev_(dev),
      socket_ino_(ino) {}

ControlServer::~ControlServer() {
  for (auto& [fd, client] : clients_) ::close(fd);
  ::close(epoll_fd_);
  ::close(listen_fd_);
  // Only the socket this server made: whatever has replaced it since is not the daemon's to remove.
  struct stat now {};
  if (::lstat(options_.path.c_str(), &now) == 0 && S_ISSOCK(now.st_mode) && now.st_dev == socket_dev_ &&
      now.st_ino == socket_ino_)
    ::unlink(options_.path.c_str());
}

bool ControlServer::allowed(const Peer& peer) const {
  if (peer.uid == 0 || peer.uid == ::geteuid()) return true;
  return options_.group && (peer.gid == *options_.group || in_group(peer.pid, *options_.group));
}

void ControlServer::poll(std::chrono::milliseconds timeout, const Handler& handler) {
  auto now = Clock::now();
  if (accept_paused_until_ && now >= *accept_paused_until_) {
    accept_paused_until_.reset();
    if (!accept_full_) watch_listener();
  }
  if (accept_full_ && active_clients() < options_.max_clients + options_.reserved_clients) {
    accept_full_ = false;
    if (!accept_paused_until_) watch_listener();
  }
  epoll_event events[kMaxEvents];
  const int wait_ms = ready_.empty() ? static_cast<int>(timeout.count()) : 0;
  const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, wait_ms);
  now = Clock::now();
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd == listen_fd_) {
      accept_all(now);
    } else if (const auto found = clients_.find(events[i].data.fd); found != clients_.end()) {
      on_event(*found->second, events[i].events, now);
    }
  }
  // One request of each client that has one, in turn.
  const std::vector<int> ready(ready_.begin(), ready_.end());
  ready_.clear();
  for (const int fd : ready) {
    const auto found = clients_.find(fd);
    if (found == clients_.end()) continue;
    Client& client = *found->second;
    serve_one(client, handler, now);
    write_replies(client, now);
    settle(client);
  }
  if (now >= next_expiry_) {
    expire(now);
    next_expiry_ = now + kExpiryPeriod;
  }
}

void ControlServer::watch_listener() {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = listen_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &event);
}

std::size_t ControlServer::active_clients() const noexcept {
  std::size_t active = 0;
  for (const auto& [fd, client] : clients_) active += client->closing ? 0 : 1;
  return active;
}

void ControlServer::note(Closing why, const std::string& line, Clock::time_point now) {
  Noted& noted = noted_[why];
  if (noted.at != Clock::time_point{} && now - noted.at < kNoteEvery) {
    ++noted.since;
    return;
  }
  log_(line + (noted.since != 0 ? " (and " + std::to_string(noted.since) + " more like it since the last said)" : ""));
  noted = {now, 0};
}

void ControlServer::accept_all(Clock::time_point now) {
  for (;;) {
    // Every slot taken, the reserved ones too: new connections wait in the listen backlog (what they
    // sent is kept there) until one is closed, rather than being accepted only to be refused.
    if (active_clients() >= options_.max_clients + options_.reserved_clients) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
      accept_full_ = true;
      return;
    }
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The connection stays in the backlog; watching the socket now would wake every turn for it.
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accept_paused_until_ = now + kAcceptPause;
        note(Closing::too_many_clients, "cannot accept a connection: " + errno_text(errno) + "; trying again in " +
                                            seconds_text(kAcceptPause), now);
      }
      return;  // EAGAIN: all taken
    }
    auto owned = std::make_unique<Client>();
    Client& client = *owned;
    client.fd = fd;
    client.last_active = client.last_written = now;
    ucred credentials{};
    socklen_t length = sizeof credentials;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0)
      client.peer = {credentials.pid, credentials.uid, credentials.gid};
    else
      client.peer = {0, static_cast<uid_t>(-1), static_cast<gid_t>(-1)};
    client.privileged = client.peer.uid == 0 || client.peer.uid == ::geteuid();
    std::size_t others = 0, all = 0;
    for (const auto& [other_fd, other] : clients_)
      if (!other->closing) ++all, others += other->privileged ? 0 : 1;
    // (all < max_clients + reserved_clients here: checked above.)
    clients_.emplace(fd, std::move(owned));
    epoll_event event{};
    event.events = client.watched = EPOLLIN | EPOLLRDHUP;
    event.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
    const std::string group = options_.group ? " or group " + std::to_string(*options_.group) : std::string();
    if (!allowed(client.peer)) {
      note(Closing::permission, "refused a connection from " + who(client.peer) + ": not root" + group, now);
      refuse(client, Closing::permission,
             "permission denied: uid " + std::to_string(client.peer.uid) + " may not use this socket (root" + group +
                 " only)");
    } else if (!client.privileged && others >= options_.max_clients) {
      note(Closing::too_many_clients,
           "refused a connection from " + who(client.peer) + ": " + std::to_string(all) + " clients already", now);
      refuse(client, Closing::too_many_clients,
             "too many clients: " + std::to_string(options_.max_clients) + " are connected (" +
                 std::to_string(options_.reserved_clients) + " more are kept for root)");
    }
    write_replies(client, now);
    settle(client);
  }
}

void ControlServer::on_event(Client& client, std::uint32_t events, Clock::time_point now) {
  // The peer hung up both ways, or the socket failed: nothing can reach it. What it sent before is
  // still read (below) and run.
  if ((events & (EPOLLHUP | EPOLLERR)) != 0 && !client.gone) {
    client.gone = true;
    unsent_total_ -= client.unsent();
    client.out.clear();
    client.written = 0;
  }
  if ((events & EPOLLOUT) != 0) write_replies(client, now);
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) receive(client);
  settle(client);
}

// Takes what the socket holds, up to a chunk beyond what is not yet read.
void ControlServer::receive(Client& client) {
  if (client.eof || client.closing) return;
  if (client.in_used == client.in.size()) {
    client.in.clear();
    client.in_used = 0;
  }
  while (client.unread() < kReadChunk) {
    const std::size_t at = client.in.size();
    client.in.resize(at + kReadChunk);
    const ssize_t got = ::recv(client.fd, client.in.data() + at, kReadChunk, MSG_DONTWAIT);
    client.in.resize(at + static_cast<std::size_t>(std::max<ssize_t>(got, 0)));
    if (got > 0) continue;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == EAGAIN) return;
    client.eof = true;  // 0: it sends no more; an error: it is gone
    if (got < 0 && !client.gone) {
      client.gone = true;
      unsent_total_ -= client.unsent();
      client.out.clear();
      client.written = 0;
    }
    return;
  }
}

void ControlServer::count_pending(Client& client) {
  pending_total_ = pending_total_ - client.pending_counted + client.reader.pending();
  client.pending_counted = client.reader.pending();
}

// Reads the client's next request, if its bytes are here, and answers it. True if one was answered.
bool ControlServer::serve_one(Client& client, const Handler& handler, Clock::time_point now) {
  if (client.closing || (!client.gone && client.unsent() >= options_.max_reply_backlog)) return false;
  std::size_t fed = 0;
  for (;;) {
    if (client.unread() == 0) {
      if (client.eof || fed >= kReadPerTurn) return false;
      receive(client);
      if (client.unread() == 0) return false;
    }
    const auto bytes = std::span(reinterpret_cast<const std::uint8_t*>(client.in.data()) + client.in_used,
                                 client.unread());
    // What this feed may add to the incomplete requests (at most the bytes here).
    if (client.reader.pending() + bytes.size() > kSmallRequestBytes &&
        pending_total_ + bytes.size() > options_.max_pending_request_bytes) {
      note(Closing::busy, "refused a request of " + who(client.peer) + ": the daemon holds " +
                              mib_text(pending_total_) + " of incomplete requests", now);
      refuse(client, Closing::busy,
             "busy: the daemon holds " + mib_text(pending_total_) + " of incomplete requests from its clients (" +
                 mib_text(options_.max_pending_request_bytes) + " at most); try again");
      return false;
    }
    const std::size_t used = client.reader.feed(bytes);
    client.in_used += used;
    fed += used;
    if (client.reader.pending() != 0 && !client.request_began) client.request_began = now;
    count_pending(client);
    if (client.reader.error()) {
      note(Closing::frame, "closed the connection of " + who(client.peer) + ": " + client.reader.error()->message, now);
      refuse(client, Closing::frame, client.reader.error()->message);
      return false;
    }
    auto frame = client.reader.next();
    if (!frame) continue;
    client.request_began.reset();
    count_pending(client);
    if (!client.gone && unsent_total_ >= options_.max_total_backlog) {
      note(Closing::busy, "answered a request of " + who(client.peer) + " busy: " + mib_text(unsent_total_) +
                              " of replies wait for clients that do not read them", now);
      answer(client, error_reply("busy: " + mib_text(unsent_total_) + " of replies wait for clients that do not take "
                                 "them (" + mib_text(options_.max_total_backlog) + " at most); the request was not "
                                 "run; try again"));
    } else {
      auto request = protocol::parse_request(*frame);
      if (!request) {
        answer(client, error_reply(request.error().message, request.error().subject));
      } else {
        try {
          answer(client, handler(*request, client.peer));
        } catch (const std::bad_alloc&) {  // a reply too large for the memory left: the daemon goes on
          answer(client, error_reply("the daemon could not answer: out of memory"));
        }
      }
    }
    client.last_active = Clock::now();  // a request may take a while: idle from its answer on
    return true;
  }
}

void ControlServer::answer(Client& client, const protocol::Reply& reply) {
  if (client.gone) return;
  std::string payload = protocol::reply_json(reply);
  if (payload.size() > protocol::kMaxReplyFrameBytes)
    payload = protocol::reply_json(error_reply(
        "the reply would be " + std::to_string(payload.size()) + " bytes, over the limit of " +
        std::to_string(protocol::kMaxReplyFrameBytes) + ": ask for a part (stats rule NAME, key list RULE top N)"));
  if (client.unsent() == 0) client.last_written = Clock::now();  // the reply time counts from now
  const std::string framed = protocol::frame(payload);
  client.out += framed;
  unsent_total_ += framed.size();
}

// Says why (one reply, "closing"), reads nothing more, and closes once that is written.
void ControlServer::refuse(Client& client, Closing why, const std::string& message) {
  protocol::Reply reply = error_reply(message);
  reply.closing = why;
  answer(client, reply);
  client.closing = true;
  client.in.clear();
  client.in_used = 0;
  client.request_began.reset();
}

void ControlServer::write_replies(Client& client, Clock::time_point now) {
  while (client.unsent() != 0 && !client.gone) {
    const ssize_t sent = ::send(client.fd, client.out.data() + client.written, client.unsent(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      client.gone = true;  // the peer is gone: what it sent is still run
      unsent_total_ -= client.unsent();
      client.out.clear();
      client.written = 0;
      return;
    }
    client.written += static_cast<std::size_t>(sent);
    unsent_total_ -= static_cast<std::size_t>(sent);
    client.last_written = client.last_active = std::max(now, client.last_written);
  }
  if (client.unsent() == 0) {
    client.out.clear();
    client.written = 0;
  }
}

void ControlServer::settle(Client& client) {
  const bool backlogged = !client.gone && client.unsent() >= options_.max_reply_backlog;
  // Whether a request may still come: bytes not read yet, or the socket may hold more.
  const bool more_input = !client.closing && (client.unread() != 0 || !client.eof);
  const bool done = client.closing ? client.unsent() == 0 || client.gone
                                   : !more_input && (client.unsent() == 0 || client.gone);
  if (done) return close_client(client.fd);

  if (!client.closing && !backlogged && (client.unread() != 0 || (client.gone && !client.eof)))
    ready_.insert(client.fd);
  // Read while a request may come and there is room for it; write while replies wait.
  const bool read = !client.closing && !client.gone && !client.eof && !backlogged && client.unread() < kReadChunk;
  const bool write = !client.gone && client.unsent() != 0;
  const std::uint32_t want = (read ? EPOLLIN | EPOLLRDHUP : 0u) | (write ? EPOLLOUT : 0u);
  if (client.gone) {
    // Nothing to wait for from the socket (its hang-up would be reported at every turn): what it
    // holds is read when the client's turn comes.
    if (client.registered) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, client.fd, nullptr);
    client.registered = false;
    return;
  }
  if (want == client.watched) return;
  epoll_event event{};
  event.events = want;
  event.data.fd = client.fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, client.fd, &event);
  client.watched = want;
}

void ControlServer::expire(Clock::time_point now) {
  // Decided first, done after: closing a client changes clients_.
  std::vector<int> stalled, unfinished, idle;
  for (const auto& [fd, owned] : clients_) {
    const Client& client = *owned;
    if (client.unsent() != 0 && !client.gone && now - client.last_written > options_.reply_timeout)
      stalled.push_back(fd);
    else if (client.closing || client.gone)
      continue;
    else if (client.request_began && now - *client.request_began > options_.request_timeout)
      unfinished.push_back(fd);
    else if (client.unsent() == 0 && client.unread() == 0 && client.reader.pending() == 0 &&
             now - client.last_active > options_.idle_timeout)
      idle.push_back(fd);
  }
  for (const int fd : stalled) {
    note(Closing::other, "closed the connection of " + who(clients_.at(fd)->peer) + ": it took none of its replies for " +
                             seconds_text(options_.reply_timeout), now);
    close_client(fd);
  }
  const auto close_with = [&](int fd, Closing why, const std::string& message) {
    Client& client = *clients_.at(fd);
    refuse(client, why, message);
    write_replies(client, now);
    settle(client);
  };
  for (const int fd : unfinished) {
    note(Closing::request_timeout, "closed the connection of " + who(clients_.at(fd)->peer) +
                                       ": a request not complete " + seconds_text(options_.request_timeout) +
                                       " after its first byte", now);
    close_with(fd, Closing::request_timeout,
               "a request begun " + seconds_text(options_.request_timeout) +
                   " ago is not complete: the connection is closed (what was sent of it is dropped)");
  }
  for (const int fd : idle)
    close_with(fd, Closing::idle,
               "idle for " + seconds_text(options_.idle_timeout) + ": the connection is closed (connect again)");
}

void ControlServer::close_client(int fd) {
  const auto found = clients_.find(fd);
  if (found == clients_.end()) return;
  Client& client = *found->second;
  unsent_total_ -= client.unsent();
  pending_total_ -= client.pending_counted;
  if (client.registered) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  ready_.erase(fd);
  clients_.erase(found);
}

}  // namespace tricolor::control
