// The caching allocator's pools, best fit, splitting, merging and
// max_split_size, each expected value derived by hand from PyTorch's rules
// (remat/device/caching_allocator.h lists them).
#include "remat/device/caching_allocator.h"

#include <gtest/gtest.h>

#include <vector>

namespace remat {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = int64_t{1} << 20;

AllocatorReplay Replay(const std::vector<AllocEvent>& events, const AllocatorOptions& o = {}) {
  auto r = ReplayAllocations(events, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : AllocatorReplay{};
}

// 5000 requests of 1 KiB: small pool, 2048 per 2 MiB segment, so
// ceil(5000 / 2048) = 3 segments = 6 MiB reserved for 5000 KiB allocated.
TEST(CachingAllocator, SmallRequestsShareTwoMiBSegments) {
  std::vector<AllocEvent> events;
  for (int i = 0; i < 5000; ++i) events.push_back(AllocEvent::Alloc(i, kKiB));
  const AllocatorReplay r = Replay(events);
  EXPECT_EQ(r.stats.allocated_bytes, 5000 * kKiB);
  EXPECT_EQ(r.stats.reserved_bytes, 6 * kMiB);
  EXPECT_EQ(r.stats.segments, 3);
  // The first request reserves the first segment; request 2049 the third.
  EXPECT_EQ(r.reserved_timeline_bytes.front(), 2 * kMiB);
  EXPECT_EQ(r.reserved_timeline_bytes[2047], 2 * kMiB);
  EXPECT_EQ(r.reserved_timeline_bytes[2048], 4 * kMiB);
  EXPECT_EQ(r.reserved_timeline_bytes[4096], 6 * kMiB);
}

// 5 MiB is a large request below 10 MiB: a 20 MiB segment, split (15 MiB
// remain, more than 1 MiB). The next 5 MiB request best-fits the 15 MiB rest.
TEST(CachingAllocator, MidSizeRequestsShareATwentyMiBSegment) {
  const AllocatorReplay r =
      Replay({AllocEvent::Alloc(1, 5 * kMiB), AllocEvent::Alloc(2, 5 * kMiB)});
  EXPECT_EQ(r.reserved_timeline_bytes, (std::vector<int64_t>{20 * kMiB, 20 * kMiB}));
  EXPECT_EQ(r.stats.segments, 1);
  EXPECT_EQ(r.stats.allocated_bytes, 10 * kMiB);
}

// From 10 MiB up a request gets its own segment rounded up to 2 MiB; when the
// rest is not more than 1 MiB the block is not split and all of it counts as
// allocated.
TEST(CachingAllocator, LargeRequestsGetTheirOwnSegment) {
  AllocatorReplay r = Replay({AllocEvent::Alloc(1, 30 * kMiB)});
  EXPECT_EQ(r.stats.reserved_bytes, 30 * kMiB);
  r = Replay({AllocEvent::Alloc(1, 31 * kMiB + 1)});
  EXPECT_EQ(r.stats.reserved_bytes, 32 * kMiB);
  EXPECT_EQ(r.stats.allocated_bytes, 32 * kMiB);  // 1 MiB - 512 B rest: not split
  EXPECT_EQ(r.stats.requested_bytes, 31 * kMiB + 1);
}

// Three 5 MiB blocks and a 5 MiB rest in one 20 MiB segment; freeing all three
// merges everything back into one 20 MiB block, which then serves a 19 MiB
// request whole (1 MiB rest: not more than 1 MiB, no split).
TEST(CachingAllocator, FreedBlocksMergeWithinTheirSegment) {
  CudaAllocatorModel m(AllocatorOptions{}, AllocatorLimit{});
  for (int id = 1; id <= 3; ++id) ASSERT_TRUE(m.Malloc(id, 5 * kMiB).ok());
  ASSERT_TRUE(m.Free(2).ok());
  auto snap = m.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].blocks.size(), 4u);  // A, free 5, C, free 5
  EXPECT_FALSE(snap[0].blocks[1].allocated);
  ASSERT_TRUE(m.Free(1).ok());
  ASSERT_TRUE(m.Free(3).ok());
  snap = m.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].blocks.size(), 1u);
  EXPECT_EQ(snap[0].blocks[0].size_bytes, 20 * kMiB);
  EXPECT_EQ(m.stats().reserved_bytes, 20 * kMiB);  // freeing keeps the memory cached

  ASSERT_TRUE(m.Malloc(4, 19 * kMiB).ok());
  EXPECT_EQ(m.stats().reserved_bytes, 20 * kMiB);
  EXPECT_EQ(m.stats().allocated_bytes, 20 * kMiB);
}

