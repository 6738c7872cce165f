// NIC steering (dataplane/dpdk/rss.hpp). No NIC here: steered_queue, DPDK's software Toeplitz hash plus the
// RETA lookup, stands in for one, and is itself checked against Microsoft's RSS verification vectors.
//   1. Every packet of one meter key lands on one queue, for every key kind and for policies that mix
//      them, over TCP, UDP, ICMP, fragments, IPv4 and IPv6.
//   2. The RETA spreads keys evenly over 2, 3, 4 and 8 queues, and ports with RETAs of different sizes
//      pick the same queue for a hash.
//   3. Each refusal says why, and rules are then placed by handoff.
//   4. The hash is the NIC's: Microsoft's vectors, and an independent bitwise Toeplitz for one field.
//   5. The plan written into a port (net_null) reads back as planned.
#include <gtest/gtest.h>
#include <rte_dev.h>
#include <rte_ethdev.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "dataplane/engine/keys.hpp"
#include "dataplane/dpdk/ports.hpp"
#include "dataplane/dpdk/rss.hpp"

namespace tricolor::dataplane {
namespace {

// Microsoft's RSS verification key (the 82599 datasheet's and DPDK's app/test/test_thash.c).
constexpr std::array<std::uint8_t, 40> kMicrosoftKey = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

constexpr std::uint64_t kEveryType =
    RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_SCTP | RTE_ETH_RSS_L3_SRC_ONLY | RTE_ETH_RSS_L3_DST_ONLY;

RssCapabilities nic(std::uint16_t port, std::uint16_t reta_size = 128, std::uint64_t types = kEveryType,
                    std::uint16_t queues = 64, std::uint8_t key_size = 40, std::string driver = "net_mlx5") {
  return {port, std::move(driver), types, reta_size, key_size, queues};
}

Rule per_key(std::string name, KeyKind kind, std::uint8_t ipv4_prefix = 32, std::uint8_t ipv6_prefix = 128) {
  Rule r;
  r.name = std::move(name);
  r.profile = "p";
  r.per_key.kind = kind;
  r.per_key.ipv4_prefix = ipv4_prefix;
  r.per_key.ipv6_prefix = ipv6_prefix;
  return r;
}
Rule aggregate(std::string name) { return per_key(std::move(name), KeyKind::none); }

std::vector<std::uint8_t> seeded_key(std::uint64_t seed, std::size_t size = 40) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> key(size);
  for (auto& b : key) b = static_cast<std::uint8_t>(rng());
  return key;
}

Parsed ipv4(std::uint32_t src, std::uint32_t dst) {
  Parsed p;
  p.l3 = L3::ipv4;
  for (int i = 0; i < 4; ++i) {
    p.src[i] = static_cast<std::uint8_t>(src >> (24 - 8 * i));
    p.dst[i] = static_cast<std::uint8_t>(dst >> (24 - 8 * i));
  }
  return p;
}

// Packets drawn from small pools of addresses and ports, so that each key of every kind recurs with
// everything outside it varying: other addresses, ports, protocols (TCP, UDP, ICMP), fragments.
class PacketSource {
 public:
  explicit PacketSource(std::uint64_t seed) : rng_(seed) {
    for (auto& a : pool4_) a = random_address(4);
    for (auto& a : pool6_) a = random_address(16);
    for (auto& port : ports_) port = static_cast<std::uint16_t>(1 + rng_() % 65535);
  }
  Parsed next() {
    Parsed p;
    const bool v6 = rng_() % 2 == 0;
    p.l3 = v6 ? L3::ipv6 : L3::ipv4;
    const auto& pool = v6 ? pool6_ : pool4_;
    p.src = pool[rng_() % pool.size()];
    p.dst = pool[rng_() % pool.size()];
    switch (rng_() % 4) {
      case 0: p.protocol = ip_protocol::tcp; break;
      case 1: p.protocol = ip_protocol::udp; break;
      case 2: p.protocol = v6 ? ip_protocol::icmpv6 : ip_protocol::icmp; break;
      default: p.protocol = ip_protocol::udp, p.fragment = true; break;  // a later fragment: no ports
    }
    if ((p.protocol == ip_protocol::tcp || p.protocol == ip_protocol::udp) && !p.fragment) {
      p.src_port = ports_[rng_() % ports_.size()];
      p.dst_port = ports_[rng_() % ports_.size()];
    }
    return p;
  }

