// The workers' flow cache (dataplane/engine/flow_cache.hpp): its fields tell apart every field a rule
// can match, a lookup under another rule set misses, and an engine with the cache decides every packet
// as one without it: more flows than the cache holds, flows that share its entries (a cache of 2),
// rule and rate changes and key expiry in the middle.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "dataplane/engine/flow_cache.hpp"
#include "tests/dataplane/engine/engine_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using namespace engine_test;

TEST(FlowCache, TakesPowersOfTwoOnly) {
  EXPECT_EQ(FlowCache::make(0), nullptr);
  EXPECT_EQ(FlowCache::make(1), nullptr);
  EXPECT_EQ(FlowCache::make(3), nullptr);
  EXPECT_EQ(FlowCache::make(kMaxFlowCacheEntries * 2), nullptr);
  auto cache = FlowCache::make(2);
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->entries(), 2u);
  EXPECT_EQ(cache->memory_bytes(), 128u);
}

Parsed ipv4_parsed() {
  Parsed p;
  p.l3 = L3::ipv4;
  p.src = {192, 0, 2, 1};
  p.dst = {10, 0, 0, 1};
  p.protocol = 17;
  p.src_port = 1000;
  p.dst_port = 53;
  return p;
}

TEST(FlowCache, FieldsTellApartEveryMatchedField) {
  const PacketView view{nullptr, 0, 0, 0, 3, 0, false};
  FlowCache::Fields base;
  FlowCache::fields_of(view, ipv4_parsed(), base);
  const auto differs = [&](auto change, const char* what) {
    Parsed p = ipv4_parsed();
    PacketView v = view;
    change(p, v);
    FlowCache::Fields f;
    FlowCache::fields_of(v, p, f);
    EXPECT_NE(std::memcmp(f, base, sizeof base), 0) << what;
  };
  differs([](Parsed& p, PacketView&) { p.src[3] = 2; }, "source");
  differs([](Parsed& p, PacketView&) { p.dst[0] = 11; }, "destination");
  differs([](Parsed& p, PacketView&) { p.protocol = 6; }, "protocol");
  differs([](Parsed& p, PacketView&) { p.src_port = 1001; }, "source port");
  differs([](Parsed& p, PacketView&) { p.dst_port = 54; }, "destination port");
  differs([](Parsed& p, PacketView&) { p.dscp = 46; }, "DSCP");
  differs([](Parsed& p, PacketView&) { p.has_vlan = true; }, "VLAN 0 against untagged");
  differs([](Parsed& p, PacketView&) { p.has_vlan = true, p.vlan_id = 7; }, "VLAN id");
  differs([](Parsed&, PacketView& v) { v.port = 4; }, "ingress port");
  // IPv6 with the IPv4 packet's bytes at the start of its addresses.
  differs([](Parsed& p, PacketView&) { p.l3 = L3::ipv6; }, "family");
  differs([](Parsed& p, PacketView&) { p.l3 = L3::ipv6, p.src[15] = 1; }, "IPv6 address bytes past the fourth");
  // What no rule matches does not split a flow: the ECN bits, the length, the arrival.
  Parsed p = ipv4_parsed();
  p.ecn = 3, p.l3_length = 1000;
  PacketView v = view;
  v.arrival = 99, v.wire_length = 1014;
  FlowCache::Fields f;
  FlowCache::fields_of(v, p, f);
  EXPECT_EQ(std::memcmp(f, base, sizeof base), 0);
}

// 20 rules (past the scan's 16 entries: rte_acl's trie) by destination host, port range, DSCP and
// VLAN; three of them per key (by 5-tuple, short idle timeouts: keys expire in the run), one with a
// DSCP remark.
Policy policy(std::uint16_t first_port_of_rule_3, std::uint64_t cir) {
  Policy p;
  p.profiles.push_back({"p", params_1r2c(cir, 3000)});
  for (std::uint8_t h = 1; h <= 20; ++h) {
    Rule r = rule("r" + std::to_string(h), h, "p");
    r.match.protocol = 17;
    if (h == 3) r.match.dst_ports = {{first_port_of_rule_3, 65535}};
    if (h % 4 == 1) r.match.dscp = {0, 10, 46};
    if (h == 6) r.match.vlan = 7;
    if (h % 5 == 2) {
      r.per_key.kind = KeyKind::five_tuple;
      r.per_key.idle_timeout_ns = 3'000'000;
    }
    if (h == 8) {
      Action remark;
      remark.dscp = 10;
      r.on_color[1] = remark;  // yellow
    }
    p.rules.push_back(r);
  }
  return p;
}