// Four 5 MiB blocks fill a 20 MiB segment; freeing the 1st and 3rd leaves
// 10 MiB cached in two 5 MiB holes, which cannot serve 8 MiB: a second
// 20 MiB segment is reserved.
TEST(CachingAllocator, FragmentedHolesForceANewSegment) {
  const AllocatorReplay r =
      Replay({AllocEvent::Alloc(1, 5 * kMiB), AllocEvent::Alloc(2, 5 * kMiB),
              AllocEvent::Alloc(3, 5 * kMiB), AllocEvent::Alloc(4, 5 * kMiB), AllocEvent::Free(1),
              AllocEvent::Free(3), AllocEvent::Alloc(5, 8 * kMiB)});
  EXPECT_EQ(r.reserved_timeline_bytes[5], 20 * kMiB);
  EXPECT_EQ(r.stats.reserved_bytes, 40 * kMiB);
  EXPECT_EQ(r.stats.allocated_bytes, 18 * kMiB);
  EXPECT_EQ(r.stats.segments, 2);
}

// Best fit: of two cached blocks that fit, the smaller is used.
TEST(CachingAllocator, BestFitTakesTheSmallestBlockThatFits) {
  CudaAllocatorModel m(AllocatorOptions{}, AllocatorLimit{});
  ASSERT_TRUE(m.Malloc(1, 40 * kMiB).ok());
  ASSERT_TRUE(m.Malloc(2, 24 * kMiB).ok());
  ASSERT_TRUE(m.Free(1).ok());
  ASSERT_TRUE(m.Free(2).ok());
  ASSERT_TRUE(m.Malloc(3, 23 * kMiB).ok());  // 24 MiB block: rest 1 MiB, not split
  EXPECT_EQ(m.stats().allocated_bytes, 24 * kMiB);
  EXPECT_EQ(m.stats().reserved_bytes, 64 * kMiB);
}

// Splitting is by the rest: a large-pool block is split only when more than
// 1 MiB would remain. 20 MiB segment: 18.5 MiB leaves 1.5 MiB (split, 18.5
// allocated); 19 MiB leaves exactly 1 MiB (whole block, 20 allocated).
TEST(CachingAllocator, LargePoolSplitsOnlyAboveOneMiBRest) {
  CudaAllocatorModel m(AllocatorOptions{}, AllocatorLimit{});
  ASSERT_TRUE(m.Malloc(1, 5 * kMiB).ok());
  ASSERT_TRUE(m.Free(1).ok());
  ASSERT_TRUE(m.Malloc(2, 18 * kMiB + kMiB / 2).ok());
  EXPECT_EQ(m.stats().allocated_bytes, 18 * kMiB + kMiB / 2);
  ASSERT_TRUE(m.Free(2).ok());
  ASSERT_TRUE(m.Malloc(3, 19 * kMiB).ok());
  EXPECT_EQ(m.stats().allocated_bytes, 20 * kMiB);
}

// max_split_size_mb:40. A freed 100 MiB block is oversize: it does not serve
// a 30 MiB request (below 40), nor a 50 MiB one (100 >= 50 + 20 MiB rounding
// limit); it serves 90 MiB whole (100 < 90 + 20), unsplit.
TEST(CachingAllocator, MaxSplitSizeKeepsOversizeBlocksWhole) {
  AllocatorOptions o;
  o.max_split_size_bytes = 40 * kMiB;
  const std::vector<AllocEvent> head = {AllocEvent::Alloc(1, 100 * kMiB), AllocEvent::Free(1)};

  auto with = [&](int64_t bytes, const AllocatorOptions& opts) {
    std::vector<AllocEvent> events = head;
    events.push_back(AllocEvent::Alloc(2, bytes));
    return Replay(events, opts);
  };
  EXPECT_EQ(with(30 * kMiB, o).stats.reserved_bytes, 130 * kMiB);
  EXPECT_EQ(with(50 * kMiB, o).stats.reserved_bytes, 150 * kMiB);
  // The rounding limit is strict: 100 >= 80 + 20, a new segment.
  EXPECT_EQ(with(80 * kMiB, o).stats.reserved_bytes, 180 * kMiB);
  const AllocatorReplay whole = with(90 * kMiB, o);
  EXPECT_EQ(whole.stats.reserved_bytes, 100 * kMiB);
  EXPECT_EQ(whole.stats.allocated_bytes, 100 * kMiB);
  // Without max_split_size the 100 MiB block is split for 50 MiB.
  const AllocatorReplay split = with(50 * kMiB, AllocatorOptions{});
  EXPECT_EQ(split.stats.reserved_bytes, 100 * kMiB);
  EXPECT_EQ(split.stats.allocated_bytes, 50 * kMiB);
}

