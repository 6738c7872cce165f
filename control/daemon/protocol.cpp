#include "control/daemon/protocol.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

#include "policer/quote.hpp"

namespace tricolor::control::protocol {

namespace {

using nlohmann::json;

std::uint32_t read_length(const std::uint8_t* header) noexcept {
  return (std::uint32_t{header[0]} << 24) | (std::uint32_t{header[1]} << 16) | (std::uint32_t{header[2]} << 8) |
         std::uint32_t{header[3]};
}

// nlohmann's description of a parse error without its prefix ("[json.exception.parse_error.101]
// parse error at line 1, column 5: ") and without the bytes it last read (the peer's, unquoted).
std::string parse_error_text(const json::parse_error& e) {
  std::string_view text = e.what();
  if (const auto colon = text.find(": "); colon != std::string_view::npos) text.remove_prefix(colon + 2);
  if (const auto read = text.find("; last read"); read != std::string_view::npos) text = text.substr(0, read);
  return std::string(text);
}

// The payload as JSON, or why not, naming the byte at fault (1-based, as nlohmann counts).
Expected<json> parse_object(std::string_view payload, const char* what) {
  json doc;
  try {
    doc = json::parse(payload);
  } catch (const json::parse_error& e) {
    return Error{"json", std::string(what) + " is not JSON: at byte " + std::to_string(e.byte) + " of " +
                             std::to_string(payload.size()) + ", " + parse_error_text(e)};
  } catch (const json::exception&) {  // valid JSON that nlohmann cannot hold: a number such as 1E999
    return Error{"json", std::string(what) + " is not JSON that can be read: a number out of range"};
  }
  if (!doc.is_object()) return Error{"json", std::string(what) + " is not a JSON object"};
  return doc;
}

constexpr std::pair<Closing, std::string_view> kClosings[] = {
    {Closing::permission, "permission"}, {Closing::too_many_clients, "too-many-clients"},
    {Closing::idle, "idle"},             {Closing::request_timeout, "request-timeout"},
    {Closing::frame, "frame"},           {Closing::busy, "busy"},
    {Closing::other, "other"}};

Error field_error(std::string_view field, const char* expected) {
  return Error{std::string(field), "field " + quote(field) + ": expected " + expected};
}

}  // namespace

std::string_view to_string(Closing closing) noexcept {
  for (const auto& [value, name] : kClosings)
    if (value == closing) return name;
  return "none";
}

std::string frame(std::string_view payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out.append(payload);
  return out;
}

std::size_t FrameReader::feed(std::span<const std::uint8_t> bytes) {
  std::size_t used = 0;
  while (used < bytes.size() && !ready_ && !error_) {
    if (header_got_ < kHeaderBytes) {
      const std::size_t take = std::min(kHeaderBytes - header_got_, bytes.size() - used);
      std::copy_n(bytes.data() + used, take, header_ + header_got_);
      header_got_ += take;
      used += take;
      if (header_got_ < kHeaderBytes) break;
      length_ = read_length(header_);
      if (length_ == 0 || length_ > max_) {
        error_ = Error{"frame", length_ == 0 ? std::string("a frame of 0 bytes: a request is a JSON object")
                                             : "a frame of " + std::to_string(length_) + " bytes: the limit is " +
                                                   std::to_string(max_)};
        break;
      }
      continue;
    }
    // The payload grows with what arrives (std::string's doubling), never to the announced length at once.
    const std::size_t take = std::min<std::size_t>(length_ - payload_.size(), bytes.size() - used);
    payload_.append(reinterpret_cast<const char*>(bytes.data() + used), take);
    used += take;
    if (payload_.size() == length_) {
      ready_ = std::move(payload_);
      payload_.clear();
      header_got_ = 0;
    }
  }
  return used;
}

std::optional<std::string> FrameReader::next() {
  std::optional<std::string> out = std::move(ready_);
  ready_.reset();
  return out;
}

Expected<Request> parse_request(std::string_view payload) {
  auto doc = parse_object(payload, "the request");
  if (!doc) return doc.error();
  Request request;
  bool has_command = false;
  for (const auto& [key, value] : doc->items()) {
    if (key == "command") {
      if (!value.is_string()) return field_error(key, "a string, a line of the command language");
      request.command = value.get<std::string>();
      has_command = true;
    } else if (key == "text") {
      if (!value.is_string()) return field_error(key, "a string, the policy to load");
      request.text = value.get<std::string>();
    } else if (key == "json") {
      if (!value.is_boolean()) return field_error(key, "true or false");
      request.json = value.get<bool>();
    } else {
      return Error{key, "the request has a field " + quote(key) + " that tricolord does not know (command, text, json)"};
    }
  }
  if (!has_command) return Error{"command", "the request has no \"command\""};
  return request;
}

std::string request_json(const Request& request) {
  json doc = {{"command", request.command}};
  if (request.text) doc["text"] = *request.text;
  if (request.json) doc["json"] = true;
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string reply_json(const Reply& reply) {
  json doc = {{"ok", reply.ok}};
  if (reply.ok) {
    doc["output"] = reply.output;
    if (!reply.result_json.empty()) {
      json result = json::parse(reply.result_json, nullptr, /*allow_exceptions=*/false);
      if (!result.is_discarded()) doc["result"] = std::move(result);
    }
  } else {
    json error = {{"message", reply.error.message}};
    // The token locates the mistake (with its column); a long one is cut, not echoed whole.
    if (!reply.error.token.empty()) error["token"] = reply.error.token.substr(0, kMaxReplyTokenBytes);
    if (reply.error.column) error["column"] = *reply.error.column;
    doc["error"] = std::move(error);
  }
  if (reply.closing != Closing::none) doc["closing"] = to_string(reply.closing);
  // Text from a policy or a client may hold invalid UTF-8: replaced, so the reply is always JSON.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

Expected<Reply> parse_reply(std::string_view payload) {
  auto doc = parse_object(payload, "the reply");
  if (!doc) return doc.error();
  Reply reply;
  const auto ok = doc->find("ok");
  if (ok == doc->end() || !ok->is_boolean()) return field_error("ok", "true or false");
  reply.ok = ok->get<bool>();
  if (const auto closing = doc->find("closing"); closing != doc->end()) {
    if (!closing->is_string()) return field_error("closing", "a string, why the connection is closed");
    reply.closing = Closing::other;
    for (const auto& [value, name] : kClosings)
      if (closing->get<std::string>() == name) reply.closing = value;
  }
  // A field of the wrong type makes the reply broken, not silently empty.
  if (reply.ok) {
    if (const auto output = doc->find("output"); output != doc->end()) {
      if (!output->is_string()) return field_error("output", "a string");
      reply.output = output->get<std::string>();
    }
    if (const auto result = doc->find("result"); result != doc->end()) reply.result_json = result->dump();
    return reply;
  }
  const auto error = doc->find("error");
  if (error == doc->end() || !error->is_object()) return field_error("error", "an object");
  const auto m = error->find("message");
  if (m == error->end() || !m->is_string()) return field_error("message", "a string, the error's message");
  reply.error.message = m->get<std::string>();
  if (const auto t = error->find("token"); t != error->end()) {
    if (!t->is_string()) return field_error("token", "a string");
    reply.error.token = t->get<std::string>();
  }
  if (const auto c = error->find("column"); c != error->end()) {
    if (!c->is_number_unsigned()) return field_error("column", "a column number");
    reply.error.column = c->get<std::size_t>();
  }
  return reply;
}

}  // namespace tricolor::control::protocol
