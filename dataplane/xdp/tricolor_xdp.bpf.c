// SPDX-License-Identifier: GPL-2.0
/* tricolor's policy engine as an XDP program: parse, first match, meter, act, count, as the DPDK
 * engine's worker does (dataplane/engine/worker.cpp) one packet at a time. Every meter check is the
 * 64-bit integer arithmetic of policer/meter.hpp and policer/limiters.hpp on the same translated
 * profile; tests/dataplane/xdp/ checks colors, frames and counters against the engine packet by packet.
 * GPL: bpf_spin_lock and bpf_ktime_get_ns are GPL-only helpers. */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "xdp_maps.h"

char LICENSE[] SEC("license") = "GPL";

/* Set through the skeleton before load: the clock is txdp_test_clock[0] instead of bpf_ktime_get_ns
 * (the exactness tests drive time packet by packet through BPF_PROG_TEST_RUN). */
const volatile __u8 test_clock = 0;

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} txdp_current SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, TXDP_GENERATIONS);
  __type(key, __u32);
  __type(value, struct txdp_set);
} txdp_sets SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, TXDP_GENERATIONS * TXDP_MAX_RULES);
  __type(key, __u32);
  __type(value, struct txdp_rule);
} txdp_rules SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, TXDP_MAX_RULES);
  __type(key, __u32);
  __type(value, struct txdp_meter);
} txdp_aggregates SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, TXDP_MAX_RULES);
  __type(key, __u32);
  __type(value, struct txdp_meter);
} txdp_parents SEC(".maps");

/* Preallocated (no BPF_F_NO_PREALLOC): an insert never allocates, and never evicts a live meter. The
 * loader sets max_entries to the key budget before load. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1024);
  __type(key, struct txdp_key);
  __type(value, struct txdp_keyed_meter);
} txdp_keys SEC(".maps");

/* Mappable: the control side's sweep gives a deleted key's place back with an atomic decrement on
 * the same words the program's atomic adds use (xdp_program.cpp). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, TXDP_MAX_RULES);
  __uint(map_flags, BPF_F_MMAPABLE);
  __type(key, __u32);
  __type(value, struct txdp_key_live);
} txdp_key_live SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, TXDP_MAX_RULES);
  __type(key, __u32);
  __type(value, struct txdp_rule_counters);
} txdp_counters SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct txdp_default_counters);
} txdp_defaults SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} txdp_test_clock SEC(".maps");

/* ---------------------------------------------------------------- parse (dataplane/engine/parse.cpp) */

enum parse_error {
  PE_NONE = 0,
  PE_TRUNCATED_ETHERNET = 1,
  PE_TRUNCATED_VLAN = 2,
  PE_TOO_MANY_VLANS = 3,
  PE_TRUNCATED_IPV4 = 4,
  PE_BAD_IPV4_VERSION = 5,
  PE_BAD_IPV4_HEADER_LENGTH = 6,
  PE_BAD_IPV4_TOTAL_LENGTH = 7,
  PE_TRUNCATED_IPV6 = 8,
  PE_BAD_IPV6_VERSION = 9,
  PE_BAD_IPV6_PAYLOAD_LENGTH = 10,
  PE_TRUNCATED_IPV6_EXTENSION = 11,
  PE_IPV6_EXTENSION_CHAIN_TOO_LONG = 12,
  PE_TRUNCATED_L4 = 13,
};

enum l3_kind { L3_NONE = 0, L3_IPV4 = 4, L3_IPV6 = 6 };

#define ETHERNET_HEADER_LENGTH 14
#define MAX_FRAME_VLANS 2
#define IPV4_MIN_HEADER_LENGTH 20
#define IPV6_HEADER_LENGTH 40
#define MAX_IPV6_EXTENSIONS 8
#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_SCTP 132
/* Offsets beyond this lie outside any frame XDP hands a program (one page, no fragments): a read there
 * fails its bounds check as it would in the engine, and the bound lets the verifier check the access. */
#define MAX_OFFSET 0x1000
#define MAX_BURST_TOKENS ((__u64)1 << 30) /* policer::kMaxBurst */

struct parsed {
  __u32 error;
  __u32 l3;
  __u8 has_vlan;
  __u8 pcp;
  __u16 vlan_id;
  __u32 l3_offset;
  __u32 l3_length;
  __u8 protocol;
  __u8 dscp;
  __u8 fragment;
  __u8 pad;
  __u16 src_port;
  __u16 dst_port;
  __u8 src[16];
  __u8 dst[16];
};