// A parsed PYTORCH_CUDA_ALLOC_CONF drives the replay: with 2 divisions per
// power of two, 12.5 MiB (in [8, 16) MiB, steps of 4 MiB) rounds to 16 MiB and
// gets a 16 MiB segment; plain rounding keeps 12.5 MiB in a 14 MiB segment.
TEST(CachingAllocator, ParsedConfDrivesTheReplay) {
  const std::vector<AllocEvent> events = {AllocEvent::Alloc(1, 12 * kMiB + kMiB / 2)};
  const auto conf = ParseAllocConf("roundup_power2_divisions:2");
  ASSERT_TRUE(conf.ok());
  const AllocatorReplay divided = Replay(events, *conf);
  EXPECT_EQ(divided.stats.reserved_bytes, 16 * kMiB);
  EXPECT_EQ(divided.stats.allocated_bytes, 16 * kMiB);
  const AllocatorReplay plain = Replay(events);
  EXPECT_EQ(plain.stats.reserved_bytes, 14 * kMiB);
  EXPECT_EQ(plain.stats.allocated_bytes, 12 * kMiB + kMiB / 2);
}

// An empty tensor gets no memory (CUDACachingAllocator::allocate skips
// malloc for size 0); its id is live until freed all the same.
TEST(CachingAllocator, EmptyRequestsTakeNoMemory) {
  const AllocatorReplay r = Replay(
      {AllocEvent::Alloc(1, 0), AllocEvent::Alloc(2, 1), AllocEvent::Free(1), AllocEvent::Free(2)});
  EXPECT_EQ(r.allocated_timeline_bytes, (std::vector<int64_t>{0, 512, 512, 0}));
  EXPECT_EQ(r.stats.reserved_bytes, 2 * kMiB);
  EXPECT_FALSE(ReplayAllocations({AllocEvent::Alloc(1, 0), AllocEvent::Alloc(1, 0)}, {}).ok());
}

TEST(CachingAllocator, BadEventsAreErrorsNamingTheEvent) {
  auto r = ReplayAllocations({AllocEvent::Alloc(1, 8), AllocEvent::Free(2)}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(r.status().message().find("event 1"), std::string::npos) << r.status().message();
  r = ReplayAllocations({AllocEvent::Alloc(1, 8), AllocEvent::Alloc(1, 8)}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("already live"), std::string::npos);
  r = ReplayAllocations({AllocEvent::Alloc(1, -1)}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("negative"), std::string::npos);
}

// Any int64 names an allocation: small non-negative ids (as the replayed
// events number tensors), negative and huge ones alike. An id's request is
// what was asked, not the block's rounded size.
TEST(CachingAllocator, LiveRequestBytesFollowsEveryKindOfId) {
  CudaAllocatorModel m({}, {});
  const std::vector<int64_t> ids = {0, 7, (int64_t{1} << 20) - 1, int64_t{1} << 20, -3,
                                    int64_t{1} << 40};
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(m.LiveRequestBytes(ids[i]), -1) << ids[i];
    ASSERT_TRUE(m.Malloc(ids[i], static_cast<int64_t>(i) * 1000).ok()) << ids[i];
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(m.LiveRequestBytes(ids[i]), static_cast<int64_t>(i) * 1000) << ids[i];
    EXPECT_FALSE(m.Malloc(ids[i], 1).ok()) << ids[i];  // already live
  }
  EXPECT_EQ(m.stats().requested_bytes, 15000);
  EXPECT_EQ(m.stats().allocated_bytes, 1024 + 2048 + 3072 + 4096 + 5120);
  for (int64_t id : ids) {
    ASSERT_TRUE(m.Free(id).ok()) << id;
    EXPECT_EQ(m.LiveRequestBytes(id), -1) << id;
    EXPECT_FALSE(m.Free(id).ok()) << id;
  }
  EXPECT_EQ(m.stats().allocated_bytes, 0);
}

}  // namespace
}  // namespace remat
