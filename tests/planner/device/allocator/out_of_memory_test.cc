// The allocator at its limit: what it releases before giving up
// (DeviceCachingAllocator::malloc's retry chain) and the garbage collector
// under a memory-fraction cap.
#include <gtest/gtest.h>

#include <vector>

#include "remat/device/caching_allocator.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

AllocatorLimit Driver(int64_t bytes) {
  AllocatorLimit limit;
  limit.driver_bytes = bytes;
  return limit;
}

// Limit 40 MiB. A (30 MiB) is freed and stays cached. B (32 MiB) fits no
// cached block and 30 + 32 > 40: every unused cached segment is released,
// then B gets its segment (a last-resort retry). C (10 MiB, own segment)
// needs 32 + 10 > 40 with nothing cached left: its retry fails too, out of
// memory at event 3.
TEST(AllocatorOutOfMemory, ReleasesCachedSegmentsThenReports) {
  const auto r =
      ReplayAllocations({AllocEvent::Alloc(1, 30 * kMiB), AllocEvent::Free(1),
                         AllocEvent::Alloc(2, 32 * kMiB), AllocEvent::Alloc(3, 10 * kMiB)},
                        AllocatorOptions{}, Driver(40 * kMiB));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->reserved_timeline_bytes, (std::vector<int64_t>{30 * kMiB, 30 * kMiB, 32 * kMiB}));
  EXPECT_EQ(r->stats.alloc_retries, 2);
  EXPECT_EQ(r->stats.device_frees, 1);
  ASSERT_TRUE(r->oom.has_value());
  EXPECT_EQ(r->oom->event_index, 3);
  EXPECT_EQ(r->oom->id, 3);
  EXPECT_EQ(r->oom->segment_bytes, 10 * kMiB);
  EXPECT_EQ(r->oom->reserved_bytes, 32 * kMiB);
  EXPECT_EQ(r->oom->allocated_bytes, 32 * kMiB);
  // Unlimited, nothing is released and C splits A's cached 30 MiB: 30 + 32.
  const auto free_run =
      ReplayAllocations({AllocEvent::Alloc(1, 30 * kMiB), AllocEvent::Free(1),
                         AllocEvent::Alloc(2, 32 * kMiB), AllocEvent::Alloc(3, 10 * kMiB)},
                        AllocatorOptions{});
  ASSERT_TRUE(free_run.ok());
  EXPECT_FALSE(free_run->oom.has_value());
  EXPECT_EQ(free_run->stats.reserved_bytes, 62 * kMiB);
}

// max_split_size_mb:40, limit 150 MiB: cached are a 100 MiB oversize block and
// a 20 MiB segment (reserved 120). 60 MiB cannot use the 100 MiB block
// (100 >= 60 + 20) and 120 + 60 > 150, so the allocator first frees the
// oversize block alone (the smallest cached block >= 60 MiB) and succeeds:
// reserved 80, the 20 MiB segment still cached, no last-resort retry.
TEST(AllocatorOutOfMemory, FreesOversizeBlocksFirst) {
  AllocatorOptions o;
  o.max_split_size_bytes = 40 * kMiB;
  CudaAllocatorModel m(o, Driver(150 * kMiB));
  ASSERT_TRUE(m.Malloc(1, 100 * kMiB).ok());
  ASSERT_TRUE(m.Malloc(2, 5 * kMiB).ok());
  ASSERT_TRUE(m.Free(1).ok());
  ASSERT_TRUE(m.Free(2).ok());
  EXPECT_EQ(m.stats().reserved_bytes, 120 * kMiB);
  ASSERT_TRUE(m.Malloc(3, 60 * kMiB).ok());
  EXPECT_EQ(m.stats().reserved_bytes, 80 * kMiB);
  EXPECT_EQ(m.stats().segments, 2);
  EXPECT_EQ(m.stats().alloc_retries, 0);
}

TEST(AllocatorOutOfMemory, ModelStaysUsableAfterAnOutOfMemory) {
  CudaAllocatorModel m(AllocatorOptions{}, Driver(20 * kMiB));
  ASSERT_TRUE(m.Malloc(1, 12 * kMiB).ok());
  const Status s = m.Malloc(2, 12 * kMiB);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory);
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_TRUE(m.Malloc(2, 12 * kMiB).ok());
}

// The fraction cap is checked with a request's segment size, even with
// expandable segments whose pages may be larger (PyTorch checks it before
// mapping); a driver limit sees the pages.
TEST(AllocatorOutOfMemory, FractionCapChecksTheWholeSegment) {
  AllocatorOptions o;
  o.expandable_segments = true;
  AllocatorLimit cap;
  cap.fraction_cap_bytes = 30 * kMiB;
  // 12 MiB maps one 20 MiB page (the 8 MiB rest stays free); 10 MiB more
  // fits nothing cached, and as a >= 10 MiB request its segment is 10 MiB:
  // 20 + 10 <= 30, so it maps one more page: reserved 40 > the cap, as
  // PyTorch (the cap is checked with the segment size, not the pages).
  const auto r =
      ReplayAllocations({AllocEvent::Alloc(1, 12 * kMiB), AllocEvent::Alloc(2, 10 * kMiB)}, o, cap);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->oom.has_value());
  EXPECT_EQ(r->stats.reserved_bytes, 40 * kMiB);
  // The same under a 30 MiB driver limit: the pages themselves do not fit.
  const auto d = ReplayAllocations(
      {AllocEvent::Alloc(1, 12 * kMiB), AllocEvent::Alloc(2, 10 * kMiB)}, o, Driver(30 * kMiB));
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->oom.has_value());
  EXPECT_EQ(d->oom->event_index, 1);
}

// Cap 200 MiB, garbage_collection_threshold 0.5: collect above 100 MiB.
// Large-pool lookups: A (1), B (2); A freed (cached at 2); C (3, 42 MiB new:
// reserved 102); B freed (cached at 3); D (lookup 4, 50 MiB fits nothing):
// reserved 102 > 100, ages A = 2, B = 1, average 1.5, so A (the older) is
// freed, which reclaims enough. D then reserves 50: 102 - 30 + 50 = 122.
// Without the threshold: 152.
TEST(AllocatorGarbageCollection, FreesTheOldestCachedSegmentsAboveTheThreshold) {
  const std::vector<AllocEvent> events = {AllocEvent::Alloc(1, 30 * kMiB),
                                          AllocEvent::Alloc(2, 30 * kMiB),
                                          AllocEvent::Free(1),
                                          AllocEvent::Alloc(3, 42 * kMiB),
                                          AllocEvent::Free(2),
                                          AllocEvent::Alloc(4, 50 * kMiB)};
  AllocatorOptions o;
  o.garbage_collection_threshold = 0.5;
  AllocatorLimit cap;
  cap.fraction_cap_bytes = 200 * kMiB;
  auto r = ReplayAllocations(events, o, cap);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.reserved_bytes, 122 * kMiB);
  EXPECT_EQ(r->stats.segments, 3);  // B cached, C, D
  // Without a cap PyTorch runs no collection, threshold or not.
  r = ReplayAllocations(events, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.reserved_bytes, 152 * kMiB);
  r = ReplayAllocations(events, AllocatorOptions{}, cap);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.reserved_bytes, 152 * kMiB);
}

}  // namespace
}  // namespace remat
