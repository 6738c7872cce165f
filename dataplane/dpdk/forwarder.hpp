#pragma once
// The daemon's poll loop on a worker lcore: RX bursts from the queues this worker owns -> packet views
// over the mbufs -> the engine's worker -> TX bursts on this worker's TX queue of each packet's egress
// port; packets whose key another worker owns (placement.hpp) are passed to it through a ring, and
// the packets other workers pass to this one are processed like received ones. One quiescent point
// per loop (RCU: the control thread may free what an old rule set owned).
//
// Per burst: one clock read (the TSC, or each packet's RX timestamp), no copy, no allocation, no
// system call, no lock (but a port's TX queue shared by workers, when the port has fewer TX queues
// than there are workers: one spinlock per TX burst). Dropped packets go back to the pool at once; a
// TX queue that takes only part of a burst is retried briefly (while it makes progress), and what it
// still refuses is freed and counted per port (tx_dropped); a handoff ring that is full drops what it
// cannot take and counts it (handoff_dropped), so no worker ever waits for another.
//
// Shaping (issue 27): a packet the engine holds (Verdict::delay) waits in this worker's timing wheel
// (timing_wheel.hpp) until its release tick, then leaves like any forwarded packet; a full wheel frees
// it and counts it (shape_overflow). While the wheel holds anything, each loop reads the clock once and
// sends what is due; within a burst, what is due by each packet's arrival leaves before it, so that a
// packet that conforms at once never overtakes a held one of its flow. At the stop what is still held
// is sent (shape_flushed).
#include <rte_config.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "dataplane/dpdk/mbuf_view.hpp"
#include "dataplane/dpdk/timing_wheel.hpp"
#include "dataplane/engine/rule_set.hpp"
#include "dataplane/engine/worker.hpp"

namespace tricolor::dataplane {

// Packets received on rx_port leave by tx_port: a bump in the wire has two paths (A->B, B->A), a
// one-armed port one (P->P).
struct Path {
  std::uint16_t rx_port = 0;
  std::uint16_t tx_port = 0;
};

struct RxQueue {
  std::uint16_t port = 0;
  std::uint16_t queue = 0;
};

// A worker's TX queue on a port; `lock` when other workers transmit on it too.
struct TxQueue {
  std::uint16_t queue = 0;
  rte_spinlock_t* lock = nullptr;
};

// Packets a worker takes from an RX queue or a ring at once (tricolord --burst): DPDK's usual 32 by
// default; up to the engine's burst (Worker::kMaxBurst), which the forwarder's arrays are sized for.
inline constexpr unsigned kMaxRxBurst = 64;
inline constexpr unsigned kDefaultRxBurst = 32;

struct ForwarderOptions {
  std::uint16_t burst = kDefaultRxBurst;  // 1 to kMaxRxBurst
  ClockSource clock = ClockSource::tsc;
  RxTimestampField timestamp;                        // with ClockSource::rx_timestamp
  std::array<bool, RTE_MAX_ETHPORTS> vlan_insert{};  // ports that insert a VLAN tag on transmit
  // Test instrumentation: each forwarded IPv4 packet carries, in its identification field, the low 16
  // bits of the generation of the rule set it was metered under (tests of live changes).
  bool stamp_generation = false;
  // Shaping: the packets each worker may hold at once (their mbufs come from the pool, which the daemon
  // sizes for them), and the wheel's slots: WheelGeometry::for_clock(the clock's rate, kMaxShapeDelayNs).
  std::uint32_t shape_capacity = 4096;
  WheelGeometry shape_geometry;
};

// What a handoff ring carries: the packet and what its receiver learned (rte_ring elements of 16
// bytes, so that the owner does not wait for one more of the mbuf's cache lines from the receiver's core).
struct HandedPacket {
  rte_mbuf* mbuf = nullptr;
  Handed handed;
};
static_assert(sizeof(HandedPacket) == 16);

// One worker's share of the ports and its rings to and from the other workers.
struct ForwarderPlan {
  std::vector<RxQueue> rx;                              // the RX queues it polls
  std::array<std::uint16_t, RTE_MAX_ETHPORTS> egress{};  // by receiving port: the port its packets leave by
  std::array<TxQueue, RTE_MAX_ETHPORTS> tx{};            // by port: its TX queue there
  // Rings of HandedPacket (rte_ring_create_elem), single producer and single consumer.
  std::vector<rte_ring*> to;    // by worker: the ring this worker passes that worker's packets on (null: itself)
  std::vector<rte_ring*> from;  // the rings other workers pass it packets on
};

// What the worker counts, read by the control thread while it runs (one writer each).
struct alignas(64) ForwarderCounters {
  OwnedCounter polls, idle_polls, bursts, packets, policy_drops, no_timestamp, vlan_restore_failed;
  OwnedCounter handed_out, handed_in, handoff_dropped;  // passed to other workers, taken from them, ring full
  std::array<OwnedCounter, RTE_MAX_ETHPORTS> tx_dropped;  // by egress port: refused by its TX queue
  // Shaping: packets put in the wheel, sent at their tick, freed because the wheel was full, sent at the
  // stop while still held. Held now: held_in - released - flushed.
  OwnedCounter shape_held_in, shape_released, shape_overflow, shape_flushed;
};

// Workers that have stopped receiving from their ports: a worker that stops keeps taking what others
// pass it until all of them have stopped receiving and its rings are empty.
struct StopState {
  std::atomic<bool> requested{false};
  std::atomic<unsigned> stopped_receiving{0};
};

class Forwarder {
 public:
  static constexpr unsigned kBurst = kMaxRxBurst;  // the most packets any of its arrays holds
  static_assert(kBurst <= Worker::kMaxBurst && kBurst <= 64, "a burst's drop mask is one 64-bit word");
  // A TX queue that takes only part of a burst gets this many more tries, about a microsecond apart,
  // before the rest is freed: long enough for a NIC to free descriptors, short enough that one slow
  // port does not stall the others for long.
  static constexpr unsigned kTxRetries = 16;
  static constexpr unsigned kTxIdleTries = 2;  // tries in a row that sent nothing: give up on the burst

