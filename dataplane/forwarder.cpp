#include "dataplane/forwarder.hpp"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

namespace tricolor::dataplane {

void Forwarder::run(const std::atomic<bool>& stop) noexcept {
  worker_.online();
  while (!stop.load(std::memory_order_relaxed)) {
    std::uint32_t received = 0;
    for (const Path& path : paths_) received += poll(path);
    counters_.polls.add(1);
    if (received == 0) counters_.idle_polls.add(1);
    worker_.quiescent();
  }
  worker_.offline();
}

std::uint16_t Forwarder::poll(const Path& path) noexcept {
  rte_mbuf* mbufs[kBurst];
  const std::uint16_t n = rte_eth_rx_burst(path.rx_port, 0, mbufs, kBurst);
  if (n == 0) return 0;

  PacketView views[kBurst];
  Verdict verdicts[kBurst];
  if (options_.clock == ClockSource::tsc) {
    const std::uint64_t now = rte_rdtsc();  // one clock read per burst
    for (std::uint16_t i = 0; i < n; ++i) views[i] = view_of(mbufs[i], path.rx_port, now);
  } else {
    std::uint64_t missing = 0;
    for (std::uint16_t i = 0; i < n; ++i) {
      std::uint64_t ticks;
      if (rx_timestamp_ticks(mbufs[i], options_.timestamp, ticks)) last_timestamp_ = ticks;
      else ++missing;  // metered at the time of the packet before it
      views[i] = view_of(mbufs[i], path.rx_port, last_timestamp_);
    }
    if (missing != 0) counters_.no_timestamp.add(missing);
  }

  worker_.process(std::span<PacketView>(views, n), std::span<Verdict>(verdicts, n));

  // Forwarded packets keep their order; dropped ones go back to the pool together.
  rte_mbuf* forward[kBurst];
  rte_mbuf* drop[kBurst];
  std::uint16_t forwarded = 0, dropped = 0, unrestored = 0;
  const bool vlan_insert = options_.vlan_insert[path.tx_port];
  for (std::uint16_t i = 0; i < n; ++i) {
    if (verdicts[i].drop) {
      drop[dropped++] = mbufs[i];
    } else if (restore_stripped_vlan(mbufs[i], views[i], vlan_insert)) {
      forward[forwarded++] = mbufs[i];
    } else {
      drop[dropped++] = mbufs[i];
      ++unrestored;
    }
  }
  counters_.bursts.add(1);
  counters_.packets.add(n);
  if (dropped != 0) {
    counters_.policy_drops.add(dropped - unrestored);
    if (unrestored != 0) counters_.vlan_restore_failed.add(unrestored);
    rte_pktmbuf_free_bulk(drop, dropped);
  }
  if (forwarded != 0) transmit(path.tx_port, forward, forwarded);
  return n;
}

void Forwarder::transmit(std::uint16_t port, rte_mbuf** packets, std::uint16_t count) noexcept {
  std::uint16_t sent = rte_eth_tx_burst(port, 0, packets, count);
  // A port that takes nothing twice in a row is down or stuck: stop waiting for it, so that it does
  // not slow the other paths by the whole retry budget every burst.
  unsigned idle_tries = sent == 0 ? 1 : 0;
  for (unsigned retry = 0; sent < count && retry < kTxRetries && idle_tries < kTxIdleTries; ++retry) {
    rte_delay_us_block(1);
    const std::uint16_t more = rte_eth_tx_burst(port, 0, packets + sent, count - sent);
    sent += more;
    idle_tries = more == 0 ? idle_tries + 1 : 0;
  }
  if (sent < count) {
    rte_pktmbuf_free_bulk(packets + sent, count - sent);
    counters_.tx_dropped[port].add(count - sent);
  }
}

}  // namespace tricolor::dataplane
