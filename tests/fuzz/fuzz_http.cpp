// libFuzzer: the metrics listener's request heads (control/telemetry/http_request.hpp). The input is a byte
// stream; its first byte chooses the size of the pieces it is fed in. Nothing may crash; the parser
// never holds more than the head limit; an error is final; every request it gives is well formed;
// and the stream fed in those pieces gives the same requests and error as the stream fed a byte at a
// time (what arrives when must not change what a request is).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "control/telemetry/http_request.hpp"

using namespace tricolor::control::http;

namespace {

constexpr HeadLimits kLimits{.max_head_bytes = 1024, .max_header_lines = 16};  // small: reached often

// Each request as one line of text, then the error's status and message, if any.
std::vector<std::string> outcomes(std::string_view stream, std::size_t piece) {
  std::vector<std::string> out;
  RequestParser parser(kLimits);
  for (;;) {
    Parsed parsed = parser.next();
    if (parser.buffered() > kLimits.max_head_bytes) std::abort();
    if (auto* r = std::get_if<Request>(&parsed)) {
      const bool path_ok = r->path == "*" || (!r->path.empty() && r->path.front() == '/');
      if (r->method_name.empty() || r->target.empty() || !path_ok || r->path.find('?') != std::string::npos) std::abort();
      if ((r->method == Method::get) != (r->method_name == "GET")) std::abort();
      out.push_back(r->method_name + " " + r->target + " " + r->path + (r->version == Version::http_1_0 ? " 1.0" : " 1.1") +
                    (r->keep_alive ? " keep" : " close") + (r->accepts_gzip ? " gzip" : ""));
      continue;
    }
    if (auto* e = std::get_if<HeadError>(&parsed)) {
      if (parser.room() != 0 || parser.feed("x") != 0) std::abort();
      auto again = parser.next();
      if (!std::holds_alternative<HeadError>(again) || std::get<HeadError>(again).message != e->message) std::abort();
      if (e->message.empty() || code(e->status) < 400 || code(e->status) > 505) std::abort();
      out.push_back(std::to_string(code(e->status)) + " " + e->message);
      return out;
    }
    if (stream.empty()) return out;
    const std::size_t used = parser.feed(stream.substr(0, piece));
    if (used == 0) {  // full: the next call must say why
      if (!std::holds_alternative<HeadError>(parser.next())) std::abort();
      continue;
    }
    stream.remove_prefix(used);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = 2 + data[0] % 255;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  if (outcomes(stream, piece) != outcomes(stream, 1)) std::abort();
  (void)accepts_gzip(stream);
  return 0;
}
