#include "dataplane/engine/key_query.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>

namespace tricolor::dataplane {

namespace {

constexpr std::string_view kOrderNames[] = {"red-bytes",   "red-packets",   "yellow-bytes", "yellow-packets",
                                            "green-bytes", "green-packets", "bytes",        "packets"};
static_assert(std::size(kOrderNames) == std::size(kKeyOrders));

std::uint64_t measure(const KeyCounters& c, KeyOrder order) noexcept {
  switch (order) {
    case KeyOrder::red_bytes: return c.bytes[2];
    case KeyOrder::red_packets: return c.packets[2];
    case KeyOrder::yellow_bytes: return c.bytes[1];
    case KeyOrder::yellow_packets: return c.packets[1];
    case KeyOrder::green_bytes: return c.bytes[0];
    case KeyOrder::green_packets: return c.packets[0];
    case KeyOrder::bytes: return c.bytes[0] + c.bytes[1] + c.bytes[2];
    case KeyOrder::packets: return c.packets[0] + c.packets[1] + c.packets[2];
  }
  return 0;
}

// An address with an optional "/prefix" (a length the family allows, then ignored: the rule's own
// prefix masks the address, so any address inside a key's prefix names that key). Writes 4 or 16
// bytes; returns the family (4 or 6), or 0.
int parse_address(std::string_view text, std::uint8_t* out) {
  std::optional<unsigned> length;
  if (const auto slash = text.find('/'); slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) return 0;
    length = value;
    text = text.substr(0, slash);
  }
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return 0;
  const std::string z(text);
  if (inet_pton(AF_INET, z.c_str(), out) == 1) return !length || *length <= 32 ? 4 : 0;
  if (inet_pton(AF_INET6, z.c_str(), out) == 1) return !length || *length <= 128 ? 6 : 0;
  return 0;
}

std::optional<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// "ADDRESS:PORT", or "[IPv6]:PORT".
struct Endpoint {
  std::uint8_t address[16] = {};
  int family = 0;
  std::uint16_t port = 0;
};
std::optional<Endpoint> parse_endpoint(std::string_view text) {
  Endpoint e;
  std::string_view address, port;
  if (text.starts_with('[')) {
    const auto close = text.find("]:");
    if (close == std::string_view::npos) return std::nullopt;
    address = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    address = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (address.find(':') != std::string_view::npos) return std::nullopt;  // IPv6 and a port: brackets
  }
  e.family = parse_address(address, e.address);
  const auto p = parse_port(port);
  if (e.family == 0 || !p) return std::nullopt;
  e.port = *p;
  return e;
}

std::optional<std::uint8_t> parse_protocol(std::string_view name) {
  if (name == "tcp") return ip_protocol::tcp;
  if (name == "udp") return ip_protocol::udp;
  if (name == "sctp") return ip_protocol::sctp;
  if (name == "icmp") return ip_protocol::icmp;
  if (name == "icmpv6") return ip_protocol::icmpv6;
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), value);
  if (ec != std::errc{} || end != name.data() + name.size() || value > 255) return std::nullopt;
  return static_cast<std::uint8_t>(value);
}

// The key make_key would build for a packet with these fields.
MeterKey build(const PerKey& per, int family, const std::uint8_t* src, const std::uint8_t* dst,
               std::uint16_t src_port, std::uint16_t dst_port, std::uint8_t protocol) {
  Parsed p;
  p.l3 = family == 6 ? L3::ipv6 : L3::ipv4;
  const unsigned bytes = family == 6 ? 16 : 4;
  if (src != nullptr) std::copy(src, src + bytes, p.src.begin());
  if (dst != nullptr) std::copy(dst, dst + bytes, p.dst.begin());
  p.src_port = src_port;
  p.dst_port = dst_port;
  p.protocol = protocol;
  MeterKey key;
  make_key(per, p, key);
  return key;
}

}  // namespace

std::string_view to_string(KeyOrder order) noexcept { return kOrderNames[static_cast<std::size_t>(order)]; }

std::optional<KeyOrder> key_order_named(std::string_view name) noexcept {
  for (std::size_t i = 0; i < std::size(kOrderNames); ++i)
    if (kOrderNames[i] == name) return kKeyOrders[i];
  return std::nullopt;
}

std::vector<RankedKey> rank_keys(const Engine& engine, std::size_t rule, KeyOrder order,
                                 std::optional<std::size_t> top) {
  auto before = [order](const RankedKey& a, const RankedKey& b) {  // a ranks before b
    const std::uint64_t x = measure(a.counters, order), y = measure(b.counters, order);
    if (x != y) return x > y;
    return key_less(a.key, b.key);
  };
  std::vector<RankedKey> items;  // all, or a heap of the best `top` with the worst at the front
  if (!top) items.reserve(engine.live_keys(rule));
  engine.for_each_key(rule, [&](const Engine::LiveKey& live) {
    const RankedKey item{live.key, live.state, live.counters, live.worker};
    if (!top || items.size() < *top) {
      items.push_back(item);
      if (top) std::push_heap(items.begin(), items.end(), before);
    } else if (*top != 0 && before(item, items.front())) {
      std::pop_heap(items.begin(), items.end(), before);
      items.back() = item;
      std::push_heap(items.begin(), items.end(), before);
    }
  });
  std::sort(items.begin(), items.end(), before);
  return items;
}

std::optional<MeterKey> parse_key_text(const PerKey& per, std::string_view text) {
  std::uint8_t address[16] = {};
  switch (per.kind) {
    case KeyKind::src:
    case KeyKind::dst: {
      const int family = parse_address(text, address);
      if (family == 0) return std::nullopt;
      return per.kind == KeyKind::src ? build(per, family, address, nullptr, 0, 0, 0)
                                      : build(per, family, nullptr, address, 0, 0, 0);
    }
    case KeyKind::src_dport: {
      const auto e = parse_endpoint(text);
      if (!e) return std::nullopt;
      return build(per, e->family, e->address, nullptr, 0, e->port, 0);
    }
    case KeyKind::five_tuple: {
      const auto space = text.find(' ');
      const auto arrow = text.find('>');
      if (space == std::string_view::npos || arrow == std::string_view::npos || arrow < space) return std::nullopt;
      const auto protocol = parse_protocol(text.substr(0, space));
      const auto src = parse_endpoint(text.substr(space + 1, arrow - space - 1));
      const auto dst = parse_endpoint(text.substr(arrow + 1));
      if (!protocol || !src || !dst || src->family != dst->family) return std::nullopt;
      return build(per, src->family, src->address, dst->address, src->port, dst->port, *protocol);
    }
    case KeyKind::none: break;
  }
  return std::nullopt;
}

std::optional<RankedKey> find_key(const Engine& engine, std::size_t rule, const MeterKey& key) {
  std::optional<RankedKey> found;
  engine.for_each_key(rule, [&](const Engine::LiveKey& live) {
    if (!found && live.key == key) found = RankedKey{live.key, live.state, live.counters, live.worker};
  });
  return found;
}

}  // namespace tricolor::dataplane
