#pragma once
// The lease side of cluster meters (issue 26): a thread of tricolord's control side that keeps each
// cluster meter's leased balance topped up from Redis, never a worker and never the control loop (a
// slow Redis delays leases, not the socket or a packet).
//
// Each box leases from one token bucket per cluster meter in Redis: a hash at KEY_PREFIX + NAME with the
// level (millionths of a token) and the time of the last lease (microseconds of Redis' own TIME), moved
// by one Lua script (EVALSHA) that refills it to TIME and takes up to what the box asks, atomically.
// A box asks when its balance falls below half a chunk, for what tops it up to one chunk; the chunk is
// 2 x CIR x the expected lease round trip (--cluster-rtt), so that a box spending at the whole rate does
// not run dry while a lease is on its way. Over any interval T the boxes pass at most CBS + CIR*T +
// boxes x chunk green.
//
// Redis unreachable, slow past --cluster-timeout, or answering what it should not: the clusters switch
// to the fallback (--cluster-fallback: each box at its share, open or closed), said once per switch and
// counted; the lease side tries again every --cluster-retry and the leases resume when Redis answers.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "dataplane/engine/engine.hpp"
#include "policer/cluster_lease.hpp"
#include "policer/expected.hpp"

namespace tricolor::control {

struct ClusterOptions {
  std::string redis;                          // "HOST:PORT", or "unix:PATH"; empty: no lease side
  std::string user;                           // Redis ACL user (AUTH user password); empty: AUTH password
  std::string password;                       // empty: no AUTH
  std::chrono::microseconds timeout{50'000};  // each connect and each call
  std::chrono::microseconds rtt{5'000};       // the lease round trip the chunk is sized for
  std::chrono::microseconds retry{500'000};   // while Redis is out of reach, how often it is tried again
  policer::ClusterMode fallback = policer::ClusterMode::share;
  std::string key_prefix = "tricolor:cluster:";
  unsigned boxes = 1;  // the boxes expected to share each budget (for the bound said at load)
};

// "HOST:PORT" or "unix:PATH" checked, the port a number 1..65535.
Expected<bool> check_redis_address(const std::string& address);

// The chunk a box leases for a budget: 2 x CIR x rtt, at least one largest frame (byte mode) or two
// packets, at most CBS (the bucket never holds more).
std::uint64_t cluster_chunk(const policer::Params& budget, std::chrono::microseconds rtt) noexcept;

// The bound a cluster meter keeps, in words, for the log at load.
std::string cluster_bound_text(const std::string& name, const policer::Params& budget, std::uint64_t chunk, unsigned boxes);

// The password for AUTH: the first line of a regular file of at most 4 KiB (a FIFO, a device or a
// directory is refused at once, naming what it is). `warning` says so when others may read the file.
Expected<std::string> read_password_file(const std::string& path, std::string& warning);

// The Lua script (its text, for tests that run it against a Redis of their own).
const std::string& cluster_lease_script();

class ClusterLeases {
 public:
  using Log = std::function<void(const std::string&)>;  // called from the lease thread
  ClusterLeases(dataplane::Engine& engine, ClusterOptions options, Log log);
  ~ClusterLeases();  // stops the thread
  ClusterLeases(const ClusterLeases&) = delete;
  ClusterLeases& operator=(const ClusterLeases&) = delete;

  void start();

 private:
  struct Connection;
  struct Known {
    policer::Params budget;
    std::uint64_t chunk = 0;
    std::chrono::steady_clock::time_point next_lease{};
    bool failing = false;  // its last call failed (said once until it answers again)
  };
  void run();
  void turn();
  bool connect();
  void disconnect(const std::string& why);
  void fall_back(policer::ClusterLease& lease);
  void lease(const dataplane::ClusterInfo& cluster, Known& known);

  dataplane::Engine& engine_;
  ClusterOptions options_;
  Log log_;
  std::unique_ptr<Connection> redis_;
  std::string sha_;  // the script's, once loaded
  std::chrono::steady_clock::time_point next_connect_{};
  bool said_unreachable_ = false;
  std::map<std::string, Known, std::less<>> known_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tricolor::control
