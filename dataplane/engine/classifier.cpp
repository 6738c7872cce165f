#include "dataplane/engine/classifier.hpp"

#include <arpa/inet.h>
#include <rte_acl.h>
#include <rte_errno.h>
#include <rte_memory.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "dataplane/engine/exact_match.hpp"

namespace tricolor::dataplane {
namespace {

// ---- lookup keys: what rte_acl reads per packet, in network byte order ----
// rte_acl reads the first field as one byte, then the rest in groups of 4 consecutive bytes.
// vlan_dscp packs bit 20 "tagged", bits 8..19 the VLAN id and bits 0..5 the DSCP into one group.
constexpr std::uint32_t kTaggedBit = 1u << 20;
constexpr unsigned kVlanShift = 8;

struct Key4 {
  std::uint8_t protocol;
  std::uint8_t pad[3];
  std::uint32_t src;
  std::uint32_t dst;
  std::uint16_t src_port;
  std::uint16_t dst_port;
  std::uint32_t ingress_port;
  std::uint32_t vlan_dscp;
};
static_assert(sizeof(Key4) == 24);

struct Key6 {
  std::uint8_t protocol;
  std::uint8_t pad[3];
  std::uint32_t src[4];
  std::uint32_t dst[4];
  std::uint16_t src_port;
  std::uint16_t dst_port;
  std::uint32_t ingress_port;
  std::uint32_t vlan_dscp;
};
static_assert(sizeof(Key6) == 48);

enum Field4 { f4_protocol, f4_src, f4_dst, f4_src_port, f4_dst_port, f4_ingress, f4_vlan_dscp, kFields4 };
enum Field6 {
  f6_protocol,
  f6_src0, f6_src1, f6_src2, f6_src3,
  f6_dst0, f6_dst1, f6_dst2, f6_dst3,
  f6_src_port, f6_dst_port, f6_ingress, f6_vlan_dscp, kFields6
};

RTE_ACL_RULE_DEF(Acl4Rule, kFields4);
RTE_ACL_RULE_DEF(Acl6Rule, kFields6);

rte_acl_field_def field(std::uint8_t type, std::uint8_t size, std::uint8_t index, std::uint8_t input, std::size_t offset) {
  return rte_acl_field_def{type, size, index, input, static_cast<std::uint32_t>(offset)};
}

std::array<rte_acl_field_def, kFields4> defs4() {
  return {{
      field(RTE_ACL_FIELD_TYPE_BITMASK, 1, f4_protocol, 0, offsetof(Key4, protocol)),
      field(RTE_ACL_FIELD_TYPE_MASK, 4, f4_src, 1, offsetof(Key4, src)),
      field(RTE_ACL_FIELD_TYPE_MASK, 4, f4_dst, 2, offsetof(Key4, dst)),
      field(RTE_ACL_FIELD_TYPE_RANGE, 2, f4_src_port, 3, offsetof(Key4, src_port)),
      field(RTE_ACL_FIELD_TYPE_RANGE, 2, f4_dst_port, 3, offsetof(Key4, dst_port)),
      field(RTE_ACL_FIELD_TYPE_RANGE, 4, f4_ingress, 4, offsetof(Key4, ingress_port)),
      field(RTE_ACL_FIELD_TYPE_BITMASK, 4, f4_vlan_dscp, 5, offsetof(Key4, vlan_dscp)),
  }};
}

std::array<rte_acl_field_def, kFields6> defs6() {
  std::array<rte_acl_field_def, kFields6> d{};
  d[f6_protocol] = field(RTE_ACL_FIELD_TYPE_BITMASK, 1, f6_protocol, 0, offsetof(Key6, protocol));
  for (std::uint8_t w = 0; w < 4; ++w) {
    d[f6_src0 + w] = field(RTE_ACL_FIELD_TYPE_MASK, 4, f6_src0 + w, 1 + w, offsetof(Key6, src) + 4u * w);
    d[f6_dst0 + w] = field(RTE_ACL_FIELD_TYPE_MASK, 4, f6_dst0 + w, 5 + w, offsetof(Key6, dst) + 4u * w);
  }
  d[f6_src_port] = field(RTE_ACL_FIELD_TYPE_RANGE, 2, f6_src_port, 9, offsetof(Key6, src_port));
  d[f6_dst_port] = field(RTE_ACL_FIELD_TYPE_RANGE, 2, f6_dst_port, 9, offsetof(Key6, dst_port));
  d[f6_ingress] = field(RTE_ACL_FIELD_TYPE_RANGE, 4, f6_ingress, 10, offsetof(Key6, ingress_port));
  d[f6_vlan_dscp] = field(RTE_ACL_FIELD_TYPE_BITMASK, 4, f6_vlan_dscp, 11, offsetof(Key6, vlan_dscp));
  return d;
}

// ---- rule expansion: each match list merged, then crossed ----

struct Range32 {
  std::uint32_t first, last;
};
struct Bits32 {
  std::uint32_t value, mask;
};

// Ingress ports as ranges: sorted, repeats dropped, consecutive ports joined. An empty list means any.
std::vector<Range32> ingress_ranges(std::span<const std::uint16_t> list) {
  if (list.empty()) return {{0, UINT32_MAX}};
  std::vector<std::uint16_t> ports(list.begin(), list.end());
  std::sort(ports.begin(), ports.end());
  std::vector<Range32> out;
  for (std::uint16_t p : ports) {
    if (!out.empty() && out.back().last + 1 >= p) out.back().last = std::max<std::uint32_t>(out.back().last, p);
    else out.push_back({p, p});
  }
  return out;
}

// L4 port ranges sorted, overlapping and adjacent ones joined; reversed ranges (first > last) match
// nothing and are dropped. An empty list means any; a list of reversed ranges only, none (no entry).
std::vector<PortRange> l4_ranges(std::span<const PortRange> list) {
  if (list.empty()) return {PortRange{}};
  std::vector<PortRange> ranges;
  for (const PortRange& r : list)
    if (r.first <= r.last) ranges.push_back(r);
  std::sort(ranges.begin(), ranges.end(), [](const PortRange& a, const PortRange& b) { return a.first < b.first; });
  std::vector<PortRange> out;
  for (const PortRange& r : ranges) {
    if (!out.empty() && std::uint32_t{out.back().last} + 1 >= r.first) out.back().last = std::max(out.back().last, r.last);
    else out.push_back(r);
  }
  return out;
}

// VLAN and DSCP share one bitmask field. The DSCP set (values above 63 match no packet) is covered by
// the fewest aligned power-of-two blocks, each one value/mask entry: 0-63 is one entry (DSCP bits
// masked out), 8-15 one, {10, 12} two. Per maximal run, the largest aligned block that starts there
// and stays inside the run, as a range splits into prefixes.
std::vector<Bits32> vlan_dscp_bits(const Match& m) {
  constexpr std::uint32_t kDscpBits = 0x3f;
  Bits32 base{0, 0};
  if (m.vlan) base = {kTaggedBit | (std::uint32_t{*m.vlan} << kVlanShift), kTaggedBit | (0xfffu << kVlanShift)};
  if (m.dscp.empty()) return {base};
  std::uint64_t set = 0;
  for (std::uint8_t d : m.dscp)
    if (d <= kDscpBits) set |= std::uint64_t{1} << d;
  std::vector<Bits32> out;
  for (unsigned d = 0; d <= kDscpBits;) {
    if (!(set >> d & 1)) {
      ++d;
      continue;
    }
    unsigned size = 1;  // grow while aligned and every value of the doubled block is in the set
    while (d % (2 * size) == 0 && d + 2 * size <= kDscpBits + 1) {
      const std::uint64_t block = (2 * size == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << (2 * size)) - 1)) << d;
      if ((set & block) != block) break;
      size *= 2;
    }
    out.push_back({base.value | d, base.mask | (kDscpBits & ~(size - 1))});
    d += size;
  }
  return out;
}

