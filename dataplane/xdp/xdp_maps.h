/* The XDP dataplane's map layouts: included by the BPF program (tricolor_xdp.bpf.c) and by the C++
 * loader (xdp_policy.cpp), so both sides agree on every byte. Plain C, fixed-width types, explicit
 * padding: the C++ side static_asserts the sizes (xdp_policy.hpp).
 *
 * Maps (README.md in this directory):
 *   txdp_current     ARRAY[1]                 which half of the double-buffered rule set is live
 *   txdp_sets        ARRAY[2]                 per half: rule count and the default action
 *   txdp_rules       ARRAY[2 * MAX_RULES]     per half: the rules, in first-match order
 *   txdp_aggregates  ARRAY[MAX_RULES]         aggregate meters by rule slot, a spin lock in each
 *   txdp_parents     ARRAY[MAX_RULES]         parent meters by rule slot, a spin lock in each
 *   txdp_keys        HASH (preallocated)      per-key meters by (slot, key), a spin lock in each
 *   txdp_key_live    ARRAY[MAX_RULES]         live keys per slot (the rule's capacity is enforced here)
 *   txdp_counters    PERCPU_ARRAY[MAX_RULES]  per rule slot, per color
 *   txdp_defaults    PERCPU_ARRAY[1]          default action, by reason
 *   txdp_test_clock  ARRAY[1]                 the clock when loaded with test_clock set (tests only)
 */
#ifndef TRICOLOR_XDP_MAPS_H
#define TRICOLOR_XDP_MAPS_H

#include <linux/bpf.h> /* struct bpf_spin_lock */
#include <linux/types.h>

/* The most rules one policy may have: the program's first-match loop runs at most this many times. */
#define TXDP_MAX_RULES 64
/* Port ranges per match field (source, destination). */
#define TXDP_MAX_PORT_RANGES 4
/* The two halves of the rule set: the control side fills the idle one, then flips txdp_current. */
#define TXDP_GENERATIONS 2
#define TXDP_KEY_SIZE 40 /* dataplane/engine/keys.hpp: kKeySize, the same layout */
/* ParseError's values (dataplane/engine/packet.hpp), none included; malformed counters by them. */
#define TXDP_PARSE_ERRORS 14
#define TXDP_MALFORMED_SLOTS 16

/* The algorithms the program runs (policer::Algorithm's numbers, so a translation is a check). */
enum txdp_algorithm {
  TXDP_ONE_RATE_TWO_COLOR = 0,
  TXDP_SRTCM = 1,
  TXDP_TRTCM = 2,
  TXDP_TRTCM_4115 = 3,
  TXDP_FIXED_WINDOW = 4,
  TXDP_GCRA = 6,
};

enum txdp_color { TXDP_GREEN = 0, TXDP_YELLOW = 1, TXDP_RED = 2 };
enum txdp_input { TXDP_INPUT_BLIND = 0, TXDP_INPUT_DSCP = 1, TXDP_INPUT_MAPPED = 2 };
enum txdp_length_base { TXDP_LENGTH_L1 = 0, TXDP_LENGTH_L2 = 1, TXDP_LENGTH_L3 = 2 };
enum txdp_key_kind { TXDP_KEY_NONE = 0, TXDP_KEY_SRC = 1, TXDP_KEY_DST = 2, TXDP_KEY_SRC_DPORT = 3, TXDP_KEY_FIVE_TUPLE = 4 };
enum txdp_fallback { TXDP_FALLBACK_AGGREGATE = 0, TXDP_FALLBACK_DEFAULT_ACTION = 1, TXDP_FALLBACK_DROP = 2 };
enum txdp_reason { TXDP_REASON_MALFORMED = 1, TXDP_REASON_NON_IP = 2, TXDP_REASON_NO_MATCH = 3 };

/* Match fields present in a rule (txdp_rule.fields). */
enum txdp_match_field {
  TXDP_MATCH_VLAN = 1u << 0,
  TXDP_MATCH_SRC = 1u << 1,
  TXDP_MATCH_DST = 1u << 2,
  TXDP_MATCH_PROTOCOL = 1u << 3,
  TXDP_MATCH_DSCP = 1u << 4,
};

/* A policer::Profile as the program needs it, translated for hz = 1e9 (bpf_ktime_get_ns). */
struct txdp_profile {
  __u64 size[2];        /* bucket capacities, 1/hz tokens (fixed window: size[0] = limit) */
  __u64 rate[2];        /* refill, 1/hz tokens per tick */
  __u64 fill_ticks[2];  /* gap clamp */
  __u64 cost_per_byte;  /* cost(len) = min(len, 2^30 + 1) * cost_per_byte + cost_per_packet */
  __u64 cost_per_packet;
  __u64 limit;          /* limiters: LimiterConstants::limit */
  __u64 window_ticks;   /* fixed window: LimiterConstants::ticks */
  __u32 algorithm;      /* enum txdp_algorithm */
  __u32 unit;           /* policer::Unit: profiles of one family share algorithm and unit */
};

