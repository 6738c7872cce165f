// The listener's thread: one epoll loop (level-triggered) over the listening socket, the exposition's
// wake-ups and the connections, each non-blocking and in one phase at a time.
#include "control/telemetry/metrics_loop.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <variant>

#include "control/telemetry/prometheus.hpp"
#include "policer/quote.hpp"

namespace tricolor::control {

using namespace metrics;

namespace {

constexpr int kMaxEvents = 64;
constexpr std::size_t kAcceptsPerTurn = 256;  // then the connections' events get their turn
constexpr std::size_t kReadChunk = 16 * 1024;

constexpr std::string_view kIndexPage =
    "<html><head><title>tricolord</title></head><body><h1>tricolord</h1>"
    "<p><a href=\"/metrics\">/metrics</a>: the counters in Prometheus's text format.</p></body></html>\n";
constexpr std::string_view kHtml = "text/html; charset=utf-8";

}  // namespace

void MetricsServer::Loop::run() {
  std::array<epoll_event, kMaxEvents> events{};
  while (!stopping.load(std::memory_order_acquire)) {
    const int n = ::epoll_wait(epoll.get(), events.data(), kMaxEvents, wait_ms(Clock::now()));
    const auto now = Clock::now();
    for (int i = 0; i < n; ++i) {
      const std::uint64_t id = events[i].data.u64;
      if (id == kListenerId) {
        accept_ready(now);
      } else if (id == kWakeId) {
        std::uint64_t count = 0;
        [[maybe_unused]] const auto got = ::read(wake.get(), &count, sizeof count);
        take_exposition(now);
      } else {
        serve(id, events[i].events, now);
      }
    }
    expire(now);
    update_listener(now);
  }
}

// The nearest deadline, as epoll_wait's timeout (-1: none).
int MetricsServer::Loop::wait_ms(Clock::time_point now) const {
  std::optional<Clock::time_point> nearest = listener_resumes;
  for (const auto& [id, c] : connections)
    if (c->phase != Phase::exposing && (!nearest || c->deadline < *nearest)) nearest = c->deadline;
  if (!nearest) return -1;
  if (*nearest <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*nearest - now).count();
  return static_cast<int>(std::min<long long>(ms, 60'000));
}

void MetricsServer::Loop::accept_ready(Clock::time_point now) {
  const http::HeadLimits head_limits{limits.max_head_bytes, limits.max_header_lines};
  for (std::size_t i = 0; i < kAcceptsPerTurn; ++i) {
    const bool full = connections.size() >= limits.max_connections;
    if (full) {
      if (!full_since) full_since = now;
      if (now - *full_since < limits.full_wait) return;  // newcomers wait in the backlog for a while
    }
    UniqueFd fd{::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)};
    if (!fd) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        descriptors_back = now + limits.accept_pause;  // the next try would fail alike: not before then
        return;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      continue;  // ECONNABORTED and the like: that one is gone, others may wait
    }
    if (full) {  // refused: the descriptor is closed at once
      [[maybe_unused]] const auto sent = ::send(fd.get(), http::kBusyReply.data(), http::kBusyReply.size(),
                                                MSG_DONTWAIT | MSG_NOSIGNAL);
      continue;
    }
    const std::uint64_t id = next_id++;
    auto c = std::make_unique<Connection>(id, std::move(fd), head_limits);
    c->deadline = now + limits.request_time;  // for its first byte
    c->events = EPOLLIN | EPOLLRDHUP;
    epoll_event event{};
    event.events = c->events;
    event.data.u64 = id;
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, c->fd.get(), &event) != 0) continue;  // closed at once
    connections.emplace(id, std::move(c));
  }
}

// Watches the listening socket unless every connection is taken (for full_wait, then newcomers are
// refused) or accept() ran out of descriptors a moment ago.
void MetricsServer::Loop::update_listener(Clock::time_point now) {
  if (connections.size() < limits.max_connections) full_since.reset();
  else if (!full_since) full_since = now;
  if (descriptors_back && now >= *descriptors_back) descriptors_back.reset();
  listener_resumes = descriptors_back;
  if (full_since && now < *full_since + limits.full_wait)
    listener_resumes = std::max(listener_resumes.value_or(now), *full_since + limits.full_wait);
  const bool watched = !listener_resumes;
  if (watched == listener_watched) return;
  epoll_event event{};
  event.events = watched ? std::uint32_t{EPOLLIN} : 0;
  event.data.u64 = kListenerId;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_MOD, listener.get(), &event);
  listener_watched = watched;
}