 private:
  std::array<std::uint8_t, 16> random_address(unsigned bytes) {
    std::array<std::uint8_t, 16> a{};
    for (unsigned i = 0; i < bytes; ++i) a[i] = static_cast<std::uint8_t>(rng_());
    return a;
  }
  std::mt19937_64 rng_;
  std::array<std::array<std::uint8_t, 16>, 12> pool4_{}, pool6_{};
  std::array<std::uint16_t, 4> ports_{};
};

// 1. For each per-key rule of the policy: every packet of one key on one queue; keys on every queue.
void expect_keys_on_one_queue(const std::vector<Rule>& rules, unsigned workers) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const auto key = seeded_key(seed, 52);
    const RssPlan plan = plan_rss(rules, workers, std::vector{nic(0), nic(1, 512, kEveryType, 64, 52, "net_ice")}, key);
    ASSERT_TRUE(plan.enabled) << plan.reason;
    PacketSource source(seed);
    for (const Rule& rule : rules) {
      if (rule.per_key.kind == KeyKind::none) continue;
      std::map<MeterKey, unsigned> queue_of;
      std::map<MeterKey, unsigned> packets_of;
      std::vector<unsigned> keys_on(workers);
      for (int i = 0; i < 40000; ++i) {
        const Parsed p = source.next();
        MeterKey k;
        make_key(rule.per_key, p, k);
        const unsigned q = steered_queue(plan, p);
        ASSERT_LT(q, workers);
        const auto [it, first] = queue_of.emplace(k, q);
        if (first) ++keys_on[q];
        ++packets_of[k];
        ASSERT_EQ(it->second, q) << "rule " << rule.name << ": key " << key_text(rule.per_key, k)
                                 << " on queues " << it->second << " and " << q << " (seed " << seed << ")";
      }
      // The check has teeth only if keys recur with other fields varying, and spread over the queues.
      unsigned recurring = 0;
      for (const auto& [k, n] : packets_of) recurring += n >= 2;
      EXPECT_GE(recurring, queue_of.size() / 2) << rule.name;
      for (unsigned q = 0; q < workers; ++q) EXPECT_GT(keys_on[q], 0u) << rule.name << " queue " << q;
    }
  }
}

TEST(RssSteering, EveryPacketOfAKeyOnOneQueue_PerSource) { expect_keys_on_one_queue({per_key("s", KeyKind::src)}, 4); }
TEST(RssSteering, EveryPacketOfAKeyOnOneQueue_PerDestination) {
  expect_keys_on_one_queue({per_key("d", KeyKind::dst)}, 4);
}
TEST(RssSteering, EveryPacketOfAKeyOnOneQueue_PerSourceAndPort) {
  expect_keys_on_one_queue({per_key("sp", KeyKind::src_dport)}, 2);
}
TEST(RssSteering, EveryPacketOfAKeyOnOneQueue_PerFiveTuple) {
  expect_keys_on_one_queue({per_key("f", KeyKind::five_tuple)}, 8);
}
TEST(RssSteering, EveryPacketOfAKeyOnOneQueue_MixedRules) {
  // Source, source+port and 5-tuple share the source address; the aggregate rule is not steered.
  expect_keys_on_one_queue({aggregate("all"), per_key("s", KeyKind::src), per_key("sp", KeyKind::src_dport),
                            per_key("f", KeyKind::five_tuple)},
                           3);
  expect_keys_on_one_queue({per_key("d", KeyKind::dst), per_key("f", KeyKind::five_tuple)}, 4);
}

TEST(RssSteering, PlanHashesTheIntersectionOfTheKeysAddresses) {
  const auto ports = std::vector{nic(0)};
  const RssPlan src = plan_rss(std::vector{per_key("a", KeyKind::src_dport), per_key("b", KeyKind::five_tuple)}, 2, ports);
  ASSERT_TRUE(src.enabled) << src.reason;
  EXPECT_EQ(src.fields, HashedFields::src);
  EXPECT_EQ(src.rss_hf, RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_L3_SRC_ONLY);
  const RssPlan dst = plan_rss(std::vector{per_key("a", KeyKind::dst)}, 2, ports);
  ASSERT_TRUE(dst.enabled) << dst.reason;
  EXPECT_EQ(dst.rss_hf, RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_L3_DST_ONLY);
  const RssPlan both = plan_rss(std::vector{per_key("a", KeyKind::five_tuple)}, 2, ports);
  ASSERT_TRUE(both.enabled) << both.reason;
  EXPECT_EQ(both.fields, HashedFields::src_and_dst);
  EXPECT_EQ(both.rss_hf, RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_IPV6);  // no L4 type: ports are never hashed
  EXPECT_EQ(both.key.size(), 40u);                               // random (getrandom)
}