/* The bytes [offset, offset + length) of the frame, or NULL when they are not all there. */
static __always_inline __u8 *bytes_at(void *data, void *data_end, __u32 offset, __u32 length) {
  if (offset > MAX_OFFSET) return NULL;
  __u8 *p = (__u8 *)data + (offset & (MAX_OFFSET * 2 - 1));
  if ((void *)(p + length) > data_end) return NULL;
  return p;
}

static __always_inline __u16 be16(const __u8 *p) { return (__u16)((p[0] << 8) | p[1]); }

static __always_inline int is_vlan_tpid(__u16 t) { return t == 0x8100 || t == 0x88a8 || t == 0x9100; }

static __always_inline int is_ipv6_extension(__u8 nh) {
  return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60;
}

static __always_inline int has_ports(__u8 protocol) {
  return protocol == PROTO_TCP || protocol == PROTO_UDP || protocol == PROTO_SCTP;
}

static __always_inline __u32 parse_ports(void *data, void *data_end, __u32 readable_end, __u32 l4, struct parsed *out) {
  if (!has_ports(out->protocol)) return PE_NONE;
  if (l4 + 4 > readable_end) return PE_TRUNCATED_L4;
  const __u8 *p = bytes_at(data, data_end, l4, 4);
  if (!p) return PE_TRUNCATED_L4; /* cannot happen: readable_end <= captured */
  out->src_port = be16(p);
  out->dst_port = be16(p + 2);
  return PE_NONE;
}

static __always_inline __u32 parse_ipv4(void *data, void *data_end, __u32 captured, __u32 wire_l3, struct parsed *out) {
  const __u32 l3 = out->l3_offset;
  const __u32 captured_l3 = captured - l3;
  if (captured_l3 < IPV4_MIN_HEADER_LENGTH) return PE_TRUNCATED_IPV4;
  const __u8 *ip = bytes_at(data, data_end, l3, IPV4_MIN_HEADER_LENGTH);
  if (!ip) return PE_TRUNCATED_IPV4;
  if ((ip[0] >> 4) != 4) return PE_BAD_IPV4_VERSION;
  const __u32 header_length = (ip[0] & 0x0f) * 4;
  if (header_length < IPV4_MIN_HEADER_LENGTH) return PE_BAD_IPV4_HEADER_LENGTH;
  if (captured_l3 < header_length) return PE_TRUNCATED_IPV4;
  out->dscp = ip[1] >> 2;
  out->protocol = ip[9];
  __builtin_memcpy(out->src, ip + 12, 4);
  __builtin_memcpy(out->dst, ip + 16, 4);
  const __u32 total_length = be16(ip + 2);
  if (total_length < header_length || total_length > wire_l3) return PE_BAD_IPV4_TOTAL_LENGTH;
  out->l3_length = total_length;
  if ((be16(ip + 6) & 0x3fff) != 0) { /* more fragments, or an offset: every fragment alike, no ports */
    out->fragment = 1;
    return PE_NONE;
  }
  const __u32 datagram_end = l3 + total_length;
  const __u32 readable_end = captured < datagram_end ? captured : datagram_end;
  return parse_ports(data, data_end, readable_end, l3 + header_length, out);
}