std::size_t saturating_mul(std::size_t a, std::size_t b) noexcept {
  std::size_t product;
  return __builtin_mul_overflow(a, b, &product) ? SIZE_MAX : product;
}
std::size_t saturating_add(std::size_t a, std::size_t b) noexcept {
  std::size_t sum;
  return __builtin_add_overflow(a, b, &sum) ? SIZE_MAX : sum;
}

// One rule's match after merging: the lists it crosses and the address families it goes into.
struct Expansion {
  std::vector<Range32> ingress;
  std::vector<PortRange> src_ports;
  std::vector<PortRange> dst_ports;
  std::vector<Bits32> vlan_dscp;
  bool ipv4 = false, ipv6 = false;

  explicit Expansion(const Match& m)
      : ingress(ingress_ranges(m.ports)),
        src_ports(l4_ranges(m.src_ports)),
        dst_ports(l4_ranges(m.dst_ports)),
        vlan_dscp(vlan_dscp_bits(m)) {
    // A prefix of one family keeps the rule out of the other's trie (both kinds: out of both).
    ipv4 = !(m.src && m.src->ipv6) && !(m.dst && m.dst->ipv6);
    ipv6 = !(m.src && !m.src->ipv6) && !(m.dst && !m.dst->ipv6);
  }
  // Entries per family, saturating.
  std::size_t per_family() const noexcept {
    return saturating_mul(saturating_mul(ingress.size(), src_ports.size()),
                          saturating_mul(dst_ports.size(), vlan_dscp.size()));
  }
  std::size_t entries() const noexcept { return saturating_mul(per_family(), std::size_t{ipv4} + ipv6); }