// 2. Toeplitz is linear over GF(2): on uniformly random addresses its low bits are uniform whenever the
// key's rows are independent, so each queue's count of K keys is binomial(K, share of its RETA
// entries). 40 000 keys, within five standard deviations (at 8 queues, 5 000 +- 331): a false failure
// about once in 1.7 million per queue, were the seeds not fixed.
TEST(RssSteering, RetaSpreadsKeysEvenly) {
  for (const unsigned workers : {2u, 3u, 4u, 8u}) {
    const RssPlan plan = plan_rss(std::vector{per_key("s", KeyKind::src)}, workers, std::vector{nic(0)}, seeded_key(workers));
    ASSERT_TRUE(plan.enabled) << plan.reason;
    ASSERT_EQ(plan.reta.size(), 128u);
    std::vector<unsigned> entries(workers);
    for (const auto q : plan.reta) ++entries.at(q);
    const auto [least, most] = std::minmax_element(entries.begin(), entries.end());
    EXPECT_LE(*most - *least, 1u) << workers << " workers";

    constexpr unsigned kKeys = 40000;
    std::mt19937_64 rng(workers);
    for (const bool v6 : {false, true}) {
      std::vector<unsigned> keys(workers);
      for (unsigned i = 0; i < kKeys; ++i) {
        Parsed p = ipv4(static_cast<std::uint32_t>(rng()), 0x0a000001);
        if (v6) {
          p.l3 = L3::ipv6;
          for (auto& b : p.src) b = static_cast<std::uint8_t>(rng());
        }
        ++keys[steered_queue(plan, p)];
      }
      for (unsigned q = 0; q < workers; ++q) {
        const double share = static_cast<double>(entries[q]) / 128;
        const double sd = std::sqrt(kKeys * share * (1 - share));
        EXPECT_NEAR(keys[q], kKeys * share, 5 * sd) << workers << " workers, queue " << q << (v6 ? " IPv6" : " IPv4");
      }
    }
  }
}

TEST(RssSteering, PortsWithLargerRetasPickTheSameQueue) {
  // 3 workers: 512 % 3 != 128 % 3, so a RETA filled i % 3 on each port would disagree.
  const RssPlan plan = plan_rss(std::vector{per_key("s", KeyKind::src)}, 3,
                                std::vector{nic(0, 512), nic(1, 128), nic(2, 64)}, seeded_key(7));
  ASSERT_TRUE(plan.enabled) << plan.reason;
  ASSERT_EQ(plan.reta.size(), 64u);
  std::mt19937 rng(7);
  for (const std::uint16_t size : {64, 128, 512}) {
    const auto reta = port_reta(plan, size);
    ASSERT_EQ(reta.size(), size);
    for (int i = 0; i < 10000; ++i) {
      const std::uint32_t hash = rng();
      ASSERT_EQ(reta[hash & (size - 1u)], plan.reta[hash & 63u]) << "RETA of " << size << ", hash " << hash;
    }
  }
}

TEST(RssSteering, UnhashedPacketsAndPlansOffGoToQueueZero) {
  const RssPlan plan = plan_rss(std::vector{per_key("s", KeyKind::src)}, 4, std::vector{nic(0)}, kMicrosoftKey);
  ASSERT_TRUE(plan.enabled) << plan.reason;
  Parsed arp;  // not IP
  EXPECT_EQ(steered_queue(plan, arp), 0u);
  const RssPlan off = plan_rss(std::vector{per_key("s", KeyKind::src)}, 1, std::vector{nic(0)});
  ASSERT_FALSE(off.enabled);
  for (std::uint32_t a = 1; a < 100; ++a) EXPECT_EQ(steered_queue(off, ipv4(a, 1)), 0u);
}

