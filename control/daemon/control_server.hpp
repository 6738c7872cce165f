#pragma once
// The control socket's server: a Unix stream socket served by tricolord's main lcore between its
// periodic turns (the control side: the thread that publishes rule sets), with epoll, never blocking
// on a client. Each client has a frame reader (protocol.hpp), the bytes it sent not yet read as
// requests, and a queue of reply bytes; requests are answered in the order they came.
//
// Who may use it: the socket file is created with `mode` (0660) and, with a group, given to it; each
// connection's peer credentials (SO_PEERCRED) are checked too (root, or the group as primary or
// supplementary group), since a socket file's permissions are not checked by every system alike.
//
// What one client, or many, can take from the others, and the bound on each (ServerOptions):
//   - connection slots: max_clients for the group's members; root and the daemon's own user have
//     reserved_clients more, so a full table never locks the operator out. A member's connection
//     beyond its slots gets a reply saying why ("closing": "too-many-clients") and is closed; once
//     every slot is taken, reserved ones too, new connections wait in the listen backlog.
//   - the control thread: one request per client per turn, in turn, so a client that pipelines
//     thousands of requests delays another's by one request, not by thousands.
//   - memory for replies: a client's requests are not read while its unsent replies exceed
//     max_reply_backlog, and a request is answered only when that is not so; so a client holds at
//     most that plus one reply. Across all clients, beyond max_total_backlog a request is answered
//     "busy" (a short error) instead of run.
//   - memory for requests: a request frame is at most kMaxRequestFrameBytes and grows only with the
//     bytes that arrive; beyond kSmallRequestBytes each, all clients' incomplete requests share
//     max_pending_request_bytes ("closing": "busy" for the one that would pass it).
//   - time: a connection with nothing in progress for idle_timeout is closed ("closing": "idle",
//     sent unasked: tricolorctl connects again); a request must arrive whole within request_timeout of
//     its first byte; a client that takes none of its replies for reply_timeout is closed.
//   - a peer that shuts down its writing side, or vanishes: every complete request it sent before is
//     still run (and audited, and answered while it can read); what it sent of an incomplete one is
//     dropped. Such a connection is no longer watched for reading, so it never makes the thread spin.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "control/daemon/protocol.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// A request this size or smaller never waits on the shared budget for incomplete requests.
inline constexpr std::size_t kSmallRequestBytes = std::size_t{1} << 20;

struct ServerOptions {
  std::string path;                 // the socket file
  mode_t mode = 0660;
  std::optional<gid_t> group;       // who else may connect besides root
  std::size_t max_clients = 120;    // connections of others than root and the daemon's user
  std::size_t reserved_clients = 8; // more for root and the daemon's user
  std::size_t max_reply_backlog = std::size_t{1} << 20;         // per client, see above
  std::size_t max_total_backlog = std::size_t{256} << 20;       // all clients' unsent replies
  std::size_t max_pending_request_bytes = std::size_t{256} << 20;  // all clients' incomplete requests
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds request_timeout{30'000};
  std::chrono::milliseconds reply_timeout{30'000};
};

class ControlServer {
 public:
  using Handler = std::function<protocol::Reply(const protocol::Request& request, const Peer& peer)>;
  using Log = std::function<void(const std::string& line)>;

  // Binds and listens. A socket file left by a daemon that is gone is replaced; one a live daemon
  // serves is refused ("another tricolord serves PATH"); anything else at the path is left alone.
  static Expected<std::unique_ptr<ControlServer>> listen(const ServerOptions& options, Log log);
  ~ControlServer();  // closes every connection and removes the socket file (if it is still ours)
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Waits up to `timeout` for activity (not at all while a client has requests waiting) and serves
  // what is ready: new connections, one request of each client that has one, replies a client can
  // take now, the timeouts. Never waits on one client.
  void poll(std::chrono::milliseconds timeout, const Handler& handler);

  std::size_t clients() const noexcept { return clients_.size(); }
  std::size_t unsent_reply_bytes() const noexcept { return unsent_total_; }
  std::size_t pending_request_bytes() const noexcept { return pending_total_; }

 private:
  struct Client;
  using Clock = std::chrono::steady_clock;
  ControlServer(int listen_fd, int epoll_fd, ServerOptions options, Log log, dev_t dev, ino_t ino) noexcept;
  void accept_all(Clock::time_point now);
  void on_event(Client& client, std::uint32_t events, Clock::time_point now);
  void receive(Client& client);
  bool serve_one(Client& client, const Handler& handler, Clock::time_point now);
  void answer(Client& client, const protocol::Reply& reply);
  void refuse(Client& client, protocol::Closing why, const std::string& message);
  void write_replies(Client& client, Clock::time_point now);
  void settle(Client& client);  // closes it, or watches it for what it waits on
  void expire(Clock::time_point now);
  void count_pending(Client& client);
  void close_client(int fd);
  void watch_listener();
  std::size_t active_clients() const noexcept;  // not being refused
  void note(protocol::Closing why, const std::string& line, Clock::time_point now);
  bool allowed(const Peer& peer) const;

  int listen_fd_;
  int epoll_fd_;
  ServerOptions options_;
  Log log_;
  dev_t socket_dev_;  // the socket file we made, so that the destructor removes only that
  ino_t socket_ino_;
  std::map<int, std::unique_ptr<Client>> clients_;
  std::set<int> ready_;  // clients with requests, or bytes that may hold one, not yet served
  std::size_t unsent_total_ = 0;
  std::size_t pending_total_ = 0;
  std::optional<Clock::time_point> accept_paused_until_;  // out of descriptors: accept later
  bool accept_full_ = false;  // every slot taken: accept once one is free
  Clock::time_point next_expiry_{};
  struct Noted {
    Clock::time_point at{};
    std::size_t since = 0;  // the same event, not logged since
  };
  std::map<protocol::Closing, Noted> noted_;
};

// A reply for a refused request or connection.
protocol::Reply error_reply(std::string message, std::string token = {}, std::optional<std::size_t> column = {});

}  // namespace tricolor::control