  // Calls emit(ingress, src_ports, dst_ports, vlan_dscp) for every entry of one family.
  template <class Emit>
  void for_each_entry(Emit&& emit) const {
    for (const auto& i : ingress)
      for (const auto& s : src_ports)
        for (const auto& d : dst_ports)
          for (const auto& b : vlan_dscp) emit(i, s, d, b);
  }
};

// A count that may have saturated, as text.
std::string count_text(std::size_t n) { return (n == SIZE_MAX ? "at least " : "") + std::to_string(n); }

// One factor of a rule's cross product: "any DSCP" for an empty list, else "2 DSCP blocks".
std::string factor(bool listed, std::size_t n, const char* any, const char* one, const char* many) {
  if (!listed) return any;
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// "rule x expands to N classifier entries: a ingress port ranges x b source port ranges x ...".
Error too_many_for_a_rule(const Rule& rule, const Expansion& e) {
  const Match& m = rule.match;
  const std::string factors =
      factor(!m.ports.empty(), e.ingress.size(), "any ingress port", "ingress port range", "ingress port ranges") + " x " +
      factor(!m.src_ports.empty(), e.src_ports.size(), "any source port", "source port range", "source port ranges") +
      " x " +
      factor(!m.dst_ports.empty(), e.dst_ports.size(), "any destination port", "destination port range",
             "destination port ranges") +
      " x " + factor(!m.dscp.empty(), e.vlan_dscp.size(), "any DSCP", "DSCP block", "DSCP blocks");
  return Error{rule.name, "rule " + rule.name + " expands to " + count_text(e.per_family()) + " classifier entries: " +
                              factors + " (after merging repeated, overlapping and adjacent values); " +
                              "a rule may have at most " + std::to_string(kMaxEntriesPerRule)};
}

// The totals an error names: all entries and the three biggest rules with theirs.
struct Sizes {
  std::size_t total = 0;
  std::vector<std::size_t> per_rule;

  std::string biggest(std::span<const Rule> rules) const {
    std::vector<std::size_t> order(per_rule.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const std::size_t shown = std::min<std::size_t>(3, order.size());
    const auto bigger = [&](std::size_t a, std::size_t b) {
      return per_rule[a] != per_rule[b] ? per_rule[a] > per_rule[b] : a < b;  // ties: in rule order
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(), bigger);
    std::string text = shown == 1 ? "biggest rule " : "biggest rules ";
    for (std::size_t k = 0; k < shown; ++k)
      text += (k ? ", " : "") + rules[order[k]].name + " " + std::to_string(per_rule[order[k]]);
    return text;
  }
};

Error over_the_limit(std::span<const Rule> rules, const Sizes& sizes, std::size_t limit) {
  return Error{"classifier", "the rules expand to " + count_text(sizes.total) +
                                 " classifier entries, more than the limit of " + std::to_string(limit) + " (" +
                                 sizes.biggest(rules) + "); raise the limit, or shorten those rules' port and DSCP lists"};
}

Error out_of_memory(std::span<const Rule> rules, const Sizes& sizes, const std::string& what, const char* note = "") {
  return Error{"classifier", "cannot build the classifier of " + std::to_string(sizes.total) + " entries (" +
                                 sizes.biggest(rules) + "): " + what + ": out of memory" + note};
}

std::uint32_t word(const Prefix& p, unsigned w) {
  std::uint32_t v;
  std::memcpy(&v, p.address.data() + 4 * w, 4);
  return ntohl(v);
}

// The prefix bits that fall in 32-bit word w.
std::uint32_t word_length(const Prefix& p, unsigned w) {
  const int bits = static_cast<int>(p.length) - 32 * static_cast<int>(w);
  return static_cast<std::uint32_t>(std::clamp(bits, 0, 32));
}

template <class AclRule>
void set_common(AclRule& r, std::size_t index, std::size_t rule_count) {
  r.data.category_mask = 1;
  r.data.priority = static_cast<std::int32_t>(rule_count - index);  // earlier rules win
  r.data.userdata = static_cast<std::uint32_t>(index + 1);            // 0 means "no match" to rte_acl
}

void set_protocol(rte_acl_field& f, const Match& m) {
  f.value.u8 = m.protocol.value_or(0);
  f.mask_range.u8 = m.protocol ? 0xff : 0;
}

void set_range16(rte_acl_field& f, const PortRange& r) {
  f.value.u16 = r.first;
  f.mask_range.u16 = r.last;
}

void set_ingress(rte_acl_field& f, const Range32& r) {
  f.value.u32 = r.first;
  f.mask_range.u32 = r.last;
}

void set_bits(rte_acl_field& f, const Bits32& b) {
  f.value.u32 = b.value;
  f.mask_range.u32 = b.mask;
}

void fill(Acl4Rule& r, const Match& m, const Range32& ingress, const PortRange& sport, const PortRange& dport,
          const Bits32& bits) {
  set_protocol(r.field[f4_protocol], m);
  if (m.src) r.field[f4_src].value.u32 = word(*m.src, 0), r.field[f4_src].mask_range.u32 = m.src->length;
  if (m.dst) r.field[f4_dst].value.u32 = word(*m.dst, 0), r.field[f4_dst].mask_range.u32 = m.dst->length;
  set_range16(r.field[f4_src_port], sport);
  set_range16(r.field[f4_dst_port], dport);
  set_ingress(r.field[f4_ingress], ingress);
  set_bits(r.field[f4_vlan_dscp], bits);
}

void fill(Acl6Rule& r, const Match& m, const Range32& ingress, const PortRange& sport, const PortRange& dport,
          const Bits32& bits) {
  set_protocol(r.field[f6_protocol], m);
  for (unsigned w = 0; w < 4; ++w) {
    if (m.src) r.field[f6_src0 + w].value.u32 = word(*m.src, w), r.field[f6_src0 + w].mask_range.u32 = word_length(*m.src, w);
    if (m.dst) r.field[f6_dst0 + w].value.u32 = word(*m.dst, w), r.field[f6_dst0 + w].mask_range.u32 = word_length(*m.dst, w);
  }
  set_range16(r.field[f6_src_port], sport);
  set_range16(r.field[f6_dst_port], dport);
  set_ingress(r.field[f6_ingress], ingress);
  set_bits(r.field[f6_vlan_dscp], bits);
}

// The mask of a prefix's bits within one 32-bit word (length 0..32).
std::uint32_t prefix_mask(std::uint32_t length) { return length == 0 ? 0 : ~std::uint32_t{0} << (32 - length); }

// The scan's form of one entry: what fill() gives rte_acl, with the prefix lengths made masks.
Classifier::ScanEntry scan_entry(const Match& m, std::uint32_t rule, bool ipv6, const Range32& ingress,
                                 const PortRange& sport, const PortRange& dport, const Bits32& bits) {
  Classifier::ScanEntry e{};
  const unsigned words = ipv6 ? 4 : 1;
  for (unsigned w = 0; w < words; ++w) {
    if (m.src) e.src_mask[w] = prefix_mask(word_length(*m.src, w)), e.src[w] = word(*m.src, w) & e.src_mask[w];
    if (m.dst) e.dst_mask[w] = prefix_mask(word_length(*m.dst, w)), e.dst[w] = word(*m.dst, w) & e.dst_mask[w];
  }
  e.ingress_first = ingress.first;
  e.ingress_last = ingress.last;
  e.vlan_dscp_mask = bits.mask;
  e.vlan_dscp = bits.value & bits.mask;
  e.src_first = sport.first;
  e.src_last = sport.last;
  e.dst_first = dport.first;
  e.dst_last = dport.last;
  e.protocol_mask = m.protocol ? 0xff : 0;
  e.protocol = m.protocol.value_or(0);
  e.rule = rule;
  return e;
}

// Whether an entry tests nothing but its addresses and protocol: every port, ingress port, VLAN and
// DSCP passes.
bool addresses_and_protocol_only(const Classifier::ScanEntry& e) {
  return e.ingress_first == 0 && e.ingress_last == UINT32_MAX && e.vlan_dscp_mask == 0 && e.src_first == 0 &&
         e.src_last == UINT16_MAX && e.dst_first == 0 && e.dst_last == UINT16_MAX;
}

std::atomic<unsigned> g_context_serial{0};

struct Family {
  const char* name;                                  // "IPv4", "IPv6"
  bool Expansion::*member;                           // whether a rule goes into this family's trie
  std::size_t entries;
};

// One family's trie: its entries made (exactly as many as counted: no vector growth), handed to
// rte_acl (which copies them into its context in DPDK's heap), our copy freed before rte_acl's build
// scratch (C heap) is taken, then built. `ctx` belongs to the caller's Classifier, which frees it
// whatever happens here.
template <class AclRule, std::size_t N>
std::optional<Error> build_family(rte_acl_ctx*& ctx, const Family& family, const std::array<rte_acl_field_def, N>& defs,
                                  std::span<const Rule> rules, std::span<const Expansion> expansions, const Sizes& sizes) {
  std::vector<AclRule> entries;
  entries.reserve(family.entries);
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (!(expansions[i].*family.member)) continue;
    expansions[i].for_each_entry(
        [&](const Range32& ingress, const PortRange& sport, const PortRange& dport, const Bits32& bits) {
          AclRule& r = entries.emplace_back();
          set_common(r, i, rules.size());
          fill(r, rules[i].match, ingress, sport, dport, bits);
        });
  }
  const std::string trie = std::string("the ") + family.name + " trie";
  // rte_acl_create returns an existing context of the same name: every build needs a fresh name.
  const std::string name = std::string("tricolor-") + family.name + "-" + std::to_string(g_context_serial++);
  rte_acl_param param{};
  param.name = name.c_str();
  param.socket_id = SOCKET_ID_ANY;
  param.rule_size = static_cast<std::uint32_t>(RTE_ACL_RULE_SZ(N));
  param.max_rule_num = static_cast<std::uint32_t>(entries.size());
  ctx = rte_acl_create(&param);
  if (ctx == nullptr) {
    if (rte_errno == ENOMEM) return out_of_memory(rules, sizes, "creating " + trie);
    return Error{"classifier", "cannot create " + trie + ": " + rte_strerror(rte_errno)};
  }
  if (int rc = rte_acl_add_rules(ctx, reinterpret_cast<const rte_acl_rule*>(entries.data()),
                                 static_cast<std::uint32_t>(entries.size()));
      rc != 0) {
    if (rc == -ENOMEM) return out_of_memory(rules, sizes, "adding the entries of " + trie);
    return Error{"classifier", "cannot add the entries of " + trie + ": " + rte_strerror(-rc)};
  }
  entries = std::vector<AclRule>();
  rte_acl_config cfg{};
  cfg.num_categories = 1;
  cfg.num_fields = N;
  std::copy(defs.begin(), defs.end(), cfg.defs);
  // -ENOMEM: its scratch (C heap) or its tables (DPDK's heap) could not be had, or the entries needed
  // more than its 8 sub-tries (RTE_ACL_MAX_TRIES in its acl.h: rules too varied); it does not say which.
  if (int rc = rte_acl_build(ctx, &cfg); rc != 0) {
    if (rc == -ENOMEM)
      return out_of_memory(rules, sizes, "building " + trie,
                           " (or rules too varied for rte_acl's 8 sub-tries: it reports both alike)");
    return Error{"classifier", "cannot build " + trie + ": " + rte_strerror(-rc)};
  }
  return std::nullopt;
}

}  // namespace

