#pragma once
// The metrics listener's inside (metrics_server.hpp says what it does): its connections and the state
// its two threads share. Included by metrics_server.cpp (binding, the exposition's thread) and
// metrics_loop.cpp (the listener's epoll loop) only.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "control/telemetry/http_reply.hpp"
#include "control/telemetry/http_request.hpp"
#include "control/telemetry/metrics_server.hpp"
#include "control/telemetry/unique_fd.hpp"

namespace tricolor::control {
namespace metrics {

using Clock = std::chrono::steady_clock;

// epoll's data for the two sockets that are not connections; connections count up from kFirstConnection,
// never reused, so that an event for a connection closed earlier in the same batch finds nothing.
inline constexpr std::uint64_t kListenerId = 0;
inline constexpr std::uint64_t kWakeId = 1;
inline constexpr std::uint64_t kFirstConnection = 2;

// What one exposition made: the text (or why there is none) and, when a scrape asked, its gzip form.
// The replies it answers share it.
struct Exposed {
  bool available = false;
  std::string text;  // the exposition, or the 503's message
  std::optional<std::string> gzipped;
};

enum class Phase {
  reading,    // a request head, or waiting for one (a new or kept-alive connection)
  exposing,   // its request waits for an exposition
  writing,    // a reply queued
  lingering,  // shut for writing after the last reply: what comes is read and dropped
  done,       // to be closed
};

struct Reply {
  std::string head;
  std::shared_ptr<const void> owner;  // keeps `body` alive (an exposition shared with other replies)
  std::string_view body;              // empty for HEAD
  std::size_t sent = 0;               // of head, then body
  bool last = false;                  // the connection ends once it is written
};

struct Connection {
  explicit Connection(std::uint64_t id, UniqueFd fd, const http::HeadLimits& limits)
      : id(id), fd(std::move(fd)), parser(limits) {}
  std::uint64_t id;
  UniqueFd fd;
  http::RequestParser parser;
  Phase phase = Phase::reading;
  Clock::time_point deadline;  // of the phase (none while exposing: the callback has its own bound)
  bool head_started = false;   // a byte of the request being read has come
  std::size_t answered = 0;    // replies written whole
  http::Request request;       // the one being answered
  Reply reply;
  std::uint32_t events = 0;  // what epoll watches for
  std::size_t dropped = 0;   // bytes read and dropped while lingering
};

}  // namespace metrics

struct MetricsServer::Loop {
  using Clock = metrics::Clock;
  using Connection = metrics::Connection;
  using Status = http::Status;

  // Set by bind(), read-only after.
  MetricsLimits limits;
  Exposition exposition;
  UniqueFd listener, epoll, wake;  // wake: an eventfd, written to stop the loop or hand it an exposition
  std::uint16_t port = 0;

  // The listener's thread's alone.
  std::map<std::uint64_t, std::unique_ptr<Connection>> connections;  // at most limits.max_connections
  std::uint64_t next_id = metrics::kFirstConnection;
  bool listener_watched = true;
  std::optional<Clock::time_point> full_since;        // every connection taken since then
  std::optional<Clock::time_point> descriptors_back;  // accept() ran out of descriptors: not before then
  std::optional<Clock::time_point> listener_resumes;  // the listening socket is not watched until then
  std::vector<std::uint64_t> waiting;                 // connections whose request waits for the next exposition
  std::vector<std::uint64_t> exposing;                // those the exposition being made answers

  // Between the threads: `stopping` from the destructor's; the rest under `mutex`.
  std::atomic<bool> stopping{false};
  std::mutex mutex;
  std::condition_variable wanted_changed;
  bool wanted = false, wanted_gzip = false, producer_stops = false;
  std::shared_ptr<const metrics::Exposed> made;  // the exposition made, until the listener takes it
  std::thread listener_thread, exposition_thread;

  // The exposition's thread (metrics_server.cpp).
  void produce();
  void notify_listener();
  void stop();  // from the destructor: ends both threads

  // The listener's thread (metrics_loop.cpp).
  void run();
  int wait_ms(Clock::time_point now) const;  // until the nearest deadline
  void accept_ready(Clock::time_point now);
  void update_listener(Clock::time_point now);
  void serve(std::uint64_t id, std::uint32_t ready, Clock::time_point now);
  void read_request(Connection& c, Clock::time_point now);
  void advance(Connection& c, Clock::time_point now);  // answers what is buffered, one request at a time
  void answer(Connection& c, Clock::time_point now);
  void respond(Connection& c, http::ReplyHead head, std::shared_ptr<const void> owner, std::string_view body,
               Clock::time_point now);
  void respond_text(Connection& c, Status status, std::string text, bool last, Clock::time_point now);
  void write_reply(Connection& c, Clock::time_point now);
  void linger(Connection& c, Clock::time_point now);
  void drop_input(Connection& c);
  void expire(Clock::time_point now);
  void request_exposition();
  void take_exposition(Clock::time_point now);
  void watch(Connection& c, std::uint32_t events);
  void close_if_done(std::uint64_t id);  // a connection whose phase is done: closed and forgotten
};

}  // namespace tricolor::control