// 3. Refusals, each with the reason an operator reads.
std::string refusal(const std::vector<Rule>& rules, const std::vector<RssCapabilities>& ports, unsigned workers = 2) {
  const RssPlan plan = plan_rss(rules, workers, ports, kMicrosoftKey);
  EXPECT_FALSE(plan.enabled);
  EXPECT_EQ(plan.rss_hf, 0u);
  EXPECT_TRUE(plan.reta.empty());
  return plan.reason;
}

TEST(RssRefusal, OneWorker) {
  EXPECT_EQ(refusal({per_key("s", KeyKind::src)}, {nic(0)}, 1), "1 worker: nothing to steer");
}
TEST(RssRefusal, NoPerKeyRule) {
  EXPECT_EQ(refusal({aggregate("a"), aggregate("b")}, {nic(0)}), "no rule has per-key meters: nothing to steer");
}
TEST(RssRefusal, RulesShareNoAddress) {
  EXPECT_EQ(refusal({aggregate("all"), per_key("a", KeyKind::src), per_key("b", KeyKind::dst)}, {nic(0)}),
            "rules a (source address) and b (destination address) share no address to hash on");
  EXPECT_EQ(refusal({per_key("f", KeyKind::five_tuple), per_key("d", KeyKind::dst), per_key("sp", KeyKind::src_dport)},
                    {nic(0)}),
            "rules d (destination address) and sp (source address and destination port) share no address to hash on");
}
TEST(RssRefusal, MaskedAddresses) {
  EXPECT_EQ(refusal({per_key("web", KeyKind::src, 24)}, {nic(0)}),
            "rule web keys on IPv4 source /24: a NIC hashes whole addresses");
  EXPECT_EQ(refusal({per_key("s", KeyKind::src), per_key("v6", KeyKind::five_tuple, 32, 64)}, {nic(0)}),
            "rule v6 keys on IPv6 source /64: a NIC hashes whole addresses");
  EXPECT_EQ(refusal({per_key("f", KeyKind::five_tuple, 16)}, {nic(0)}),
            "rule f keys on IPv4 source and destination /16: a NIC hashes whole addresses");
  // A rule that only ever sees IPv6 (its match names an IPv6 prefix) may mask IPv4 as it likes.
  Rule v6_only = per_key("v6", KeyKind::dst, 8, 128);
  v6_only.match.src = Prefix{true, {0x20, 0x01, 0x0d, 0xb8}, 32};
  EXPECT_TRUE(plan_rss(std::vector{v6_only}, 2, std::vector{nic(0)}).enabled);
  v6_only.per_key.ipv6_prefix = 127;
  EXPECT_EQ(refusal({v6_only}, {nic(0)}), "rule v6 keys on IPv6 destination /127: a NIC hashes whole addresses");
}
TEST(RssRefusal, TooFewQueues) {
  EXPECT_EQ(refusal({per_key("s", KeyKind::src)}, {nic(0), nic(1, 128, kEveryType, 1, 40, "net_pcap")}),
            "port 1 (net_pcap) has 1 RX queue for 2 workers");
  EXPECT_EQ(refusal({per_key("s", KeyKind::src)}, {nic(0, 128, kEveryType, 4, 40, "net_virtio")}, 8),
            "port 0 (net_virtio) has 4 RX queues for 8 workers");
}
TEST(RssRefusal, MissingHashTypesOrSelectors) {
  const std::vector src{per_key("s", KeyKind::src)};
  EXPECT_EQ(refusal(src, {nic(0), nic(1, 128, kEveryType & ~RTE_ETH_RSS_L3_SRC_ONLY, 64, 40, "net_ixgbe")}),
            "port 1 (net_ixgbe) does not hash on source addresses only (RTE_ETH_RSS_L3_SRC_ONLY)");
  EXPECT_EQ(refusal({per_key("d", KeyKind::dst)}, {nic(0, 128, kEveryType & ~RTE_ETH_RSS_L3_DST_ONLY, 64, 40, "net_ixgbe")}),
            "port 0 (net_ixgbe) does not hash on destination addresses only (RTE_ETH_RSS_L3_DST_ONLY)");
  EXPECT_EQ(refusal(src, {nic(0, 128, kEveryType & ~RTE_ETH_RSS_IPV6, 64, 40, "net_e1000")}),
            "port 0 (net_e1000) does not hash every IPv6 packet on its addresses (RTE_ETH_RSS_IPV6)");
  // A port that hashes per packet type only (fragments, TCP, ... but no generic IPv4 type).
  const std::uint64_t per_type = RTE_ETH_RSS_FRAG_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV4_UDP |
                                 RTE_ETH_RSS_NONFRAG_IPV4_OTHER | RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_L3_SRC_ONLY;
  EXPECT_EQ(refusal(src, {nic(0, 512, per_type, 64, 52, "net_i40e")}),
            "port 0 (net_i40e) does not hash every IPv4 packet on its addresses (RTE_ETH_RSS_IPV4)");
  EXPECT_EQ(refusal(src, {nic(0, 0, 0, 8, 0, "net_memif")}), "port 0 (net_memif) has no RSS");
}
TEST(RssRefusal, RetaOrKeyUnfit) {
  const std::vector src{per_key("s", KeyKind::src)};
  EXPECT_EQ(refusal(src, {nic(0, 100)}),
            "port 0 (net_mlx5) has a redirection table of 100 entries, not a power of two: which entry a hash picks "
            "is not known");
  EXPECT_EQ(refusal(src, {nic(0, 4)}, 8), "port 0 (net_mlx5) has a redirection table of 4 entries for 8 workers");
  EXPECT_EQ(refusal({per_key("f", KeyKind::five_tuple)}, {nic(0, 128, kEveryType, 64, 32)}),
            "port 0 (net_mlx5) has a 32-byte hash key: hashing IPv6 source and destination addresses takes 36");
  EXPECT_TRUE(plan_rss(src, 2, std::vector{nic(0, 128, kEveryType, 64, 32)}).enabled);  // 16 + 4 bytes for one field
  EXPECT_EQ(refusal(src, {}), "no RX port");
  EXPECT_EQ(refusal(src, {nic(0, 512, kEveryType, 64, 52, "net_ice")}), "the hash key given has 40 bytes, the ports take 52");
}