struct CachedEngine {
  std::unique_ptr<Engine> engine;
  explicit CachedEngine(std::size_t cache_entries) {
    EngineOptions options;
    options.limits.flow_cache_entries = cache_entries;
    auto made = Engine::create(policy(1000, 200'000), *policer::TickRate::make(kHz), options);
    EXPECT_TRUE(made.ok()) << made.error().message;
    engine = std::move(*made);
  }
};

void same_decisions(std::size_t cache_entries, std::uint64_t seed) {
  CachedEngine plain(0), cached(cache_entries);
  ASSERT_NE(cached.engine->worker(0).flow_cache(), nullptr);
  ASSERT_GT(cached.engine->classifier_entries(), kDefaultScanEntries);  // rte_acl's trie
  std::mt19937_64 random(seed);
  std::uint64_t now = 1'000'000;
  for (int burst = 0; burst < 3000; ++burst) {
    if (burst == 1000) {  // a rule's match changes: a new classifier, a new generation
      ASSERT_TRUE(plain.engine->update(policy(2000, 200'000)).ok());
      ASSERT_TRUE(cached.engine->update(policy(2000, 200'000)).ok());
    }
    if (burst == 2000) {  // a rate change: the classifier kept, a new generation
      ASSERT_TRUE(plain.engine->update(policy(2000, 400'000)).ok());
      ASSERT_TRUE(cached.engine->update(policy(2000, 400'000)).ok());
    }
    const std::size_t n = 1 + random() % 32;
    std::vector<std::vector<std::uint8_t>> frames;
    std::vector<PacketView> views_a, views_b;
    for (std::size_t i = 0; i < n; ++i) {
      // Up to 22 hosts (two match no rule) x 4 ports x 4 DSCP (one no DSCP rule matches) x tagged or
      // not x 2 ingress ports: 1 408 flows, most of them past a small cache; now and then a frame that is not IP.
      const auto host = static_cast<std::uint8_t>(1 + random() % 22);
      const auto port = static_cast<std::uint16_t>(std::array<unsigned, 4>{53, 1500, 2500, 9000}[random() % 4]);
      const auto dscp = static_cast<std::uint8_t>(std::array<unsigned, 4>{0, 10, 46, 12}[random() % 4]);
      std::vector<std::uint8_t> f = udp4(64 + random() % 200, host, port, dscp, random() % 2 == 0);
      if (random() % 50 == 0) f[12] = 0x08, f[13] = 0x06;  // ARP
      frames.push_back(std::move(f));
    }
    std::vector<std::vector<std::uint8_t>> copies = frames;
    for (std::size_t i = 0; i < n; ++i) {
      const auto ingress = static_cast<std::uint16_t>(i % 2);
      views_a.push_back(PacketView{frames[i].data(), std::uint32_t(frames[i].size()), std::uint32_t(frames[i].size()),
                                   now + i, ingress, 0, false});
      views_b.push_back(PacketView{copies[i].data(), std::uint32_t(copies[i].size()), std::uint32_t(copies[i].size()),
                                   now + i, ingress, 0, false});
    }
    std::vector<Verdict> a(n), b(n);
    plain.engine->process(views_a, a);
    cached.engine->process(views_b, b);
    for (std::size_t i = 0; i < n; ++i) {
      SCOPED_TRACE("burst " + std::to_string(burst) + " packet " + std::to_string(i));
      ASSERT_TRUE(same_verdict(a[i], b[i]));
      ASSERT_EQ(frames[i], copies[i]);
    }
    now += 20'000 + random() % (burst % 100 == 99 ? 10'000'000 : 200'000);  // now and then past the idle timeout
  }
  for (std::size_t r = 0; r < 20; ++r) {
    const RuleCounters x = plain.engine->counters(r), y = cached.engine->counters(r);
    EXPECT_EQ(x.packets, y.packets) << "rule " << r;
    // A key idle past its timeout starts again either swept and created or renewed in place, as the
    // sweep's hand (where the secret hash put the key in the index) meets it first: only their sum is
    // the same in two engines.
    EXPECT_EQ(x.keys_created + x.keys_renewed, y.keys_created + y.keys_renewed) << "rule " << r;
  }
  const FlowCacheCounters& c = cached.engine->worker(0).flow_cache()->counters();
  EXPECT_GT(c.hits.load(), 0u);
  EXPECT_GT(c.misses.load(), 0u);
  if (cache_entries <= 16) {
    EXPECT_GT(c.misses.load(), c.hits.load() / 4) << "a small cache was not thrashed";
  }
}

TEST(FlowCacheEngine, DecidesAsWithoutItWithMoreFlowsThanItHolds) { same_decisions(16, 1); }
TEST(FlowCacheEngine, DecidesAsWithoutItWhenEveryFlowSharesItsTwoEntries) { same_decisions(2, 2); }
TEST(FlowCacheEngine, DecidesAsWithoutItWhenItHoldsEveryFlow) { same_decisions(kSuggestedFlowCacheEntries, 3); }

// A flow seen under one set misses under the next, whatever its entry still holds.
TEST(FlowCacheEngine, ANewRuleSetMissesEveryFlow) {
  CachedEngine cached(kSuggestedFlowCacheEntries);
  const auto send = [&](std::uint64_t now) {
    std::vector<std::uint8_t> f = udp4(100, 3, 1500);
    PacketView v{f.data(), std::uint32_t(f.size()), std::uint32_t(f.size()), now, 0, 0, false};
    Verdict verdict;
    cached.engine->process(std::span(&v, 1), std::span(&verdict, 1));
    return verdict.rule;
  };
  const FlowCacheCounters& c = cached.engine->worker(0).flow_cache()->counters();
  EXPECT_EQ(send(1000), 2u);  // r3: ports 1000 and up
  EXPECT_EQ(send(2000), 2u);
  EXPECT_EQ(c.misses.load(), 1u);
  EXPECT_EQ(c.hits.load(), 1u);
  ASSERT_TRUE(cached.engine->update(policy(2000, 200'000)).ok());
  EXPECT_EQ(send(3000), kNoRule);  // r3 now from port 2000: the cached rule is not used
  EXPECT_EQ(c.misses.load(), 2u);
}

}  // namespace
}  // namespace tricolor::dataplane
