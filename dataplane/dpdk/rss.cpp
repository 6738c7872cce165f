#include "dataplane/dpdk/rss.hpp"

#include <rte_thash.h>
#include <sys/random.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace tricolor::dataplane {

namespace {

constexpr std::uint64_t kAddressTypes = RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_IPV6;

unsigned count(HashedFields f) noexcept { return std::popcount(static_cast<unsigned>(f)); }
HashedFields operator&(HashedFields a, HashedFields b) noexcept {
  return static_cast<HashedFields>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}
bool has(HashedFields set, HashedFields field) noexcept { return (set & field) == field; }

// The address fields a per-key rule's key holds whole or masked (dataplane/engine/keys.hpp).
HashedFields key_fields(KeyKind kind) noexcept {
  switch (kind) {
    case KeyKind::src:
    case KeyKind::src_dport: return HashedFields::src;
    case KeyKind::dst: return HashedFields::dst;
    case KeyKind::five_tuple: return HashedFields::src_and_dst;
    case KeyKind::none: break;
  }
  return HashedFields::none;
}

std::string kind_text(KeyKind kind) {
  switch (kind) {
    case KeyKind::src: return "source address";
    case KeyKind::dst: return "destination address";
    case KeyKind::src_dport: return "source address and destination port";
    case KeyKind::five_tuple: return "5-tuple";
    case KeyKind::none: break;
  }
  return "nothing";
}

std::string fields_text(HashedFields f) {
  switch (f) {
    case HashedFields::src: return "source addresses";
    case HashedFields::dst: return "destination addresses";
    case HashedFields::src_and_dst: return "source and destination addresses";
    case HashedFields::none: break;
  }
  return "nothing";
}

// Which address families a rule can see: a prefix of one family in its match excludes the other.
bool sees_ipv4(const Rule& r) { return !(r.match.src && r.match.src->ipv6) && !(r.match.dst && r.match.dst->ipv6); }
bool sees_ipv6(const Rule& r) { return !(r.match.src && !r.match.src->ipv6) && !(r.match.dst && !r.match.dst->ipv6); }

std::string port_text(const RssCapabilities& p) { return "port " + std::to_string(p.port) + " (" + p.driver + ")"; }

// Bytes of key a Toeplitz hash over `input` bytes reads: a 32-bit window slides over every input bit.
constexpr unsigned key_bytes_for(unsigned input) noexcept { return input + 4; }

// Why the rules cannot be steered, or "" and the fields to hash on.
std::string rules_refusal(std::span<const Rule> rules, HashedFields& fields) {
  fields = HashedFields::src_and_dst;
  const Rule* lacking_src = nullptr;  // the first per-key rule whose key has no source address
  const Rule* lacking_dst = nullptr;
  bool any = false;
  for (const Rule& r : rules) {
    const HashedFields own = key_fields(r.per_key.kind);
    if (own == HashedFields::none) continue;
    any = true;
    fields = fields & own;
    if (!has(own, HashedFields::src) && lacking_src == nullptr) lacking_src = &r;
    if (!has(own, HashedFields::dst) && lacking_dst == nullptr) lacking_dst = &r;
  }
  if (!any) {
    fields = HashedFields::none;
    return "no rule has per-key meters: nothing to steer";
  }
  if (fields == HashedFields::none) {
    const bool src_first = lacking_dst < lacking_src;  // the two rules in policy order
    const Rule& a = src_first ? *lacking_dst : *lacking_src;
    const Rule& b = src_first ? *lacking_src : *lacking_dst;
    return "rules " + a.name + " (" + kind_text(a.per_key.kind) + ") and " + b.name + " (" +
           kind_text(b.per_key.kind) + ") share no address to hash on";
  }
  for (const Rule& r : rules) {
    if (key_fields(r.per_key.kind) == HashedFields::none) continue;
    const std::string field = fields == HashedFields::src ? "source" : fields == HashedFields::dst ? "destination"
                                                                                               : "source and destination";
    if (sees_ipv4(r) && r.per_key.ipv4_prefix < 32)
      return "rule " + r.name + " keys on IPv4 " + field + " /" + std::to_string(r.per_key.ipv4_prefix) +
             ": a NIC hashes whole addresses";
    if (sees_ipv6(r) && r.per_key.ipv6_prefix < 128)
      return "rule " + r.name + " keys on IPv6 " + field + " /" + std::to_string(r.per_key.ipv6_prefix) +
             ": a NIC hashes whole addresses";
  }
  return {};
}

std::uint64_t selector(HashedFields fields) noexcept {
  return fields == HashedFields::src ? RTE_ETH_RSS_L3_SRC_ONLY : fields == HashedFields::dst ? RTE_ETH_RSS_L3_DST_ONLY : 0;
}

// Why `p` cannot be steered for `fields` on `workers` queues, or "".
std::string port_refusal(const RssCapabilities& p, HashedFields fields, unsigned workers) {
  if (p.max_rx_queues < workers)
    return port_text(p) + " has " + std::to_string(p.max_rx_queues) + " RX queue" + (p.max_rx_queues == 1 ? "" : "s") +
           " for " + std::to_string(workers) + " workers";
  if (p.reta_size == 0 || (p.flow_type_rss_offloads & kAddressTypes) == 0) return port_text(p) + " has no RSS";
  if ((p.flow_type_rss_offloads & RTE_ETH_RSS_IPV4) == 0)
    return port_text(p) + " does not hash every IPv4 packet on its addresses (RTE_ETH_RSS_IPV4)";
  if ((p.flow_type_rss_offloads & RTE_ETH_RSS_IPV6) == 0)
    return port_text(p) + " does not hash every IPv6 packet on its addresses (RTE_ETH_RSS_IPV6)";
  if (fields == HashedFields::src && (p.flow_type_rss_offloads & RTE_ETH_RSS_L3_SRC_ONLY) == 0)
    return port_text(p) + " does not hash on source addresses only (RTE_ETH_RSS_L3_SRC_ONLY)";
  if (fields == HashedFields::dst && (p.flow_type_rss_offloads & RTE_ETH_RSS_L3_DST_ONLY) == 0)
    return port_text(p) + " does not hash on destination addresses only (RTE_ETH_RSS_L3_DST_ONLY)";
  if (!std::has_single_bit(p.reta_size))
    return port_text(p) + " has a redirection table of " + std::to_string(p.reta_size) +
           " entries, not a power of two: which entry a hash picks is not known";
  if (p.reta_size < workers)
    return port_text(p) + " has a redirection table of " + std::to_string(p.reta_size) + " entries for " +
           std::to_string(workers) + " workers";
  const unsigned needed = key_bytes_for(16 * count(fields));  // IPv6, the longer family
  if (p.hash_key_size < needed)
    return port_text(p) + " has a " + std::to_string(p.hash_key_size) + "-byte hash key: hashing IPv6 " +
           fields_text(fields) + " takes " + std::to_string(needed);
  return {};
}

RssPlan off(RssPlan plan, std::string reason) {
  plan.enabled = false;
  plan.reason = std::move(reason);
  plan.rss_hf = 0;
  plan.key.clear();
  plan.reta.clear();
  plan.ports.clear();
  return plan;
}

}  // namespace

