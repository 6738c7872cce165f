#pragma once
// Packet views over received mbufs, and what goes back into an mbuf before it is sent: the daemon's
// bridge between DPDK's buffers and the engine, which only ever sees views (packet.hpp).
//
// A view is the mbuf's first segment (the headers the parser needs are there: a NIC or a PMD writes
// the frame from the start of the first buffer) and the packet's whole length, so that a jumbo frame
// chained over several segments is metered for every byte. No copy, no allocation.
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ether.h>

#include <cstdint>

#include "dataplane/engine/packet.hpp"

namespace tricolor::dataplane {

// The engine's clock in the daemon: the TSC read once per burst, or each packet's RX timestamp
// (net_pcap writes the capture's time in microseconds; the engine then ticks at 1e9 per second, as
// tricolor-replay's clock does).
enum class ClockSource : std::uint8_t { tsc, rx_timestamp };

inline constexpr std::uint64_t kNanosecondsPerMicrosecond = 1000;

// Where the RX timestamp lives in an mbuf, once registered (rte_mbuf_dyn_rx_timestamp_register).
struct RxTimestampField {
  int offset = -1;
  std::uint64_t flag = 0;  // set in ol_flags when the field holds a time
};

// A view of `m` received on `port`, arriving at `arrival` ticks.
inline PacketView view_of(rte_mbuf* m, std::uint16_t port, std::uint64_t arrival) noexcept {
  PacketView view;
  view.data = rte_pktmbuf_mtod(m, std::uint8_t*);
  view.captured = m->data_len;
  view.wire_length = m->pkt_len;
  view.arrival = arrival;
  view.port = port;
  if ((m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) != 0) {
    view.has_stripped_vlan = true;
    view.stripped_tci = m->vlan_tci;
  }
  return view;
}

// The arrival tick of `m` by its RX timestamp (microseconds) at 1e9 ticks per second; false when the
// port wrote none.
inline bool rx_timestamp_ticks(const rte_mbuf* m, const RxTimestampField& field, std::uint64_t& ticks) noexcept {
  if ((m->ol_flags & field.flag) == 0) return false;
  const auto us = *RTE_MBUF_DYNFIELD(m, field.offset, const rte_mbuf_timestamp_t*);
  ticks = us * kNanosecondsPerMicrosecond;
  return true;
}

// Before transmission: a VLAN tag the NIC stripped on receipt leaves with the packet again, with the
// priority a PCP remark gave it (the engine wrote it into view.stripped_tci). The egress port inserts
// it when it can (`insert_offload`), otherwise it is written back into the frame here (in the mbuf's
// headroom: no allocation). False if the tag could not be put back (the packet should not leave
// without it).
inline bool restore_stripped_vlan(rte_mbuf*& m, const PacketView& view, bool insert_offload) noexcept {
  if (!view.has_stripped_vlan) return true;
  m->ol_flags &= ~RTE_MBUF_F_RX_VLAN_STRIPPED;
  m->vlan_tci = view.stripped_tci;
  if (insert_offload) {
    m->ol_flags |= RTE_MBUF_F_TX_VLAN;
    return true;
  }
  return rte_vlan_insert(&m) == 0;
}

}  // namespace tricolor::dataplane
