#include "control/ctl/ctl_client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <ostream>
#include <utility>
#include <vector>

#include "control/language/language_internal.hpp"
#include "control/language/policy_file.hpp"
#include "control/ctl/terminal_text.hpp"
#include "policer/quote.hpp"

namespace tricolor::control {

namespace {

using protocol::Closing;

Error unreachable(std::string message) { return Error{"", std::move(message)}; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
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

// What a reply with "closing" says: no request ran, and why.
Error closing_error(const protocol::Reply& reply) {
  const std::string& said = reply.ok ? reply.output : reply.error.message;
  return unreachable("tricolord closed the connection without running the request (" +
                     std::string(protocol::to_string(reply.closing)) + ")" + (said.empty() ? "" : ": " + said));
}

bool printable_ascii(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return false;
  return true;
}

void write_error(std::ostream& err, std::string_view where, std::string_view message) {
  err << "tricolorctl: " << where;
  write_terminal_text(err, message);
  err << '\n' << std::flush;
}

// `load FILE` or `save FILE`: `words` are those after the verb.
Expected<CtlRequest> file_request(std::string_view verb, std::span<const std::string_view> words, bool json) {
  const std::string usage = std::string(verb) + " FILE: " +
                            (verb == "load" ? "one policy file to load" : "one file to write the policy to");
  if (words.size() != 1) {
    std::string given = words.empty() ? "none given" : std::to_string(words.size()) + " words given:";
    for (std::size_t i = 0; i < words.size() && i < 4; ++i) given += " " + quote(words[i], kQuotePathMaxBytes);
    if (words.size() > 4) given += " ...";
    return Error{std::string(verb), usage + "; " + given};
  }
  const std::string path(words.front());
  if (path.empty()) return Error{std::string(verb), usage + "; an empty file name given"};
  CtlRequest out;
  out.request.json = json;
  if (verb == "save") {
    out.request.command = "save";
    out.save_path = path;
    out.json = protocol::request_json(out.request);
    return out;
  }
  auto text = read_policy_file(path);
  if (!text) return text.error();
  const std::size_t file_bytes = text->size();
  out.request.command = "load";
  out.request.text = std::string();  // sent as `json` only: a text of 64 MiB is not held twice
  {
    // protocol::request_json's object, with the text moved into it rather than copied.
    nlohmann::json doc = {{"command", out.request.command}, {"text", std::move(*text)}};
    if (json) doc["json"] = true;
    out.json = doc.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
  }
  // JSON writes a quote, a backslash or a line end as two bytes, another control byte as six (\u0001),
  // a byte that is not UTF-8 as three (U+FFFD). The limit has room for a file of 64 MiB of the first
  // kind; only the others can exceed it, and the daemon would refuse the frame unread.
  if (out.json.size() > protocol::kMaxRequestFrameBytes)
    return Error{"load", "load: " + quote(path, kQuotePathMaxBytes) + " has " + std::to_string(file_bytes) +
                             " bytes, which make a request of " + std::to_string(out.json.size()) +
                             " bytes; the control socket takes at most " +
                             std::to_string(protocol::kMaxRequestFrameBytes) +
                             " (control bytes and bytes that are not UTF-8 take up to 6 bytes each)"};
  return out;
}

// The running policy's text (the reply to `save`) written to the file, as the user who runs this.
int write_saved(const Answer& answer, const std::string& path, const PrintOptions& options, std::ostream& out,
                std::ostream& err) {
  const auto result = nlohmann::json::parse(answer.reply.result_json, nullptr, /*allow_exceptions=*/false);
  std::array<std::uint64_t, 4> counts{};
  static constexpr std::array<const char*, 4> kFields{"rules", "profiles", "color_maps", "generation"};
  for (std::size_t i = 0; i < kFields.size(); ++i) {
    const auto it = result.is_object() ? result.find(kFields[i]) : result.end();
    if (!result.is_object() || it == result.end() || !it->is_number_unsigned()) {
      write_error(err, options.where,
                  broken_reply(std::string("save: the result has no count of ") + kFields[i]).message);
      return kExitUnreachable;
    }
    counts[i] = it->get<std::uint64_t>();
  }
  // The file holds what `show` prints: the text, ending in a line end.
  const std::string& text = answer.reply.output;
  const bool ends = text.empty() || text.back() == '\n';
  auto written = write_policy_file(path, ends ? text : text + '\n');
  if (!written) {
    write_error(err, options.where, written.error().message);
    return kExitUsage;
  }
  const std::string said = "saved " + std::to_string(counts[0]) + (counts[0] == 1 ? " rule" : " rules") + " to " + path;
  if (options.json) {
    nlohmann::ordered_json doc = {{"ok", true}, {"output", said}};
    doc["result"] = {{"rules", counts[0]}, {"profiles", counts[1]}, {"color_maps", counts[2]},
                     {"generation", counts[3]}, {"path", path}};
    out << doc.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::ordered_json::error_handler_t::replace) << '\n';
  } else {
    write_terminal_text(out, said);
    out << '\n';
  }
  out << std::flush;
  return kExitDone;
}

}  // namespace

Error broken_reply(std::string_view what) { return unreachable("a broken reply from tricolord: " + std::string(what)); }

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
  reader_ = protocol::FrameReader(protocol::kMaxReplyFrameBytes);
  unread_.clear();
}

