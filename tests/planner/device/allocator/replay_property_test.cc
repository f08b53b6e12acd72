// Properties of the allocator over seeded random sequences, checked after
// every event against the snapshot and against closed forms where one exists.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "remat/device/caching_allocator.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// A request size mixing the small pool, the 20 MiB-segment range and large
// segments.
int64_t RandomSize(std::mt19937_64& rng) {
  switch (rng() % 3) {
    case 0:
      return static_cast<int64_t>(rng() % kMiB) + 1;
    case 1:
      return kMiB + static_cast<int64_t>(rng() % (9 * kMiB));
    default:
      return 10 * kMiB + static_cast<int64_t>(rng() % (60 * kMiB));
  }
}

// The snapshot agrees with the counters: segments hold exactly the reserved
// bytes, allocated blocks exactly the allocated bytes, and no two free blocks
// are neighbours (every free merged).
void CheckInvariants(const CudaAllocatorModel& m) {
  const AllocatorStats& s = m.stats();
  int64_t segments_total = 0;
  int64_t allocated_total = 0;
  for (const AllocatorSegmentView& seg : m.Snapshot()) {
    segments_total += seg.total_bytes();
    for (size_t i = 0; i < seg.blocks.size(); ++i) {
      if (seg.blocks[i].allocated) allocated_total += seg.blocks[i].size_bytes;
      if (i > 0) {
        EXPECT_FALSE(!seg.blocks[i].allocated && !seg.blocks[i - 1].allocated)
            << "two neighbouring free blocks";
      }
    }
  }
  EXPECT_EQ(segments_total, s.reserved_bytes);
  EXPECT_EQ(allocated_total, s.allocated_bytes);
  EXPECT_GE(s.reserved_bytes, s.allocated_bytes);
  EXPECT_GE(s.allocated_bytes, s.requested_bytes);
  EXPECT_GE(s.peak_reserved_bytes, s.reserved_bytes);
}

// One random step: allocate a new id (`alloc_in` out of `out_of` steps, and
// whenever nothing is live) or free a random live one. Returns the
// allocation's status (OK for a free); `live` keeps the live ids.
Status RandomStep(std::mt19937_64& rng, int alloc_in, int out_of, CudaAllocatorModel& m,
                  std::vector<int64_t>& live, int64_t& next_id) {
  if (live.empty() || static_cast<int>(rng() % out_of) < alloc_in) {
    const Status s = m.Malloc(next_id, RandomSize(rng));
    if (s.ok()) live.push_back(next_id);
    ++next_id;
    return s;
  }
  const size_t k = rng() % live.size();
  const Status s = m.Free(live[k]);
  live[k] = live.back();
  live.pop_back();
  return s;
}

class AllocatorProperty : public ::testing::TestWithParam<bool> {};  // expandable?

// Random allocs and frees, unlimited: every invariant holds after every event,
// reserved never drops (nothing is released without pressure), and after
// freeing all and emptying the cache nothing is reserved.
TEST_P(AllocatorProperty, InvariantsHoldOverRandomSequences) {
  AllocatorOptions o;
  o.expandable_segments = GetParam();
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    CudaAllocatorModel m(o, AllocatorLimit{});
    std::vector<int64_t> live;
    int64_t next_id = 0;
    int64_t last_reserved = 0;
    for (int step = 0; step < 200; ++step) {
      ASSERT_TRUE(RandomStep(rng, 2, 3, m, live, next_id).ok());
      CheckInvariants(m);
      EXPECT_GE(m.stats().reserved_bytes, last_reserved);
      last_reserved = m.stats().reserved_bytes;
    }
    for (int64_t id : live) ASSERT_TRUE(m.Free(id).ok());
    CheckInvariants(m);
    m.EmptyCache();
    EXPECT_EQ(m.stats().reserved_bytes, 0) << "seed " << seed;
    EXPECT_EQ(m.stats().allocated_bytes, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Segments, AllocatorProperty, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Expandable" : "Fixed";
                         });

// Under a driver limit, with out-of-memory failures along the way, every
// invariant still holds and reserved never passes the limit.
TEST(AllocatorPropertyLimit, ReservedStaysWithinTheDriverLimit) {
  for (bool expandable : {false, true}) {
    AllocatorOptions o;
    o.expandable_segments = expandable;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      std::mt19937_64 rng(seed);
      AllocatorLimit limit;
      limit.driver_bytes = 200 * kMiB;
      CudaAllocatorModel m(o, limit);
      std::vector<int64_t> live;
      int64_t next_id = 0;
      for (int step = 0; step < 200; ++step) {
        const Status s = RandomStep(rng, 1, 2, m, live, next_id);
        ASSERT_TRUE(s.ok() || s.code() == StatusCode::kOutOfMemory) << s.message();
        CheckInvariants(m);
        EXPECT_LE(m.stats().peak_reserved_bytes, limit.driver_bytes);
      }
    }
  }
}

// Expandable segments with allocations only: blocks pack each pool's segment
// from its start (every rest of >= 512 B is split off), so each pool maps
// exactly its rounded requests rounded up to its page: 2 MiB for the small
// pool, 20 MiB for the large pool; allocated is the rounded requests' sum.
TEST(AllocatorPropertyExpandable, NoFreesMapsRoundedUpToPages) {
  AllocatorOptions o;
  o.expandable_segments = true;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    CudaAllocatorModel m(o, AllocatorLimit{});
    int64_t small = 0;
    int64_t large = 0;
    for (int64_t id = 0; id < 100; ++id) {
      const int64_t bytes = RandomSize(rng);
      ASSERT_TRUE(m.Malloc(id, bytes).ok());
      const int64_t rounded = RoundAllocationBytes(bytes, o);
      (rounded <= kAllocSmallRequestBytes ? small : large) += rounded;
      const int64_t expected = (small + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB) +
                               (large + 20 * kMiB - 1) / (20 * kMiB) * (20 * kMiB);
      ASSERT_EQ(m.stats().reserved_bytes, expected) << "seed " << seed << " alloc " << id;
      ASSERT_EQ(m.stats().allocated_bytes, small + large);
    }
  }
}

}  // namespace
}  // namespace remat
