// The rte_acl classifier against the obvious first-match scan (dataplane/engine/match.hpp), on random rule
// sets and packets, IPv4 and IPv6, with lists as written (repeated, overlapping and adjacent values
// included); the entries a rule costs after merging; and the limits: per rule, per rule set, and
// memory that cannot be had (in a child process under an address-space limit).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dataplane/engine/classifier.hpp"
#include "dataplane/engine/match.hpp"
#include "tests/dataplane/engine/limited_child.hpp"
#include "tests/policer/meter_test_support.hpp"

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

// `messy`: lists as a careless or hostile author writes them: values repeated, ranges overlapping,
// nested or adjacent (the classifier merges them; the scan reads them as written).
std::vector<PortRange> random_ranges(Rng& r, bool messy) {
  std::vector<PortRange> out;
  const std::size_t n = r.chance(50) ? 0 : 1 + r.below(messy ? 8 : 3);
  for (std::size_t i = 0; i < n; ++i) {
    if (messy && !out.empty() && r.chance(50)) {
      const PortRange& prev = out[r.below(out.size())];
      switch (r.below(5)) {
        case 0: out.push_back(prev); break;  // repeated
        case 4:                               // one port apart: must stay two ranges
          if (prev.last < 65534) out.push_back({static_cast<std::uint16_t>(prev.last + 2),
                                                static_cast<std::uint16_t>(std::min<std::uint64_t>(65535, prev.last + 2 + r.below(50)))});
          break;
        case 1:                               // adjacent above
          if (prev.last < 65535) out.push_back({static_cast<std::uint16_t>(prev.last + 1),
                                                static_cast<std::uint16_t>(std::min<std::uint64_t>(65535, prev.last + 1 + r.below(50)))});
          break;
        case 2:  // overlapping
          out.push_back({static_cast<std::uint16_t>(prev.first + (prev.last - prev.first) / 2),
                         static_cast<std::uint16_t>(std::min<std::uint64_t>(65535, prev.last + r.below(50)))});
          break;
        default:  // adjacent below, or nested
          if (prev.first > 0) out.push_back({static_cast<std::uint16_t>(prev.first - 1 - std::min<std::uint64_t>(prev.first - 1, r.below(20))),
                                             static_cast<std::uint16_t>(prev.first - 1)});
          else out.push_back({prev.first, prev.first});
          break;
      }
      continue;
    }
    const auto a = static_cast<std::uint16_t>(r.chance(50) ? r.below(1100) : r.below(65536));
    const auto b = static_cast<std::uint16_t>(r.chance(40) ? a : std::min<std::uint64_t>(65535, a + r.below(2000)));
    out.push_back({a, b});
  }
  return out;
}

// DSCP values: a few at random, or (messy) runs that pack into aligned blocks (0-63, 8-15, 16-23 ...),
// runs that do not (5-27), with repeats.
std::vector<std::uint8_t> random_dscp(Rng& r, bool messy) {
  std::vector<std::uint8_t> out;
  if (!messy) {
    for (std::size_t i = 0, n = 1 + r.below(3); i < n; ++i) out.push_back(static_cast<std::uint8_t>(r.below(64)));
    return out;
  }
  for (std::size_t run = 0, runs = 1 + r.below(3); run < runs; ++run) {
    const unsigned size = r.chance(50) ? 1u << r.below(7) : 1 + static_cast<unsigned>(r.below(30));
    const unsigned first = r.chance(50) ? static_cast<unsigned>(r.below(64 / size + 1)) * size % 64 : static_cast<unsigned>(r.below(64));
    for (unsigned d = first; d < std::min(64u, first + size); ++d) out.push_back(static_cast<std::uint8_t>(d));
    if (r.chance(30)) out.push_back(static_cast<std::uint8_t>(first));  // repeated
  }
  return out;
}

// Which fields a generated rule may match: any; only addresses and protocol (the scan's narrow form);
// or IPv4 rules only addresses and protocol and IPv6 rules anything (one family narrow, one not).
enum class Fields { any, addresses_and_protocol, ipv4_addresses_and_protocol };

