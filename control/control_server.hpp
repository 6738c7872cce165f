#pragma once
// The control socket's server: a Unix stream socket served by tricolord's main lcore between its
// periodic turns (the control side: the thread that publishes rule sets), with epoll, never blocking
// on a client. Each client has a frame reader (protocol.hpp) and a queue of reply bytes; a request is
// answered when its last byte arrives, in the order requests came. A client that stops reading its
// replies is not read from (no new requests) until it does; a client that vanishes mid-request is
// forgotten with what it had sent; a frame too long, or a peer that may not use the socket, gets an
// error reply and the connection is closed once it is written.
//
// Who may use it: the socket file is created with `mode` (0660) and, with a group, given to it; each
// connection's peer credentials (SO_PEERCRED) are checked too (root, or the group as primary or
// supplementary group), since a socket file's permissions are not checked by every system alike.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "control/protocol.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct ServerOptions {
  std::string path;                 // the socket file
  mode_t mode = 0660;
  std::optional<gid_t> group;       // who else may connect besides root
  std::size_t max_clients = 256;    // more are refused with a message
  std::size_t max_reply_backlog = std::size_t{64} << 20;  // reply bytes held for a client before it is not read
};

class ControlServer {
 public:
  using Handler = std::function<protocol::Reply(const protocol::Request& request, const Peer& peer)>;
  using Log = std::function<void(const std::string& line)>;

  // Binds and listens. A socket file left by a daemon that is gone is replaced; one a live daemon
  // serves is refused ("another tricolord serves PATH").
  static Expected<std::unique_ptr<ControlServer>> listen(const ServerOptions& options, Log log);
  ~ControlServer();  // closes every connection and removes the socket file
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Waits up to `timeout` for activity and serves what is ready: new connections, requests complete
  // (answered by `handler`), replies a client can take now. Never waits on one client.
  void poll(std::chrono::milliseconds timeout, const Handler& handler);

  std::size_t clients() const noexcept { return clients_.size(); }

 private:
  struct Client;
  ControlServer(int listen_fd, int epoll_fd, ServerOptions options, Log log) noexcept;
  void accept_all();
  void serve(int fd, std::uint32_t events, const Handler& handler);
  void read_requests(Client& client, const Handler& handler);
  void answer(Client& client, const protocol::Reply& reply);
  bool write_replies(Client& client);  // false: the connection is to be closed now
  void watch(Client& client);
  void close_client(int fd);
  bool allowed(const Peer& peer) const;

  int listen_fd_;
  int epoll_fd_;
  ServerOptions options_;
  Log log_;
  std::map<int, std::unique_ptr<Client>> clients_;
};

// A reply for a refused request or connection.
protocol::Reply error_reply(std::string message, std::string token = {}, std::optional<std::size_t> column = {});

}  // namespace tricolor::control