static __always_inline __u32 parse_ipv6(void *data, void *data_end, __u32 captured, __u32 wire_l3, struct parsed *out) {
  const __u32 l3 = out->l3_offset;
  if (captured - l3 < IPV6_HEADER_LENGTH) return PE_TRUNCATED_IPV6;
  const __u8 *ip = bytes_at(data, data_end, l3, IPV6_HEADER_LENGTH);
  if (!ip) return PE_TRUNCATED_IPV6;
  if ((ip[0] >> 4) != 6) return PE_BAD_IPV6_VERSION;
  out->dscp = (__u8)(((ip[0] & 0x0f) << 4) | (ip[1] >> 4)) >> 2;
  __builtin_memcpy(out->src, ip + 8, 16);
  __builtin_memcpy(out->dst, ip + 24, 16);
  const __u32 datagram_length = IPV6_HEADER_LENGTH + be16(ip + 4);
  if (datagram_length > wire_l3) return PE_BAD_IPV6_PAYLOAD_LENGTH;
  out->l3_length = datagram_length; /* at most 65575 only with LRO, which XDP does not see */
  if (out->l3_length > 0xffff) out->l3_length = 0xffff;
  const __u32 datagram_end = l3 + datagram_length;
  const __u32 readable_end = captured < datagram_end ? captured : datagram_end;
  __u8 next_header = ip[6];
  __u32 cursor = l3 + IPV6_HEADER_LENGTH;
  for (__u32 headers = 0; headers <= MAX_IPV6_EXTENSIONS; ++headers) {
    if (!is_ipv6_extension(next_header)) break;
    if (headers == MAX_IPV6_EXTENSIONS) return PE_IPV6_EXTENSION_CHAIN_TOO_LONG;
    if (cursor + 2 > readable_end) return PE_TRUNCATED_IPV6_EXTENSION;
    const __u8 *ext = bytes_at(data, data_end, cursor, 2);
    if (!ext) return PE_TRUNCATED_IPV6_EXTENSION;
    const __u32 length_field = ext[1];
    __u32 length = (length_field + 1) * 8;
    if (next_header == 51) length = (length_field + 2) * 4; /* AH, RFC 4302 */
    if (next_header == 44) length = 8;
    if (cursor + length > readable_end) return PE_TRUNCATED_IPV6_EXTENSION;
    if (next_header == 44) {
      const __u8 *frag = bytes_at(data, data_end, cursor, 8);
      if (!frag) return PE_TRUNCATED_IPV6_EXTENSION;
      if ((be16(frag + 2) & 0xfff9) != 0) { /* offset or more fragments: not an atomic fragment */
        out->fragment = 1;
        out->protocol = frag[0];
        return PE_NONE;
      }
    }
    next_header = ext[0];
    cursor += length;
  }
  out->protocol = next_header;
  return parse_ports(data, data_end, readable_end, cursor, out);
}

static __always_inline __u32 parse_frame(void *data, void *data_end, struct parsed *out) {
  if (!out) return PE_TRUNCATED_ETHERNET;
  const __u32 captured = (__u32)((__u8 *)data_end - (__u8 *)data);
  if (captured < ETHERNET_HEADER_LENGTH) return PE_TRUNCATED_ETHERNET;
  __u32 type_offset = 12;
  const __u8 *t = bytes_at(data, data_end, type_offset, 2);
  if (!t) return PE_TRUNCATED_ETHERNET;
  __u16 ether_type = be16(t);
  __u32 frame_vlans = 0;
  for (int i = 0; i <= MAX_FRAME_VLANS; ++i) {
    if (!is_vlan_tpid(ether_type)) break;
    if (frame_vlans == MAX_FRAME_VLANS) return PE_TOO_MANY_VLANS;
    const __u8 *tag = bytes_at(data, data_end, type_offset + 2, 4);
    if (!tag) return PE_TRUNCATED_VLAN;
    if (frame_vlans == 0) {
      const __u16 tci = be16(tag);
      out->vlan_id = tci & 0x0fff;
      out->pcp = (__u8)(tci >> 13);
      out->has_vlan = 1;
    }
    ++frame_vlans;
    type_offset += 4;
    ether_type = be16(tag + 2);
  }
  const __u32 l3 = type_offset + 2;
  out->l3_offset = l3;
  const __u32 wire_l3 = captured > l3 ? captured - l3 : 0;
  if (ether_type == 0x0800) {
    out->l3 = L3_IPV4;
    return parse_ipv4(data, data_end, captured, wire_l3, out);
  }
  if (ether_type == 0x86dd) {
    out->l3 = L3_IPV6;
    return parse_ipv6(data, data_end, captured, wire_l3, out);
  }
  return PE_NONE; /* ARP, LACP, ...: not IP */
}

/* Global functions (parse, match, remark) are verified once each, on their own, rather than along every
 * path of the program: without them the verifier's state count explodes past its limit. */
__noinline int txdp_parse(struct xdp_md *ctx, struct parsed *out) {
  void *data = (void *)(long)ctx->data;
  void *data_end = (void *)(long)ctx->data_end;
  return (int)parse_frame(data, data_end, out);
}

/* ---------------------------------------------------------------- match (dataplane/engine/match.hpp) */

static __always_inline int prefix_matches(const __u8 *address, const __u8 *want, const __u8 *mask) {
  __u8 differ = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) differ |= (address[i] & mask[i]) ^ want[i];
  return differ == 0;
}

static __always_inline int in_ranges(const struct txdp_port_range *ranges, __u8 count, __u16 port) {
  if (count == 0) return 1;
#pragma unroll
  for (int i = 0; i < TXDP_MAX_PORT_RANGES; ++i)
    if (i < count && ranges[i].first <= port && port <= ranges[i].last) return 1;
  return 0;
}

