#include "dataplane/classifier.hpp"

#include <arpa/inet.h>
#include <rte_acl.h>
#include <rte_errno.h>
#include <rte_memory.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <cstring>
#include <vector>

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

// ---- rule expansion ----

struct Range32 {
  std::uint32_t first, last;
};
struct Bits32 {
  std::uint32_t value, mask;
};

// Consecutive ingress ports merge into ranges; an empty list means any.
std::vector<Range32> ingress_ranges(std::vector<std::uint16_t> ports) {
  if (ports.empty()) return {{0, UINT32_MAX}};
  std::sort(ports.begin(), ports.end());
  std::vector<Range32> out;
  for (std::uint16_t p : ports) {
    if (!out.empty() && out.back().last + 1 >= p) out.back().last = std::max<std::uint32_t>(out.back().last, p);
    else out.push_back({p, p});
  }
  return out;
}

std::vector<PortRange> l4_ranges(const std::vector<PortRange>& ranges) {
  return ranges.empty() ? std::vector<PortRange>{PortRange{}} : ranges;
}

std::vector<Bits32> vlan_dscp_bits(const Match& m) {
  Bits32 base{0, 0};
  if (m.vlan) base = {kTaggedBit | (std::uint32_t{*m.vlan} << kVlanShift), kTaggedBit | (0xfffu << kVlanShift)};
  if (m.dscp.empty()) return {base};
  std::vector<Bits32> out;
  for (std::uint8_t d : m.dscp) out.push_back({base.value | d, base.mask | 0x3fu});
  return out;
}

// Calls emit(ingress, src_ports, dst_ports, vlan_dscp) for every entry of the rule's cross product.
template <class Emit>
void for_each_entry(const Match& m, Emit&& emit) {
  const auto ingress = ingress_ranges(m.ports);
  const auto sports = l4_ranges(m.src_ports);
  const auto dports = l4_ranges(m.dst_ports);
  const auto bits = vlan_dscp_bits(m);
  for (const auto& i : ingress)
    for (const auto& s : sports)
      for (const auto& d : dports)
        for (const auto& b : bits) emit(i, s, d, b);
}

std::size_t entry_count(const Match& m) {
  return ingress_ranges(m.ports).size() * l4_ranges(m.src_ports).size() * l4_ranges(m.dst_ports).size() *
         vlan_dscp_bits(m).size();
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

std::atomic<unsigned> g_context_serial{0};

rte_acl_ctx* make_context(const char* family, std::size_t rules, std::size_t fields, Error& error) {
  // rte_acl_create returns an existing context of the same name: every build needs a fresh name.
  const std::string name = std::string("tricolor-") + family + "-" + std::to_string(g_context_serial++);
  rte_acl_param param{};
  param.name = name.c_str();
  param.socket_id = SOCKET_ID_ANY;
  param.rule_size = static_cast<std::uint32_t>(RTE_ACL_RULE_SZ(fields));
  param.max_rule_num = static_cast<std::uint32_t>(rules);
  rte_acl_ctx* ctx = rte_acl_create(&param);
  if (ctx == nullptr)
    error = Error{"classifier", std::string("cannot create the ") + family + " classifier: " + rte_strerror(rte_errno)};
  return ctx;
}

template <std::size_t N>
bool build_context(rte_acl_ctx* ctx, const std::array<rte_acl_field_def, N>& defs, const char* family, Error& error) {
  rte_acl_config cfg{};
  cfg.num_categories = 1;
  cfg.num_fields = N;
  std::copy(defs.begin(), defs.end(), cfg.defs);
  if (int rc = rte_acl_build(ctx, &cfg); rc != 0) {
    error = Error{"classifier", std::string("cannot build the ") + family + " classifier: " + rte_strerror(-rc)};
    return false;
  }
  return true;
}

}  // namespace