void MetricsServer::Loop::serve(std::uint64_t id, std::uint32_t ready, Clock::time_point now) {
  const auto found = connections.find(id);
  if (found == connections.end()) return;
  Connection& c = *found->second;
  if ((ready & EPOLLERR) != 0) {
    c.phase = Phase::done;
  } else if (c.phase == Phase::reading) {
    read_request(c, now);
  } else if (c.phase == Phase::writing) {
    write_reply(c, now);
    if (c.phase == Phase::reading) advance(c, now);  // the next pipelined request
  } else if (c.phase == Phase::lingering) {
    drop_input(c);
  } else if (c.phase == Phase::exposing && (ready & EPOLLHUP) != 0) {
    c.phase = Phase::done;  // gone both ways: nobody to answer
  }
  close_if_done(id);
}

void MetricsServer::Loop::read_request(Connection& c, Clock::time_point now) {
  std::array<char, kReadChunk> buffer;
  const std::size_t room = std::min(c.parser.room(), buffer.size());
  if (room == 0) return advance(c, now);  // the head is over its limit: the parser says so
  const ssize_t got = ::recv(c.fd.get(), buffer.data(), room, 0);
  if (got == 0) {  // the client sends no more: what it sent of a request is dropped
    c.phase = Phase::done;
    return;
  }
  if (got < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) c.phase = Phase::done;
    return;
  }
  if (!c.head_started) {
    c.head_started = true;
    c.deadline = now + limits.request_time;  // the whole head from its first byte
  }
  c.parser.feed(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
  advance(c, now);
}

// Answers the requests buffered, one at a time, until one must wait (for more bytes, an exposition,
// or the client taking its reply).
void MetricsServer::Loop::advance(Connection& c, Clock::time_point now) {
  while (c.phase == Phase::reading) {
    http::Parsed parsed = c.parser.next();
    if (auto* error = std::get_if<http::HeadError>(&parsed)) {
      c.request = {};
      return respond_text(c, error->status, "tricolord: " + error->message + "\n", true, now);
    }
    if (auto* request = std::get_if<http::Request>(&parsed)) {
      c.request = std::move(*request);
      answer(c, now);
      continue;
    }
    if (c.parser.buffered() > 0 && !c.head_started) {  // a pipelined request begun
      c.head_started = true;
      c.deadline = now + limits.request_time;
    }
    return watch(c, EPOLLIN | EPOLLRDHUP);
  }
}

// /metrics waits for an exposition; the index page and the refusals are answered at once.
void MetricsServer::Loop::answer(Connection& c, Clock::time_point now) {
  const http::Request& r = c.request;
  if (r.path != "/metrics" && r.path != "/")
    return respond_text(c, Status::not_found, "tricolord: no page " + quote(r.path) + " here; /metrics has the counters\n",
                        false, now);
  if (r.method == http::Method::other) {
    const std::string text = "tricolord: method " + quote(r.method_name) + " is not served here; GET and HEAD are\n";
    const auto body = std::make_shared<const std::string>(text);
    return respond(c, {.status = Status::method_not_allowed, .content_length = body->size(), .allow = true}, body,
                   *body, now);
  }
  if (r.path == "/")
    return respond(c, {.content_type = kHtml, .content_length = kIndexPage.size()}, nullptr, kIndexPage, now);
  c.phase = Phase::exposing;
  watch(c, 0);  // nothing to read until it is answered; a reset still shows (EPOLLERR, EPOLLHUP)
  waiting.push_back(c.id);
  request_exposition();
}

void MetricsServer::Loop::respond(Connection& c, http::ReplyHead head, std::shared_ptr<const void> owner,
                                  std::string_view body, Clock::time_point now) {
  head.version = c.request.version;
  head.keep_alive = head.keep_alive && c.request.keep_alive;
  c.reply = Reply{http::reply_head(head), std::move(owner), c.request.method == http::Method::head ? "" : body, 0,
                  !head.keep_alive};
  c.phase = Phase::writing;
  c.deadline = now + limits.reply_time;
  write_reply(c, now);
}

void MetricsServer::Loop::respond_text(Connection& c, Status status, std::string text, bool last, Clock::time_point now) {
  const auto body = std::make_shared<const std::string>(std::move(text));
  respond(c, {.status = status, .content_length = body->size(), .keep_alive = !last}, body, *body, now);
}