Expected<std::unique_ptr<Classifier>> Classifier::build(std::span<const Rule> rules, const ClassifierLimits& limits) {
  // 1. Each rule merged and counted: nothing is expanded yet, so a rule or rule set too big for the
  //    limits is refused before it costs memory.
  Sizes sizes;
  try {
    std::vector<Expansion> expansions;
    expansions.reserve(rules.size());
    sizes.per_rule.reserve(rules.size());
    Family v4{"IPv4", &Expansion::ipv4, 0}, v6{"IPv6", &Expansion::ipv6, 0};
    for (const Rule& rule : rules) {
      const Expansion& e = expansions.emplace_back(rule.match);
      if (e.per_family() > kMaxEntriesPerRule) return too_many_for_a_rule(rule, e);
      sizes.per_rule.push_back(e.entries());
      sizes.total = saturating_add(sizes.total, e.entries());
      if (e.ipv4) v4.entries += e.per_family();
      if (e.ipv6) v6.entries += e.per_family();
    }
    // rte_acl counts a trie's entries in 32 bits, whatever the limit says.
    const std::size_t limit = std::min<std::size_t>(limits.max_entries, UINT32_MAX);
    if (sizes.total > limit) return over_the_limit(rules, sizes, limit);

    // 2. Every entry in its flat form, in rule order: what the scan reads and the hash is built from.
    std::unique_ptr<Classifier> c(new Classifier());
    c->entries_ = sizes.total;
    const bool scan = sizes.total != 0 && sizes.total <= limits.scan_entries;
    const bool hash = limits.exact_hash && sizes.total != 0;
    std::vector<ScanEntry> entries4, entries6;
    if (scan || hash) try {
      entries4.reserve(v4.entries);
      entries6.reserve(v6.entries);
      for (std::size_t i = 0; i < rules.size(); ++i) {
        const auto rule = static_cast<std::uint32_t>(i);
        if (expansions[i].ipv4) expansions[i].for_each_entry([&](auto&&... parts) {
          entries4.push_back(scan_entry(rules[i].match, rule, false, parts...));
        });
        if (expansions[i].ipv6) expansions[i].for_each_entry([&](auto&&... parts) {
          entries6.push_back(scan_entry(rules[i].match, rule, true, parts...));
        });
      }
    } catch (const std::bad_alloc&) {
      return out_of_memory(rules, sizes, scan ? "expanding the rules" : "building the exact-match tables");
    }
    const auto scanned = [&] {
      c->scanned_ = true;
      c->addresses_only4_ = std::all_of(entries4.begin(), entries4.end(), addresses_and_protocol_only);
      c->addresses_only6_ = std::all_of(entries6.begin(), entries6.end(), addresses_and_protocol_only);
      if (entries4.size() == 1 && entries6.empty() && c->addresses_only4_) {
        const ScanEntry& e = entries4.front();
        c->only_ = OnlyEntry{.src = htonl(e.src[0]), .src_mask = htonl(e.src_mask[0]), .dst = htonl(e.dst[0]),
                             .dst_mask = htonl(e.dst_mask[0]), .protocol = e.protocol,
                             .protocol_mask = e.protocol_mask, .rule = e.rule};
      }
      c->scan4_ = std::move(entries4);
      c->scan6_ = std::move(entries6);
      return std::move(c);
    };
    // 3. A few entries are scanned, no trie; but from kHashAheadOfScanEntries entries in a family, a
    //    set of one shape is hashed instead (a scan's cost grows with the entries it passes, a hash's
    //    does not).
    if (scan && !(hash && std::max(entries4.size(), entries6.size()) >= kHashAheadOfScanEntries)) return scanned();

    // 4. All of one shape in each family: a hash table per family, no trie.
    if (hash) try {
      auto exact4 = ExactMatch::build(entries4, false);
      auto exact6 = ExactMatch::build(entries6, true);
      if ((entries4.empty() || exact4 != nullptr) && (entries6.empty() || exact6 != nullptr)) {
        c->exact4_ = std::move(exact4);
        c->exact6_ = std::move(exact6);
        return c;
      }
    } catch (const std::bad_alloc&) {
      return out_of_memory(rules, sizes, "building the exact-match tables");
    }
    if (scan) return scanned();  // a few entries of several shapes

    // 5. The tries, each built aside; the Classifier frees whatever was made if a step fails.
    if (v4.entries != 0)
      if (auto error = build_family<Acl4Rule>(c->ipv4_, v4, defs4(), rules, expansions, sizes)) return *error;
    if (v6.entries != 0)
      if (auto error = build_family<Acl6Rule>(c->ipv6_, v6, defs6(), rules, expansions, sizes)) return *error;
    return c;
  } catch (const std::bad_alloc&) {
    return out_of_memory(rules, sizes, "expanding the rules");
  }
}