Expected<RssCapabilities> rss_capabilities(std::uint16_t port) {
  rte_eth_dev_info info{};
  if (const int rc = rte_eth_dev_info_get(port, &info); rc != 0)
    return Error{"port", "port " + std::to_string(port) + ": cannot read its capabilities: " + std::strerror(-rc)};
  RssCapabilities c;
  c.port = port;
  c.driver = info.driver_name != nullptr ? info.driver_name : "?";
  c.flow_type_rss_offloads = info.flow_type_rss_offloads;
  c.reta_size = info.reta_size;
  c.hash_key_size = info.hash_key_size;
  c.max_rx_queues = info.max_rx_queues;
  return c;
}

RssPlan plan_rss(std::span<const Rule> rules, unsigned workers, std::span<const RssCapabilities> ports,
                 std::span<const std::uint8_t> key) {
  RssPlan plan;
  plan.queues = workers;
  HashedFields fields = HashedFields::none;
  const std::string refused = rules_refusal(rules, fields);
  plan.fields = fields;
  if (workers < 2) return off(std::move(plan), std::to_string(workers) + " worker: nothing to steer");
  if (!refused.empty()) return off(std::move(plan), refused);
  if (ports.empty()) return off(std::move(plan), "no RX port");
  for (const RssCapabilities& p : ports)
    if (std::string why = port_refusal(p, fields, workers); !why.empty()) return off(std::move(plan), why);

  std::size_t key_size = 0;
  std::uint16_t smallest_reta = UINT16_MAX;
  for (const RssCapabilities& p : ports) {
    key_size = std::max<std::size_t>(key_size, p.hash_key_size);
    smallest_reta = std::min(smallest_reta, p.reta_size);
    plan.ports.push_back({p.port, p.reta_size, p.hash_key_size});
  }
  if (key.empty()) {
    plan.key.resize(key_size);
    // A key of at most 256 bytes comes whole from getrandom once the pool is initialised (it waits).
    if (getrandom(plan.key.data(), key_size, 0) != static_cast<ssize_t>(key_size))
      return off(std::move(plan), std::string("no random hash key: getrandom: ") + std::strerror(errno));
  } else {
    if (key.size() < key_size)
      return off(std::move(plan), "the hash key given has " + std::to_string(key.size()) + " bytes, the ports take " +
                                      std::to_string(key_size));
    plan.key.assign(key.begin(), key.begin() + static_cast<std::ptrdiff_t>(key_size));
  }
  plan.reta.resize(smallest_reta);
  for (std::size_t i = 0; i < plan.reta.size(); ++i) plan.reta[i] = static_cast<std::uint16_t>(i % workers);
  plan.rss_hf = kAddressTypes | selector(fields);
  plan.enabled = true;
  return plan;
}