Expected<bool> CtlClient::reconnect() {
  auto fresh = connect(path_);
  if (!fresh) return fresh.error();
  *this = std::move(*fresh);
  return true;
}

void CtlClient::feed(std::string_view bytes, std::optional<std::string>& payload) {
  // The reader stops at a frame's end: what follows is kept for the next call.
  auto rest = std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  while (!rest.empty() && !payload && !reader_.error()) {
    rest = rest.subspan(reader_.feed(rest));
    payload = reader_.next();
  }
  unread_.append(reinterpret_cast<const char*>(rest.data()), rest.size());
}

Expected<CtlClient::Kept> CtlClient::check_kept() {
  // Anything the daemon sent before a request is not a reply: an idle notice, another reason it closes
  // the connection, or its end.
  std::optional<std::string> payload;
  feed(std::exchange(unread_, {}), payload);
  bool ended = false;
  std::array<char, 16 * 1024> buffer;
  while (!payload && !reader_.error()) {
    const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n > 0) {
      feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)), payload);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    ended = true;  // closed, or reset: gone either way
    break;
  }
  if (reader_.error()) {
    const std::string message = reader_.error()->message;
    close();
    return broken_reply(message);
  }
  if (payload) {
    auto reply = protocol::parse_reply(*payload);
    close();
    if (!reply) return broken_reply(reply.error().message);
    if (reply->closing == Closing::idle) return Kept::closed_by_daemon;
    if (reply->closing != Closing::none) return closing_error(*reply);
    return broken_reply("a reply before any request");
  }
  if (ended) {
    close();
    return Kept::closed_by_daemon;
  }
  return Kept::open;  // a part of a frame may have come: the reply read next is that frame
}

Expected<Answer> CtlClient::call(const protocol::Request& request, std::chrono::milliseconds timeout) {
  return call(protocol::request_json(request), timeout);
}

Expected<Answer> CtlClient::call(std::string_view request_json, std::chrono::milliseconds timeout) {
  if (fd_ < 0) return unreachable("the connection to tricolord is closed");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int sent = 0;;) {
    auto kept = check_kept();
    if (!kept) return kept.error();
    if (*kept == Kept::closed_by_daemon)
      if (auto again = reconnect(); !again) return again.error();
    auto answer = exchange(request_json, deadline, timeout);
    ++sent;
    if (!answer || answer->reply.closing == Closing::none) return answer;
    // Nothing ran. After an idle close, once more on a new connection.
    close();
    if (answer->reply.closing != Closing::idle || sent > 1) return closing_error(answer->reply);
    if (auto again = reconnect(); !again) return again.error();
  }
}

Expected<Answer> CtlClient::exchange(std::string_view request_json, std::chrono::steady_clock::time_point deadline,
                                     std::chrono::milliseconds timeout) {
  // The header and the payload as they are: a load's payload is not copied into a frame.
  const auto n = static_cast<std::uint32_t>(request_json.size());
  const std::array<char, protocol::kHeaderBytes> header{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                                                        static_cast<char>(n >> 8), static_cast<char>(n)};
  // A failed send is not the end: a daemon that refuses a peer writes its reason before it closes,
  // and that reply, read below, says more than "broken pipe".
  for (std::string_view part : {std::string_view(header.data(), header.size()), request_json}) {
    while (!part.empty()) {
      pollfd p{fd_, POLLOUT, 0};
      const int ready = ::poll(&p, 1, left_ms(deadline));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        close();
        return unreachable("tricolord took no request within " + seconds(timeout) + " (--timeout)");
      }
      const ssize_t sent = ::send(fd_, part.data(), part.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (sent <= 0) break;
      part.remove_prefix(static_cast<std::size_t>(sent));
    }
  }

  std::optional<std::string> payload;
  feed(std::exchange(unread_, {}), payload);
  std::vector<char> buffer(256 * 1024);  // a reply may be hundreds of MB
  while (!payload && !reader_.error()) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, left_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      close();
      return unreachable("no reply from tricolord within " + seconds(timeout) + " (--timeout)");
    }
    const ssize_t got = ::recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      const int e = errno;
      close();
      return unreachable(got == 0 ? "tricolord closed the connection without a reply"
                                  : std::string("no reply from tricolord: ") + std::strerror(e));
    }
    feed(std::string_view(buffer.data(), static_cast<std::size_t>(got)), payload);
  }
  if (!payload) {
    const std::string message = reader_.error()->message;
    close();
    return broken_reply(message);
  }
  auto reply = protocol::parse_reply(*payload);
  if (!reply) {
    close();
    return broken_reply(reply.error().message);
  }
  return Answer{std::move(*reply), std::move(*payload)};
}