Classifier::~Classifier() {
  if (ipv4_ != nullptr) rte_acl_free(ipv4_);
  if (ipv6_ != nullptr) rte_acl_free(ipv6_);
}

// Each packet against the entries of its family, in rule order; the first that matches is its rule.
void Classifier::scan(std::span<const PacketView> views, std::span<const Parsed> parsed,
                      std::span<std::uint32_t> rules) const noexcept {
  // The first entry a packet matches, with its family's address words as a constant: the IPv4 loop
  // compares one word of each address, unrolled (a count known only at run time cost 20 instructions a
  // packet, callgrind, issue 23). `addresses_only`: the family's entries test addresses and protocol
  // alone, so the other fields are neither gathered nor compared (one IPv4 entry: 59 instructions a
  // packet before, 35 after; callgrind, issue 23).
  const auto first_match = [](auto words_constant, auto addresses_only_constant, std::span<const ScanEntry> entries,
                              const Parsed& p, std::uint32_t port) __attribute__((always_inline)) {
    constexpr unsigned words = decltype(words_constant)::value;
    constexpr bool addresses_only = decltype(addresses_only_constant)::value;
    std::uint32_t src[words], dst[words];
    for (unsigned w = 0; w < words; ++w) {
      std::memcpy(&src[w], p.src.data() + 4 * w, 4);
      std::memcpy(&dst[w], p.dst.data() + 4 * w, 4);
      src[w] = ntohl(src[w]);
      dst[w] = ntohl(dst[w]);
    }
    const std::uint32_t vlan_dscp =
        addresses_only ? 0 : (p.has_vlan ? kTaggedBit : 0) | (std::uint32_t{p.vlan_id} << kVlanShift) | p.dscp;
    for (const ScanEntry& e : entries) {
      bool hit = (p.protocol & e.protocol_mask) == e.protocol;
      if constexpr (!addresses_only)
        hit = hit && (vlan_dscp & e.vlan_dscp_mask) == e.vlan_dscp && e.ingress_first <= port && port <= e.ingress_last &&
              e.src_first <= p.src_port && p.src_port <= e.src_last && e.dst_first <= p.dst_port && p.dst_port <= e.dst_last;
      for (unsigned w = 0; hit && w < words; ++w)
        hit = (src[w] & e.src_mask[w]) == e.src[w] && (dst[w] & e.dst_mask[w]) == e.dst[w];
      if (hit) return e.rule;
    }
    return kNoRule;
  };
  using V4 = std::integral_constant<unsigned, 1>;
  using V6 = std::integral_constant<unsigned, 4>;
  using AddressesOnly = std::true_type;
  using EveryField = std::false_type;
  // The loop in four forms, each family's scan chosen once a burst, not a packet.
  const auto each = [&](auto addresses_only4, auto addresses_only6) __attribute__((always_inline)) {
    for (std::size_t i = 0; i < views.size(); ++i) {
      const Parsed& p = parsed[i];
      const std::uint16_t family = error_and_l3(p);
      if (family == kIpv4Parsed) [[likely]]
        rules[i] = first_match(V4{}, addresses_only4, scan4_, p, views[i].port);
      else if (family == kIpv6Parsed)
        rules[i] = first_match(V6{}, addresses_only6, scan6_, p, views[i].port);
      else
        rules[i] = kNoRule;  // malformed or not IP
    }
  };
  // One IPv4 entry of addresses and protocol, no IPv6 one (a set of one rule, as the daemon
  // benchmark's): the entry copied to the stack, where no store to `rules` can alias it, so that its
  // fields stay in registers for the burst instead of being loaded again for every packet.
  if (only_) {
    const OnlyEntry only = *only_;
    for (std::size_t i = 0; i < views.size(); ++i) rules[i] = only.classify(parsed[i]);
    return;
  }
  if (addresses_only4_) {
    if (addresses_only6_) each(AddressesOnly{}, AddressesOnly{});
    else each(AddressesOnly{}, EveryField{});
  } else {
    if (addresses_only6_) each(EveryField{}, AddressesOnly{});
    else each(EveryField{}, EveryField{});
  }
}