static __always_inline int rule_matches(const struct txdp_rule *r, const struct parsed *p) {
  if (r->family != 0 && r->family != p->l3) return 0;
  if ((r->fields & TXDP_MATCH_VLAN) && !(p->has_vlan && p->vlan_id == r->vlan)) return 0;
  if ((r->fields & TXDP_MATCH_SRC) && !prefix_matches(p->src, r->src_addr, r->src_mask)) return 0;
  if ((r->fields & TXDP_MATCH_DST) && !prefix_matches(p->dst, r->dst_addr, r->dst_mask)) return 0;
  if ((r->fields & TXDP_MATCH_PROTOCOL) && p->protocol != r->protocol) return 0;
  if (!in_ranges(r->src_port, r->src_ranges, p->src_port)) return 0;
  if (!in_ranges(r->dst_port, r->dst_ranges, p->dst_port)) return 0;
  if ((r->fields & TXDP_MATCH_DSCP) && !((r->dscp_set >> (p->dscp & 63)) & 1)) return 0;
  return 1;
}

/* The index of the first rule of `generation` that matches, or -1. */
__noinline int txdp_match(const struct parsed *p, __u32 generation, __u32 count) {
  if (!p) return -1;
  for (__u32 i = 0; i < TXDP_MAX_RULES; ++i) {
    if (i >= count) break;
    const __u32 index = (generation & (TXDP_GENERATIONS - 1)) * TXDP_MAX_RULES + i;
    const struct txdp_rule *r = bpf_map_lookup_elem(&txdp_rules, &index);
    if (!r) break;
    if (rule_matches(r, p)) return (int)index;
  }
  return -1;
}

/* ---------------------------------------------------------------- meters (policer/state.hpp, meter.hpp, limiters.hpp) */

static __always_inline __u64 min64(__u64 a, __u64 b) { return a < b ? a : b; }
static __always_inline __u64 max64(__u64 a, __u64 b) { return a > b ? a : b; }

static __always_inline __u64 elapsed(struct txdp_state *s, __u64 now) {
  const __u64 last = s->last;
  const __u64 latest = max64(now, last);
  s->last = latest;
  return latest - last;
}

static __always_inline __u64 refill(__u64 level, const struct txdp_profile *p, int b, __u64 dt) {
  return min64(level + p->rate[b] * min64(dt, p->fill_ticks[b]), p->size[b]);
}

/* All ones when level < cost (both below 2^63), as detail::short_of. */
static __always_inline __u64 short_of(__u64 level, __u64 cost) { return (__u64)(((__s64)level - (__s64)cost) >> 63); }
static __always_inline __u64 not_green(__u8 in) { return ~(__u64)(((__s64)in - 1) >> 63); }
static __always_inline __u64 is_red(__u8 in) { return ~(__u64)(((__s64)in - 2) >> 63); }

static __always_inline __u64 cost_of(const struct txdp_profile *p, __u32 length) {
  return min64(length, MAX_BURST_TOKENS + 1) * p->cost_per_byte + p->cost_per_packet;
}

static __always_inline void advance(struct txdp_state *s, const struct txdp_profile *p, __u64 now) {
  switch (p->algorithm) {
    case TXDP_SRTCM: {
      const __u64 dt = min64(elapsed(s, now), p->fill_ticks[0]);
      const __u64 c = s->level[0] + p->rate[0] * dt;
      s->level[1] = min64(s->level[1] + (max64(c, p->size[0]) - p->size[0]), p->size[1]);
      s->level[0] = min64(c, p->size[0]);
      break;
    }
    case TXDP_TRTCM:
    case TXDP_TRTCM_4115: {
      const __u64 dt = elapsed(s, now);
      s->level[0] = refill(s->level[0], p, 0, dt);
      s->level[1] = refill(s->level[1], p, 1, dt);
      break;
    }
    case TXDP_FIXED_WINDOW: {
      const __u64 dt = elapsed(s, now);
      const int closed = dt >= s->level[1];
      s->level[0] = closed ? p->limit : s->level[0];
      s->level[1] = closed ? p->window_ticks : s->level[1] - dt;
      break;
    }
    case TXDP_GCRA: {
      const __u64 paid = p->rate[0] * min64(elapsed(s, now), p->fill_ticks[0]);
      s->level[0] -= min64(s->level[0], paid);
      break;
    }
    default: /* 1R2C */
      s->level[0] = refill(s->level[0], p, 0, elapsed(s, now));
      break;
  }
}