Expected<CtlRequest> request_for_line(std::string_view line, bool json) {
  // The words are the language's tokens: what the daemon would see, whatever spaces come first.
  const std::vector<detail::Token> tokens = detail::tokenize(line);
  if (!tokens.empty() && (tokens[0].text == "load" || tokens[0].text == "save")) {
    std::vector<std::string_view> words;
    for (std::size_t i = 1; i < tokens.size(); ++i) words.push_back(tokens[i].text);
    return file_request(tokens[0].text, words, json);
  }
  CtlRequest out;
  out.request.command = std::string(trim(line));
  out.request.json = json;
  out.caret_line = out.request.command;
  out.json = protocol::request_json(out.request);
  return out;
}

Expected<CtlRequest> request_for_words(std::span<const std::string> words, bool json) {
  if (!words.empty() && (words[0] == "load" || words[0] == "save")) {
    const std::vector<std::string_view> rest(words.begin() + 1, words.end());
    return file_request(words[0], rest, json);
  }
  std::string line;
  for (const std::string& word : words) line += (line.empty() ? "" : " ") + word;
  return request_for_line(line, json);
}

int send_and_print(CtlClient& client, const CtlRequest& request, const PrintOptions& options, std::ostream& out,
                   std::ostream& err) {
  auto answer = client.call(request.json, options.timeout);
  if (!answer) {
    write_error(err, options.where, std::string(options.gone) + answer.error().message);
    return kExitUnreachable;
  }
  if (!request.save_path.empty() && answer->reply.ok) return write_saved(*answer, request.save_path, options, out, err);
  return print_answer(*answer, request.caret_line, options.json, out, err, options.where);
}

int print_answer(const Answer& answer, std::string_view caret_line, bool json, std::ostream& out, std::ostream& err,
                 std::string_view where) {
  const protocol::Reply& reply = answer.reply;
  const auto broken = [&](std::string_view what) {
    write_error(err, where, broken_reply(what).message);
    return kExitUnreachable;
  };
  if (json) {
    // tricolord writes printable ASCII; anything else (DEL, C1 or bidi controls in UTF-8) is written
    // again as \uXXXX, the fields in their order.
    if (printable_ascii(answer.payload)) {
      out << answer.payload;
    } else {
      const auto doc = nlohmann::ordered_json::parse(answer.payload, nullptr, /*allow_exceptions=*/false);
      if (doc.is_discarded()) return broken("not JSON");
      out << doc.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::ordered_json::error_handler_t::replace);
    }
    out << '\n' << std::flush;
    return reply.ok ? kExitDone : kExitRefused;
  }
  if (reply.ok) {
    if (reply.output.empty()) {  // "output" is there, a string, in every answer: "" or absent is not alike
      const auto doc = nlohmann::json::parse(answer.payload, nullptr, /*allow_exceptions=*/false);
      const auto output = doc.is_object() ? doc.find("output") : doc.end();
      if (!doc.is_object() || output == doc.end() || !output->is_string()) return broken("an answer without its output");
    }
    write_terminal_text(out, reply.output);
    if (!reply.output.empty() && reply.output.back() != '\n') out << '\n';
    out << std::flush;
    return kExitDone;
  }
  if (reply.error.message.empty()) return broken("an error without a message");
  write_error(err, where, reply.error.message);
  const std::size_t column = reply.error.column.value_or(0);
  if (column >= 1 && column <= caret_line.size() + 1 && caret_line.find('\n') == std::string_view::npos) {
    // The caret under the token as the line is shown (escaped where it must be).
    const std::size_t at = terminal_text(caret_line.substr(0, column - 1)).size();
    err << "  " << terminal_text(caret_line) << "\n  " << std::string(at, ' ') << '^' << '\n';
  }
  err << std::flush;
  return kExitRefused;
}

}  // namespace tricolor::control
