#include "control/telemetry/http_reply.hpp"

#include <zlib.h>

#include <cstdio>
#include <ctime>
#include <limits>

namespace tricolor::control::http {
namespace {

constexpr int kGzipWindowBits = 15 + 16;  // 32 KiB window, a gzip header and trailer (zlib's convention)
constexpr int kMemoryLevel = 8;           // zlib's default

// RFC 9110 5.6.7's IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" (English names, whatever the locale).
std::string http_date(std::time_t now) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[40];
  std::snprintf(text, sizeof text, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[utc.tm_wday % 7], utc.tm_mday,
                kMonths[utc.tm_mon % 12], utc.tm_year + 1900, utc.tm_hour, utc.tm_min, utc.tm_sec);
  return text;
}

}  // namespace

std::string reply_head(const ReplyHead& head) {
  std::string out;
  out.reserve(256);
  out.append("HTTP/1.1 ").append(std::to_string(code(head.status))).append(" ").append(reason(head.status)).append("\r\n");
  out.append("Date: ").append(http_date(std::time(nullptr))).append("\r\n");
  out.append("Content-Type: ").append(head.content_type).append("\r\n");
  out.append("Content-Length: ").append(std::to_string(head.content_length)).append("\r\n");
  if (head.gzip) out.append("Content-Encoding: gzip\r\n");
  if (head.varies_by_encoding) out.append("Vary: Accept-Encoding\r\n");
  if (head.allow) out.append("Allow: GET, HEAD\r\n");
  if (!head.keep_alive) out.append("Connection: close\r\n");
  else if (head.version == Version::http_1_0) out.append("Connection: keep-alive\r\n");
  out.append("\r\n");
  return out;
}

Expected<std::string> gzip(std::string_view text) {
  if (text.size() > std::numeric_limits<uInt>::max() / 2)  // zlib counts a call's bytes in 32 bits
    return Error{"gzip", "cannot compress " + std::to_string(text.size()) + " bytes in one piece"};
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, kGzipWindowBits, kMemoryLevel, Z_DEFAULT_STRATEGY) != Z_OK)
    return Error{"gzip", "zlib could not start: " + std::string(stream.msg != nullptr ? stream.msg : "no memory")};
  std::string out(deflateBound(&stream, static_cast<uLong>(text.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&stream, Z_FINISH);  // the bound holds it all: one call
  const std::size_t written = stream.total_out;
  deflateEnd(&stream);
  if (status != Z_STREAM_END) return Error{"gzip", "zlib could not compress " + std::to_string(text.size()) + " bytes"};
  out.resize(written);
  return out;
}

}  // namespace tricolor::control::http
