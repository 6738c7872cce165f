// The metrics listener's HTTP pieces without sockets: request heads (control/telemetry/http_request.hpp) fed
// whole, in pieces and a byte at a time, at and past every limit; replies' heads and gzip
// (control/telemetry/http_reply.hpp).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "control/telemetry/http_reply.hpp"
#include "control/telemetry/http_request.hpp"
#include "tests/control/telemetry/gunzip.hpp"

namespace {

using namespace tricolor::control::http;

// Every request and the error (if any) the stream gives, fed `piece` bytes at a time; `pending` is
// set when the stream ends inside a head.
struct Outcome {
  std::vector<Request> requests;
  std::optional<HeadError> error;
  bool pending = false;
};

Outcome parse(std::string_view stream, std::size_t piece = std::string_view::npos, HeadLimits limits = {}) {
  Outcome out;
  RequestParser parser(limits);
  for (;;) {
    Parsed parsed = parser.next();
    if (auto* r = std::get_if<Request>(&parsed)) {
      out.requests.push_back(std::move(*r));
      continue;
    }
    if (auto* e = std::get_if<HeadError>(&parsed)) {
      out.error = *e;
      EXPECT_EQ(parser.room(), 0u) << "an error is final";
      return out;
    }
    if (stream.empty()) {
      out.pending = parser.buffered() > 0;
      return out;
    }
    const std::size_t used = parser.feed(stream.substr(0, std::min(piece, stream.size())));
    EXPECT_LE(parser.buffered(), limits.max_head_bytes);
    if (used == 0) {  // the buffer is full: next() must say why
      Parsed full = parser.next();
      EXPECT_TRUE(std::holds_alternative<HeadError>(full));
      if (auto* e = std::get_if<HeadError>(&full)) out.error = *e;
      return out;
    }
    stream.remove_prefix(used);
  }
}

Request one(std::string_view stream) {
  Outcome out = parse(stream);
  EXPECT_FALSE(out.error) << out.error->message;
  EXPECT_EQ(out.requests.size(), 1u) << stream;
  return out.requests.empty() ? Request{} : out.requests.front();
}

Status refused(std::string_view stream, std::string_view message_part = {}) {
  Outcome out = parse(stream);
  EXPECT_TRUE(out.error) << "accepted: " << stream;
  if (!out.error) return Status::ok;
  EXPECT_NE(out.error->message.find(message_part), std::string::npos) << out.error->message;
  return out.error->status;
}

TEST(HttpRequest, ReadsTheRequestLine) {
  Request r = one("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.method, Method::get);
  EXPECT_EQ(r.method_name, "GET");
  EXPECT_EQ(r.path, "/metrics");
  EXPECT_EQ(r.version, Version::http_1_1);
  EXPECT_TRUE(r.keep_alive);
  EXPECT_FALSE(r.accepts_gzip);
  r = one("HEAD /metrics?name[]=x&y HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.method, Method::head);
  EXPECT_EQ(r.target, "/metrics?name[]=x&y");
  EXPECT_EQ(r.path, "/metrics") << "the query is not the path";
  r = one("POST /x HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(r.method, Method::other);
  EXPECT_EQ(r.method_name, "POST");
  EXPECT_EQ(one("get / HTTP/1.1\r\nHost: a\r\n\r\n").method, Method::other) << "methods are case-sensitive";
  EXPECT_EQ(one("GET http://h:9400/metrics?q HTTP/1.1\r\nHost: h\r\n\r\n").path, "/metrics") << "absolute-form";
  EXPECT_EQ(one("GET HTTP://h HTTP/1.1\r\nHost: h\r\n\r\n").path, "/");
  EXPECT_EQ(one("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n").path, "*");
  EXPECT_EQ(one("\r\n\nGET / HTTP/1.0\r\n\r\n").path, "/") << "empty lines before a request are ignored";
}

TEST(HttpRequest, RefusesMalformedRequestLines) {
  EXPECT_EQ(refused("GET /metrics\r\n\r\n", "is not METHOD TARGET HTTP/VERSION"), Status::bad_request);
  EXPECT_EQ(refused("GET  /metrics HTTP/1.1\r\n\r\n"), Status::bad_request);
  EXPECT_EQ(refused("GET /metrics HTTP/1.1 \r\n\r\n"), Status::bad_request);
  EXPECT_EQ(refused("GET /a b HTTP/1.1\r\n\r\n"), Status::bad_request);
  EXPECT_EQ(refused("G(T / HTTP/1.1\r\n\r\n", "the method 'G(T' is not a token"), Status::bad_request);
  EXPECT_EQ(refused("GET metrics HTTP/1.1\r\n\r\n", "the target 'metrics'"), Status::bad_request);
  EXPECT_EQ(refused("GET ftp://h/ HTTP/1.1\r\n\r\n"), Status::bad_request);
  EXPECT_EQ(refused("GET / http/1.1\r\n\r\n", "'http/1.1' is not HTTP/DIGIT.DIGIT"), Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1\r\n\r\n"), Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.10\r\n\r\n"), Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.1\tx\r\n\r\n", "a control byte (0x09) in the request line"), Status::bad_request);
  EXPECT_EQ(refused("GET /\xc3\xa9 HTTP/1.1\r\n\r\n", "a byte above 0x7f (0xc3) in the request line"), Status::bad_request);
}

TEST(HttpRequest, ServesHttp10And11Only) {
  EXPECT_EQ(one("GET / HTTP/1.0\r\n\r\n").version, Version::http_1_0);
  EXPECT_EQ(one("GET / HTTP/1.1\r\nHost: a\r\n\r\n").version, Version::http_1_1);
  for (const char* version : {"HTTP/0.9", "HTTP/1.2", "HTTP/2.0", "HTTP/3.0", "HTTP/9.9"})
    EXPECT_EQ(refused("GET / " + std::string(version) + "\r\nHost: a\r\n\r\n",
                      "version '" + std::string(version) + "' is not served (HTTP/1.0 and HTTP/1.1 are)"),
              Status::version_not_supported);
}

TEST(HttpRequest, KeepAliveRules) {
  struct Case {
    const char* head;
    bool keep;
  };
  for (const Case& c : {Case{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
                        Case{"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false},
                        Case{"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, CLOSE\r\n\r\n", false},
                        Case{"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nconnection: Close\r\n\r\n", false},
                        Case{"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n", true},
                        Case{"GET / HTTP/1.0\r\n\r\n", false},
                        Case{"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
                        Case{"GET / HTTP/1.0\r\nconnection:Keep-Alive\r\n\r\n", true},
                        Case{"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", false}})
    EXPECT_EQ(one(c.head).keep_alive, c.keep) << c.head;
}

TEST(HttpRequest, Http11NeedsOneHost) {
  EXPECT_EQ(refused("GET / HTTP/1.1\r\n\r\n", "has one Host header; this one has 0"), Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", "this one has 2"), Status::bad_request);
  EXPECT_EQ(one("GET / HTTP/1.1\r\nHOST: a\r\n\r\n").path, "/");
}

TEST(HttpRequest, RefusesBodies) {
  EXPECT_EQ(one("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").path, "/");
  EXPECT_EQ(one("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 000\r\n\r\n").path, "/");
  EXPECT_EQ(refused("POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
                    "a request body is not accepted (Content-Length: '5')"),
            Status::content_too_large);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
                    "(Transfer-Encoding: 'chunked')"),
            Status::content_too_large);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", "Content-Length '-1' is not a number"),
            Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\n"), Status::bad_request);
}

// A head of exactly `size` bytes: the request line, Host, and one header that fills the rest.
std::string head_of(std::size_t size) {
  const std::string start = "GET /metrics HTTP/1.1\r\nHost: a\r\nX-Fill: ";
  const std::string end = "\r\n\r\n";
  return start + std::string(size - start.size() - end.size(), 'x') + end;
}

TEST(HttpRequest, HeadOfExactly8KiBPassesOneByteMoreDoesNot) {
  ASSERT_EQ(kMaxHeadBytes, 8192u);
  const std::string fits = head_of(kMaxHeadBytes);
  ASSERT_EQ(fits.size(), 8192u);
  for (std::size_t piece : {std::size_t{1}, std::size_t{1000}, std::string::npos}) {
    Outcome ok = parse(fits, piece);
    EXPECT_FALSE(ok.error) << piece;
    EXPECT_EQ(ok.requests.size(), 1u) << piece;
    Outcome over = parse(head_of(kMaxHeadBytes + 1), piece);
    ASSERT_TRUE(over.error) << piece;
    EXPECT_EQ(over.error->status, Status::header_fields_too_large);
    EXPECT_EQ(over.error->message, "the request head is longer than 8192 bytes");
  }
  RequestParser parser;
  EXPECT_EQ(parser.feed(std::string(20000, 'x')), kMaxHeadBytes) << "it never holds more than the limit";
  EXPECT_EQ(parser.room(), 0u);
}

TEST(HttpRequest, RequestLineTooLongIs414) {
  Outcome out = parse("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->status, Status::uri_too_long);
  EXPECT_EQ(out.error->message, "the request line is longer than 8192 bytes");
}

TEST(HttpRequest, SixtyFourHeaderLinesPassSixtyFiveDoNot) {
  ASSERT_EQ(kMaxHeaderLines, 64u);
  std::string head = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 2; i <= 64; ++i) head += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(parse(head + "\r\n").requests.size(), 1u);
  Outcome over = parse(head + "X-65: v\r\n\r\n");
  ASSERT_TRUE(over.error);
  EXPECT_EQ(over.error->status, Status::header_fields_too_large);
  EXPECT_EQ(over.error->message, "more than 64 header lines");
  // Refused as the 65th line ends, before the head does.
  EXPECT_TRUE(parse(head + "X-65: v\r\n").error);
}

TEST(HttpRequest, LimitsAreParameters) {
  Outcome out = parse("GET / HTTP/1.0\r\nA: b\r\nC: d\r\n\r\n", std::string::npos, {.max_head_bytes = 64, .max_header_lines = 1});
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->message, "more than 1 header lines");
  EXPECT_EQ(parse("GET / HTTP/1.0\r\n\r\n", 1, {.max_head_bytes = 18, .max_header_lines = 0}).requests.size(), 1u);
  EXPECT_EQ(parse("GET / HTTP/1.0\r\n\r\n", 1, {.max_head_bytes = 17, .max_header_lines = 0}).error->status,
            Status::header_fields_too_large);
}

const std::string kPipelined =
    "GET /metrics HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n"
    "HEAD / HTTP/1.1\r\nHost: a\r\n\r\n"
    "GET /three HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
    "GET /four HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

void expect_pipelined(const Outcome& out, const std::string& how) {
  EXPECT_FALSE(out.error) << how;
  ASSERT_EQ(out.requests.size(), 4u) << how;
  EXPECT_EQ(out.requests[0].path, "/metrics");
  EXPECT_TRUE(out.requests[0].accepts_gzip);
  EXPECT_EQ(out.requests[1].method, Method::head);
  EXPECT_FALSE(out.requests[1].accepts_gzip) << "each request's headers are its own";
  EXPECT_EQ(out.requests[2].path, "/three");
  EXPECT_TRUE(out.requests[2].keep_alive);
  EXPECT_EQ(out.requests[3].path, "/four");
  EXPECT_FALSE(out.requests[3].keep_alive);
  EXPECT_FALSE(out.pending);
}

TEST(HttpRequest, PipelinedRequestsInOneBufferComeOneAtATime) {
  expect_pipelined(parse(kPipelined), "whole");
  RequestParser parser;
  ASSERT_EQ(parser.feed(kPipelined), kPipelined.size());
  ASSERT_TRUE(std::holds_alternative<Request>(parser.next()));
  EXPECT_EQ(parser.buffered(), kPipelined.size() - kPipelined.find("HEAD")) << "what follows stays for the next";
}

TEST(HttpRequest, BytesOneAtATimeAndEveryCut) {
  expect_pipelined(parse(kPipelined, 1), "a byte at a time");
  for (std::size_t piece = 2; piece < 40; ++piece) expect_pipelined(parse(kPipelined, piece), "pieces of " + std::to_string(piece));
  // A head is not a request until its last byte.
  const std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  RequestParser parser;
  for (std::size_t i = 0; i + 1 < head.size(); ++i) {
    parser.feed(head.substr(i, 1));
    EXPECT_TRUE(std::holds_alternative<NeedMore>(parser.next())) << i;
  }
  parser.feed(head.substr(head.size() - 1));
  EXPECT_TRUE(std::holds_alternative<Request>(parser.next()));
  EXPECT_EQ(parser.buffered(), 0u);
}

TEST(HttpRequest, BareLfEndsALineBareCrIsRefused) {
  EXPECT_EQ(one("GET /metrics HTTP/1.1\nHost: a\n\n").path, "/metrics");
  EXPECT_EQ(one("GET /metrics HTTP/1.1\r\nHost: a\n\r\n").path, "/metrics");
  EXPECT_EQ(refused("GET / HTTP/1.1\rHost: a\r\n\r\n", "a CR not followed by LF in the request line"), Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", "a CR not followed by LF in header line 1"), Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\r\n\r\r\n"), Status::bad_request);
}

TEST(HttpRequest, RefusesObsoleteLineFoldingAndBadFieldNames) {
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n  c\r\n\r\n",
                    "header line 3 starts with whitespace (obsolete line folding is not accepted)"),
            Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\n\tHost: a\r\n\r\n"), Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost : a\r\n\r\n", "the field name 'Host ' is not a token (no whitespace before the colon)"),
            Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost a\r\n\r\n", "header line 1 'Host a' has no colon"), Status::bad_request);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\n: a\r\n\r\n"), Status::bad_request);
}

