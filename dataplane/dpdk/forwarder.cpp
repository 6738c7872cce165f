#include "dataplane/dpdk/forwarder.hpp"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring_elem.h>

#include <bit>
#include <cstddef>
#include <new>
#include <rte_prefetch.h>

#include "dataplane/dpdk/mbuf_free.hpp"
#include "dataplane/engine/actions.hpp"
#include "dataplane/engine/parse.hpp"

namespace tricolor::dataplane {

void Forwarder::run(StopState& stop) noexcept {
  worker_.online();
  while (!stop.requested.load(std::memory_order_relaxed)) {
    if (!wheel_.empty()) [[unlikely]] release_due(clock_now());
    std::uint32_t received = 0;
    for (const RxQueue& rx : plan_.rx) received += poll_port(rx);
    received += poll_rings();
    counters_.polls.add(1);
    if (received == 0) counters_.idle_polls.add(1);
    worker_.quiescent();
  }
  // Stopped receiving; what the others still pass is processed until they have all stopped too.
  stop.stopped_receiving.fetch_add(1, std::memory_order_acq_rel);
  for (;;) {
    const bool others_stopped = stop.stopped_receiving.load(std::memory_order_acquire) == workers_;
    if (!wheel_.empty()) [[unlikely]] release_due(clock_now());
    const std::uint16_t taken = poll_rings();
    worker_.quiescent();
    if (others_stopped && taken == 0) break;
  }
  flush_held();
  worker_.offline();
}

std::uint64_t Forwarder::clock_now() const noexcept {
  // rx_timestamp: time moves with the packets; the latest one's is now.
  return options_.clock == ClockSource::tsc ? rte_rdtsc() : last_timestamp_;
}

std::uint16_t Forwarder::poll_port(const RxQueue& rx) noexcept {
  rte_mbuf* mbufs[kBurst];
  const std::uint16_t n = rte_eth_rx_burst(rx.port, rx.queue, mbufs, options_.burst);
  if (n != 0) process(mbufs, n, {});
  return n;
}

std::uint16_t Forwarder::poll_rings() noexcept {
  std::uint16_t taken = 0;
  for (rte_ring* ring : plan_.from) taken += poll_ring(ring);
  return taken;
}

std::uint16_t Forwarder::poll_ring(rte_ring* ring) noexcept {
  HandedPacket taken[kBurst];
  const auto n = static_cast<std::uint16_t>(
      rte_ring_sc_dequeue_burst_elem(ring, taken, sizeof(HandedPacket), options_.burst, nullptr));
  if (n == 0) return 0;
  // These mbufs were last written on another core: ask for all their header lines at once, then for
  // their frames' first lines, rather than wait for each in turn.
  rte_mbuf* mbufs[kBurst];
  Handed handed[kBurst];
  for (std::uint16_t i = 0; i < n; ++i) {
    mbufs[i] = taken[i].mbuf;
    handed[i] = taken[i].handed;
    rte_prefetch0(mbufs[i]);
  }
  for (std::uint16_t i = 0; i < n; ++i) rte_prefetch0(rte_pktmbuf_mtod(mbufs[i], const void*));
  counters_.handed_in.add(n);
  process(mbufs, n, std::span<const Handed>(handed, n));
  return n;
}

Forwarder::Viewed Forwarder::view_all(rte_mbuf** mbufs, std::uint16_t n, PacketView* views) noexcept {
  // Views built in place (guaranteed elision): a returned temporary copied over stalls on store
  // forwarding, every packet.
  const std::uint16_t first_port = mbufs[0]->port;
  std::uint16_t other_ports = 0;  // non-zero: some packet came in by another port than the first
  std::uint64_t stripped = 0;     // non-zero: some packet's tag was stripped
  if (options_.clock == ClockSource::tsc) {
    const std::uint64_t now = rte_rdtsc();  // one clock read per burst
    for (std::uint16_t i = 0; i < n; ++i) {
      const std::uint16_t port = mbufs[i]->port;
      other_ports |= static_cast<std::uint16_t>(port ^ first_port);
      stripped |= mbufs[i]->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED;
      ::new (static_cast<void*>(&views[i])) PacketView(view_of(mbufs[i], port, now));
    }
    return {other_ports == 0, stripped == 0};
  }
  std::uint64_t missing = 0;
  for (std::uint16_t i = 0; i < n; ++i) {
    std::uint64_t ticks;
    if (rx_timestamp_ticks(mbufs[i], options_.timestamp, ticks)) last_timestamp_ = ticks;
    else ++missing;  // metered at the time of the packet before it
    const std::uint16_t port = mbufs[i]->port;
    other_ports |= static_cast<std::uint16_t>(port ^ first_port);
    stripped |= mbufs[i]->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED;
    ::new (static_cast<void*>(&views[i])) PacketView(view_of(mbufs[i], port, last_timestamp_));
  }
  if (missing != 0) counters_.no_timestamp.add(missing);
  return {other_ports == 0, stripped == 0};
}

void Forwarder::process(rte_mbuf** mbufs, std::uint16_t n, std::span<const Handed> handed) noexcept {
  // Uninitialised: view_all builds every view and the worker writes every verdict whole (zeroing
  // both arrays by their members' initialisers cost a memset of 2 KiB a burst).
  alignas(PacketView) std::byte view_storage[sizeof(PacketView) * kBurst];
  alignas(Verdict) std::byte verdict_storage[sizeof(Verdict) * kBurst];
  auto* const views = reinterpret_cast<PacketView*>(view_storage);
  auto* const verdicts = reinterpret_cast<Verdict*>(verdict_storage);
  const Viewed viewed = view_all(mbufs, n, views);
  // A burst that goes out or back to the pool whole (below) is not read packet by packet: its verdicts
  // may be left unwritten (Worker::VerdictsRead).
  const bool sent_whole = viewed.one_ingress && viewed.no_stripped && wheel_.empty();
  const RuleSet& set = worker_.process(std::span<PacketView>(views, n), std::span<Verdict>(verdicts, n), handed,
                                       sent_whole ? Worker::VerdictsRead::when_mixed : Worker::VerdictsRead::every);
  // The usual bursts of a policer: within contract, every packet forwarded now, by one port, with no
  // tag to put back and none held before it, is sent as received; far above it, every packet dropped
  // goes back to the pool at once. Neither needs a pass over the verdicts.
  const Worker::WholeBurst whole = worker_.whole_burst();
  if (whole == Worker::WholeBurst::forwarded && sent_whole) [[likely]] {
    if (options_.stamp_generation) [[unlikely]]
      stamp(mbufs, n, static_cast<std::uint16_t>(set.generation));
    counters_.bursts.add(1);
    counters_.packets.add(n);
    transmit(plan_.egress[views[0].port], mbufs, n);
    return;
  }
  if (whole == Worker::WholeBurst::dropped) {
    counters_.bursts.add(1);
    counters_.packets.add(n);
    counters_.policy_drops.add(n);
    free_dropped<kBurst>(mbufs, n);
    return;
  }
  // A policed burst, a few packets forwarded and the rest dropped (only a burst sent whole is split:
  // Worker::VerdictsRead::when_mixed): parted by the worker's bit a packet, no verdict read, each side
  // gathered by its set bits in order (a count of trailing zeros a packet, no branch on a bit).
  if (whole == Worker::WholeBurst::split) {
    rte_mbuf* forward[kBurst];
    rte_mbuf* drop[kBurst];
    const std::uint64_t dropping = worker_.dropped_mask();
    const auto gather = [&](std::uint64_t bits, rte_mbuf** to) {
      unsigned count = 0;
      for (; bits != 0; bits &= bits - 1) to[count++] = mbufs[std::countr_zero(bits)];
      return static_cast<std::uint16_t>(count);
    };
    const std::uint16_t dropped = gather(dropping, drop);
    const std::uint64_t burst_bits = ~std::uint64_t{0} >> (64 - n);  // n bits: 2 to 64 packets (some of each)
    const std::uint16_t forwarded = gather(~dropping & burst_bits, forward);
    if (options_.stamp_generation) [[unlikely]]
      stamp(forward, forwarded, static_cast<std::uint16_t>(set.generation));
    counters_.bursts.add(1);
    counters_.packets.add(n);
    counters_.policy_drops.add(dropped);
    free_dropped<kBurst>(drop, dropped);
    transmit(plan_.egress[views[0].port], forward, forwarded);
    return;
  }

  // Forwarded packets keep their order; dropped ones go back to the pool together; those another
  // worker owns are passed on. Those shaping holds (a delay) stay among the forwarded, in order.
  rte_mbuf* forward[kBurst];
  rte_mbuf* drop[kBurst];
  std::uint16_t forwarded = 0, dropped = 0, unrestored = 0, passed = 0;
  std::uint32_t delays = 0;  // non-zero: some packet is held
  for (std::uint16_t i = 0; i < n; ++i) {
    if (verdicts[i].handoff) {
      ++passed;
    } else if (verdicts[i].drop) {
      drop[dropped++] = mbufs[i];
    } else if (!views[i].has_stripped_vlan ||  // tested here too: else the insert lookup is made for
                                                 // every packet (6 instructions, callgrind)
               restore_stripped_vlan(mbufs[i], views[i], options_.vlan_insert[plan_.egress[mbufs[i]->port]])) [[likely]] {
      delays |= verdicts[i].delay;
      forward[forwarded++] = mbufs[i];
    } else {
      drop[dropped++] = mbufs[i];
      mbufs[i] = nullptr;  // freed below: not forwarded (shape() reads the burst again)
      ++unrestored;
    }
  }
  if (options_.stamp_generation) [[unlikely]]
    stamp(forward, forwarded, static_cast<std::uint16_t>(set.generation));
  counters_.bursts.add(1);
  counters_.packets.add(n - passed);
  if (passed != 0) hand_over(mbufs, n, verdicts, set.generation);
  if (dropped != 0) {
    counters_.policy_drops.add(dropped - unrestored);
    if (unrestored != 0) counters_.vlan_restore_failed.add(unrestored);
    free_dropped<kBurst>(drop, dropped);
  }
  if (delays != 0 || !wheel_.empty()) [[unlikely]] {
    shape(mbufs, n, views, verdicts);
    return;
  }
  // A burst from one port (always, from a port's queue) leaves by that port's egress, without a
  // lookup per packet.
  if (viewed.one_ingress) {
    if (forwarded != 0) transmit(plan_.egress[views[0].port], forward, forwarded);
  } else {
    transmit_by_port(forward, forwarded);
  }
}

// By egress port, in order within each (a burst from a port has one; one from a ring or the wheel may
// have more). Reorders `packets`.
void Forwarder::transmit_by_port(rte_mbuf** packets, std::uint16_t count) noexcept {
  while (count != 0) {
    const std::uint16_t port = plan_.egress[packets[0]->port];
    rte_mbuf* now[kBurst];
    std::uint16_t sending = 0, later = 0;
    for (std::uint16_t i = 0; i < count; ++i) {
      if (plan_.egress[packets[i]->port] == port) now[sending++] = packets[i];
      else packets[later++] = packets[i];
    }
    transmit(port, now, sending);
    count = later;
  }
}

// The burst's forwarded packets, in time order with the wheel's: before each, what is due by its
// arrival leaves (a packet of a flow that conforms at its arrival never overtakes one of the flow held
// before it: the engine gives a meter's packets non-decreasing release ticks), then it leaves, or is
// held until arrival + delay. With the TSC every packet of a burst has one arrival; with RX timestamps
// a burst spans time. Draining up to a packet's arrival before inserting also keeps the wheel's cursor
// there, so that the new release tick lies within the wheel's span.
void Forwarder::shape(rte_mbuf** mbufs, std::uint16_t n, const PacketView* views, const Verdict* verdicts) noexcept {
  rte_mbuf* out[kBurst];
  rte_mbuf* refused[kBurst];
  std::uint16_t sending = 0, refusals = 0;
  bool drained = false;
  std::uint64_t drained_to = 0;  // draining to the same tick again finds nothing: one drain per TSC burst
  for (std::uint16_t i = 0; i < n; ++i) {
    const Verdict& v = verdicts[i];
    if (v.handoff || v.drop || mbufs[i] == nullptr) continue;
    if (!drained || views[i].arrival != drained_to) {
      drain_before(views[i].arrival, out, sending);
      drained = true;
      drained_to = views[i].arrival;
    }
    if (v.delay == 0) {
      out[sending++] = mbufs[i];
      if (sending == kBurst) {
        transmit_by_port(out, sending);
        sending = 0;
      }
    } else if (wheel_.insert(views[i].arrival + v.delay, mbufs[i])) {
      counters_.shape_held_in.add(1);  // now: it may be released before this burst ends
    } else {
      refused[refusals++] = mbufs[i];
    }
  }
  transmit_by_port(out, sending);
  if (refusals != 0) {
    counters_.shape_overflow.add(refusals);
    rte_pktmbuf_free_bulk(refused, refusals);
  }
}

// Everything due by `now` appended to out[0, sending), which is sent whenever it fills.
void Forwarder::drain_before(std::uint64_t now, rte_mbuf** out, std::uint16_t& sending) noexcept {
  for (;;) {
    const auto due = static_cast<std::uint16_t>(wheel_.drain(now, std::span<rte_mbuf*>(out + sending, kBurst - sending)));
    if (due != 0) counters_.shape_released.add(due);
    sending += due;
    if (sending < kBurst) return;  // nothing more is due
    transmit_by_port(out, sending);
    sending = 0;
  }
}

void Forwarder::release_due(std::uint64_t now) noexcept {
  rte_mbuf* due[kBurst];
  while (const auto n = static_cast<std::uint16_t>(wheel_.drain(now, std::span<rte_mbuf*>(due, kBurst)))) {
    counters_.shape_released.add(n);
    transmit_by_port(due, n);
  }
}

// At the stop: every packet still held leaves now, in the order of its tick slots.
void Forwarder::flush_held() noexcept {
  rte_mbuf* left[kBurst];
  while (const auto n = static_cast<std::uint16_t>(wheel_.take_all(std::span<rte_mbuf*>(left, kBurst)))) {
    counters_.shape_flushed.add(n);
    transmit_by_port(left, n);
  }
}

void Forwarder::stamp(rte_mbuf** mbufs, std::uint16_t n, std::uint16_t generation) noexcept {
  for (std::uint16_t i = 0; i < n; ++i) {
    PacketView view = view_of(mbufs[i], mbufs[i]->port, 0);
    stamp_ipv4_identification(view, parse(view), generation);
  }
}

// Each owner's packets in one enqueue, in the order they came, with what this worker learned.
void Forwarder::hand_over(rte_mbuf** mbufs, std::uint16_t n, const Verdict* verdicts, std::uint64_t generation) noexcept {
  HandedPacket pending[kBurst];
  std::uint16_t owners[kBurst];
  std::uint16_t count = 0;
  for (std::uint16_t i = 0; i < n; ++i) {
    if (!verdicts[i].handoff) continue;
    pending[count] = {mbufs[i], {static_cast<std::uint32_t>(generation), verdicts[i].rule}};
    owners[count++] = verdicts[i].owner;
  }
  while (count != 0) {
    const std::uint16_t owner = owners[0];
    HandedPacket batch[kBurst];
    std::uint16_t batched = 0, later = 0;
    for (std::uint16_t i = 0; i < count; ++i) {
      if (owners[i] == owner) {
        batch[batched++] = pending[i];
      } else {
        owners[later] = owners[i];
        pending[later++] = pending[i];
      }
    }
    const unsigned taken = rte_ring_sp_enqueue_burst_elem(plan_.to[owner], batch, sizeof(HandedPacket), batched, nullptr);
    counters_.handed_out.add(taken);
    if (taken < batched) {  // the owner is behind: drop rather than wait for it
      rte_mbuf* dropped[kBurst];
      for (unsigned i = taken; i < batched; ++i) dropped[i - taken] = batch[i].mbuf;
      rte_pktmbuf_free_bulk(dropped, batched - taken);
      counters_.handoff_dropped.add(batched - taken);
    }
    count = later;
  }
}

std::uint16_t Forwarder::send(std::uint16_t port, rte_mbuf** packets, std::uint16_t count) noexcept {
  const TxQueue& tx = plan_.tx[port];
  if (tx.lock == nullptr) return rte_eth_tx_burst(port, tx.queue, packets, count);
  rte_spinlock_lock(tx.lock);
  const std::uint16_t sent = rte_eth_tx_burst(port, tx.queue, packets, count);
  rte_spinlock_unlock(tx.lock);
  return sent;
}

void Forwarder::transmit(std::uint16_t port, rte_mbuf** packets, std::uint16_t count) noexcept {
  std::uint16_t sent = send(port, packets, count);
  // A port that takes nothing twice in a row is down or stuck: stop waiting for it, so that it does
  // not slow the other paths by the whole retry budget every burst.
  unsigned idle_tries = sent == 0 ? 1 : 0;
  for (unsigned retry = 0; sent < count && retry < kTxRetries && idle_tries < kTxIdleTries; ++retry) {
    rte_delay_us_block(1);
    const std::uint16_t more = send(port, packets + sent, count - sent);
    sent += more;
    idle_tries = more == 0 ? idle_tries + 1 : 0;
  }
  if (sent < count) {
    rte_pktmbuf_free_bulk(packets + sent, count - sent);
    counters_.tx_dropped[port].add(count - sent);
  }
}

}  // namespace tricolor::dataplane
