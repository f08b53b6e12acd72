// expandable_segments:True: one segment per pool that grows by mapped pages
// (2 MiB in the small pool, 20 MiB in the large pool); reserved = mapped.
#include <gtest/gtest.h>

#include <vector>

#include "remat/device/caching_allocator.h"

namespace remat {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = int64_t{1} << 20;

AllocatorOptions Expandable() {
  AllocatorOptions o;
  o.expandable_segments = true;
  return o;
}

// 5 MiB maps one 20 MiB page; 30 MiB more best-fits nothing, so the free
// 15 MiB tail grows by one more page (15 + 20 >= 30): 40 MiB mapped. Without
// expandable segments the 30 MiB request takes its own 30 MiB segment: 50 MiB.
TEST(ExpandableSegments, GrowByPagesInsteadOfNewSegments) {
  const std::vector<AllocEvent> events = {AllocEvent::Alloc(1, 5 * kMiB),
                                          AllocEvent::Alloc(2, 30 * kMiB)};
  auto r = ReplayAllocations(events, Expandable());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->reserved_timeline_bytes, (std::vector<int64_t>{20 * kMiB, 40 * kMiB}));
  EXPECT_EQ(r->stats.expandable_segments, 1);
  EXPECT_EQ(r->stats.segments, 0);
  EXPECT_EQ(r->stats.allocated_bytes, 35 * kMiB);
  r = ReplayAllocations(events, AllocatorOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.reserved_bytes, 50 * kMiB);
}

// Best fit in an expandable segment counts a free block in front of the
// unmapped pages as the size it could grow to. A (6), B (10), C (4 MiB) fill
// one 20 MiB page; A and C are freed. For 3 MiB the smallest fit is C's 4 MiB
// at the segment's end, but it could grow to the whole segment, so A's 6 MiB
// hole is taken instead.
TEST(ExpandableSegments, BestFitLeavesTheGrowableEndAlone) {
  CudaAllocatorModel m(Expandable(), AllocatorLimit{});
  ASSERT_TRUE(m.Malloc(1, 6 * kMiB).ok());
  ASSERT_TRUE(m.Malloc(2, 10 * kMiB).ok());
  ASSERT_TRUE(m.Malloc(3, 4 * kMiB).ok());
  ASSERT_TRUE(m.Free(1).ok());
  ASSERT_TRUE(m.Free(3).ok());
  ASSERT_TRUE(m.Malloc(4, 3 * kMiB).ok());
  const auto snap = m.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].blocks.size(), 4u);
  EXPECT_TRUE(snap[0].blocks[0].allocated);
  EXPECT_EQ(snap[0].blocks[0].size_bytes, 3 * kMiB);
  EXPECT_FALSE(snap[0].blocks[3].allocated);
  EXPECT_EQ(snap[0].blocks[3].size_bytes, 4 * kMiB);
}

// 1000 x 1 KiB in the small pool: 1000 KiB packed from the segment's start,
// mapped in 2 MiB pages: one page.
TEST(ExpandableSegments, SmallPoolMapsTwoMiBPages) {
  std::vector<AllocEvent> events;
  for (int i = 0; i < 3000; ++i) events.push_back(AllocEvent::Alloc(i, kKiB));
  const auto r = ReplayAllocations(events, Expandable());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reserved_timeline_bytes[999], 2 * kMiB);
  // 3000 KiB: ceil(3000 KiB / 2 MiB) = 2 pages.
  EXPECT_EQ(r->stats.reserved_bytes, 4 * kMiB);
}

// Emptying the cache unmaps every free whole page; a segment with nothing
// mapped is released. A live block keeps the pages under it.
TEST(ExpandableSegments, EmptyCacheUnmapsFreePages) {
  CudaAllocatorModel m(Expandable(), AllocatorLimit{});
  ASSERT_TRUE(m.Malloc(1, 30 * kMiB).ok());  // pages [0, 40) MiB
  ASSERT_TRUE(m.Malloc(2, 30 * kMiB).ok());  // [30, 60): pages up to 60 MiB
  EXPECT_EQ(m.stats().reserved_bytes, 60 * kMiB);
  ASSERT_TRUE(m.Free(2).ok());
  m.EmptyCache();
  // Free range [30, 60) MiB holds one whole page, [40, 60); [30, 40) shares a
  // page with block 1.
  EXPECT_EQ(m.stats().reserved_bytes, 40 * kMiB);
  ASSERT_TRUE(m.Free(1).ok());
  m.EmptyCache();
  EXPECT_EQ(m.stats().reserved_bytes, 0);
  EXPECT_EQ(m.stats().expandable_segments, 0);
}

// Under a driver limit of 70 MiB: A and B (20 MiB each) map pages [0, 40);
// A is freed. C (30 MiB) fits no cached block and B sits before the unmapped
// tail, so C needs two new pages: 40 + 40 > 70. The allocator unmaps A's free
// page (reserved 20) and retries: C maps two pages after B, reserved 60.
// Unlimited, nothing is unmapped: 80.
TEST(ExpandableSegments, OutOfMemoryUnmapsCachedPagesAndRetries) {
  const std::vector<AllocEvent> events = {AllocEvent::Alloc(1, 20 * kMiB),
                                          AllocEvent::Alloc(2, 20 * kMiB), AllocEvent::Free(1),
                                          AllocEvent::Alloc(3, 30 * kMiB)};
  AllocatorLimit limit;
  limit.driver_bytes = 70 * kMiB;
  auto r = ReplayAllocations(events, Expandable(), limit);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->oom.has_value());
  EXPECT_EQ(r->stats.reserved_bytes, 60 * kMiB);
  EXPECT_EQ(r->stats.peak_reserved_bytes, 60 * kMiB);
  EXPECT_EQ(r->stats.alloc_retries, 1);
  r = ReplayAllocations(events, Expandable());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.reserved_bytes, 80 * kMiB);
}

}  // namespace
}  // namespace remat