TEST(HttpRequest, RefusesNulAndControlBytesAsTheyArrive) {
  for (const char byte : {'\0', '\x01', '\x1b', '\x7f', '\v', '\f'}) {
    char shown[8];
    std::snprintf(shown, sizeof shown, "0x%02x", static_cast<unsigned char>(byte));
    EXPECT_EQ(refused(std::string("GET /a") + byte + "b HTTP/1.1\r\nHost: a\r\n\r\n",
                      "a control byte (" + std::string(shown) + ") in the request line"),
              Status::bad_request);
    EXPECT_EQ(refused(std::string("GET / HTTP/1.1\r\nHost: a\r\nX: a") + byte + "b\r\n\r\n", "in header line 2"),
              Status::bad_request);
    // No need to wait for the head's end.
    RequestParser parser;
    parser.feed(std::string("GET / HTTP/1.1\r\nHost: a") + byte);
    EXPECT_TRUE(std::holds_alternative<HeadError>(parser.next())) << int(byte);
  }
  EXPECT_EQ(one("GET / HTTP/1.1\r\nHost: a\r\nX: tab\there\r\nY: caf\xc3\xa9\r\n\r\n").path, "/")
      << "a tab and obs-text in a field value are allowed";
}

TEST(HttpRequest, AnErrorIsFinal) {
  RequestParser parser;
  parser.feed("BAD\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
  const Parsed first = parser.next();
  ASSERT_TRUE(std::holds_alternative<HeadError>(first));
  EXPECT_EQ(parser.room(), 0u);
  EXPECT_EQ(parser.feed("more"), 0u);
  const Parsed again = parser.next();
  ASSERT_TRUE(std::holds_alternative<HeadError>(again));
  EXPECT_EQ(std::get<HeadError>(again).message, std::get<HeadError>(first).message);
}

TEST(HttpRequest, QuotesWhatTheClientSent) {
  Outcome out = parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: " + std::string(500, '9') + "\r\n\r\n");
  ASSERT_TRUE(out.error);
  EXPECT_LT(out.error->message.size(), 200u) << "a long value is cut: " << out.error->message;
  EXPECT_NE(out.error->message.find("... (500 bytes)"), std::string::npos) << out.error->message;
}

TEST(HttpRequest, AcceptEncoding) {
  for (const char* yes : {"gzip", "GZIP", "x-gzip", "gzip, deflate", "deflate, gzip;q=0.5", "*", "br;q=1.0, gzip;q=0.8, *;q=0.1",
                          "identity;q=1, *;q=0.001", " gzip ; q=1 "})
    EXPECT_TRUE(accepts_gzip(yes)) << yes;
  for (const char* no : {"", "identity", "deflate, br", "gzip;q=0", "gzip;q=0.000", "*;q=0", "*, gzip;q=0", "gzipx"})
    EXPECT_FALSE(accepts_gzip(no)) << no;
  EXPECT_TRUE(one("GET / HTTP/1.1\r\nHost: a\r\nAccept-Encoding: br\r\naccept-encoding: gzip\r\n\r\n").accepts_gzip)
      << "several lines make one list";
}

TEST(HttpReply, HeadHasLengthTypeAndConnection) {
  const std::string head = reply_head({.status = Status::ok, .content_type = "text/plain; version=0.0.4",
                                       .content_length = 1234, .gzip = true, .varies_by_encoding = true});
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\nDate: ")) << head;
  EXPECT_TRUE(head.ends_with("\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: 1234\r\n"
                             "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n\r\n"))
      << head;
  EXPECT_NE(head.find(" GMT\r\n"), std::string::npos);
  const std::string refused = reply_head({.status = Status::method_not_allowed, .allow = true, .keep_alive = false});
  EXPECT_TRUE(refused.starts_with("HTTP/1.1 405 Method Not Allowed\r\n")) << refused;
  EXPECT_NE(refused.find("\r\nAllow: GET, HEAD\r\n"), std::string::npos);
  EXPECT_NE(refused.find("\r\nConnection: close\r\n"), std::string::npos);
  EXPECT_NE(reply_head({.version = Version::http_1_0}).find("\r\nConnection: keep-alive\r\n"), std::string::npos);
  EXPECT_EQ(reply_head({.version = Version::http_1_1}).find("Connection:"), std::string::npos);
  EXPECT_NE(kBusyReply.find("\r\n\r\n"), std::string::npos);
  EXPECT_EQ(kBusyReply.substr(kBusyReply.find("\r\n\r\n") + 4).size(), 40u) << "its Content-Length";
}

using tricolor::test::gunzip;

TEST(HttpReply, GzipRoundTrips) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "tricolor_rule_packets_total{rule=\"r" + std::to_string(i) + "\",color=\"green\"} 12345\n";
  auto packed = gzip(text);
  ASSERT_TRUE(packed);
  EXPECT_LT(packed->size(), text.size() / 5);
  EXPECT_EQ(packed->substr(0, 2), "\x1f\x8b") << "a gzip member";
  EXPECT_EQ(gunzip(*packed), text);
  auto empty = gzip("");
  ASSERT_TRUE(empty);
  EXPECT_EQ(gunzip(*empty), "");
}

}  // namespace