bool fill_rss_conf(const RssPlan& plan, std::uint16_t port, rte_eth_conf& conf) {
  if (!plan.enabled) return false;
  const auto it = std::find_if(plan.ports.begin(), plan.ports.end(), [port](const RssPort& p) { return p.port == port; });
  if (it == plan.ports.end()) return false;
  conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
  // DPDK takes a non-const pointer but only reads the key at configure time.
  conf.rx_adv_conf.rss_conf.rss_key = const_cast<std::uint8_t*>(plan.key.data());
  conf.rx_adv_conf.rss_conf.rss_key_len = it->hash_key_size;
  conf.rx_adv_conf.rss_conf.rss_hf = plan.rss_hf;
  // RTE_ETH_RX_OFFLOAD_RSS_HASH is not asked for: nothing reads mbuf->hash.rss, the queue is the fact.
  return true;
}

std::vector<std::uint16_t> port_reta(const RssPlan& plan, std::uint16_t reta_size) {
  std::vector<std::uint16_t> reta(reta_size);
  if (plan.reta.empty()) return reta;
  for (std::size_t i = 0; i < reta.size(); ++i) reta[i] = plan.reta[i % plan.reta.size()];
  return reta;
}

int apply_reta(std::uint16_t port, const RssPlan& plan) {
  const auto it = std::find_if(plan.ports.begin(), plan.ports.end(), [port](const RssPort& p) { return p.port == port; });
  if (!plan.enabled || it == plan.ports.end()) return -EINVAL;
  const std::vector<std::uint16_t> reta = port_reta(plan, it->reta_size);
  std::vector<rte_eth_rss_reta_entry64> groups((reta.size() + RTE_ETH_RETA_GROUP_SIZE - 1) / RTE_ETH_RETA_GROUP_SIZE);
  for (std::size_t i = 0; i < reta.size(); ++i) {
    rte_eth_rss_reta_entry64& g = groups[i / RTE_ETH_RETA_GROUP_SIZE];
    g.mask |= std::uint64_t{1} << (i % RTE_ETH_RETA_GROUP_SIZE);
    g.reta[i % RTE_ETH_RETA_GROUP_SIZE] = reta[i];
  }
  return rte_eth_dev_rss_reta_update(port, groups.data(), it->reta_size);
}