static __always_inline __u8 decide(struct txdp_state *s, const struct txdp_profile *p, __u64 cost, __u8 in) {
  switch (p->algorithm) {
    case TXDP_SRTCM:
    case TXDP_TRTCM_4115: {
      const __u64 c_short = short_of(s->level[0], cost) | not_green(in);
      const __u64 e_short = short_of(s->level[1], cost) | is_red(in);
      s->level[1] -= cost & c_short & ~e_short;
      s->level[0] -= cost & ~c_short;
      return (__u8)((c_short & 1) + (c_short & e_short & 1));
    }
    case TXDP_TRTCM: {
      const __u64 p_short = short_of(s->level[1], cost) | is_red(in);
      const __u64 c_short = short_of(s->level[0], cost) | not_green(in) | p_short;
      s->level[1] -= cost & ~p_short;
      s->level[0] -= cost & ~c_short;
      return (__u8)((c_short & 1) + (p_short & 1));
    }
    case TXDP_GCRA: {
      const __u64 limit = p->limit, lead = s->level[0];
      const __u64 room = limit - min64(lead, limit);
      const __u64 refused = short_of(limit, lead) | short_of(room, cost) | not_green(in);
      s->level[0] += cost & ~refused;
      return (__u8)(refused & 2);
    }
    default: { /* 1R2C and the fixed window: take from level[0] */
      const __u64 c_short = short_of(s->level[0], cost) | not_green(in);
      s->level[0] -= cost & ~c_short;
      return (__u8)(c_short & 2);
    }
  }
}

/* A blind check is an aware one with a green input: not_green and is_red are then 0 (meter.hpp). */
static __always_inline __u8 check(struct txdp_state *s, const struct txdp_profile *p, __u64 now, __u32 length, __u8 in) {
  advance(s, p, now);
  return decide(s, p, cost_of(p, length), in);
}

static __always_inline void full_state(struct txdp_state *s, const struct txdp_profile *p, __u64 now) {
  s->level[0] = p->size[0];
  s->level[1] = p->size[1];
  s->last = now;
}

/* policer::change_profile: within a family the levels carry over (credited at the old rate up to
 * `now`, clamped to the new sizes; a window keeps its end; GCRA its lead), else the meter starts full. */
static __always_inline void change_profile(struct txdp_state *s, const struct txdp_profile *from,
                                           const struct txdp_profile *to, __u64 now) {
  if (from->algorithm != to->algorithm || from->unit != to->unit) {
    full_state(s, to, max64(s->last, now));
    return;
  }
  switch (from->algorithm) {
    case TXDP_FIXED_WINDOW: {
      const __u64 dt = elapsed(s, now);
      const __u64 used = from->limit - s->level[0];
      const int closed = dt >= s->level[1];
      s->level[1] = closed ? 0 : s->level[1] - dt;
      s->level[0] = to->limit - (closed ? 0 : min64(used, to->limit));
      break;
    }
    case TXDP_GCRA:
      advance(s, from, now);
      break;
    default:
      advance(s, from, now);
      s->level[0] = min64(s->level[0], to->size[0]);
      s->level[1] = min64(s->level[1], to->size[1]);
      break;
  }
}

/* ---------------------------------------------------------------- actions (dataplane/engine/actions.cpp) */

static __always_inline __u16 fold_carries(__u32 sum) {
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return (__u16)sum;
}

__noinline int txdp_remark(struct xdp_md *ctx, const struct parsed *p, __u32 dscp) {
  void *data = (void *)(long)ctx->data;
  void *data_end = (void *)(long)ctx->data_end;
  if (!p || p->error != PE_NONE || dscp > 63) return 0;
  if (p->l3 == L3_IPV4) {
    __u8 *ip = bytes_at(data, data_end, p->l3_offset, 12);
    if (!ip) return 0;
    const __u8 tos = (__u8)((dscp << 2) | (ip[1] & 0x03));
    if (tos == ip[1]) return 1; /* nothing changes, checksum included */
    const __u16 old_word = be16(ip);
    const __u16 new_word = (__u16)((old_word & 0xff00) | tos);
    const __u16 old_checksum = be16(ip + 10);
    /* RFC 1624 eqn. 3, as the engine: HC' = ~(~HC + ~m + m') */
    const __u32 sum = (~(__u32)old_checksum & 0xffff) + (~(__u32)old_word & 0xffff) + new_word;
    const __u16 checksum = (__u16)~fold_carries(sum);
    ip[10] = (__u8)(checksum >> 8);
    ip[11] = (__u8)checksum;
    ip[1] = tos;
    return 1;
  }
  if (p->l3 == L3_IPV6) {
    __u8 *ip = bytes_at(data, data_end, p->l3_offset, 2);
    if (!ip) return 0;
    const __u8 ecn = (ip[1] >> 4) & 0x03;
    const __u8 traffic_class = (__u8)((dscp << 2) | ecn);
    ip[0] = (__u8)((ip[0] & 0xf0) | (traffic_class >> 4));
    ip[1] = (__u8)((ip[1] & 0x0f) | ((traffic_class & 0x0f) << 4));
    return 1;
  }
  return 0;
}

