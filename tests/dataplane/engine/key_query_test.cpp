// The key text an operator types to `key show`: every form key_text prints reads back to the same key,
// any address inside a key's prefix names that key, and anything else is refused.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "dataplane/engine/key_query.hpp"

namespace tricolor::dataplane {
namespace {

Parsed packet(const char* src, const char* dst, std::uint16_t sport, std::uint16_t dport, std::uint8_t protocol) {
  Parsed p;
  const bool v6 = std::string_view(src).find(':') != std::string_view::npos;
  p.l3 = v6 ? L3::ipv6 : L3::ipv4;
  inet_pton(v6 ? AF_INET6 : AF_INET, src, p.src.data());
  inet_pton(v6 ? AF_INET6 : AF_INET, dst, p.dst.data());
  p.src_port = sport, p.dst_port = dport, p.protocol = protocol;
  return p;
}

PerKey per(KeyKind kind, std::uint8_t v4 = 32, std::uint8_t v6 = 128) {
  PerKey k;
  k.kind = kind, k.ipv4_prefix = v4, k.ipv6_prefix = v6;
  return k;
}

TEST(KeyQuery, EveryPrintedKeyReadsBackToItself) {
  const Parsed packets[] = {packet("10.1.2.3", "192.0.2.7", 1000, 53, ip_protocol::udp),
                            packet("2001:db8::1", "2001:db8:ffff::2", 40000, 443, ip_protocol::tcp),
                            packet("10.9.9.9", "10.8.8.8", 0, 0, 47)};
  const PerKey kinds[] = {per(KeyKind::src), per(KeyKind::dst), per(KeyKind::src_dport), per(KeyKind::five_tuple),
                          per(KeyKind::src, 24, 64), per(KeyKind::dst, 16, 48), per(KeyKind::src_dport, 20, 56),
                          per(KeyKind::five_tuple, 8, 32)};
  for (const PerKey& k : kinds)
    for (const Parsed& p : packets) {
      MeterKey key;
      make_key(k, p, key);
      const std::string text = key_text(k, key);
      const auto parsed = parse_key_text(k, text);
      ASSERT_TRUE(parsed) << text;
      EXPECT_EQ(*parsed, key) << text;
    }
}

// keys.hpp's layout: an IPv4 key lies in its first 16 bytes (its table hashes two words); ties in
// `key list` are ordered by source, destination, ports and protocol, not by where those bytes lie.
TEST(KeyQuery, AnIpv4KeyLiesInItsFirstSixteenBytes) {
  const Parsed p = packet("255.255.255.255", "255.255.255.254", 65535, 65534, 255);
  for (const KeyKind kind : {KeyKind::src, KeyKind::dst, KeyKind::src_dport, KeyKind::five_tuple}) {
    MeterKey key;
    make_key(per(kind), p, key);
    EXPECT_TRUE(std::all_of(key.begin() + 16, key.end(), [](std::uint8_t b) { return b == 0; }))
        << key_text(per(kind), key);
    EXPECT_EQ(key_text(per(kind), key).find("255.255.255.25") != std::string::npos, true);
  }
  const std::pair<std::uint8_t, const char*> prefixes[] = {{0, "0.0.0.0/0"}, {1, "128.0.0.0/1"}, {12, "10.0.0.0/12"},
                                                           {31, "10.1.2.2/31"}, {32, "10.1.2.3"}};
  for (const auto& [prefix, text] : prefixes) {
    MeterKey key;
    make_key(per(KeyKind::dst, prefix), packet("192.0.2.1", prefix == 1 ? "200.1.2.3" : "10.1.2.3", 1, 2, 6), key);
    EXPECT_EQ(key_text(per(KeyKind::dst, prefix), key), text);
  }
  MeterKey a, b, c;
  make_key(per(KeyKind::five_tuple), packet("10.0.0.1", "10.0.0.9", 9, 9, 17), a);
  make_key(per(KeyKind::five_tuple), packet("10.0.0.2", "10.0.0.1", 1, 1, 6), b);
  make_key(per(KeyKind::five_tuple), packet("10.0.0.2", "10.0.0.1", 2, 1, 6), c);
  EXPECT_TRUE(key_less(a, b) && key_less(b, c) && !key_less(c, a) && !key_less(a, a));
}

// The packet path's form of make_key: the key's first two words as it stored them (of an IPv4 key, all
// that is not zero: the worker hashes them from registers), and the same key as the plain form.
TEST(KeyQuery, TheWordsOfAnIpv4KeyAreTheKeysFirstSixteenBytes) {
  const Parsed packets[] = {packet("10.1.2.3", "192.0.2.7", 1000, 53, ip_protocol::udp),
                            packet("255.255.255.255", "255.255.255.254", 65535, 65534, 255),
                            packet("2001:db8::1", "2001:db8:ffff::2", 40000, 443, ip_protocol::tcp)};
  for (const KeyKind kind : {KeyKind::src, KeyKind::dst, KeyKind::src_dport, KeyKind::five_tuple})
    for (const std::uint8_t prefix : {std::uint8_t{32}, std::uint8_t{20}})
      for (const Parsed& p : packets) {
        MeterKey plain, key;
        make_key(per(kind, prefix), p, plain);
        std::uint64_t pair[2] = {~0ull, ~0ull};
        const bool ipv4 = make_key(KeyShape(per(kind, prefix)), p, key, pair);
        EXPECT_EQ(key, plain) << key_text(per(kind, prefix), key);
        EXPECT_EQ(ipv4, p.l3 == L3::ipv4);
        std::uint64_t words[2];
        std::memcpy(words, key.data(), sizeof words);
        EXPECT_EQ(pair[0], words[0]) << key_text(per(kind, prefix), key);
        EXPECT_EQ(pair[1], words[1]) << key_text(per(kind, prefix), key);
      }
}

TEST(KeyQuery, AnAddressInsideTheKeysPrefixNamesIt) {
  const PerKey k = per(KeyKind::src, 24, 64);
  MeterKey key;
  make_key(k, packet("10.1.2.0", "10.0.0.1", 0, 0, 17), key);
  EXPECT_EQ(key_text(k, key), "10.1.2.0/24");
  EXPECT_EQ(parse_key_text(k, "10.1.2.200"), key);
  EXPECT_EQ(parse_key_text(k, "10.1.2.0/24"), key);
  EXPECT_NE(parse_key_text(k, "10.1.3.1"), key);
}

TEST(KeyQuery, AnythingElseIsRefused) {
  EXPECT_FALSE(parse_key_text(per(KeyKind::src), "10.1.2"));
  EXPECT_FALSE(parse_key_text(per(KeyKind::src), ""));
  EXPECT_FALSE(parse_key_text(per(KeyKind::src_dport), "10.0.0.1"));
  EXPECT_FALSE(parse_key_text(per(KeyKind::src_dport), "10.0.0.1:65536"));
  EXPECT_FALSE(parse_key_text(per(KeyKind::src_dport), "10.0.0.1:-1"));
  EXPECT_FALSE(parse_key_text(per(KeyKind::src_dport), "2001:db8::1:80"));  // IPv6 with a port needs brackets
  EXPECT_TRUE(parse_key_text(per(KeyKind::src_dport), "[2001:db8::1]:80"));
  EXPECT_FALSE(parse_key_text(per(KeyKind::five_tuple), "udp 10.0.0.1:1>2001:db8::1:2"));  // two families
  EXPECT_FALSE(parse_key_text(per(KeyKind::five_tuple), "bogus 10.0.0.1:1>10.0.0.2:2"));
  EXPECT_FALSE(parse_key_text(per(KeyKind::five_tuple), "udp 10.0.0.1:1 10.0.0.2:2"));
  EXPECT_FALSE(parse_key_text(per(KeyKind::none), "10.0.0.1"));
}

TEST(KeyQuery, OrdersHaveNamesBothWays) {
  for (KeyOrder order : kKeyOrders) EXPECT_EQ(key_order_named(to_string(order)), order);
  EXPECT_FALSE(key_order_named("blue-bytes"));
}

}  // namespace
}  // namespace tricolor::dataplane