std::optional<Error> apply_rss(std::uint16_t port, const RssPlan& plan) {
  const auto it = std::find_if(plan.ports.begin(), plan.ports.end(), [port](const RssPort& p) { return p.port == port; });
  const std::string subject = "port " + std::to_string(port);
  if (!plan.enabled || it == plan.ports.end()) return Error{"port", subject + " is not in the steering plan"};
  auto failed = [&](const std::string& what, int rc) {
    return Error{"port", subject + ": cannot " + what + ": " + std::strerror(-rc)};
  };
  std::vector<std::uint8_t> key(plan.key.begin(), plan.key.begin() + it->hash_key_size);
  rte_eth_rss_conf conf{};
  conf.rss_key = key.data();
  conf.rss_key_len = it->hash_key_size;
  conf.rss_hf = plan.rss_hf;
  if (const int rc = rte_eth_dev_rss_hash_update(port, &conf); rc != 0 && rc != -ENOTSUP)
    return failed("set its RSS hash key and types", rc);
  if (const int rc = apply_reta(port, plan); rc != 0) return failed("set its RSS redirection table", rc);

  std::vector<std::uint8_t> read_key(it->hash_key_size);
  rte_eth_rss_conf read{};
  read.rss_key = read_key.data();
  read.rss_key_len = it->hash_key_size;
  if (const int rc = rte_eth_dev_rss_hash_conf_get(port, &read); rc == 0) {
    if (read_key != key) return Error{"port", subject + " reports another RSS hash key than the one it was given"};
    if (read.rss_hf != plan.rss_hf) {
      char text[160];
      std::snprintf(text, sizeof text, " hashes on RSS types 0x%" PRIx64 ", not the 0x%" PRIx64 " asked for",
                    read.rss_hf, plan.rss_hf);
      return Error{"port", subject + text};
    }
  } else if (rc != -ENOTSUP) {
    return failed("read its RSS hash configuration", rc);
  }
  const std::vector<std::uint16_t> reta = port_reta(plan, it->reta_size);
  std::vector<rte_eth_rss_reta_entry64> groups((reta.size() + RTE_ETH_RETA_GROUP_SIZE - 1) / RTE_ETH_RETA_GROUP_SIZE);
  for (std::size_t i = 0; i < reta.size(); ++i) groups[i / RTE_ETH_RETA_GROUP_SIZE].mask |= std::uint64_t{1} << (i % RTE_ETH_RETA_GROUP_SIZE);
  if (const int rc = rte_eth_dev_rss_reta_query(port, groups.data(), it->reta_size); rc == 0) {
    for (std::size_t i = 0; i < reta.size(); ++i)
      if (groups[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE] != reta[i])
        return Error{"port", subject + "'s RSS redirection table entry " + std::to_string(i) + " is not what it was given"};
  } else if (rc != -ENOTSUP) {
    return failed("read its RSS redirection table", rc);
  }
  return std::nullopt;
}

std::uint32_t toeplitz_hash(std::span<const std::uint8_t> key, HashedFields fields, const Parsed& packet) {
  if (packet.l3 == L3::none || fields == HashedFields::none) return 0;
  const unsigned address_bytes = packet.l3 == L3::ipv6 ? 16 : 4;
  // rte_softrss takes the input as 32-bit words in host order, each the next 4 bytes of the header.
  std::uint32_t words[8];
  unsigned n = 0;
  auto load = [&](const std::array<std::uint8_t, 16>& address) {
    for (unsigned i = 0; i < address_bytes; i += 4) {
      std::uint32_t be;
      std::memcpy(&be, address.data() + i, 4);
      words[n++] = rte_be_to_cpu_32(be);
    }
  };
  if (has(fields, HashedFields::src)) load(packet.src);
  if (has(fields, HashedFields::dst)) load(packet.dst);
  if (key.size() < key_bytes_for(4 * n)) return 0;  // too short to hash this input (plan_rss refuses such ports)
  return rte_softrss(words, n, key.data());
}

unsigned steered_queue(const RssPlan& plan, const Parsed& packet) {
  if (!plan.enabled || packet.l3 == L3::none) return 0;
  const std::uint32_t hash = toeplitz_hash(plan.key, plan.fields, packet);
  return plan.reta[hash & (plan.reta.size() - 1)];
}

}  // namespace tricolor::dataplane