// 4. The hash is the NIC's. Microsoft's verification suite (82599 datasheet 7.1.2.8.3, DPDK's
// app/test/test_thash.c): addresses, ports, and the hash over the addresses and over all four.
struct Vector4 {
  std::uint32_t dst, src;
  std::uint16_t dst_port, src_port;
  std::uint32_t l3, l3l4;
};
constexpr Vector4 kVectors4[] = {
    {0xa18e6450, 0x420995bb, 1766, 2794, 0x323e8fc2, 0x51ccc178},   // 161.142.100.80 <- 66.9.149.187
    {0x41458c53, 0xc75c6f02, 4739, 14230, 0xd718262a, 0xc626b0ea},  // 65.69.140.83 <- 199.92.111.2
    {0x0c16cfb8, 0x1813c65f, 38024, 12898, 0xd2d0a5de, 0x5c2b394a}, // 12.22.207.184 <- 24.19.198.95
    {0xd18ea306, 0x261bcd1e, 2217, 48228, 0x82989176, 0xafc7327f},  // 209.142.163.6 <- 38.27.205.30
    {0xcabc7f02, 0x9927a3bf, 1303, 44251, 0x5d1809c5, 0x10e828a2},  // 202.188.127.2 <- 153.39.163.191
};
struct Vector6 {
  std::array<std::uint8_t, 16> dst, src;
  std::uint16_t dst_port, src_port;
  std::uint32_t l3, l3l4;
};
const Vector6 kVectors6[] = {
    {{0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x01},  // 3ffe:2501:200:3::1
     {0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x07},  // 3ffe:2501:200:1fff::7
     1766, 2794, 0x2cc18cd5, 0x40207d3d},
    {{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01},                                          // ff02::1
     {0x3f, 0xfe, 0x05, 0x01, 0x00, 0x08, 0x00, 0x00, 0x02, 0x60, 0x97, 0xff, 0xfe, 0x40, 0xef, 0xab},  // 3ffe:501:8::260:97ff:fe40:efab
     4739, 14230, 0x0f0c461c, 0xdde51bbf},
    {{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0xf8, 0xff, 0xfe, 0x21, 0x67, 0xcf},                    // fe80::200:f8ff:fe21:67cf
     {0x3f, 0xfe, 0x19, 0x00, 0x45, 0x45, 0x00, 0x03, 0x02, 0x00, 0xf8, 0xff, 0xfe, 0x21, 0x67, 0xcf},  // 3ffe:1900:4545:3:200:f8ff:fe21:67cf
     38024, 44251, 0x4b61e985, 0x02d1feef},
};