void MetricsServer::Loop::write_reply(Connection& c, Clock::time_point now) {
  Reply& r = c.reply;
  while (r.sent < r.head.size() + r.body.size()) {
    std::array<iovec, 2> parts{};
    std::size_t count = 0;
    if (r.sent < r.head.size())
      parts[count++] = {const_cast<char*>(r.head.data() + r.sent), r.head.size() - r.sent};
    const std::size_t body_sent = r.sent > r.head.size() ? r.sent - r.head.size() : 0;
    if (body_sent < r.body.size())
      parts[count++] = {const_cast<char*>(r.body.data() + body_sent), r.body.size() - body_sent};
    msghdr message{};
    message.msg_iov = parts.data();
    message.msg_iovlen = count;
    const ssize_t sent = ::sendmsg(c.fd.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return watch(c, EPOLLOUT);
    if (sent < 0) {  // the client is gone
      c.phase = Phase::done;
      return;
    }
    r.sent += static_cast<std::size_t>(sent);
  }
  ++c.answered;
  const bool last = r.last;
  c.reply = {};  // the exposition's text goes once no reply holds it
  if (last) return linger(c, now);
  c.phase = Phase::reading;
  c.head_started = false;
  c.deadline = now + limits.idle_time;
}

// Closing a socket with unread bytes resets the connection, and a reset can destroy the reply before
// the client reads it: the last reply is followed by a FIN, and what the client still sends is dropped
// for a while before the close.
void MetricsServer::Loop::linger(Connection& c, Clock::time_point now) {
  ::shutdown(c.fd.get(), SHUT_WR);
  c.phase = Phase::lingering;
  c.deadline = now + limits.linger_time;
  watch(c, EPOLLIN | EPOLLRDHUP);
}

void MetricsServer::Loop::drop_input(Connection& c) {
  std::array<char, kReadChunk> buffer;
  for (;;) {
    const ssize_t got = ::recv(c.fd.get(), buffer.data(), buffer.size(), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dropped += got > 0 ? static_cast<std::size_t>(got) : 0;
    if (got <= 0 || c.dropped >= limits.linger_bytes) {
      c.phase = Phase::done;
      return;
    }
  }
}

// Deadlines past: a request that did not come in time is answered 408; anything else is closed.
void MetricsServer::Loop::expire(Clock::time_point now) {
  std::vector<std::uint64_t> expired;
  for (const auto& [id, c] : connections)
    if (c->phase != Phase::exposing && c->deadline <= now) expired.push_back(id);
  for (const std::uint64_t id : expired) {
    Connection& c = *connections.at(id);
    if (c.phase == Phase::reading && (c.head_started || c.answered == 0)) {
      c.request = {};
      respond_text(c, Status::request_timeout,
                   "tricolord: the request did not arrive within " + std::to_string(limits.request_time.count()) + " ms\n",
                   true, now);
    } else {  // kept alive with nothing asked, a reply not taken in time, or the linger over
      c.phase = Phase::done;
    }
    close_if_done(id);
  }
}

// Asks the exposition's thread for one, for every request waiting, unless one is being made: those
// wait for the next, so that each reply's counters are read after its request came.
void MetricsServer::Loop::request_exposition() {
  if (!exposing.empty()) return;  // one at a time: those waiting get the next
  std::erase_if(waiting, [&](std::uint64_t id) { return !connections.contains(id); });
  if (waiting.empty()) return;
  exposing.swap(waiting);
  const bool gzip = std::any_of(exposing.begin(), exposing.end(),
                                [&](std::uint64_t id) { return connections.at(id)->request.accepts_gzip; });
  {
    const std::lock_guard lock(mutex);
    wanted = true;
    wanted_gzip = gzip;
  }
  wanted_changed.notify_one();
}

// The exposition made: every request it was made for is answered with it (a 503 if there is none).
void MetricsServer::Loop::take_exposition(Clock::time_point now) {
  std::shared_ptr<const Exposed> exposed;
  {
    const std::lock_guard lock(mutex);
    exposed = std::move(made);
  }
  if (!exposed) return;
  for (const std::uint64_t id : std::exchange(exposing, {})) {
    const auto found = connections.find(id);
    if (found == connections.end() || found->second->phase != Phase::exposing) continue;
    Connection& c = *found->second;
    if (!exposed->available) {
      respond_text(c, Status::service_unavailable, exposed->text, false, now);
    } else {
      const bool gzip = c.request.accepts_gzip && exposed->gzipped;
      const std::string_view body = gzip ? *exposed->gzipped : exposed->text;
      respond(c, {.content_type = kPrometheusContentType, .content_length = body.size(), .gzip = gzip,
                  .varies_by_encoding = true}, exposed, body, now);
    }
    if (c.phase == Phase::reading) advance(c, now);
    close_if_done(id);
  }
  request_exposition();
}

// EPOLLIN while a request is read, EPOLLOUT while a reply waits, nothing while an exposition is made.
void MetricsServer::Loop::watch(Connection& c, std::uint32_t events) {
  if (c.events == events) return;
  epoll_event event{};
  event.events = events;
  event.data.u64 = c.id;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_MOD, c.fd.get(), &event);
  c.events = events;
}

void MetricsServer::Loop::close_if_done(std::uint64_t id) {
  const auto found = connections.find(id);
  if (found == connections.end() || found->second->phase != Phase::done) return;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, found->second->fd.get(), nullptr);
  connections.erase(found);  // closes the socket
}

}  // namespace tricolor::control
