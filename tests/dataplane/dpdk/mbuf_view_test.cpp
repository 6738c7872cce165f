// The daemon's bridge between mbufs and the engine (dataplane/dpdk/mbuf_view.hpp), on real mbufs from a
// DPDK pool: a jumbo frame chained over several segments is viewed from its first segment and metered
// for its whole length; a VLAN tag the NIC stripped is seen by the parser and goes back into the frame
// (or to the NIC's insertion offload) with the PCP a remark gave it; the RX timestamp becomes ticks.
#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include <cstring>
#include <vector>

#include "dataplane/engine/actions.hpp"
#include "dataplane/dpdk/mbuf_view.hpp"
#include "dataplane/engine/parse.hpp"
#include "dataplane/dpdk/ports.hpp"

namespace tricolor::dataplane {
namespace {

// An untagged IPv4/UDP frame of `length` bytes (FCS excluded).
std::vector<std::uint8_t> udp_frame(std::size_t length) {
  std::vector<std::uint8_t> f(length, 0);
  f[12] = 0x08, f[13] = 0x00;                              // EtherType IPv4
  f[14] = 0x45;                                            // version 4, IHL 5
  const auto total = static_cast<std::uint16_t>(length - 14);
  f[16] = static_cast<std::uint8_t>(total >> 8), f[17] = static_cast<std::uint8_t>(total);
  f[22] = 64, f[23] = 17;                                  // TTL, UDP
  f[26] = 10, f[29] = 1, f[30] = 10, f[33] = 2;            // 10.0.0.1 -> 10.0.0.2
  f[34] = 0x13, f[35] = 0x88, f[36] = 0x00, f[37] = 0x35;  // 5000 -> 53
  return f;
}

class MbufView : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = make_mbuf_pool(1023, SOCKET_ID_ANY, {});  // no port: mbufs of the default size
    ASSERT_TRUE(made) << made.error().message;
    pool_ = std::move(*made);
  }
  // `frame` in as many chained mbufs as it takes (as a PMD builds a jumbo frame), each at most `segment` bytes.
  rte_mbuf* chain(const std::vector<std::uint8_t>& frame, std::size_t segment) {
    rte_mbuf* head = nullptr;
    for (std::size_t at = 0; at < frame.size(); at += segment) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool_.get());
      EXPECT_NE(m, nullptr);
      const std::size_t n = std::min(segment, frame.size() - at);
      std::memcpy(rte_pktmbuf_append(m, static_cast<std::uint16_t>(n)), frame.data() + at, n);
      if (head == nullptr) head = m;
      else EXPECT_EQ(rte_pktmbuf_chain(head, m), 0);
    }
    return head;
  }
  Mempool pool_;
};

TEST_F(MbufView, JumboFrameInSegmentsIsParsedFromTheFirstAndMeteredWhole) {
  const auto frame = udp_frame(9000);
  rte_mbuf* m = chain(frame, 2048);
  ASSERT_EQ(m->nb_segs, 5);
  const PacketView view = view_of(m, 3, 777);
  EXPECT_EQ(view.captured, 2048u);  // the first segment
  EXPECT_EQ(view.wire_length, 9000u);
  EXPECT_EQ(view.port, 3);
  EXPECT_EQ(view.arrival, 777u);
  const Parsed parsed = parse(view);
  EXPECT_EQ(parsed.error, ParseError::none);
  EXPECT_EQ(parsed.l3_length, 9000 - 14);
  EXPECT_EQ(parsed.dst_port, 53);
  rte_pktmbuf_free(m);
}