// Each packet's fields under its family's shape, hashed and their slots prefetched; then looked up.
void Classifier::look_up(std::span<const PacketView> views, std::span<const Parsed> parsed,
                         std::span<std::uint32_t> rules) const noexcept {
  std::uint64_t keys[kMaxBurst][ExactMatch::kKeyWords];
  std::uint64_t hashes[kMaxBurst];
  const ExactMatch* tables[kMaxBurst];
  for (std::size_t i = 0; i < views.size(); ++i) {
    const Parsed& p = parsed[i];
    const std::uint16_t family = error_and_l3(p);
    tables[i] = family == kIpv4Parsed ? exact4_.get() : family == kIpv6Parsed ? exact6_.get() : nullptr;
    if (tables[i] == nullptr) continue;  // malformed, not IP, or no entry of its family
    const std::uint32_t vlan_dscp = (p.has_vlan ? kTaggedBit : 0) | (std::uint32_t{p.vlan_id} << kVlanShift) | p.dscp;
    hashes[i] = tables[i]->hash(p, views[i].port, vlan_dscp, keys[i]);
    tables[i]->prefetch(hashes[i]);
  }
  for (std::size_t i = 0; i < views.size(); ++i)
    rules[i] = tables[i] == nullptr ? kNoRule : tables[i]->lookup(keys[i], hashes[i]);
}