/* Applies an action; returns the XDP verdict. Forwarded packets go on to the kernel's stack (XDP_PASS):
 * the policer sits in front of the host, not between two ports. */
static __always_inline int act(struct xdp_md *ctx, const struct parsed *p, const struct txdp_action *a) {
  if (a->drop) return XDP_DROP;
  if (a->remark) txdp_remark(ctx, p, a->dscp);
  return XDP_PASS;
}

/* ---------------------------------------------------------------- the packet */

static __always_inline __u8 fixed_dscp_color(__u8 dscp) {
  switch (dscp) {
    case 12: case 20: case 28: case 36: return TXDP_YELLOW;
    case 14: case 22: case 30: case 38: return TXDP_RED;
    default: return TXDP_GREEN;
  }
}

static __always_inline __u8 input_color(const struct txdp_rule *r, const struct parsed *p) {
  if (r->input == TXDP_INPUT_DSCP) return fixed_dscp_color(p->dscp);
  if (r->input == TXDP_INPUT_MAPPED) {
    if (r->has_pcp_map && p->has_vlan) return r->pcp_map[p->pcp & 7];
    if (r->has_dscp_map) return r->dscp_map[p->dscp & 63];
    return r->input_default;
  }
  return TXDP_GREEN;
}

static __always_inline __u32 metered_length(const struct txdp_rule *r, const struct parsed *p, __u32 wire) {
  __s64 base = wire; /* L2: XDP sees the frame as received, FCS excluded */
  if (r->length_base == TXDP_LENGTH_L1) base = (__s64)wire + 24;
  else if (r->length_base == TXDP_LENGTH_L3) base = p->l3_length;
  base += r->length_adjust;
  if (base < 0) base = 0;
  return (__u32)base;
}

/* The address masked to the rule's key prefix (the masks are the control side's: no loop over bits). */
static __always_inline void copy_masked(__u8 *out, const __u8 *address, const __u8 *mask) {
#pragma unroll
  for (int i = 0; i < 16; ++i) out[i] = address[i] & mask[i];
}

/* dataplane/engine/keys.hpp: make_key, byte for byte. */
static __always_inline void make_key(const struct txdp_rule *r, const struct parsed *p, struct txdp_key *k) {
  __builtin_memset(k, 0, sizeof(*k));
  k->slot = r->slot;
  const int ipv6 = p->l3 == L3_IPV6;
  const __u8 *mask = ipv6 ? r->key_mask6 : r->key_mask4; /* IPv4: 4 bytes, the rest of the mask 0 */
  const __u8 kind = r->key_kind;
  /* family 0, protocol 1, ports 2..5, src 8, dst 12 (IPv4) or 24 (IPv6). IPv4 copies 16 masked bytes
   * too, the 12 past the address zero: the source's spill into the destination's place is overwritten
   * by the destination, copied after it, and the destination's spill lands on zeros. */
  k->key[0] = ipv6 ? 6 : 4;
  if (kind == TXDP_KEY_SRC || kind == TXDP_KEY_SRC_DPORT || kind == TXDP_KEY_FIVE_TUPLE)
    copy_masked(k->key + 8, p->src, mask);
  if (kind == TXDP_KEY_DST || kind == TXDP_KEY_FIVE_TUPLE) {
    if (ipv6) copy_masked(k->key + 24, p->dst, mask);
    else copy_masked(k->key + 12, p->dst, mask);
  }
  if (kind == TXDP_KEY_FIVE_TUPLE) {
    k->key[1] = p->protocol;
    k->key[2] = (__u8)(p->src_port >> 8);
    k->key[3] = (__u8)p->src_port;
  }
  if (kind == TXDP_KEY_SRC_DPORT || kind == TXDP_KEY_FIVE_TUPLE) {
    k->key[4] = (__u8)(p->dst_port >> 8);
    k->key[5] = (__u8)p->dst_port;
  }
}

