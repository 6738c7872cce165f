// The control socket's framing and messages (control/daemon/protocol.hpp): frames reassembled from any split
// of the stream, the length limit enforced before anything is read or reserved, and every malformed
// request refused with a message that says what was wrong.
#include "control/daemon/protocol.hpp"
#include "control/language/policy_file.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace tricolor::control::protocol {
namespace {

std::span<const std::uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Every frame of `stream`, fed in pieces of the sizes `cut` gives.
std::vector<std::string> reassemble(const std::string& stream, auto cut, FrameReader& reader) {
  std::vector<std::string> frames;
  std::size_t at = 0;
  while (at < stream.size() && !reader.error()) {
    const std::size_t piece = std::min<std::size_t>(cut(), stream.size() - at);
    std::size_t done = 0;
    while (done < piece && !reader.error()) {
      done += reader.feed(bytes(stream).subspan(at + done, piece - done));
      if (auto f = reader.next()) frames.push_back(std::move(*f));
    }
    at += done;
  }
  return frames;
}

TEST(Framing, FramesComeBackWhateverTheSplit) {
  const std::vector<std::string> payloads = {R"({"command":"ping"})", std::string(70'000, 'x'), "{}", "\xff\x00\x01"};
  std::string stream;
  for (const std::string& p : payloads) stream += frame(p);
  for (std::size_t size : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{5},
                           std::size_t{7}, std::size_t{4096}, stream.size()}) {
    FrameReader reader(kMaxRequestFrameBytes);
    EXPECT_EQ(reassemble(stream, [&] { return size; }, reader), payloads) << "pieces of " << size;
    EXPECT_FALSE(reader.error());
    EXPECT_EQ(reader.pending(), 0u);
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    FrameReader reader(kMaxRequestFrameBytes);
    EXPECT_EQ(reassemble(stream, [&] { return 1 + rng() % 9000; }, reader), payloads);
  }
}

TEST(Framing, FeedStopsAfterEachFrame) {
  const std::string stream = frame("a") + frame("bc");
  FrameReader reader(kMaxRequestFrameBytes);
  EXPECT_EQ(reader.feed(bytes(stream)), 5u);  // the first frame only: the caller answers it first
  EXPECT_EQ(reader.next(), "a");
  EXPECT_EQ(reader.next(), std::nullopt);
  EXPECT_EQ(reader.feed(bytes(stream).subspan(5)), 6u);
  EXPECT_EQ(reader.next(), "bc");
}

TEST(Framing, ALengthOverTheLimitIsRefusedBeforeAnyOfItIsRead) {
  FrameReader reader(1000);
  const std::string header = frame(std::string(1001, 'x')).substr(0, kHeaderBytes);
  EXPECT_EQ(reader.feed(bytes(header + "xxxx")), kHeaderBytes);
  ASSERT_TRUE(reader.error());
  EXPECT_EQ(reader.error()->message, "a frame of 1001 bytes: the limit is 1000");
  EXPECT_EQ(reader.pending(), kHeaderBytes);  // nothing of the payload taken, nothing reserved
  EXPECT_EQ(reader.feed(bytes(std::string("more"))), 0u);  // and nothing after it

  FrameReader huge(kMaxRequestFrameBytes);  // the request limit: 4 GiB announced, nothing reserved
  EXPECT_EQ(huge.feed(bytes(std::string("\xff\xff\xff\xff", 4))), kHeaderBytes);
  ASSERT_TRUE(huge.error());
  EXPECT_EQ(huge.error()->message, "a frame of 4294967295 bytes: the limit is 134283264");

  FrameReader exact(1000);  // the limit itself is allowed
  const std::string at_limit = frame(std::string(1000, 'y'));
  EXPECT_EQ(exact.feed(bytes(at_limit)), at_limit.size());
  EXPECT_EQ(exact.next()->size(), 1000u);
}

TEST(Framing, AnEmptyFrameIsRefused) {
  FrameReader reader(kMaxRequestFrameBytes);
  reader.feed(bytes(frame("")));
  ASSERT_TRUE(reader.error());
  EXPECT_EQ(reader.error()->message, "a frame of 0 bytes: a request is a JSON object");
}

TEST(Framing, AFrameGrowsWithWhatArrivesNotWithItsAnnouncedLength) {
  FrameReader reader(kMaxRequestFrameBytes);
  const std::string big = frame(std::string(1 << 20, 'z'));
  reader.feed(bytes(big).first(kHeaderBytes + 10));
  EXPECT_EQ(reader.pending(), kHeaderBytes + 10);
  EXPECT_FALSE(reader.next());
}

TEST(Requests, RoundTrip) {
  Request r;
  r.command = "load";
  r.text = "profile add p 1r2c cir 1mbit cbs 8k\n# é\n";
  r.json = true;
  auto back = parse_request(request_json(r));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->command, r.command);
  EXPECT_EQ(back->text, r.text);
  EXPECT_TRUE(back->json);
  auto plain = parse_request(R"({"command":"rule list"})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->command, "rule list");
  EXPECT_FALSE(plain->text);
  EXPECT_FALSE(plain->json);
}

TEST(Requests, EachMalformedRequestSaysWhatWasWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rule list", "the request is not JSON: at byte 1 of 9, syntax error while parsing value - invalid literal"},
      {R"({"command":"ping")",
       "the request is not JSON: at byte 18 of 17, syntax error while parsing object - unexpected end of input; "
       "expected '}'"},
      {"{\"command\":\"ping\"} x", "the request is not JSON: at byte 20 of 20, syntax error while parsing value - "
                                    "invalid literal"},
      {R"({"command":"ping","json":1E999})", "the request is not JSON that can be read: a number out of range"},
      {R"(["ping"])", "the request is not a JSON object"},
      {R"("ping")", "the request is not a JSON object"},
      {R"({})", "the request has no \"command\""},
      {R"({"json":true})", "the request has no \"command\""},
      {R"({"command":7})", "field 'command': expected a string, a line of the command language"},
      {R"({"command":"load","text":["a"]})", "field 'text': expected a string, the policy to load"},
      {R"({"command":"ping","json":"yes"})", "field 'json': expected true or false"},
      {R"({"command":"ping","jsno":true})",
       "the request has a field 'jsno' that tricolord does not know (command, text, json)"},
  };
  for (const auto& [payload, message] : cases) {
    auto r = parse_request(payload);
    ASSERT_FALSE(r.ok()) << payload;
    EXPECT_EQ(r.error().message, message) << payload;
  }
}

TEST(Replies, RoundTripAndStayJsonWhateverTheText) {
  Reply ok;
  ok.output = "rule web ...\n";
  ok.result_json = R"({"rules":[{"name":"web"}]})";
  auto back = parse_reply(reply_json(ok));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->ok);
  EXPECT_EQ(back->output, ok.output);
  EXPECT_EQ(back->result_json, ok.result_json);

