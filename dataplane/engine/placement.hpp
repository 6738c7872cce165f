#pragma once
// Where a rule's meters run when the daemon has several workers, so that all of them together never
// admit more than one meter seeing the same packets would (doc/tricolord.md, "Several workers").
//
//   - A rule without per-key meters (an aggregate), and every parent, has one meter in the shared form
//     (policer/shared_meter.hpp): each worker checks it for the packets it received, one critical
//     section per meter per burst. Nothing moves between workers; the meter sees every packet once.
//   - A per-key rule's keys are each owned by one worker. By key hash: the worker that receives a
//     packet hashes its key and, if another worker owns it, passes the packet to that worker (a
//     single-producer single-consumer ring per worker pair), which meters and transmits it. A key's
//     packets from one receiving queue stay in order through one ring.
//   - Steered: the NIC's RSS hash is a function of the key, so a key's packets all reach one queue and
//     its worker meters them where they arrive (no handoff).
//   - Local: every worker meters what it receives on meters of its own. Right for keys with one
//     worker; with several it is the flaw of per-core meters (a key, or an aggregate, metered by each
//     worker apart), kept only as a test switch (tricolord --placement=none, which makes aggregates and
//     parents per worker too) to show that the exactness checks catch it.
#include <cstdint>

#include "dataplane/engine/key_table.hpp"
#include "dataplane/engine/keys.hpp"
#include "dataplane/engine/policy.hpp"
#include "dataplane/engine/secret_hash.hpp"

namespace tricolor::dataplane {

enum class Placement : std::uint8_t { shared, by_key_hash, steered, local };

// The engine's choice for per-key rules when it has several workers.
enum class PlacementMode : std::uint8_t {
  keys_by_hash,  // each key owned by one worker: by the NIC's hash when steered, else by handoff
  none,          // test only: each worker meters what it receives on meters of its own
  // Tests and benchmarks on ports without RSS: each RX queue's packets are taken as steered by key
  // already (as a NIC with the steering plan would deliver them); per-key rules are steered, no
  // handoff. Wrong, and inexact, on ports whose queues do not split keys so.
  assume_steered,
};

// The address fields every RX port hashes on when the ports steer by RSS (neither: no steering;
// rss.hpp makes the plan).
struct Steering {
  bool src = false;
  bool dst = false;
  bool active() const noexcept { return src || dst; }
};

// Whether the ports' hash is a function of the rule's key: every field hashed is in the key, unmasked.
inline bool steerable(const PerKey& key, const Steering& steering) noexcept {
  if (!steering.active() || key.kind == KeyKind::none) return false;
  const bool full = key.ipv4_prefix == 32 && key.ipv6_prefix == 128;
  const bool has_src = key.kind == KeyKind::src || key.kind == KeyKind::src_dport || key.kind == KeyKind::five_tuple;
  const bool has_dst = key.kind == KeyKind::dst || key.kind == KeyKind::five_tuple;
  return full && (!steering.src || has_src) && (!steering.dst || has_dst);
}

// The worker that owns a key, by a hash under a secret of its own (not any key table's: each worker's
// table then spreads its keys over its whole index), mapped onto the workers by a multiplication
// (no division per packet).
class KeyOwners {
 public:
  explicit KeyOwners(unsigned workers) noexcept : workers_(workers) {}
  unsigned owner(const MeterKey& key) const noexcept {
    return static_cast<unsigned>((static_cast<key_table_detail::U128>(hash_(key)) * workers_) >> 64);
  }
  unsigned workers() const noexcept { return workers_; }

 private:
  SecretHash<kKeySize> hash_;
  unsigned workers_;
};

// A rule's placement, for the daemon's report.
constexpr const char* placement_name(Placement placement) noexcept {
  switch (placement) {
    case Placement::shared: return "shared";
    case Placement::by_key_hash: return "owned by key hash";
    case Placement::steered: return "steered";
    case Placement::local: return "local";
  }
  return "?";
}

}  // namespace tricolor::dataplane