  // Allocates the timing wheel (std::bad_alloc).
  Forwarder(Worker& worker, ForwarderPlan plan, const ForwarderOptions& options, unsigned workers)
      : worker_(worker),
        plan_(std::move(plan)),
        options_(options),
        workers_(workers),
        wheel_(options.shape_capacity, options.shape_geometry) {}

  // Polls until a stop is requested, then, once every worker has stopped receiving, returns having
  // sent or freed every mbuf it received or was passed, and sent every packet it held.
  void run(StopState& stop) noexcept;

  const ForwarderCounters& counters() const noexcept { return counters_; }
  const ForwarderPlan& plan() const noexcept { return plan_; }

 private:
  // One burst from a port's queue, or from a ring; returns the packets taken.
  std::uint16_t poll_port(const RxQueue& rx) noexcept;
  std::uint16_t poll_ring(rte_ring* ring) noexcept;
  std::uint16_t poll_rings() noexcept;
  void process(rte_mbuf** mbufs, std::uint16_t n, std::span<const Handed> handed) noexcept;
  // What view_all() saw of a burst as it built the views.
  struct Viewed {
    bool one_ingress;  // every packet came in by the first one's port
    bool no_stripped;  // no packet's VLAN tag was stripped by the NIC (none to put back)
  };
  // Builds the burst's views (n >= 1).
  Viewed view_all(rte_mbuf** mbufs, std::uint16_t n, PacketView* views) noexcept;
  void stamp(rte_mbuf** mbufs, std::uint16_t n, std::uint16_t generation) noexcept;
  void hand_over(rte_mbuf** mbufs, std::uint16_t n, const Verdict* verdicts, std::uint64_t generation) noexcept;
  void transmit(std::uint16_t port, rte_mbuf** packets, std::uint16_t count) noexcept;
  void transmit_by_port(rte_mbuf** packets, std::uint16_t count) noexcept;
  // Shaping: the burst's forwarded packets (mbufs[i] neither handed over, dropped nor null) sent or
  // held, in time order with what the wheel releases.
  void shape(rte_mbuf** mbufs, std::uint16_t n, const PacketView* views, const Verdict* verdicts) noexcept;
  void drain_before(std::uint64_t now, rte_mbuf** out, std::uint16_t& sending) noexcept;
  void release_due(std::uint64_t now) noexcept;
  void flush_held() noexcept;
  std::uint64_t clock_now() const noexcept;
  std::uint16_t send(std::uint16_t port, rte_mbuf** packets, std::uint16_t count) noexcept;

  Worker& worker_;
  ForwarderPlan plan_;
  ForwarderOptions options_;
  unsigned workers_;
  std::uint64_t last_timestamp_ = 0;  // the clock of packets without an RX timestamp
  TimingWheel<rte_mbuf*> wheel_;      // the packets shaping holds
  ForwarderCounters counters_;
};

}  // namespace tricolor::dataplane