  Reply failed;
  failed.ok = false;
  failed.error = {"'tcpx': expected a protocol", "tcpx", 17};
  back = parse_reply(reply_json(failed));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->ok);
  EXPECT_EQ(back->error.message, failed.error.message);
  EXPECT_EQ(back->error.token, "tcpx");
  EXPECT_EQ(back->error.column, 17u);

  Reply binary;  // a token that is not UTF-8, as a client may send: the reply is still JSON
  binary.ok = false;
  binary.error = {"bad \xff\xfe token", "\xff", std::nullopt};
  EXPECT_TRUE(parse_reply(reply_json(binary)).ok());
}

// The load of the largest policy file fits a request frame whatever its printable text: JSON escapes
// a byte to at most two (a quote, a backslash, a line end, a tab), and the request's own fields fit
// in the slack. Checked on 1 MiB, then scaled: the frame limit is over twice the file limit.
TEST(Requests, TheLargestPolicyFileFitsARequestFrame) {
  static_assert(kMaxRequestFrameBytes >= 2 * kMaxPolicyFileBytes + (std::size_t{64} << 10));
  constexpr std::size_t kSample = std::size_t{1} << 20;
  for (const char c : {'"', '\\', '\n', '\t', 'x'}) {
    Request r;
    r.command = "load";
    r.text = std::string(kSample, c);
    EXPECT_LE(request_json(r).size(), 2 * kSample + 64) << int(c);
  }
}

// A reply that closes the connection says why; a client that does not know the reason still sees
// that the connection closes.
TEST(Replies, ClosingComesBackAndAnUnknownReasonIsStillClosing) {
  for (Closing closing : {Closing::permission, Closing::too_many_clients, Closing::idle, Closing::request_timeout,
                          Closing::frame, Closing::busy}) {
    Reply r;
    r.ok = false;
    r.error.message = "closed";
    r.closing = closing;
    auto back = parse_reply(reply_json(r));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->closing, closing) << to_string(closing);
  }
  auto newer = parse_reply(R"({"ok":false,"error":{"message":"m"},"closing":"maintenance"})");
  ASSERT_TRUE(newer.ok());
  EXPECT_EQ(newer->closing, Closing::other);
  auto plain = parse_reply(R"({"ok":true,"output":"pong"})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->closing, Closing::none);
  EXPECT_FALSE(parse_reply(R"({"ok":false,"error":{"message":"m"},"closing":1})").ok());
}

// A reply whose fields have the wrong types is broken, not read as empty.
TEST(Replies, FieldsOfTheWrongTypeMakeABrokenReply) {
  for (const char* payload : {R"({"ok":true,"output":7})", R"({"ok":false,"error":{}})",
                              R"({"ok":false,"error":{"message":["m"]}})",
                              R"({"ok":false,"error":{"message":"m","token":1}})",
                              R"({"ok":false,"error":{"message":"m","column":-1}})", R"({"ok":"yes"})"})
    EXPECT_FALSE(parse_reply(payload).ok()) << payload;
  EXPECT_TRUE(parse_reply(R"({"ok":true})").ok());  // no output: an empty one
}

}  // namespace
}  // namespace tricolor::control::protocol