Expected<std::unique_ptr<Classifier>> Classifier::build(std::span<const Rule> rules) {
  std::vector<Acl4Rule> v4;
  std::vector<Acl6Rule> v6;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const Match& m = rules[i].match;
    if (const std::size_t n = entry_count(m); n > kMaxEntriesPerRule) {
      return Error{rules[i].name, "rule " + rules[i].name + " expands to " + std::to_string(n) +
                                      " classifier entries (ports x source ports x destination ports x dscp values); "
                                      "at most " + std::to_string(kMaxEntriesPerRule)};
    }
    const bool ipv6_only = (m.src && m.src->ipv6) || (m.dst && m.dst->ipv6);
    const bool ipv4_only = (m.src && !m.src->ipv6) || (m.dst && !m.dst->ipv6);
    for_each_entry(m, [&](const Range32& ingress, const PortRange& sport, const PortRange& dport, const Bits32& bits) {
      if (!ipv6_only) {
        Acl4Rule r{};
        set_common(r, i, rules.size());
        set_protocol(r.field[f4_protocol], m);
        if (m.src) r.field[f4_src].value.u32 = word(*m.src, 0), r.field[f4_src].mask_range.u32 = m.src->length;
        if (m.dst) r.field[f4_dst].value.u32 = word(*m.dst, 0), r.field[f4_dst].mask_range.u32 = m.dst->length;
        set_range16(r.field[f4_src_port], sport);
        set_range16(r.field[f4_dst_port], dport);
        r.field[f4_ingress].value.u32 = ingress.first;
        r.field[f4_ingress].mask_range.u32 = ingress.last;
        r.field[f4_vlan_dscp].value.u32 = bits.value;
        r.field[f4_vlan_dscp].mask_range.u32 = bits.mask;
        v4.push_back(r);
      }
      if (!ipv4_only) {
        Acl6Rule r{};
        set_common(r, i, rules.size());
        set_protocol(r.field[f6_protocol], m);
        for (unsigned w = 0; w < 4; ++w) {
          if (m.src) r.field[f6_src0 + w].value.u32 = word(*m.src, w), r.field[f6_src0 + w].mask_range.u32 = word_length(*m.src, w);
          if (m.dst) r.field[f6_dst0 + w].value.u32 = word(*m.dst, w), r.field[f6_dst0 + w].mask_range.u32 = word_length(*m.dst, w);
        }
        set_range16(r.field[f6_src_port], sport);
        set_range16(r.field[f6_dst_port], dport);
        r.field[f6_ingress].value.u32 = ingress.first;
        r.field[f6_ingress].mask_range.u32 = ingress.last;
        r.field[f6_vlan_dscp].value.u32 = bits.value;
        r.field[f6_vlan_dscp].mask_range.u32 = bits.mask;
        v6.push_back(r);
      }
    });
  }

  std::unique_ptr<Classifier> c(new Classifier());
  c->entries_ = v4.size() + v6.size();
  Error error;
  if (!v4.empty()) {
    c->ipv4_ = make_context("ipv4", v4.size(), kFields4, error);
    if (c->ipv4_ == nullptr) return error;
    if (rte_acl_add_rules(c->ipv4_, reinterpret_cast<const rte_acl_rule*>(v4.data()), static_cast<std::uint32_t>(v4.size())) != 0)
      return Error{"classifier", "cannot add the IPv4 rules: " + std::string(rte_strerror(rte_errno))};
    if (!build_context(c->ipv4_, defs4(), "IPv4", error)) return error;
  }
  if (!v6.empty()) {
    c->ipv6_ = make_context("ipv6", v6.size(), kFields6, error);
    if (c->ipv6_ == nullptr) return error;
    if (rte_acl_add_rules(c->ipv6_, reinterpret_cast<const rte_acl_rule*>(v6.data()), static_cast<std::uint32_t>(v6.size())) != 0)
      return Error{"classifier", "cannot add the IPv6 rules: " + std::string(rte_strerror(rte_errno))};
    if (!build_context(c->ipv6_, defs6(), "IPv6", error)) return error;
  }
  return c;
}

Classifier::~Classifier() {
  if (ipv4_ != nullptr) rte_acl_free(ipv4_);
  if (ipv6_ != nullptr) rte_acl_free(ipv6_);
}

void Classifier::classify(std::span<const PacketView> views, std::span<const Parsed> parsed,
                          std::span<std::uint32_t> rules) const {
  const std::size_t n = views.size();
  assert(n <= kMaxBurst && parsed.size() >= n && rules.size() >= n);
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