/* The profile change i led to: the next change's `before`, or the current profile after the last. */
static __always_inline const struct txdp_profile *after(const struct txdp_history *h, __u32 i,
                                                      const struct txdp_profile *current) {
  return i + 1 < h->count && i + 1 < TXDP_PROFILE_HISTORY ? &h->changes[(i + 1) & (TXDP_PROFILE_HISTORY - 1)].before
                                                          : current;
}

/* A shared meter (several CPUs check it, so its last tick does not tell which changes it saw): the
 * changes after its version, each at its tick; one it can no longer know: afresh (catch_up_shared). */
static __always_inline void catch_up_shared(struct txdp_meter *m, const struct txdp_history *h,
                                            const struct txdp_profile *current, __u64 now) {
  if (m->version >= h->version) return;
  const int exact = h->forgotten_version <= m->version;
  for (__u32 i = 0; exact && i < TXDP_PROFILE_HISTORY; ++i) {
    if (i >= h->count) break;
    const struct txdp_change *c = &h->changes[i];
    if (c->version <= m->version) continue;
    change_profile(&m->state, &c->before, after(h, i, current), c->tick);
  }
  if (!exact) full_state(&m->state, current, max64(m->state.last, now));
  m->version = h->version;
}

/* A key (one meter per key): the changes made after its last check (catch_up_key). */
static __always_inline void catch_up_key(struct txdp_state *s, const struct txdp_history *h,
                                         const struct txdp_profile *current, __u64 now) {
  if (h->forgotten_version != 0 && s->last < h->forgotten_tick) {
    full_state(s, current, max64(s->last, now));
    return;
  }
  for (__u32 i = 0; i < TXDP_PROFILE_HISTORY; ++i) {
    if (i >= h->count) break;
    const struct txdp_change *c = &h->changes[i];
    if (s->last < c->tick) change_profile(s, &c->before, after(h, i, current), c->tick);
  }
}

static __always_inline __u8 check_shared(struct txdp_meter *m, const struct txdp_profile *profile,
                                         const struct txdp_history *history, __u64 now, __u32 length, __u8 in) {
  bpf_spin_lock(&m->lock);
  catch_up_shared(m, history, profile, now);
  const __u8 color = check(&m->state, profile, now, length, in);
  bpf_spin_unlock(&m->lock);
  return color;
}

static __always_inline __u64 clock_now(void) {
  if (test_clock) {
    __u32 zero = 0;
    const __u64 *t = bpf_map_lookup_elem(&txdp_test_clock, &zero);
    return t ? *t : 0;
  }
  return bpf_ktime_get_ns();
}

static __always_inline int take_default(struct xdp_md *ctx, const struct parsed *p, __u32 reason,
                                        const struct txdp_set *set, __u32 wire) {
  __u32 zero = 0;
  struct txdp_default_counters *c = bpf_map_lookup_elem(&txdp_defaults, &zero);
  if (!c) return XDP_PASS;
  c->packets += 1;
  c->bytes += wire;
  if (reason == TXDP_REASON_MALFORMED) c->malformed[p->error & (TXDP_MALFORMED_SLOTS - 1)] += 1;
  else if (reason == TXDP_REASON_NON_IP) c->non_ip += 1;
  else c->no_match += 1;
  const int verdict = act(ctx, p, &set->default_action);
  if (verdict == XDP_DROP) {
    c->dropped_packets += 1;
    c->dropped_bytes += wire;
  }
  return verdict;
}