// Toeplitz from its definition, bit by bit: for each set input bit i (most significant first), XOR in
// the 32 key bits starting at bit i. Independent of rte_softrss; checked against the vectors below.
std::uint32_t reference_toeplitz(std::span<const std::uint8_t> key, const std::vector<std::uint8_t>& input) {
  std::uint32_t hash = 0;
  for (std::size_t i = 0; i < input.size() * 8; ++i) {
    if ((input[i / 8] & (0x80u >> (i % 8))) == 0) continue;
    std::uint32_t window = 0;
    for (std::size_t b = i; b < i + 32; ++b) window = (window << 1) | ((key[b / 8] >> (7 - b % 8)) & 1u);
    hash ^= window;
  }
  return hash;
}
std::vector<std::uint8_t> bytes_of(const Parsed& p, HashedFields fields, bool ports = false) {
  const unsigned n = p.l3 == L3::ipv6 ? 16 : 4;
  std::vector<std::uint8_t> input;
  if (fields == HashedFields::src || fields == HashedFields::src_and_dst) input.insert(input.end(), p.src.begin(), p.src.begin() + n);
  if (fields == HashedFields::dst || fields == HashedFields::src_and_dst) input.insert(input.end(), p.dst.begin(), p.dst.begin() + n);
  if (ports)
    for (const std::uint16_t port : {p.src_port, p.dst_port}) {
      input.push_back(static_cast<std::uint8_t>(port >> 8));
      input.push_back(static_cast<std::uint8_t>(port));
    }
  return input;
}

TEST(RssHash, MicrosoftVerificationVectors) {
  for (const Vector4& v : kVectors4) {
    Parsed p = ipv4(v.src, v.dst);
    p.src_port = v.src_port, p.dst_port = v.dst_port;
    EXPECT_EQ(toeplitz_hash(kMicrosoftKey, HashedFields::src_and_dst, p), v.l3) << std::hex << v.src;
    EXPECT_EQ(reference_toeplitz(kMicrosoftKey, bytes_of(p, HashedFields::src_and_dst)), v.l3) << std::hex << v.src;
    EXPECT_EQ(reference_toeplitz(kMicrosoftKey, bytes_of(p, HashedFields::src_and_dst, true)), v.l3l4) << std::hex << v.src;
  }
  for (const Vector6& v : kVectors6) {
    Parsed p;
    p.l3 = L3::ipv6;
    p.src = v.src, p.dst = v.dst;
    p.src_port = v.src_port, p.dst_port = v.dst_port;
    EXPECT_EQ(toeplitz_hash(kMicrosoftKey, HashedFields::src_and_dst, p), v.l3) << std::hex << v.l3;
    EXPECT_EQ(reference_toeplitz(kMicrosoftKey, bytes_of(p, HashedFields::src_and_dst)), v.l3) << std::hex << v.l3;
    EXPECT_EQ(reference_toeplitz(kMicrosoftKey, bytes_of(p, HashedFields::src_and_dst, true)), v.l3l4) << std::hex << v.l3;
  }
}

// One address alone (L3_SRC_ONLY / L3_DST_ONLY): no published vectors, so the reference above, which
// reproduces them, judges; the NIC hashes the one field from the key's first bit.
TEST(RssHash, OneAddressAgreesWithTheReference) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const auto key = seeded_key(rng(), 52);
    Parsed p = ipv4(static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng()));
    if (i % 2 == 1) {
      p.l3 = L3::ipv6;
      for (auto& b : p.src) b = static_cast<std::uint8_t>(rng());
      for (auto& b : p.dst) b = static_cast<std::uint8_t>(rng());
    }
    for (const HashedFields f : {HashedFields::src, HashedFields::dst, HashedFields::src_and_dst})
      ASSERT_EQ(toeplitz_hash(key, f, p), reference_toeplitz(key, bytes_of(p, f))) << i << " " << static_cast<int>(f);
  }
}