Rule random_rule(Rng& r, std::size_t index, bool messy = false, Fields fields = Fields::any) {
  Rule rule;
  rule.name = "r" + std::to_string(index);
  rule.profile = "p";
  Match& m = rule.match;
  const int family = fields == Fields::ipv4_addresses_and_protocol ? 1 + static_cast<int>(r.below(2))  // IPv4 or IPv6
                                                                    : static_cast<int>(r.below(3));  // 0 any, 1 IPv4, 2 IPv6
  if (family != 0 && r.chance(70)) m.src = random_prefix(r, family == 2);
  if (family != 0 && r.chance(70)) m.dst = random_prefix(r, family == 2);
  if (r.chance(50)) m.protocol = static_cast<std::uint8_t>(r.chance(80) ? (r.chance(50) ? 6 : 17) : r.below(256));
  const bool narrow = fields == Fields::addresses_and_protocol || (fields == Fields::ipv4_addresses_and_protocol && family == 1);
  if (narrow) return rule;
  if (!m.protocol || *m.protocol == 6 || *m.protocol == 17) {
    m.src_ports = random_ranges(r, messy);
    m.dst_ports = random_ranges(r, messy);
  }
  if (r.chance(20)) m.vlan = static_cast<std::uint16_t>(r.below(5));
  if (r.chance(messy ? 40 : 20)) m.dscp = random_dscp(r, messy);
  if (r.chance(messy ? 40 : 20))
    for (std::size_t i = 0, n = 1 + r.below(messy ? 6 : 3); i < n; ++i) m.ports.push_back(static_cast<std::uint16_t>(r.below(4)));
  return rule;
}

// A port at a range's edges (where merged ranges meet), just outside them, or inside.
std::uint16_t near_a_range(Rng& r, const PortRange& range) {
  switch (r.below(6)) {
    case 0: return range.first;
    case 1: return range.last;
    case 2: return static_cast<std::uint16_t>(range.first - 1);  // wraps at 0: some port outside
    case 3: return static_cast<std::uint16_t>(range.last + 1);
    default: return static_cast<std::uint16_t>(range.first + r.below(std::uint64_t{range.last} - range.first + 1));
  }
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
    if (!m.src_ports.empty() && r.chance(90)) p.src_port = near_a_range(r, m.src_ports[r.below(m.src_ports.size())]);
    if (!m.dst_ports.empty() && r.chance(90)) p.dst_port = near_a_range(r, m.dst_ports[r.below(m.dst_ports.size())]);
    if (m.vlan && r.chance(90)) p.has_vlan = true, p.vlan_id = *m.vlan;
    if (!m.dscp.empty() && r.chance(90)) p.dscp = m.dscp[r.below(m.dscp.size())];
    if (!m.ports.empty() && r.chance(90)) view.port = m.ports[r.below(m.ports.size())];
  }
  if (p.protocol != 6 && p.protocol != 17 && p.protocol != 132) p.src_port = p.dst_port = 0;
  if (r.chance(3)) p.l3 = L3::none;
  if (r.chance(3)) p.error = ParseError::truncated_l4;
  return p;
}

// 40 bursts of random packets, many aimed at the rules: the classifier's rule for each is the first
// that matches (match.hpp). `matched` and `checked` count the packets.
void same_as_first_match(Rng& rng, const Classifier& classifier, const std::vector<Rule>& rules, const std::string& where,
                         std::size_t& matched, std::size_t& checked) {
  for (int burst = 0; burst < 40; ++burst) {
    const std::size_t n = 1 + rng.below(Classifier::kMaxBurst);
    std::vector<PacketView> views(n);
    std::vector<Parsed> parsed(n);
    for (std::size_t i = 0; i < n; ++i) parsed[i] = random_packet(rng, rules, views[i]);
    std::vector<std::uint32_t> got(n);
    classifier.classify(views, parsed, got);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t want = first_match(rules, views[i], parsed[i]);
      ASSERT_EQ(got[i], want) << where << ": packet " << i << " of " << rules.size() << " rules";
      matched += want != UINT32_MAX;
      ++checked;
    }
  }
}

