// The rte_acl classifier against the obvious first-match scan (dataplane/match.hpp), on random rule
// sets and packets, IPv4 and IPv6.
#include <gtest/gtest.h>

#include <vector>

#include "dataplane/classifier.hpp"
#include "dataplane/match.hpp"
#include "tests/meter_test_support.hpp"

namespace tricolor::dataplane {
namespace {

using test::Rng;

Prefix random_prefix(Rng& r, bool ipv6) {
  Prefix p;
  p.ipv6 = ipv6;
  const unsigned bits = ipv6 ? 128 : 32;
  p.length = static_cast<std::uint8_t>(r.chance(10) ? 0 : r.chance(20) ? bits : r.below(bits + 1));
  // Few distinct high bytes, so that prefixes nest and overlap.
  for (unsigned i = 0; i < bits / 8; ++i) p.address[i] = static_cast<std::uint8_t>(i < 2 ? r.below(3) : r.below(256));
  for (unsigned b = p.length; b < bits; ++b) p.address[b / 8] &= static_cast<std::uint8_t>(~(0x80u >> (b % 8)));
  return p;
}

std::vector<PortRange> random_ranges(Rng& r) {
  std::vector<PortRange> out;
  const std::size_t n = r.chance(50) ? 0 : 1 + r.below(3);
  for (std::size_t i = 0; i < n; ++i) {
    const auto a = static_cast<std::uint16_t>(r.chance(50) ? r.below(1100) : r.below(65536));
    const auto b = static_cast<std::uint16_t>(r.chance(40) ? a : std::min<std::uint64_t>(65535, a + r.below(2000)));
    out.push_back({a, b});
  }
  return out;
}

Rule random_rule(Rng& r, std::size_t index) {
  Rule rule;
  rule.name = "r" + std::to_string(index);
  rule.profile = "p";
  Match& m = rule.match;
  const int family = static_cast<int>(r.below(3));  // 0 any, 1 IPv4, 2 IPv6
  if (family != 0 && r.chance(70)) m.src = random_prefix(r, family == 2);
  if (family != 0 && r.chance(70)) m.dst = random_prefix(r, family == 2);
  if (r.chance(50)) m.protocol = static_cast<std::uint8_t>(r.chance(80) ? (r.chance(50) ? 6 : 17) : r.below(256));
  if (!m.protocol || *m.protocol == 6 || *m.protocol == 17) {
    m.src_ports = random_ranges(r);
    m.dst_ports = random_ranges(r);
  }
  if (r.chance(20)) m.vlan = static_cast<std::uint16_t>(r.below(5));
  if (r.chance(20))
    for (std::size_t i = 0, n = 1 + r.below(3); i < n; ++i) m.dscp.push_back(static_cast<std::uint8_t>(r.below(64)));
  if (r.chance(20))
    for (std::size_t i = 0, n = 1 + r.below(3); i < n; ++i) m.ports.push_back(static_cast<std::uint16_t>(r.below(4)));
  return rule;
}

// A packet, often built to fall inside a given rule, sometimes just random.
Parsed random_packet(Rng& r, const std::vector<Rule>& rules, PacketView& view) {
  Parsed p;
  const Rule* target = rules.empty() || r.chance(20) ? nullptr : &rules[r.below(rules.size())];
  bool ipv6 = r.chance(50);
  if (target && target->match.src) ipv6 = target->match.src->ipv6;
  if (target && target->match.dst) ipv6 = target->match.dst->ipv6;
  p.l3 = ipv6 ? L3::ipv6 : L3::ipv4;
  const unsigned bytes = ipv6 ? 16 : 4;
  for (unsigned i = 0; i < bytes; ++i) {
    p.src[i] = static_cast<std::uint8_t>(i < 2 ? r.below(3) : r.below(256));
    p.dst[i] = static_cast<std::uint8_t>(i < 2 ? r.below(3) : r.below(256));
  }
  auto inside = [&](const std::optional<Prefix>& prefix, std::array<std::uint8_t, 16>& address) {
    if (!prefix || r.chance(15)) return;
    for (unsigned b = 0; b < prefix->length; ++b) {
      const auto bit = static_cast<std::uint8_t>(0x80u >> (b % 8));
      address[b / 8] = static_cast<std::uint8_t>((address[b / 8] & ~bit) | (prefix->address[b / 8] & bit));
    }
  };
  p.protocol = static_cast<std::uint8_t>(r.chance(45) ? 6 : r.chance(70) ? 17 : r.below(256));
  p.src_port = static_cast<std::uint16_t>(r.chance(50) ? r.below(1100) : r.below(65536));
  p.dst_port = static_cast<std::uint16_t>(r.chance(50) ? r.below(1100) : r.below(65536));
  p.dscp = static_cast<std::uint8_t>(r.below(64));
  p.has_vlan = r.chance(50);
  p.vlan_id = static_cast<std::uint16_t>(r.below(5));
  view.port = static_cast<std::uint16_t>(r.below(4));
  if (target) {
    const Match& m = target->match;
    inside(m.src, p.src);
    inside(m.dst, p.dst);
    if (m.protocol && r.chance(90)) p.protocol = *m.protocol;
    if (!m.src_ports.empty() && r.chance(90)) p.src_port = m.src_ports[r.below(m.src_ports.size())].first;
    if (!m.dst_ports.empty() && r.chance(90)) p.dst_port = m.dst_ports[r.below(m.dst_ports.size())].last;
    if (m.vlan && r.chance(90)) p.has_vlan = true, p.vlan_id = *m.vlan;
    if (!m.dscp.empty() && r.chance(90)) p.dscp = m.dscp[r.below(m.dscp.size())];
    if (!m.ports.empty() && r.chance(90)) view.port = m.ports[r.below(m.ports.size())];
  }
  if (p.protocol != 6 && p.protocol != 17 && p.protocol != 132) p.src_port = p.dst_port = 0;
  if (r.chance(3)) p.l3 = L3::none;
  if (r.chance(3)) p.error = ParseError::truncated_l4;
  return p;
}

TEST(Classifier, AgreesWithTheFirstMatchScan) {
  Rng rng{2024};
  std::size_t matched = 0, checked = 0;
  for (std::size_t round = 0; round < 60; ++round) {
    const std::size_t count = round < 10 ? round : 1 + rng.below(round < 50 ? 60 : 600);
    std::vector<Rule> rules;
    for (std::size_t i = 0; i < count; ++i) rules.push_back(random_rule(rng, i));
    auto classifier = Classifier::build(rules);
    ASSERT_TRUE(classifier.ok()) << classifier.error().message;
    for (int burst = 0; burst < 40; ++burst) {
      const std::size_t n = 1 + rng.below(Classifier::kMaxBurst);
      std::vector<PacketView> views(n);
      std::vector<Parsed> parsed(n);
      for (std::size_t i = 0; i < n; ++i) parsed[i] = random_packet(rng, rules, views[i]);
      std::vector<std::uint32_t> got(n);
      (*classifier)->classify(views, parsed, got);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t want = first_match(rules, views[i], parsed[i]);
        ASSERT_EQ(got[i], want) << "round " << round << " packet " << i << " of " << rules.size() << " rules";
        matched += want != UINT32_MAX;
        ++checked;
      }
    }
  }
  EXPECT_GT(matched, checked / 3);  // the generator must exercise matches, not just misses
}

TEST(Classifier, EmptyRuleSetMatchesNothing) {
  auto classifier = Classifier::build({});
  ASSERT_TRUE(classifier.ok());
  std::vector<PacketView> views(1);
  std::vector<Parsed> parsed(1);
  parsed[0].l3 = L3::ipv4;
  std::vector<std::uint32_t> got(1, 0);
  (*classifier)->classify(views, parsed, got);
  EXPECT_EQ(got[0], kNoRule);
}

TEST(Classifier, RefusesARuleThatExpandsTooFar) {
  Rule rule;
  rule.name = "wide";
  for (std::uint16_t p = 0; p < 600; p += 2) rule.match.dst_ports.push_back({p, p});
  for (std::uint16_t p = 0; p < 600; p += 2) rule.match.src_ports.push_back({p, p});
  auto classifier = Classifier::build(std::vector<Rule>{rule});
  ASSERT_FALSE(classifier.ok());
  EXPECT_NE(classifier.error().message.find("rule wide expands to 90000"), std::string::npos) << classifier.error().message;
}

}  // namespace
}  // namespace tricolor::dataplane