TEST_F(MbufView, StrippedVlanIsSeenAndGoesBackWithItsRemarkedPcp) {
  const auto frame = udp_frame(100);
  rte_mbuf* m = chain(frame, 2048);
  m->ol_flags |= RTE_MBUF_F_RX_VLAN_STRIPPED;
  m->vlan_tci = (2 << 13) | 42;  // PCP 2, VLAN 42, as the NIC removed it
  PacketView view = view_of(m, 0, 0);
  const Parsed parsed = parse(view);
  EXPECT_TRUE(parsed.has_vlan);
  EXPECT_EQ(parsed.vlan_id, 42);
  EXPECT_EQ(parsed.pcp, 2);
  ASSERT_TRUE(set_pcp(view, parsed, 5));

  // Without the insertion offload the tag is written back into the frame.
  ASSERT_TRUE(restore_stripped_vlan(m, view, false));
  ASSERT_EQ(m->pkt_len, 104u);
  const auto* bytes = rte_pktmbuf_mtod(m, const std::uint8_t*);
  EXPECT_EQ(bytes[12], 0x81);
  EXPECT_EQ(bytes[13], 0x00);
  EXPECT_EQ((bytes[14] << 8 | bytes[15]), (5 << 13) | 42);
  EXPECT_EQ(bytes[16], 0x08);  // the IPv4 EtherType follows the tag
  EXPECT_EQ(std::memcmp(bytes + 18, frame.data() + 14, frame.size() - 14), 0);
  EXPECT_EQ(m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED, 0u);
  rte_pktmbuf_free(m);
}

TEST_F(MbufView, StrippedVlanGoesToTheInsertionOffloadWhenThePortHasIt) {
  rte_mbuf* m = chain(udp_frame(100), 2048);
  m->ol_flags |= RTE_MBUF_F_RX_VLAN_STRIPPED;
  m->vlan_tci = 42;
  PacketView view = view_of(m, 0, 0);
  ASSERT_TRUE(set_pcp(view, parse(view), 6));
  ASSERT_TRUE(restore_stripped_vlan(m, view, true));
  EXPECT_EQ(m->pkt_len, 100u);  // the NIC inserts it
  EXPECT_NE(m->ol_flags & RTE_MBUF_F_TX_VLAN, 0u);
  EXPECT_EQ(m->vlan_tci, (6 << 13) | 42);
  rte_pktmbuf_free(m);
}

TEST_F(MbufView, UntaggedFramesAreLeftAlone) {
  rte_mbuf* m = chain(udp_frame(100), 2048);
  PacketView view = view_of(m, 0, 0);
  EXPECT_FALSE(view.has_stripped_vlan);
  ASSERT_TRUE(restore_stripped_vlan(m, view, false));
  EXPECT_EQ(m->pkt_len, 100u);
  EXPECT_EQ(m->ol_flags & RTE_MBUF_F_TX_VLAN, 0u);
  rte_pktmbuf_free(m);
}

TEST_F(MbufView, RxTimestampInMicrosecondsBecomesNanosecondTicks) {
  RxTimestampField field;
  ASSERT_EQ(rte_mbuf_dyn_rx_timestamp_register(&field.offset, &field.flag), 0);
  rte_mbuf* m = chain(udp_frame(100), 2048);
  std::uint64_t ticks = 0;
  EXPECT_FALSE(rx_timestamp_ticks(m, field, ticks));  // no flag: no time
  *RTE_MBUF_DYNFIELD(m, field.offset, rte_mbuf_timestamp_t*) = 1'767'225'600'123'456;
  m->ol_flags |= field.flag;
  ASSERT_TRUE(rx_timestamp_ticks(m, field, ticks));
  EXPECT_EQ(ticks, 1'767'225'600'123'456'000u);
  rte_pktmbuf_free(m);
}

TEST_F(MbufView, PoolIsSizedForEveryQueueAndBurst) {
  PortOptions options;
  options.rx_descriptors = 1024;
  options.tx_descriptors = 512;
  const std::uint16_t ports[] = {0, 1};  // not probed here (a memory-only EAL): queues of the sizes asked
  const std::uint32_t n = mbufs_needed(ports, options, 2);
  EXPECT_GE(n, 2u * (1024 + 512) + 2 * 2 * 32);
  EXPECT_EQ((n + 1) & n, 0u);  // a power of two minus one
}

}  // namespace
}  // namespace tricolor::dataplane