// scan_entries: 0 puts every rule set in rte_acl's trie, SIZE_MAX scans every one (ClassifierLimits;
// the one-shape hash off, so that the trie is what is tested).
void agrees_with_the_scan(std::uint64_t seed, bool messy, std::size_t scan_entries, Fields fields = Fields::any) {
  Rng rng{seed};
  std::size_t matched = 0, checked = 0;
  for (std::size_t round = 0; round < 60; ++round) {
    const std::size_t count = round < 10 ? round : 1 + rng.below(round < 50 ? 60 : messy ? 200 : 600);
    std::vector<Rule> rules;
    for (std::size_t i = 0; i < count; ++i) rules.push_back(random_rule(rng, i, messy, fields));
    ClassifierLimits limits;
    limits.scan_entries = scan_entries;
    limits.exact_hash = false;
    auto classifier = Classifier::build(rules, limits);
    ASSERT_TRUE(classifier.ok()) << classifier.error().message;
    ASSERT_EQ((*classifier)->scanned(), scan_entries != 0 && (*classifier)->entries() != 0);
    same_as_first_match(rng, **classifier, rules, "round " + std::to_string(round), matched, checked);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(matched, checked / 3);  // the generator must exercise matches, not just misses
}

TEST(Classifier, AgreesWithTheFirstMatchScan) { agrees_with_the_scan(2024, false, 0); }

TEST(Classifier, AgreesWithTheScanOnRepeatedOverlappingAndAdjacentValues) { agrees_with_the_scan(7, true, 0); }

// The same rule sets and packets with the entries scanned instead of put in a trie.
TEST(ClassifierScanned, AgreesWithTheFirstMatchScan) { agrees_with_the_scan(2024, false, SIZE_MAX); }

TEST(ClassifierScanned, AgreesWithTheScanOnRepeatedOverlappingAndAdjacentValues) {
  agrees_with_the_scan(7, true, SIZE_MAX);
}

// Rule sets that match addresses and protocol alone are scanned on those fields only (the ports, VLAN,
// DSCP and ingress port of the packets, random, must not matter); and with only the IPv4 rules so,
// each family scanned in its own form.
TEST(ClassifierScanned, AgreesWithTheFirstMatchScanOnAddressesAndProtocolAlone) {
  agrees_with_the_scan(31, false, SIZE_MAX, Fields::addresses_and_protocol);
}

TEST(ClassifierScanned, AgreesWithTheFirstMatchScanWithOneFamilyOnAddressesAndProtocolAlone) {
  agrees_with_the_scan(32, false, SIZE_MAX, Fields::ipv4_addresses_and_protocol);
}

// A set of one IPv4 rule on addresses and protocol (the daemon benchmark's shape) has its one entry
// offered to the worker, which matches each packet against it as it parses (Classifier::OnlyEntry):
// that test and classify() both give the first match. Any other set offers none.
TEST(ClassifierScanned, TheOnlyEntryOfASetOfOneIpv4RuleGivesTheFirstMatch) {
  Rng rng{41};
  std::size_t matched = 0, checked = 0;
  for (int round = 0; round < 200; ++round) {
    Rule rule;
    do rule = random_rule(rng, 0, false, Fields::ipv4_addresses_and_protocol);
    while (!(rule.match.src && !rule.match.src->ipv6) && !(rule.match.dst && !rule.match.dst->ipv6));  // IPv4 only
    const std::vector<Rule> rules{rule};
    auto classifier = Classifier::build(rules);
    ASSERT_TRUE(classifier.ok()) << classifier.error().message;
    const Classifier::OnlyEntry* only = (*classifier)->only_entry();
    ASSERT_NE(only, nullptr) << "round " << round;
    same_as_first_match(rng, **classifier, rules, "round " + std::to_string(round), matched, checked);
    if (HasFatalFailure()) return;
    for (int i = 0; i < 64; ++i) {
      PacketView view;
      const Parsed p = random_packet(rng, rules, view);
      ASSERT_EQ(only->classify(p), first_match(rules, view, p)) << "round " << round << ", packet " << i;
    }
  }
  EXPECT_GT(matched, checked / 3);
  EXPECT_GT(checked, 1000u);
  // Not one IPv4 entry of addresses and protocol: no only entry.
  Rule ported;
  ported.name = "ported";
  ported.match.dst = Prefix{.address = {10, 0, 0, 0}, .length = 8};
  ported.match.dst_ports = {{53, 53}};
  Rule both_families;  // no prefix: an entry in each family
  both_families.name = "any";
  both_families.match.protocol = 17;
  Rule two = ported;
  two.match.dst_ports.clear();
  for (const std::vector<Rule>& rules : {std::vector<Rule>{ported}, std::vector<Rule>{both_families},
                                         std::vector<Rule>{two, two}, std::vector<Rule>{}}) {
    auto classifier = Classifier::build(rules);
    ASSERT_TRUE(classifier.ok());
    EXPECT_EQ((*classifier)->only_entry(), nullptr) << rules.size() << " rules";
  }
}

// By default a rule set of up to kDefaultScanEntries entries is scanned, a bigger one goes in the trie
// (rules of several shapes: the hash cannot take them).
TEST(ClassifierScanned, ByDefaultOnlyAFewEntriesAreScanned) {
  std::vector<Rule> rules(kDefaultScanEntries / 2);  // each rule one entry in each family
  for (std::size_t i = 0; i < rules.size(); ++i) {
    rules[i].name = "r" + std::to_string(i);
    if (i % 2 == 1) rules[i].match.dst_ports = {{static_cast<std::uint16_t>(i), static_cast<std::uint16_t>(i)}};
  }
  auto few = Classifier::build(rules);
  ASSERT_TRUE(few.ok());
  EXPECT_EQ((*few)->entries(), kDefaultScanEntries);
  EXPECT_TRUE((*few)->scanned());
  rules.push_back(rules.front());
  rules.back().name = "one-more";
  auto more = Classifier::build(rules);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE((*more)->scanned());
  EXPECT_FALSE((*more)->hashed());
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

// ---- entries after merging ----

Prefix ipv4_prefix(std::uint8_t a, std::uint8_t length) {
  Prefix p;
  p.address = {a, 0, 0, 0};
  p.length = length;
  return p;
}

// The trie entries of a one-rule classifier.
std::size_t entries_of(const Match& match) {
  Rule rule;
  rule.name = "r";
  rule.profile = "p";
  rule.match = match;
  auto classifier = Classifier::build(std::vector<Rule>{rule});
  EXPECT_TRUE(classifier.ok()) << classifier.error().message;
  return classifier.ok() ? (*classifier)->entries() : 0;
}

TEST(ClassifierEntries, RepeatedOverlappingAndAdjacentPortRangesMerge) {
  Match m;
  m.dst = ipv4_prefix(10, 8);  // IPv4 only: one trie
  m.dst_ports = {{80, 80}, {80, 80}, {81, 90}, {85, 100}, {200, 300}, {301, 301}, {250, 260}};
  EXPECT_EQ(entries_of(m), 2u);  // 80-100, 200-301
  m.dst_ports = {{0, 65535}, {22, 22}};
  EXPECT_EQ(entries_of(m), 1u);
  m.src_ports = {{1, 1}, {3, 3}, {5, 5}, {3, 3}, {1, 1}};  // 3 ranges: 1, 3, 5
  m.dst_ports = {{10, 19}, {20, 29}, {40, 49}};          // 2 ranges: 10-29, 40-49
  EXPECT_EQ(entries_of(m), 6u);
}

TEST(ClassifierEntries, IngressPortsMergeIntoRanges) {
  Match m;
  m.dst = ipv4_prefix(10, 8);
  m.ports = {7, 1, 1, 2, 3, 7, 9};  // 1-3, 7, 9
  EXPECT_EQ(entries_of(m), 3u);
}

TEST(ClassifierEntries, DscpValuesPackIntoAlignedBlocks) {
  Match m;
  m.dst = ipv4_prefix(10, 8);
  for (std::uint8_t d = 0; d < 64; ++d) m.dscp.push_back(d);
  EXPECT_EQ(entries_of(m), 1u) << "0-63 is one entry with the DSCP bits masked out";
  m.dscp = {15, 8, 9, 10, 11, 12, 13, 14, 8, 8};
  EXPECT_EQ(entries_of(m), 1u) << "8-15";
  m.dscp = {46, 46, 46};
  EXPECT_EQ(entries_of(m), 1u);
  m.dscp = {10, 12};
  EXPECT_EQ(entries_of(m), 2u);
  m.dscp.clear();
  for (std::uint8_t d = 1; d < 63; ++d) m.dscp.push_back(d);
  // 1, 2-3, 4-7, 8-15, 16-31, 32-47, 48-55, 56-59, 60-61, 62
  EXPECT_EQ(entries_of(m), 10u);
  m.vlan = 100;  // the VLAN shares the field: no more entries
  EXPECT_EQ(entries_of(m), 10u);
}

TEST(ClassifierEntries, ARuleWithoutPrefixesCountsInBothTries) {
  Match m;
  m.ports = {1, 3};                            // 2 ranges
  m.src_ports = {{10, 20}, {15, 30}};          // 1
  m.dst_ports = {{1, 1}, {2, 2}};              // 1
  m.dscp = {0, 1, 2, 3};                       // 1 block
  EXPECT_EQ(entries_of(m), 2u * 2);            // IPv4 and IPv6
  m.dst = ipv4_prefix(10, 8);
  EXPECT_EQ(entries_of(m), 2u);
}

// ---- limits ----

TEST(ClassifierLimits, RefusesARuleThatExpandsTooFarNamingEachFactor) {
  Rule rule;
  rule.name = "wide";
  for (std::uint16_t p = 0; p < 600; p += 2) rule.match.dst_ports.push_back({p, p});
  for (std::uint16_t p = 0; p < 600; p += 2) rule.match.src_ports.push_back({p, p});
  auto classifier = Classifier::build(std::vector<Rule>{rule});
  ASSERT_FALSE(classifier.ok());
  EXPECT_EQ(classifier.error().subject, "wide");
  EXPECT_NE(classifier.error().message.find("rule wide expands to 90000 classifier entries: any ingress port x 300 source port "
                                            "ranges x 300 destination port ranges x any DSCP"),
            std::string::npos)
      << classifier.error().message;
  EXPECT_NE(classifier.error().message.find("at most 65536"), std::string::npos) << classifier.error().message;
}

// The rule of issue 7: 2^15 ingress ports, 2^17 source ports, 2^16 destination ports and 2^16 DSCP
// values, whose list lengths multiply to 2^64 (0 in 64 bits). After merging: 2^15 x 2^15 x 1 x 1.
// Refused at once, without expanding anything: under an address-space limit of 256 MiB more than
// the process has, a build that expanded it would run out of memory (or, uncaught, abort).
TEST(ClassifierLimits, AHostileRuleIsRefusedWithoutBeingExpanded) {
  if (!test::kAddressSpaceLimitUsable) GTEST_SKIP() << test::kNoLimitUnderSanitizers;
  Rule rule;
  rule.name = "hostile";
  Match& m = rule.match;
  for (std::uint32_t p = 0; p < 65536; p += 2) m.ports.push_back(static_cast<std::uint16_t>(p));  // 2^15 ranges
  for (std::uint32_t i = 0; i < (1u << 17); ++i) {  // each odd port 4 times: 2^15 ranges
    const auto port = static_cast<std::uint16_t>(2 * (i % 32768) + 1);
    m.src_ports.push_back({port, port});
  }
  for (std::uint32_t p = 0; p < 65536; ++p) m.dst_ports.push_back({static_cast<std::uint16_t>(p), static_cast<std::uint16_t>(p)});  // one range
  for (std::uint32_t i = 0; i < 65536; ++i) m.dscp.push_back(static_cast<std::uint8_t>(i % 64));  // one block
  ASSERT_EQ(m.ports.size() * m.src_ports.size() * m.dst_ports.size() * m.dscp.size(), 0u) << "the product wraps";
  const auto build = [&] {
    auto classifier = Classifier::build(std::vector<Rule>{rule});
    return classifier.ok() ? std::string("built") : classifier.error().message;
  };
  const auto refused = [](const std::string& text) {
    return text.starts_with("rule hostile expands to 1073741824 classifier entries: 32768 ingress port ranges x 32768 "
                            "source port ranges x 1 destination port range x 1 DSCP block");
  };
  test::use_fresh_child_processes();
  EXPECT_EXIT(test::run_under_address_space_limit(std::size_t{256} << 20, build, refused), testing::ExitedWithCode(0), "");
}

// Rules of known sizes: a 600 (IPv4 only), b 2 x 300 (both tries), c 10, d 100: 1310 entries.
std::vector<Rule> sized_rules() {
  std::vector<Rule> rules(4);
  const char* names[] = {"a", "b", "c", "d"};
  const std::uint16_t ports[] = {600, 300, 10, 100};
  for (std::size_t i = 0; i < rules.size(); ++i) {
    rules[i].name = names[i];
    rules[i].profile = "p";
    if (i != 1) rules[i].match.dst = ipv4_prefix(static_cast<std::uint8_t>(10 + i), 8);
    for (std::uint16_t p = 0; p < ports[i]; ++p) rules[i].match.dst_ports.push_back({std::uint16_t(2 * p), std::uint16_t(2 * p)});
  }
  return rules;
}

TEST(ClassifierLimits, ARuleSetOverTheLimitIsRefusedNamingTheTotalAndTheBiggestRules) {
  auto classifier = Classifier::build(sized_rules(), ClassifierLimits{1000});
  ASSERT_FALSE(classifier.ok());
  EXPECT_EQ(classifier.error().message,
            "the rules expand to 1310 classifier entries, more than the limit of 1000 (biggest rules a 600, b 600, d "
            "100); raise the limit, or shorten those rules' port and DSCP lists");
}

TEST(ClassifierLimits, ARaisedLimitAccepts) {
  auto classifier = Classifier::build(sized_rules(), ClassifierLimits{1310});
  ASSERT_TRUE(classifier.ok()) << classifier.error().message;
  EXPECT_EQ((*classifier)->entries(), 1310u);
}

// Rules at the per-rule maximum, one more than the default limit holds: refused before expansion.
TEST(ClassifierLimits, TheDefaultLimitRefusesMoreThanItsEntries) {
  std::vector<Rule> rules(kDefaultMaxClassifierEntries / kMaxEntriesPerRule + 1);
  for (std::size_t i = 0; i < rules.size(); ++i) {
    rules[i].name = "full" + std::to_string(i);
    rules[i].match.dst = ipv4_prefix(static_cast<std::uint8_t>(i), 8);
    for (std::uint32_t p = 0; p < 65536; p += 2) rules[i].match.src_ports.push_back({std::uint16_t(p), std::uint16_t(p)});
    rules[i].match.dscp = {10, 12};  // 2^15 x 2 = 65536
  }
  auto classifier = Classifier::build(rules);
  ASSERT_FALSE(classifier.ok());
  EXPECT_NE(classifier.error().message.find("the rules expand to " + std::to_string(rules.size() * kMaxEntriesPerRule) +
                                            " classifier entries, more than the limit of " +
                                            std::to_string(kDefaultMaxClassifierEntries) + " (biggest rules full0 65536, "
                                            "full1 65536, full2 65536)"),
            std::string::npos)
      << classifier.error().message;
}

// 256 Ki entries in 4 rules of 2^15 disjoint source ports x 2 DSCP blocks (a shape rte_acl builds
// slowly and big), under an address-space limit: with 16 MiB to spare our own entries (32 MiB)
// cannot be had; with 64 MiB they can, but not rte_acl's build scratch (C heap; its tables come from
// DPDK's heap, mapped at start). Either way an error that says so, not an abort.
TEST(ClassifierLimits, MemoryThatCannotBeHadEndsAsAnError) {
  if (!test::kAddressSpaceLimitUsable) GTEST_SKIP() << test::kNoLimitUnderSanitizers;
  std::vector<Rule> rules(4);
  for (std::size_t i = 0; i < rules.size(); ++i) {
    rules[i].name = "big" + std::to_string(i);
    rules[i].match.dst = ipv4_prefix(static_cast<std::uint8_t>(i), 8);
    for (std::uint32_t p = 0; p < 65536; p += 2) rules[i].match.src_ports.push_back({std::uint16_t(p), std::uint16_t(p)});
    rules[i].match.dscp = {10, 12};
  }
  const auto build = [&] {
    // These entries are all of one shape: without the trie turned on they would be hashed.
    ClassifierLimits limits{std::size_t{1} << 20};
    limits.exact_hash = false;
    auto classifier = Classifier::build(rules, limits);
    return classifier.ok() ? std::string("built") : classifier.error().message;
  };
  const auto refused_at = [](const char* step) {
    return [step](const std::string& text) {
      return text == "cannot build the classifier of 262144 entries (biggest rules big0 65536, big1 65536, big2 65536): " +
                         std::string(step) + ": out of memory" ||
             text.starts_with("cannot build the classifier of 262144 entries (biggest rules big0 65536, big1 65536, big2 "
                              "65536): " + std::string(step) + ": out of memory (or rules too varied");
    };
  };
  test::use_fresh_child_processes();
  EXPECT_EXIT(test::run_under_address_space_limit(std::size_t{16} << 20, build, refused_at("expanding the rules")),
              testing::ExitedWithCode(0), "");
  EXPECT_EXIT(test::run_under_address_space_limit(std::size_t{64} << 20, build, refused_at("building the IPv4 trie")),
              testing::ExitedWithCode(0), "");
}

// Rule sets of one shape (exact_match.hpp): each round picks the fields its rules match and how (a
// prefix length per family, one value or a list of values per port field, the protocol, a VLAN, DSCP
// values, ingress ports), then rules with values from small domains, so that rules repeat one another
// (the first must win) and packets often hit them. Hashed, the classifier agrees with the first-match
// scan packet for packet.
Rule one_shape_rule(Rng& r, std::size_t index, std::uint64_t shape, const std::uint8_t (&prefix)[2]) {
  Rule rule;
  rule.name = "r" + std::to_string(index);
  rule.profile = "p";
  Match& m = rule.match;
  const bool ipv6 = r.chance(40);
  const auto address = [&](std::uint8_t length) {
    Prefix p;
    p.ipv6 = ipv6;
    p.length = length;
    for (unsigned i = 0; i < (ipv6 ? 16u : 4u); ++i) p.address[i] = static_cast<std::uint8_t>(i < 2 ? r.below(3) : r.below(256));
    for (unsigned b = length; b < (ipv6 ? 128u : 32u); ++b)  // host bits zero, as the language leaves them
      p.address[b / 8] = static_cast<std::uint8_t>(p.address[b / 8] & ~(0x80u >> (b % 8)));
    return p;
  };
  const auto values = [&](std::uint64_t domain) {
    std::vector<PortRange> out;
    for (std::size_t i = 0, n = r.chance(70) ? 1 : 2 + r.below(3); i < n; ++i) {
      const auto v = static_cast<std::uint16_t>(r.below(domain));
      out.push_back({v, v});
    }
    return out;
  };
  if (shape & 1) m.src = address(prefix[ipv6]);
  if (shape & 2) m.dst = address(prefix[ipv6]);
  if (shape & 4) m.protocol = static_cast<std::uint8_t>(r.chance(50) ? 6 : 17);
  if (shape & 8) m.src_ports = values(1100);
  if (shape & 16) m.dst_ports = values(8);
  if (shape & 32) m.vlan = static_cast<std::uint16_t>(r.below(5));
  if (shape & 64) m.dscp = {static_cast<std::uint8_t>(r.below(64))};
  if (shape & 128) m.ports = {static_cast<std::uint16_t>(r.below(4))};
  return rule;
}

TEST(ClassifierHashed, AgreesWithTheFirstMatchScanOnRuleSetsOfOneShape) {
  Rng rng{99};
  std::size_t matched = 0, checked = 0, hashed = 0;
  for (std::size_t round = 0; round < 120; ++round) {
    const std::uint64_t shape = 1 + rng.below(255);
    const std::uint8_t prefix[2] = {static_cast<std::uint8_t>(rng.chance(50) ? 32 : rng.below(33)),
                                    static_cast<std::uint8_t>(rng.chance(50) ? 128 : rng.below(129))};
    std::vector<Rule> rules;
    for (std::size_t i = 0, count = 1 + rng.below(round < 60 ? 40 : 400); i < count; ++i)
      rules.push_back(one_shape_rule(rng, i, shape, prefix));
    ClassifierLimits limits;
    limits.scan_entries = 0;
    auto classifier = Classifier::build(rules, limits);
    ASSERT_TRUE(classifier.ok()) << classifier.error().message;
    hashed += (*classifier)->hashed();
    same_as_first_match(rng, **classifier, rules, "round " + std::to_string(round) + " shape " + std::to_string(shape),
                        matched, checked);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(hashed, 120u);  // every set of one shape is hashed
  EXPECT_GT(matched, checked / 3);
}

// One rule of another shape (a port range wider than 64 values, a prefix of another length) puts the
// set in the trie; so does turning the hash off.
TEST(ClassifierHashed, ARuleOfAnotherShapeTakesTheTrie) {
  std::vector<Rule> rules;
  for (std::uint8_t i = 0; i < 40; ++i) {
    Rule r;
    r.name = "r" + std::to_string(i);
    r.match.dst = ipv4_prefix(i, 32);
    r.match.protocol = 17;
    r.match.dst_ports = {{53, 53}};
    rules.push_back(r);
  }
  auto one_shape = Classifier::build(rules);
  ASSERT_TRUE(one_shape.ok());
  EXPECT_TRUE((*one_shape)->hashed());
  EXPECT_FALSE((*one_shape)->scanned());
  ClassifierLimits no_hash;
  no_hash.exact_hash = false;
  auto trie = Classifier::build(rules, no_hash);
  ASSERT_TRUE(trie.ok());
  EXPECT_FALSE((*trie)->hashed());
  for (const auto change : {0, 1}) {
    std::vector<Rule> other = rules;
    if (change == 0) other[20].match.dst_ports = {{53, 1053}};
    else other[20].match.dst = ipv4_prefix(20, 24);
    auto mixed = Classifier::build(other);
    ASSERT_TRUE(mixed.ok());
    EXPECT_FALSE((*mixed)->hashed()) << change;
  }
}

// Within the scan's limit, rules of one shape are scanned up to kHashAheadOfScanEntries entries in a
// family and hashed from there; with the hash off they are scanned.
TEST(ClassifierScanned, OneShapeFromAFewEntriesOnIsHashed) {
  std::vector<Rule> rules;
  for (std::size_t i = 0; i < kHashAheadOfScanEntries; ++i) {
    Rule r;
    r.name = "r" + std::to_string(i);
    r.match.dst = ipv4_prefix(static_cast<std::uint8_t>(i), 32);
    r.match.dst_ports = {{53, 53}};
    rules.push_back(r);
    auto c = Classifier::build(rules);
    ASSERT_TRUE(c.ok());
    const bool hashed = rules.size() >= kHashAheadOfScanEntries;
    EXPECT_EQ((*c)->hashed(), hashed) << rules.size() << " rules";
    EXPECT_EQ((*c)->scanned(), !hashed) << rules.size() << " rules";
  }
  ClassifierLimits no_hash;
  no_hash.exact_hash = false;
  auto scanned = Classifier::build(rules, no_hash);
  ASSERT_TRUE(scanned.ok());
  EXPECT_TRUE((*scanned)->scanned());
  EXPECT_FALSE((*scanned)->hashed());
}

}  // namespace
}  // namespace tricolor::dataplane
