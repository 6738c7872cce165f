#pragma once
// NIC steering of per-key rules (RSS): the hash function, key and redirection table (RETA) that make a
// port deliver every packet of one meter key to one RX queue, hence to one worker, so that a worker
// meters the keys its queue brings and no packet is handed to another worker. Computed once from the
// policy and the ports' capabilities, at start-up; slow path only.
//
// What to hash on, and why exactly this:
// - The NIC's hash must be a function of every per-key rule's key: then all packets of a key hash
//   alike and reach one queue. Any field outside a rule's key (a port of a per-source rule) would
//   split that key's packets over queues, and two workers would meter one key.
// - Addresses only, never L4 ports: a NIC hashes an IPv4 fragment on its addresses alone (FRAG_IPV4:
//   only the first fragment carries the L4 header), and ICMP has no ports. Were the ports hashed
//   where a packet has them, a source's TCP packets and its fragments or ICMP would part queues.
// - Per rule, the address fields its key contains: src -> {src}; dst -> {dst}; src_dport -> {src};
//   five_tuple -> {src, dst}. A port hashes every packet the same way, whatever rule it will match,
//   so it hashes on the intersection over all per-key rules. An empty intersection (one rule per
//   source, another per destination) leaves nothing to hash on: steering is off.
// - A field must be whole in every rule that keys on it: a NIC hashes whole addresses, so two
//   sources of one /24 key would hash apart. A rule masking a hashed field (ipv4_prefix below 32 for
//   a rule that can see IPv4, ipv6_prefix below 128 for IPv6) turns steering off.
// - rss_hf is RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_IPV6, plus RTE_ETH_RSS_L3_SRC_ONLY or _DST_ONLY when
//   one field is hashed (neither when both are), and no L4 type. DPDK's types follow Microsoft's
//   RSS: an L4 type (NONFRAG_IPV4_TCP, ...) makes the NIC hash that protocol's packets on their
//   ports too, which is what must not happen; with the IPv4 type alone it hashes every IPv4 packet
//   (TCP, UDP, ICMP, fragments) on its addresses. IPV6_EX is left out: it hashes on the Home Address
//   option and the Routing header's final destination, not the header's addresses that keys hold.
// - Steering is on only when EVERY RX port the daemon polls offers these types and the selector,
//   has at least one RX queue per worker, a RETA of a power of two entries (a NIC indexes it with the
//   hash's low bits) and a hash key long enough for the fields. A key arriving on a steered port and
//   on an unsteered one would be metered by two workers.
//
// Limits: a driver whose types mean something else (one that classifies a TCP packet as
// NONFRAG_IPV4_TCP and leaves it unhashed when that type is off) would put such packets on queue 0;
// packets a NIC does not hash at all (non-IP; IPv6 behind extension headers, tunnels or tag stacks it
// does not parse) land on queue 0 too, apart from the rest of their key. Not tried on hardware here:
// the unit test checks the plan against DPDK's software Toeplitz hash (rte_softrss), itself checked
// against Microsoft's verification vectors, and apply_rss reads back what the port took.
#include <rte_ethdev.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dataplane/engine/packet.hpp"
#include "dataplane/engine/policy.hpp"
#include "policer/expected.hpp"

namespace tricolor::dataplane {

// What a port offers for RSS, from rte_eth_dev_info.
struct RssCapabilities {
  std::uint16_t port = 0;
  std::string driver;                       // for the operator: "port 0 (net_pcap)"
  std::uint64_t flow_type_rss_offloads = 0; // RTE_ETH_RSS_* it can hash on
  std::uint16_t reta_size = 0;              // RETA entries; 0 when it has no RSS
  std::uint8_t hash_key_size = 0;           // bytes
  std::uint16_t max_rx_queues = 0;
};
Expected<RssCapabilities> rss_capabilities(std::uint16_t port);

// The address fields a port hashes.
enum class HashedFields : std::uint8_t { none = 0, src = 1, dst = 2, src_and_dst = 3 };

// A port as the plan configures it.
struct RssPort {
  std::uint16_t port = 0;
  std::uint16_t reta_size = 0;
  std::uint8_t hash_key_size = 0;
};

struct RssPlan {
  bool enabled = false;
  std::string reason;  // why steering is off, for the operator; empty when on
  HashedFields fields = HashedFields::none;
  unsigned queues = 0;  // RX queues per port: one per worker, queue i to worker i
  std::uint64_t rss_hf = 0;
  // The hash key, as long as the longest port's; each port takes its first hash_key_size bytes. The
  // hash of up to 32 bytes of addresses reads only the first 36 key bytes, so all ports hash alike.
  std::vector<std::uint8_t> key;
  // The RETA of the smallest port, queue i % queues at entry i. A port with a larger table (sizes are
  // powers of two) repeats it, so that hash & (size - 1) picks the same queue on every port.
  std::vector<std::uint16_t> reta;
  std::vector<RssPort> ports;
};

// The plan for `rules` on `workers` workers receiving from `ports` (every RX port the daemon polls).
// `key`: the hash key to use, at least as long as the longest port's; empty for a random one
// (getrandom). Random by default: with a fixed, published key (Microsoft's 6d5a56da...) anyone can
// compute which worker a source address lands on and aim a flood of keys at one worker; a key drawn
// at each start makes that placement unpredictable from outside (Toeplitz is linear, so this hides
// the placement, it is not cryptography). --dump-keys shows which worker metered each key;
// steered_queue computes where a packet lands (the unit test's NIC).
RssPlan plan_rss(std::span<const Rule> rules, unsigned workers, std::span<const RssCapabilities> ports,
                 std::span<const std::uint8_t> key = {});

// Sets up `conf` for `port` under an enabled plan: RSS multi-queue mode, the key and rss_hf. The
// conf points into the plan's key: the plan must outlive rte_eth_dev_configure. False when the plan
// is off or does not name the port (conf untouched).
bool fill_rss_conf(const RssPlan& plan, std::uint16_t port, rte_eth_conf& conf);
// The RETA for a port with `reta_size` entries: the plan's, repeated.
std::vector<std::uint16_t> port_reta(const RssPlan& plan, std::uint16_t reta_size);
// Writes the plan's RETA into a started port (rte_eth_dev_rss_reta_update); 0 or a negative errno.
int apply_reta(std::uint16_t port, const RssPlan& plan);
// What to call once the port is started: the key and types again (rte_eth_dev_rss_hash_update: some
// drivers, net_null among them, ignore the key given at configure), the RETA, then both read back.
// An error names what the port would not take or reports otherwise; the port then steers nothing
// that can be trusted and the caller must fall back to handoff. A port that cannot report its hash
// configuration or RETA (-ENOTSUP) is taken at its word.
std::optional<Error> apply_rss(std::uint16_t port, const RssPlan& plan);

// The Toeplitz hash a NIC computes over the address fields of a parsed IP packet with `key`
// (at least 36 bytes): source first, then destination, in network byte order. 0 for non-IP.
std::uint32_t toeplitz_hash(std::span<const std::uint8_t> key, HashedFields fields, const Parsed& packet);
// The RX queue (hence worker) a packet reaches under the plan; 0 when steering is off or the packet is
// not IP (a NIC does not hash it and delivers it to queue 0).
unsigned steered_queue(const RssPlan& plan, const Parsed& packet);

}  // namespace tricolor::dataplane