/* The recent changes of a rule's profile (dataplane/engine/rule_set.hpp, ProfileHistory): what a
 * meter that missed some needs to catch up exactly. Versions count the rule's profile changes from 1. */
#define TXDP_PROFILE_HISTORY 8 /* the engine's kProfileHistory */
struct txdp_change {
  __u64 version;  /* the version the change brought */
  __u64 tick;     /* when it took effect */
  struct txdp_profile before;
};
struct txdp_history {
  __u64 version;            /* of the rule's current profile */
  __u32 count;              /* changes[0 .. count), oldest first */
  __u32 pad;
  __u64 forgotten_version;  /* the newest change dropped to keep TXDP_PROFILE_HISTORY (0: none) */
  __u64 forgotten_tick;
  struct txdp_change changes[TXDP_PROFILE_HISTORY];
};

struct txdp_action {
  __u8 drop;
  __u8 remark; /* set the DSCP (ECN kept; IPv4 checksum fixed) */
  __u8 dscp;
  __u8 pad;
};

struct txdp_port_range {
  __u16 first;
  __u16 last;
};

struct txdp_rule {
  /* ---- match ---- */
  __u32 fields;     /* enum txdp_match_field */
  __u8 family;      /* 0: both; 4 or 6: only that (the rule has a prefix of that family) */
  __u8 protocol;
  __u16 vlan;
  __u8 src_ranges;  /* 0: any port */
  __u8 dst_ranges;
  __u8 pad0[6];
  struct txdp_port_range src_port[TXDP_MAX_PORT_RANGES];
  struct txdp_port_range dst_port[TXDP_MAX_PORT_RANGES];
  __u64 dscp_set;   /* bit d: DSCP d matches */
  __u8 src_addr[16], src_mask[16], dst_addr[16], dst_mask[16]; /* address & mask == addr */
  /* ---- metering ---- */
  __u32 slot;       /* meters, keys and counters: the rule's stable number (< TXDP_MAX_RULES) */
  __u8 input;       /* enum txdp_input */
  __u8 length_base; /* enum txdp_length_base */
  __u8 has_pcp_map;
  __u8 has_dscp_map;
  __s32 length_adjust;
  __u8 input_default;
  __u8 key_kind;    /* enum txdp_key_kind */
  __u8 fallback;    /* enum txdp_fallback */
  __u8 has_parent;
  __u8 pad1[4];
  __u8 key_mask4[16]; /* per-key addresses masked to the rule's prefix: IPv4 (first 4 bytes), IPv6 */
  __u8 key_mask6[16];
  __u32 key_capacity;
  __u32 pad2;
  __u64 idle_ticks; /* a key idle this long is renewed (0: never) */
  __u8 pcp_map[8];
  __u8 dscp_map[64];
  struct txdp_action action[3][3]; /* [input color][output color] */
  __u32 pad3;
  /* ---- live changes ---- */
  struct txdp_profile profile;
  struct txdp_history history;
  struct txdp_profile parent_profile;
  struct txdp_history parent_history;
};

struct txdp_set {
  __u32 rule_count;
  struct txdp_action default_action;
};

/* policer::State: levels and the latest check's tick. */
struct txdp_state {
  __u64 level[2];
  __u64 last;
};

/* A shared meter. The spin lock needs BTF (the program is built with -g). */
struct txdp_meter {
  struct bpf_spin_lock lock;
  __u32 pad;
  __u64 version; /* the rule's profile version the state is at */
  struct txdp_state state;
};

struct txdp_key {
  __u32 slot;
  __u8 key[TXDP_KEY_SIZE];
};

struct txdp_keyed_meter {
  struct bpf_spin_lock lock;
  __u32 pad;
  struct txdp_state state;
};

struct txdp_key_live {
  __u64 count;
};

struct txdp_rule_counters {
  __u64 packets[3];
  __u64 bytes[3];
  __u64 dropped_packets;
  __u64 dropped_bytes;
  __u64 keys_created;
  __u64 keys_renewed;
  __u64 table_full;
  __u64 first_tick; /* this CPU's first and last metered packet's clock (valid once it counted one) */
  __u64 last_tick;
};

struct txdp_default_counters {
  __u64 packets;
  __u64 bytes;
  __u64 non_ip;
  __u64 no_match;
  __u64 malformed[TXDP_MALFORMED_SLOTS]; /* by ParseError */
  __u64 dropped_packets;
  __u64 dropped_bytes;
};

#endif /* TRICOLOR_XDP_MAPS_H */
