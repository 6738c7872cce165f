// tricolorctl: tricolord's command-line client. One command per run, sent over the control socket
// (control/protocol.hpp), its reply printed:
//   tricolorctl [--socket PATH] [--json] COMMAND...     e.g. tricolorctl rule change web profile silver
//   tricolorctl load FILE                               a whole policy, installed whole or not at all
// Exit status, for scripts: 0 done; 1 the command line is wrong; 2 tricolord refused the command (the
// message says why, with a caret under the token at fault); 3 tricolord could not be reached or
// answered nothing that makes sense (not running, no permission, a broken reply).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "control/policy_file.hpp"
#include "control/protocol.hpp"

namespace {

using namespace tricolor::control;

constexpr int kExitUsage = 1;
constexpr int kExitRefused = 2;
constexpr int kExitUnreachable = 3;
constexpr const char* kDefaultSocket = "/run/tricolor/tricolor.sock";

int unreachable(const std::string& message) {
  std::cerr << "tricolorctl: " << message << '\n';
  return kExitUnreachable;
}

bool send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tricolorctl: sends one command to tricolord over its control socket and prints the reply.\n"
               "Exit status: 0 done, 1 usage, 2 the command was refused, 3 tricolord could not be reached."};
  std::string socket_path = kDefaultSocket;
  bool json = false;
  double timeout_s = 30;
  std::vector<std::string> words;
  app.add_option("--socket", socket_path, "tricolord's control socket (default /run/tricolor/tricolor.sock)");
  app.add_flag("--json", json, "print the reply as JSON (for scripts)");
  app.add_option("--timeout", timeout_s, "seconds to wait for the reply (default 30)")->check(CLI::PositiveNumber);
  app.add_option("command", words, "a command of the language (rule list, rule change NAME ...), ping, version, "
                                    "stats, save FILE, or load FILE")
      ->required();
  app.allow_extras(false);
  app.prefix_command(false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }

  protocol::Request request;
  request.json = json;
  for (const std::string& word : words) request.command += (request.command.empty() ? "" : " ") + word;
  if (words.front() == "load") {
    if (words.size() != 2) {
      std::cerr << "tricolorctl: load FILE: one policy file\n";
      return kExitUsage;
    }
    auto text = read_policy_file(words[1]);
    if (!text) {
      std::cerr << "tricolorctl: " << text.error().message << '\n';
      return kExitUsage;
    }
    request.command = "load";
    request.text = std::move(*text);
  }

  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(address.sun_path)) {
    std::cerr << "tricolorctl: --socket: a path of 1 to " << sizeof(address.sun_path) - 1 << " bytes\n";
    return kExitUsage;
  }
  std::memcpy(address.sun_path, socket_path.data(), socket_path.size());
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
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (!send_all(fd, protocol::frame(protocol::request_json(request)))) {
    // The daemon may have refused the connection with a reply before closing it: read that below.
  }
  protocol::FrameReader reader;
  std::optional<std::string> frame;
  std::uint8_t buffer[64 * 1024];
  while (!frame && !reader.error()) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return unreachable(n == 0 ? "tricolord closed the connection without a reply"
                                : std::string("no reply from tricolord: ") + std::strerror(e));
    }
    std::span<const std::uint8_t> bytes(buffer, static_cast<std::size_t>(n));
    while (!bytes.empty() && !frame && !reader.error()) {
      bytes = bytes.subspan(reader.feed(bytes));
      frame = reader.next();
    }
  }
  ::close(fd);
  if (!frame) return unreachable("a broken reply from tricolord: " + reader.error()->message);
  auto reply = protocol::parse_reply(*frame);
  if (!reply) return unreachable("a broken reply from tricolord: " + reply.error().message);
  if (json) {
    std::cout << *frame << '\n';
    return reply->ok ? 0 : kExitRefused;
  }
  if (reply->ok) {
    std::cout << reply->output;
    if (!reply->output.empty() && reply->output.back() != '\n') std::cout << '\n';
    return 0;
  }
  std::cerr << "tricolorctl: " << reply->error.message << '\n';
  if (reply->error.column && request.command.find('\n') == std::string::npos && request.command != "load") {
    std::cerr << "  " << request.command << "\n  " << std::string(*reply->error.column - 1, ' ') << '^' << '\n';
  }
  return kExitRefused;
}
