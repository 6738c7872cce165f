#include "control/telemetry/http_request.hpp"

#include <algorithm>

#include "policer/quote.hpp"

namespace tricolor::control::http {
namespace {

constexpr char kCr = '\r';
constexpr char kLf = '\n';
constexpr char kTab = '\t';
constexpr unsigned char kDel = 0x7f;

bool is_control(unsigned char byte) { return byte < 0x20 || byte == kDel; }

// RFC 9110 5.6.2: a token's characters.
bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view text) { return !text.empty() && std::all_of(text.begin(), text.end(), is_tchar); }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

bool starts_with_name(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && same_name(text.substr(0, prefix.size()), prefix);
}

std::string_view trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == kTab; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

// Calls `each` with every trimmed, non-empty element of a comma-separated list.
template <typename Each>
void for_each_element(std::string_view list, Each each) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view element = trim(list.substr(0, comma));
    if (!element.empty()) each(element);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

std::string hex_byte(unsigned char byte) {
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("0x") + kHex[byte >> 4] + kHex[byte & 0xf];
}

// The path of a request target: origin-form "/p?q", absolute-form "http://host/p?q" (RFC 9112 3.2);
// nothing for any other form (an asterisk is taken as it is, and routed nowhere).
std::optional<std::string> path_of(std::string_view target) {
  if (target == "*") return std::string(target);
  if (!target.starts_with('/')) {
    std::size_t scheme = 0;
    if (starts_with_name(target, "http://")) scheme = 7;
    else if (starts_with_name(target, "https://")) scheme = 8;
    else return std::nullopt;
    const auto slash = target.find('/', scheme);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  return std::string(target.substr(0, target.find_first_of("?#")));
}

}  // namespace

int code(Status status) noexcept { return static_cast<int>(status); }

std::string_view reason(Status status) noexcept {
  switch (status) {
    case Status::ok: return "OK";
    case Status::bad_request: return "Bad Request";
    case Status::not_found: return "Not Found";
    case Status::method_not_allowed: return "Method Not Allowed";
    case Status::request_timeout: return "Request Timeout";
    case Status::content_too_large: return "Content Too Large";
    case Status::uri_too_long: return "URI Too Long";
    case Status::header_fields_too_large: return "Request Header Fields Too Large";
    case Status::service_unavailable: return "Service Unavailable";
    case Status::version_not_supported: return "HTTP Version Not Supported";
  }
  return "Unknown";
}

bool accepts_gzip(std::string_view accept_encoding) {
  std::optional<bool> gzip;  // named: with a q-value above 0
  std::optional<bool> any;   // "*"
  for_each_element(accept_encoding, [&](std::string_view element) {
    const auto semicolon = element.find(';');
    const std::string_view coding = trim(element.substr(0, semicolon));
    bool wanted = true;  // q=1 unless said
    for (std::string_view rest = semicolon == std::string_view::npos ? "" : element.substr(semicolon + 1); !rest.empty();) {
      const auto next = rest.find(';');
      const std::string_view parameter = trim(rest.substr(0, next));
      if (starts_with_name(parameter, "q=")) {
        const std::string_view q = parameter.substr(2);  // "0", "0.000", "0.5", "1"
        wanted = std::any_of(q.begin(), q.end(), [](char c) { return c >= '1' && c <= '9'; });
      }
      if (next == std::string_view::npos) break;
      rest.remove_prefix(next + 1);
    }
    if (same_name(coding, "gzip") || same_name(coding, "x-gzip")) gzip = gzip.value_or(false) || wanted;
    else if (coding == "*") any = any.value_or(false) || wanted;
  });
  if (gzip) return *gzip;
  return any.value_or(false);
}

RequestParser::RequestParser(HeadLimits limits) : limits_(limits) { buffer_.reserve(limits_.max_head_bytes); }

std::size_t RequestParser::room() const noexcept {
  if (error_ || buffer_.size() >= limits_.max_head_bytes) return 0;
  return limits_.max_head_bytes - buffer_.size();
}

std::size_t RequestParser::feed(std::string_view bytes) {
  const std::size_t taken = std::min(bytes.size(), room());
  buffer_.append(bytes.substr(0, taken));
  return taken;
}

HeadError RequestParser::fail(Status status, std::string message) {
  error_ = HeadError{status, std::move(message)};
  return *error_;
}

void RequestParser::reset_head() {
  scanned_ = 0;
  line_start_ = 0;
  header_lines_ = 0;
  request_line_done_ = false;
  request_ = {};
  hosts_ = 0;
  connection_close_ = false;
  connection_keep_alive_ = false;
  accept_encoding_.clear();
}

Parsed RequestParser::next() {
  if (error_) return *error_;
  while (scanned_ < buffer_.size()) {
    const char c = buffer_[scanned_];
    const auto byte = static_cast<unsigned char>(c);
    if (c == kLf) {
      std::size_t end = scanned_;
      if (end > line_start_ && buffer_[end - 1] == kCr) --end;
      const std::string_view line(buffer_.data() + line_start_, end - line_start_);
      ++scanned_;
      line_start_ = scanned_;
      if (line.empty() && !request_line_done_) continue;  // RFC 9112 2.2: empty lines before a request are ignored
      if (line.empty()) {
        if (auto error = finish_head()) return *error;
        Request done = std::move(request_);
        buffer_.erase(0, scanned_);  // what follows is the next request's
        reset_head();
        return done;
      }
      if (auto error = request_line_done_ ? take_header(line) : take_request_line(line)) return *error;
      continue;
    }
    const auto where = [&] {
      return request_line_done_ ? "header line " + std::to_string(header_lines_ + 1) : std::string("the request line");
    };
    if (c == kCr) {
      if (scanned_ + 1 == buffer_.size()) break;  // its LF may come next
      if (buffer_[scanned_ + 1] != kLf) return fail(Status::bad_request, "a CR not followed by LF in " + where());
    } else if (is_control(byte) && !(c == kTab && request_line_done_)) {
      return fail(Status::bad_request, "a control byte (" + hex_byte(byte) + ") in " + where());
    } else if (byte >= 0x80 && !request_line_done_) {
      return fail(Status::bad_request, "a byte above 0x7f (" + hex_byte(byte) + ") in the request line");
    }
    ++scanned_;
  }
  if (buffer_.size() >= limits_.max_head_bytes) {
    const std::string limit = std::to_string(limits_.max_head_bytes) + " bytes";
    if (!request_line_done_) return fail(Status::uri_too_long, "the request line is longer than " + limit);
    return fail(Status::header_fields_too_large, "the request head is longer than " + limit);
  }
  return NeedMore{};
}

std::optional<HeadError> RequestParser::take_request_line(std::string_view line) {
  request_line_done_ = true;
  const auto first = line.find(' ');
  const auto second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos || line.find(' ', second + 1) != std::string_view::npos)
    return fail(Status::bad_request, "the request line " + quote(line) + " is not METHOD TARGET HTTP/VERSION");
  const std::string_view method = line.substr(0, first);
  const std::string_view target = line.substr(first + 1, second - first - 1);
  const std::string_view version = line.substr(second + 1);
  // HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 2.3), case-sensitive.
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (version.size() != 8 || !version.starts_with("HTTP/") || !digit(version[5]) || version[6] != '.' || !digit(version[7]))
    return fail(Status::bad_request, "the request line's version " + quote(version) + " is not HTTP/DIGIT.DIGIT");
  if (version == "HTTP/1.1") request_.version = Version::http_1_1;
  else if (version == "HTTP/1.0") request_.version = Version::http_1_0;
  else return fail(Status::version_not_supported, "version " + quote(version) + " is not served (HTTP/1.0 and HTTP/1.1 are)");
  if (!is_token(method)) return fail(Status::bad_request, "the method " + quote(method) + " is not a token");
  auto path = path_of(target);
  if (!path || target.empty())
    return fail(Status::bad_request, "the target " + quote(target) + " is neither a path (/metrics) nor an http:// URL");
  request_.method = method == "GET" ? Method::get : method == "HEAD" ? Method::head : Method::other;
  request_.method_name = std::string(method);
  request_.target = std::string(target);
  request_.path = std::move(*path);
  return std::nullopt;
}