void Classifier::classify(std::span<const PacketView> views, std::span<const Parsed> parsed,
                          std::span<std::uint32_t> rules) const {
  const std::size_t n = views.size();
  assert(n <= kMaxBurst && parsed.size() >= n && rules.size() >= n);
  if (scanned_) {
    scan(views.first(n), parsed.first(n), rules.first(n));
    return;
  }
  if (hashed()) {
    look_up(views.first(n), parsed.first(n), rules.first(n));
    return;
  }
  Key4 keys4[kMaxBurst];
  Key6 keys6[kMaxBurst];
  const std::uint8_t* data4[kMaxBurst];
  const std::uint8_t* data6[kMaxBurst];
  std::uint32_t result4[kMaxBurst], result6[kMaxBurst];
  std::uint8_t slot4[kMaxBurst], slot6[kMaxBurst];
  std::uint32_t n4 = 0, n6 = 0;

  for (std::size_t i = 0; i < n; ++i) {
    rules[i] = kNoRule;
    const Parsed& p = parsed[i];
    if (p.error != ParseError::none) continue;
    const std::uint32_t vlan_dscp =
        htonl((p.has_vlan ? kTaggedBit : 0) | (std::uint32_t{p.vlan_id} << kVlanShift) | p.dscp);
    if (p.l3 == L3::ipv4 && ipv4_ != nullptr) {
      Key4& k = keys4[n4];
      k = Key4{};
      k.protocol = p.protocol;
      std::memcpy(&k.src, p.src.data(), 4);
      std::memcpy(&k.dst, p.dst.data(), 4);
      k.src_port = htons(p.src_port);
      k.dst_port = htons(p.dst_port);
      k.ingress_port = htonl(views[i].port);
      k.vlan_dscp = vlan_dscp;
      data4[n4] = reinterpret_cast<const std::uint8_t*>(&k);
      slot4[n4++] = static_cast<std::uint8_t>(i);
    } else if (p.l3 == L3::ipv6 && ipv6_ != nullptr) {
      Key6& k = keys6[n6];
      k = Key6{};
      k.protocol = p.protocol;
      std::memcpy(k.src, p.src.data(), 16);
      std::memcpy(k.dst, p.dst.data(), 16);
      k.src_port = htons(p.src_port);
      k.dst_port = htons(p.dst_port);
      k.ingress_port = htonl(views[i].port);
      k.vlan_dscp = vlan_dscp;
      data6[n6] = reinterpret_cast<const std::uint8_t*>(&k);
      slot6[n6++] = static_cast<std::uint8_t>(i);
    }
  }
  if (n4 != 0) {
    rte_acl_classify(ipv4_, data4, result4, n4, 1);
    for (std::uint32_t j = 0; j < n4; ++j)
      if (result4[j] != 0) rules[slot4[j]] = result4[j] - 1;
  }
  if (n6 != 0) {
    rte_acl_classify(ipv6_, data6, result6, n6, 1);
    for (std::uint32_t j = 0; j < n6; ++j)
      if (result6[j] != 0) rules[slot6[j]] = result6[j] - 1;
  }
}

}  // namespace tricolor::dataplane
