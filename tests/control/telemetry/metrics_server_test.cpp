// The metrics listener (control/telemetry/metrics_server.hpp) in this process, over loopback, with an exposition
// made by the test and limits made small, so that each bound shows in a fraction of a second. The
// real daemon's listener is tested end to end in metrics_test.py and metrics_hostile_test.py.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/telemetry/http_reply.hpp"
#include "control/telemetry/metrics_server.hpp"
#include "control/telemetry/prometheus.hpp"
#include "control/telemetry/unique_fd.hpp"
#include "tests/control/telemetry/gunzip.hpp"

namespace {

using namespace tricolor::control;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// "made N" and a filler: every exposition has the same length, its number first.
std::string exposition_text(int n, std::size_t size = 4000) {
  char start[16];
  std::snprintf(start, sizeof start, "made %06d\n", n);
  std::string text = start;
  while (text.size() + 30 < size) text += "tricolor_filler_total 123456\n";
  return text;
}

struct Served {
  std::atomic<int> calls{0};
  std::unique_ptr<MetricsServer> server;
  std::uint16_t port = 0;

  explicit Served(MetricsLimits limits = {}, MetricsServer::Exposition exposition = {}) {
    if (!exposition) exposition = [this] { return std::optional<std::string>(exposition_text(++calls)); };
    auto bound = MetricsServer::bind({"127.0.0.1", 0}, std::move(exposition), limits);
    EXPECT_TRUE(bound) << bound.error().message;
    server = std::move(*bound);
    server->start();
    port = server->port();
  }
};

class Client {
 public:
  explicit Client(std::uint16_t port, int receive_buffer = 0) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (receive_buffer > 0) ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  }
  void send(std::string_view bytes) {
    EXPECT_EQ(::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // What comes until the server closes (or `limit` passes: then `closed` is false).
  std::string read_to_end(std::chrono::milliseconds limit = 5000ms) {
    std::string got;
    const auto deadline = Clock::now() + limit;
    closed = false;
    while (Clock::now() < deadline) {
      pollfd p{fd_.get(), POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) break;
      char buffer[65536];
      const ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
      if (n <= 0) {
        closed = true;
        break;
      }
      got.append(buffer, static_cast<std::size_t>(n));
    }
    return got;
  }
  // Reads until `count` whole replies have come (by their Content-Length; HEAD replies have no body).
  std::vector<std::pair<std::string, std::string>> replies(std::size_t count, bool heads = false) {
    std::vector<std::pair<std::string, std::string>> out;
    const auto deadline = Clock::now() + 5s;
    while (out.size() < count && Clock::now() < deadline) {
      const auto end = buffer_.find("\r\n\r\n");
      if (end != std::string::npos) {
        const auto at = buffer_.find("Content-Length: ");
        const std::size_t length = heads ? 0 : std::stoul(buffer_.substr(at + 16));
        if (buffer_.size() >= end + 4 + length) {
          out.emplace_back(buffer_.substr(0, end + 4), buffer_.substr(end + 4, length));
          buffer_.erase(0, end + 4 + length);
          continue;
        }
      }
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
    return out;
  }
  void shut() { ::shutdown(fd_.get(), SHUT_WR); }
  bool closed = false;

 private:
  UniqueFd fd_;
  std::string buffer_;
};

std::string get(std::string_view target, std::string_view extra = "") {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra) + "\r\n";
}

using tricolor::test::gunzip;

TEST(MetricsServer, ServesMetricsAndTheIndexWithGetAndHead) {
  Served s;
  Client c(s.port);
  c.send(get("/metrics") + get("/metrics?x=1", "Accept-Encoding: gzip\r\n") + "HEAD /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
  auto r = c.replies(2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].first.starts_with("HTTP/1.1 200 OK\r\n")) << r[0].first;
  EXPECT_NE(r[0].first.find("Content-Type: " + std::string(kPrometheusContentType) + "\r\n"), std::string::npos);
  EXPECT_NE(r[0].first.find("Vary: Accept-Encoding\r\n"), std::string::npos);
  EXPECT_EQ(r[0].first.find("Content-Encoding"), std::string::npos);
  EXPECT_EQ(r[0].second, exposition_text(1));
  EXPECT_NE(r[1].first.find("Content-Encoding: gzip\r\n"), std::string::npos) << r[1].first;
  EXPECT_EQ(gunzip(r[1].second), exposition_text(2));
  auto head = c.replies(1, true);
  ASSERT_EQ(head.size(), 1u);
  EXPECT_NE(head[0].first.find("Content-Length: " + std::to_string(exposition_text(3).size()) + "\r\n"), std::string::npos)
      << "HEAD: the length GET would get, no body";
  c.send("GET / HTTP/1.0\r\n\r\n");
  const std::string index = c.read_to_end();
  EXPECT_TRUE(index.starts_with("HTTP/1.1 200 OK\r\n")) << index;
  EXPECT_NE(index.find("href=\"/metrics\""), std::string::npos);
  EXPECT_TRUE(c.closed) << "HTTP/1.0 without keep-alive: closed after the reply";
  EXPECT_EQ(s.calls, 3) << "the exposition once per request";
}

TEST(MetricsServer, AnswersErrorsWithTheirStatus) {
  Served s;
  struct Case {
    std::string request;
    std::string status;
    bool closes;
  };
  for (const Case& k : {Case{get("/nothing"), "404 Not Found", false},
                        Case{"POST /metrics HTTP/1.1\r\nHost: t\r\n\r\n", "405 Method Not Allowed", false},
                        Case{"GET /metrics HTTP/2.0\r\nHost: t\r\n\r\n", "505 HTTP Version Not Supported", true},
                        Case{"GET /metrics\r\n\r\n", "400 Bad Request", true},
                        Case{get("/metrics", "Content-Length: 4\r\n") + "body", "413 Content Too Large", true},
                        Case{get("/metrics", "X: " + std::string(9000, 'x') + "\r\n"), "431 Request Header Fields Too Large", true}}) {
    Client c(s.port);
    c.send(k.request);
    const std::string got = k.closes ? c.read_to_end() : c.replies(1).at(0).first;
    EXPECT_TRUE(got.starts_with("HTTP/1.1 " + k.status + "\r\n")) << k.status << ": " << got.substr(0, 200);
    EXPECT_EQ(k.closes, c.closed) << k.status;
    if (k.status.starts_with("405")) {
      EXPECT_NE(got.find("Allow: GET, HEAD\r\n"), std::string::npos);
    }
  }
  EXPECT_EQ(s.calls, 0);
}

TEST(MetricsServer, PipelinedRequestsAreAnsweredInOrder) {
  Served s;
  Client c(s.port);
  std::string twenty;
  for (int i = 0; i < 19; ++i) twenty += get("/metrics");
  twenty += get("/", "Connection: close\r\n");
  c.send(twenty);
  auto r = c.replies(20);
  ASSERT_EQ(r.size(), 20u);
  for (std::size_t i = 0; i + 1 < r.size(); ++i) {
    EXPECT_TRUE(r[i].first.starts_with("HTTP/1.1 200 OK\r\n")) << i;
    EXPECT_EQ(r[i].second, exposition_text(static_cast<int>(i) + 1)) << "one exposition per request, in order";
  }
  EXPECT_NE(r[19].second.find("href=\"/metrics\""), std::string::npos);
  EXPECT_EQ(c.read_to_end(), "");
  EXPECT_TRUE(c.closed);
}

TEST(MetricsServer, ScrapesArrivingDuringAnExpositionShareTheNextOne) {
  std::mutex mutex;
  std::condition_variable changed;
  bool released = false;
  std::atomic<int> calls{0};
  Served s({}, [&]() -> std::optional<std::string> {
    const int n = ++calls;
    if (n == 1) {  // the first waits until the test has sent the others
      std::unique_lock lock(mutex);
      changed.wait(lock, [&] { return released; });
    }
    return exposition_text(n);
  });
  Client first(s.port);
  first.send(get("/metrics"));
  while (calls == 0) std::this_thread::sleep_for(1ms);
  std::vector<std::unique_ptr<Client>> others;
  for (int i = 0; i < 9; ++i) {
    others.push_back(std::make_unique<Client>(s.port));
    others.back()->send(get("/metrics"));
  }
  std::this_thread::sleep_for(200ms);  // the listener reads them meanwhile
  {
    const std::lock_guard lock(mutex);
    released = true;
  }
  changed.notify_all();
  EXPECT_EQ(first.replies(1).at(0).second, exposition_text(1));
  for (auto& c : others) {
    const auto r = c->replies(1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_NE(r[0].second, exposition_text(1)) << "made after the request came";
  }
  EXPECT_EQ(calls, 2) << "the nine shared one";
}

TEST(MetricsServer, BeyondTheConnectionLimitNewcomersAreRefused) {
  Served s({.max_connections = 2, .full_wait = 0ms});
  auto a = std::make_unique<Client>(s.port);
  Client b(s.port);
  a->send("GET /metr");  // both held open, mid-request
  b.send("GET /metr");
  std::this_thread::sleep_for(100ms);
  Client c(s.port);
  EXPECT_EQ(c.read_to_end(), http::kBusyReply);
  EXPECT_TRUE(c.closed);
  a->send("ics HTTP/1.0\r\n\r\n");
  EXPECT_TRUE(a->read_to_end().starts_with("HTTP/1.1 200 OK"));
  a.reset();  // its place frees once the listener sees it gone
  std::string got;
  for (int i = 0; i < 50 && !got.starts_with("HTTP/1.1 200 OK"); ++i) {
    Client d(s.port);
    d.send("GET / HTTP/1.0\r\n\r\n");
    got = d.read_to_end();
    if (got == http::kBusyReply) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200 OK")) << got.substr(0, 100);
}

TEST(MetricsServer, AtTheLimitNewcomersWaitInTheBacklogForAWhile) {
  Served s({.max_connections = 2, .full_wait = 3000ms});
  Client a(s.port), b(s.port);
  a.send("GET /metr");
  b.send("GET /metr");
  std::this_thread::sleep_for(100ms);
  Client c(s.port);  // in the backlog
  c.send("GET / HTTP/1.0\r\n\r\n");
  std::this_thread::sleep_for(200ms);
  a.send("ics HTTP/1.0\r\n\r\n");  // once a has its reply and is gone, c is taken in and answered
  EXPECT_TRUE(a.read_to_end().starts_with("HTTP/1.1 200 OK"));
  a.shut();
  const std::string got = c.read_to_end(2000ms);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200 OK")) << got.substr(0, 100);
}

// The CPU time a thread of this process has used, by its name, in clock ticks. Its stat file is opened
// once and read with pread: reading it then takes no descriptor (nor does any stream, whose checks
// under UBSan want one).
class ThreadTicks {
 public:
  explicit ThreadTicks(std::string_view name) {
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string line;
      if (std::getline(comm, line) && line == name) stat_.reset(::open((task.path() / "stat").c_str(), O_RDONLY | O_CLOEXEC));
    }
  }
  long now() const {
    char text[1024];
    const ssize_t n = stat_ ? ::pread(stat_.get(), text, sizeof text - 1, 0) : -1;
    if (n <= 0) return -1;
    std::string_view fields(text, static_cast<std::size_t>(n));
    fields.remove_prefix(fields.rfind(')') + 2);  // from field 3, the state
    long ticks = 0;
    for (int field = 3; field <= 15 && !fields.empty(); ++field) {
      const auto space = fields.find(' ');
      if (field >= 14) ticks += std::strtol(std::string(fields.substr(0, space)).c_str(), nullptr, 10);  // utime, stime
      fields.remove_prefix(space == std::string_view::npos ? fields.size() : space + 1);
    }
    return ticks;
  }

 private:
  UniqueFd stat_;
};

TEST(MetricsServer, OutOfDescriptorsPausesAcceptingInsteadOfSpinning) {
  Served s;
  UniqueFd client{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};  // made while descriptors are left
  ThreadTicks listener("metrics-http");
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  int highest = 0;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd"))
    highest = std::max(highest, std::stoi(fd.path().filename().string()));
  rlimit none = before;
  none.rlim_cur = static_cast<rlim_t>(highest + 1);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &none), 0);
  std::vector<UniqueFd> fillers;  // the gaps below the highest: now no descriptor is left at all
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.emplace_back(fd);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(s.port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);  // in the backlog
  const long ticks = listener.now();
  std::this_thread::sleep_for(1000ms);  // accept() fails with EMFILE meanwhile
  const long spent = listener.now() - ticks;
  fillers.clear();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &before), 0);
  EXPECT_GE(ticks, 0);
  EXPECT_LT(spent, ::sysconf(_SC_CLK_TCK) / 4) << "the listener spun on EMFILE: " << spent << " ticks in 1 s";
  const std::string request = get("/", "Connection: close\r\n");
  ASSERT_EQ(::send(client.get(), request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  pollfd p{client.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "taken in once descriptors are back";
  char reply[16] = {};
  EXPECT_EQ(::recv(client.get(), reply, 15, 0), 15);
  EXPECT_EQ(std::string(reply), "HTTP/1.1 200 OK");
}

TEST(MetricsServer, AWholeRequestHeadMustComeInTime) {
  Served s({.request_time = 300ms, .idle_time = 300ms});
  const auto start = Clock::now();
  Client silent(s.port), partial(s.port), dripping(s.port);
  partial.send("GET /metrics HTTP/1.1\r\n");
  // A byte every 50 ms: each read is quick, the request is not.
  std::string got;
  for (int i = 0; i < 100 && got.empty(); ++i) {
    dripping.send("X");
    got = dripping.read_to_end(50ms);
  }
  got += dripping.read_to_end();
  EXPECT_TRUE(got.starts_with("HTTP/1.1 408 Request Timeout\r\n")) << got;
  EXPECT_TRUE(dripping.closed);
  EXPECT_LT(Clock::now() - start, 2s);
  for (Client* c : {&silent, &partial}) {
    EXPECT_TRUE(c->read_to_end().starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    EXPECT_TRUE(c->closed);
  }
  // Kept alive after a reply, then idle: closed without a word.
  Client idle(s.port);
  idle.send(get("/"));
  ASSERT_EQ(idle.replies(1).size(), 1u);
  const auto answered = Clock::now();
  EXPECT_EQ(idle.read_to_end(), "");
  EXPECT_TRUE(idle.closed);
  EXPECT_GE(Clock::now() - answered, 250ms);
}

TEST(MetricsServer, AReplyNotTakenInTimeIsDropped) {
  const std::size_t size = 16u << 20;  // more than the sockets' buffers hold
  Served s({.reply_time = 500ms}, [&] { return std::optional<std::string>(std::string(size, 'x')); });
  Client c(s.port, 4096);
  c.send(get("/metrics"));
  std::this_thread::sleep_for(1500ms);  // not reading
  const std::string got = c.read_to_end();
  EXPECT_TRUE(c.closed);
  EXPECT_LT(got.size(), size) << "the reply was cut";
}

TEST(MetricsServer, NoExpositionIs503) {
  Served s({}, [] { return std::optional<std::string>(); });
  Client c(s.port);
  c.send(get("/metrics"));
  auto r = c.replies(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].first.starts_with("HTTP/1.1 503 Service Unavailable\r\n")) << r[0].first;
  EXPECT_NE(r[0].second.find("did not answer in time"), std::string::npos);
}

TEST(MetricsServer, StopsWithConnectionsOpen) {
  auto s = std::make_unique<Served>();
  Client a(s->port), b(s->port);
  a.send("GET /met");
  b.send(get("/metrics"));
  ASSERT_EQ(b.replies(1).size(), 1u);
  s.reset();
  a.read_to_end(2000ms);
  EXPECT_TRUE(a.closed);
}

TEST(MetricsServer, BindErrorsNameTheAddress) {
  Served s;
  auto again = MetricsServer::bind({"127.0.0.1", s.port}, [] { return std::optional<std::string>(); });
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message,
            "--metrics 127.0.0.1:" + std::to_string(s.port) + ": cannot listen there: Address already in use");
  auto nowhere = MetricsServer::bind({"192.0.2.1", 9400}, [] { return std::optional<std::string>(); });
  ASSERT_FALSE(nowhere);
  EXPECT_EQ(nowhere.error().message, "--metrics 192.0.2.1:9400: cannot listen there: Cannot assign requested address");
}

}  // namespace