std::optional<HeadError> RequestParser::take_header(std::string_view line) {
  const std::string where = "header line " + std::to_string(header_lines_ + 1);
  if (++header_lines_ > limits_.max_header_lines)
    return fail(Status::header_fields_too_large, "more than " + std::to_string(limits_.max_header_lines) + " header lines");
  if (line.front() == ' ' || line.front() == kTab)
    return fail(Status::bad_request, where + " starts with whitespace (obsolete line folding is not accepted)");
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return fail(Status::bad_request, where + " " + quote(line) + " has no colon");
  const std::string_view name = line.substr(0, colon);
  if (!is_token(name)) {
    const bool spaced = !name.empty() && (name.back() == ' ' || name.back() == kTab);
    return fail(Status::bad_request, where + ": the field name " + quote(name) + " is not a token" +
                                         (spaced ? " (no whitespace before the colon)" : ""));
  }
  const std::string_view value = trim(line.substr(colon + 1));
  if (same_name(name, "Host")) {
    ++hosts_;
  } else if (same_name(name, "Connection")) {
    for_each_element(value, [&](std::string_view option) {
      if (same_name(option, "close")) connection_close_ = true;
      else if (same_name(option, "keep-alive")) connection_keep_alive_ = true;
    });
  } else if (same_name(name, "Content-Length")) {
    const bool number = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!number) return fail(Status::bad_request, where + ": Content-Length " + quote(value) + " is not a number");
    if (value.find_first_not_of('0') != std::string_view::npos)
      return fail(Status::content_too_large, "a request body is not accepted (Content-Length: " + quote(value) + ")");
  } else if (same_name(name, "Transfer-Encoding")) {
    return fail(Status::content_too_large, "a request body is not accepted (Transfer-Encoding: " + quote(value) + ")");
  } else if (same_name(name, "Accept-Encoding")) {
    if (!accept_encoding_.empty()) accept_encoding_ += ',';  // several lines make one list (RFC 9110 5.3)
    accept_encoding_ += value;
  }
  return std::nullopt;
}

std::optional<HeadError> RequestParser::finish_head() {
  if (request_.version == Version::http_1_1 && hosts_ != 1)
    return fail(Status::bad_request, "an HTTP/1.1 request has one Host header; this one has " + std::to_string(hosts_));
  request_.keep_alive = request_.version == Version::http_1_1 ? !connection_close_ : connection_keep_alive_ && !connection_close_;
  request_.accepts_gzip = accepts_gzip(accept_encoding_);
  return std::nullopt;
}

}  // namespace tricolor::control::http