SEC("xdp")
int tricolor_xdp(struct xdp_md *ctx) {
  const __u64 now = clock_now(); /* before any lock is taken */
  const __u32 wire = ctx->data_end - ctx->data; /* the frame as XDP sees it: FCS excluded */

  __u32 zero = 0;
  const __u32 *current = bpf_map_lookup_elem(&txdp_current, &zero);
  if (!current) return XDP_PASS;
  const __u32 generation = *current & (TXDP_GENERATIONS - 1); /* read once: the whole packet sees one set */
  const struct txdp_set *set = bpf_map_lookup_elem(&txdp_sets, &generation);
  if (!set) return XDP_PASS;

  struct parsed p = {};
  p.error = (__u32)txdp_parse(ctx, &p);
  if (p.error != PE_NONE) return take_default(ctx, &p, TXDP_REASON_MALFORMED, set, wire);
  if (p.l3 == L3_NONE) return take_default(ctx, &p, TXDP_REASON_NON_IP, set, wire);

  const int matched = txdp_match(&p, generation, set->rule_count);
  const __u32 rule_index = (__u32)matched;
  const struct txdp_rule *r = matched < 0 ? NULL : bpf_map_lookup_elem(&txdp_rules, &rule_index);
  if (!r) return take_default(ctx, &p, TXDP_REASON_NO_MATCH, set, wire);

  const __u32 slot = r->slot;
  struct txdp_rule_counters *counters = bpf_map_lookup_elem(&txdp_counters, &slot);
  if (!counters) return XDP_PASS;
  const __u8 in = input_color(r, &p);
  const __u32 length = metered_length(r, &p, wire);

  __u8 color = TXDP_RED;
  int table_full = 0;
  if (r->key_kind == TXDP_KEY_NONE) {
    struct txdp_meter *m = bpf_map_lookup_elem(&txdp_aggregates, &slot);
    if (!m) return XDP_PASS;
    color = check_shared(m, &r->profile, &r->history, now, length, in);
  } else {
    struct txdp_key key;
    make_key(r, &p, &key);
    struct txdp_keyed_meter *km = bpf_map_lookup_elem(&txdp_keys, &key);
    if (!km) {
      /* A new key: a place in the rule's capacity is reserved atomically first, so that CPUs racing
       * for the last places never exceed it; then the preallocated entry is inserted, full at `now`. */
      struct txdp_key_live *live = bpf_map_lookup_elem(&txdp_key_live, &slot);
      if (!live) return XDP_PASS;
      const __u64 before = __sync_fetch_and_add(&live->count, 1);
      if (before >= r->key_capacity) {
        __sync_fetch_and_sub(&live->count, 1);
        table_full = 1;
      } else {
        struct txdp_keyed_meter fresh = {};
        full_state(&fresh.state, &r->profile, now);
        const long inserted = bpf_map_update_elem(&txdp_keys, &key, &fresh, BPF_NOEXIST);
        if (inserted != 0) __sync_fetch_and_sub(&live->count, 1); /* another CPU's insert won, or no room */
        else counters->keys_created += 1;
        km = bpf_map_lookup_elem(&txdp_keys, &key);
        if (!km) table_full = 1;
      }
    }
    if (km) {
      bpf_spin_lock(&km->lock);
      struct txdp_state *s = &km->state;
      const __u64 idle = r->idle_ticks;
      if (idle != 0 && now > s->last && now - s->last >= idle) { /* idle past the timeout: afresh */
        full_state(s, &r->profile, now);
        counters->keys_renewed += 1;
      } else if (r->history.count != 0) { /* changes made since its last check, if any */
        catch_up_key(s, &r->history, &r->profile, now);
      }
      color = check(s, &r->profile, now, length, in);
      bpf_spin_unlock(&km->lock);
    }
  }

  if (table_full) {
    counters->table_full += 1;
    if (r->fallback == TXDP_FALLBACK_AGGREGATE) {
      struct txdp_meter *m = bpf_map_lookup_elem(&txdp_aggregates, &slot);
      if (!m) return XDP_PASS;
      color = check_shared(m, &r->profile, &r->history, now, length, in);
    } else {
      /* Unmetered: the default action, or a drop; counted as dropped, not by color. */
      const int verdict = r->fallback == TXDP_FALLBACK_DROP ? XDP_DROP : act(ctx, &p, &set->default_action);
      if (verdict == XDP_DROP) {
        counters->dropped_packets += 1;
        counters->dropped_bytes += wire;
      }
      return verdict;
    }
  }

  if (r->has_parent && color != TXDP_RED) {
    struct txdp_meter *pm = bpf_map_lookup_elem(&txdp_parents, &slot);
    if (!pm) return XDP_PASS;
    color = check_shared(pm, &r->parent_profile, &r->parent_history, now, length, color);
  }

  /* The compiler knows color <= 2 and the verifier does not: the barrier keeps the bound it checks. */
  __u32 out = color;
  asm volatile("" : "+r"(out));
  if (out > TXDP_RED) out = TXDP_RED;
  /* The span metered, as the engine's note_metered: this CPU's first and latest clock. */
  if (counters->packets[0] + counters->packets[1] + counters->packets[2] == 0) counters->first_tick = now;
  if (now > counters->last_tick) counters->last_tick = now;
  counters->packets[out] += 1;
  counters->bytes[out] += wire;
  const int verdict = act(ctx, &p, &r->action[in > TXDP_RED ? TXDP_RED : in][out]);
  if (verdict == XDP_DROP) {
    counters->dropped_packets += 1;
    counters->dropped_bytes += wire;
  }
  return verdict;
}