// 5. The plan on a port: net_null keeps what it is given (its RSS is emulated), so the key, the hash
// types and the RETA read back are what fill_rss_conf and apply_reta wrote.
TEST(RssOnAPort, NetNullTakesThePlan) {
  constexpr const char* kName = "net_null_rss0";
  ASSERT_EQ(rte_eal_hotplug_add("vdev", kName, ""), 0);
  std::uint16_t port = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name(kName, &port), 0);
  const auto caps = rss_capabilities(port);
  ASSERT_TRUE(caps) << caps.error().message;
  EXPECT_EQ(caps->driver, "net_null");
  constexpr unsigned kWorkers = 3;
  const std::vector rules{per_key("f", KeyKind::five_tuple)};
  // DPDK 22.11's net_null keeps a 40-byte key but announces a hash_key_size of 0: refused as it is.
  RssCapabilities null_port = *caps;
  if (null_port.hash_key_size == 0) {
    EXPECT_EQ(plan_rss(rules, kWorkers, std::vector{null_port}).reason,
              "port " + std::to_string(port) + " (net_null) has a 0-byte hash key: hashing IPv6 source and destination "
              "addresses takes 36");
    null_port.hash_key_size = 40;
  }
  const auto key = seeded_key(5, null_port.hash_key_size);
  const RssPlan plan = plan_rss(rules, kWorkers, std::vector{null_port}, key);
  ASSERT_TRUE(plan.enabled) << plan.reason;

  auto pool = make_mbuf_pool(1023, SOCKET_ID_ANY, {});
  ASSERT_TRUE(pool) << pool.error().message;
  rte_eth_conf conf{};
  ASSERT_TRUE(fill_rss_conf(plan, port, conf));
  EXPECT_FALSE(fill_rss_conf(plan, static_cast<std::uint16_t>(port + 1), conf));
  ASSERT_EQ(rte_eth_dev_configure(port, kWorkers, 1, &conf), 0);
  for (std::uint16_t q = 0; q < kWorkers; ++q) ASSERT_EQ(rte_eth_rx_queue_setup(port, q, 64, SOCKET_ID_ANY, nullptr, pool->get()), 0);
  ASSERT_EQ(rte_eth_tx_queue_setup(port, 0, 64, SOCKET_ID_ANY, nullptr), 0);
  ASSERT_EQ(rte_eth_dev_start(port), 0);
  ASSERT_EQ(apply_reta(port, plan), 0);
  // net_null drops the key given at configure: apply_rss gives it again and reads everything back.
  const auto applied = apply_rss(port, plan);
  ASSERT_FALSE(applied) << applied->message;

  // Read back here as well, so that a check apply_rss skipped would not go unnoticed.
  std::vector<rte_eth_rss_reta_entry64> groups((caps->reta_size + RTE_ETH_RETA_GROUP_SIZE - 1) / RTE_ETH_RETA_GROUP_SIZE);
  for (auto& g : groups) g.mask = ~std::uint64_t{0};
  ASSERT_EQ(rte_eth_dev_rss_reta_query(port, groups.data(), caps->reta_size), 0);
  const auto expected = port_reta(plan, caps->reta_size);
  for (std::size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(groups[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE], expected[i]) << "entry " << i;
  std::vector<std::uint8_t> read_key(null_port.hash_key_size);
  rte_eth_rss_conf read{};
  read.rss_key = read_key.data();
  read.rss_key_len = null_port.hash_key_size;
  ASSERT_EQ(rte_eth_dev_rss_hash_conf_get(port, &read), 0);
  EXPECT_EQ(read_key, key);
  EXPECT_EQ(read.rss_hf, plan.rss_hf);

  // What it does not offer is refused with its name.
  if ((caps->flow_type_rss_offloads & RTE_ETH_RSS_L3_SRC_ONLY) == 0) {
    EXPECT_EQ(plan_rss(std::vector{per_key("s", KeyKind::src)}, kWorkers, std::vector{null_port}).reason,
              "port " + std::to_string(port) + " (net_null) does not hash on source addresses only (RTE_ETH_RSS_L3_SRC_ONLY)");
  }
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  rte_eal_hotplug_remove("vdev", kName);
}

}  // namespace
}  // namespace tricolor::dataplane
