// free_dropped (dataplane/dpdk/mbuf_free.hpp) on real mbufs (a memory-only EAL): every mbuf it is given
// is released exactly as rte_pktmbuf_free would release it, whatever the burst holds: one-segment mbufs
// of one pool (the short path), a chain, another pool's mbuf, a clone's two references.
#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <vector>

#include "dataplane/dpdk/mbuf_free.hpp"
#include "dataplane/dpdk/ports.hpp"

namespace tricolor::dataplane {
namespace {

constexpr unsigned kBurst = 32;

class MbufFree : public ::testing::Test {
 protected:
  void SetUp() override {
    for (Mempool* pool : {&pool_, &other_}) {
      auto made = make_mbuf_pool(511, SOCKET_ID_ANY, {});
      ASSERT_TRUE(made) << made.error().message;
      *pool = std::move(*made);
    }
    // The pools' per-lcore caches count as available: the counts below are of the whole pool.
    full_ = rte_mempool_avail_count(pool_.get());
    other_full_ = rte_mempool_avail_count(other_.get());
  }
  rte_mbuf* one(Mempool& pool) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool.get());
    EXPECT_NE(m, nullptr);
    EXPECT_NE(rte_pktmbuf_append(m, 60), nullptr);
    return m;
  }
  unsigned in_use() const { return full_ - rte_mempool_avail_count(pool_.get()); }
  unsigned other_in_use() const { return other_full_ - rte_mempool_avail_count(other_.get()); }
  Mempool pool_, other_;
  unsigned full_ = 0, other_full_ = 0;
};

TEST_F(MbufFree, ABurstOfOneSegmentMbufsOfOnePoolGoesBackWhole) {
  std::vector<rte_mbuf*> burst;
  for (unsigned i = 0; i < kBurst; ++i) burst.push_back(one(pool_));
  ASSERT_EQ(in_use(), kBurst);
  free_dropped<kBurst>(burst.data(), static_cast<std::uint16_t>(burst.size()));
  EXPECT_EQ(in_use(), 0u);
  // Back as the pool hands them out: one reference, one segment, no chain.
  rte_mbuf* again = rte_pktmbuf_alloc(pool_.get());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(rte_mbuf_refcnt_read(again), 1);
  EXPECT_EQ(again->nb_segs, 1);
  EXPECT_EQ(again->next, nullptr);
  rte_pktmbuf_free(again);
  free_dropped<kBurst>(burst.data(), 0);  // nothing: nothing touched
  EXPECT_EQ(in_use(), 0u);
}

TEST_F(MbufFree, AChainAnotherPoolsMbufAndWhatFollowsThemGoThroughTheLibrary) {
  rte_mbuf* chained = one(pool_);
  ASSERT_EQ(rte_pktmbuf_chain(chained, one(pool_)), 0);
  std::vector<rte_mbuf*> burst{one(pool_), one(pool_), chained, one(pool_), one(other_), one(pool_)};
  ASSERT_EQ(in_use(), 6u);  // four alone and a chain of two
  ASSERT_EQ(other_in_use(), 1u);
  free_dropped<kBurst>(burst.data(), static_cast<std::uint16_t>(burst.size()));
  EXPECT_EQ(in_use(), 0u);
  EXPECT_EQ(other_in_use(), 0u);
  std::vector<rte_mbuf*> first_other{one(other_), one(pool_), one(pool_)};  // the pool is the first's
  free_dropped<kBurst>(first_other.data(), 3);
  EXPECT_EQ(in_use(), 0u);
  EXPECT_EQ(other_in_use(), 0u);
}

TEST_F(MbufFree, AnMbufWithAnotherReferenceOnlyLosesOne) {
  rte_mbuf* shared = one(pool_);
  rte_mbuf_refcnt_update(shared, 1);  // held elsewhere too (a mirror, say)
  std::vector<rte_mbuf*> burst{one(pool_), shared, one(pool_)};
  free_dropped<kBurst>(burst.data(), 3);
  EXPECT_EQ(in_use(), 1u);
  EXPECT_EQ(rte_mbuf_refcnt_read(shared), 1);
  rte_pktmbuf_free(shared);
  EXPECT_EQ(in_use(), 0u);
}

TEST_F(MbufFree, AClonesIndirectMbufIsDetachedAndItsDataKeptForTheOther) {
  rte_mbuf* original = one(pool_);
  rte_mbuf* clone = rte_pktmbuf_clone(original, pool_.get());  // indirect: attached to original's data
  ASSERT_NE(clone, nullptr);
  ASSERT_TRUE(RTE_MBUF_CLONED(clone));
  ASSERT_EQ(rte_mbuf_refcnt_read(original), 2);
  std::vector<rte_mbuf*> burst{one(pool_), clone, one(pool_)};
  free_dropped<kBurst>(burst.data(), 3);
  EXPECT_EQ(in_use(), 1u);  // the original, whose data the clone no longer holds
  EXPECT_EQ(rte_mbuf_refcnt_read(original), 1);
  rte_pktmbuf_free(original);
  EXPECT_EQ(in_use(), 0u);
}

TEST_F(MbufFree, MoreThanABurstGoesThroughTheLibrary) {
  std::vector<rte_mbuf*> many;
  for (unsigned i = 0; i < kBurst + 5; ++i) many.push_back(one(pool_));
  free_dropped<kBurst>(many.data(), static_cast<std::uint16_t>(many.size()));
  EXPECT_EQ(in_use(), 0u);
}

}  // namespace
}  // namespace tricolor::dataplane
