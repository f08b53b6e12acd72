// Request rounding and segment sizes (round_size, get_allocation_size).
#include <gtest/gtest.h>

#include "remat/device/caching_allocator.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(AllocatorSizes, RoundsTo512Bytes) {
  const AllocatorOptions o;
  EXPECT_EQ(RoundAllocationBytes(0, o), 512);
  EXPECT_EQ(RoundAllocationBytes(1, o), 512);
  EXPECT_EQ(RoundAllocationBytes(512, o), 512);
  EXPECT_EQ(RoundAllocationBytes(513, o), 1024);
  EXPECT_EQ(RoundAllocationBytes(5 * kMiB + 1, o), 5 * kMiB + 512);
}

// With d divisions, a size above 512 B x d rounds up to the next of d equal
// steps between the powers of two around it.
TEST(AllocatorSizes, PowerOfTwoDivisions) {
  AllocatorOptions o;
  o.roundup_power2_divisions.fill(4);
  // 1.2 MiB: steps of 1 MiB / 4 = 256 KiB above 1 MiB -> 1.25 MiB.
  EXPECT_EQ(RoundAllocationBytes(1258291, o), 1310720);
  // 5 MiB + 1: steps of 1 MiB above 4 MiB -> 6 MiB.
  EXPECT_EQ(RoundAllocationBytes(5 * kMiB + 1, o), 6 * kMiB);
  // A power of two stays; an exact step stays.
  EXPECT_EQ(RoundAllocationBytes(8 * kMiB, o), 8 * kMiB);
  EXPECT_EQ(RoundAllocationBytes(5 * kMiB, o), 5 * kMiB);
  // 1200 B is not above 512 x 4 = 2048: plain 512 B rounding.
  EXPECT_EQ(RoundAllocationBytes(1200, o), 1536);
  // Divisions of 1 (or 0) mean plain rounding.
  o.roundup_power2_divisions.fill(1);
  EXPECT_EQ(RoundAllocationBytes(5 * kMiB + 1, o), 5 * kMiB + 512);
}

TEST(AllocatorSizes, DivisionsPerInterval) {
  AllocatorOptions o;
  o.roundup_power2_divisions[2] = 2;  // [4 MiB, 8 MiB) only
  EXPECT_EQ(RoundAllocationBytes(5 * kMiB, o), 6 * kMiB);
  EXPECT_EQ(RoundAllocationBytes(9 * kMiB, o), 9 * kMiB);
}

TEST(AllocatorSizes, SegmentSizes) {
  const AllocatorOptions o;
  EXPECT_EQ(SegmentBytesFor(512, o), 2 * kMiB);
  EXPECT_EQ(SegmentBytesFor(kMiB, o), 2 * kMiB);
  EXPECT_EQ(SegmentBytesFor(kMiB + 512, o), 20 * kMiB);
  EXPECT_EQ(SegmentBytesFor(10 * kMiB - 512, o), 20 * kMiB);
  EXPECT_EQ(SegmentBytesFor(10 * kMiB, o), 10 * kMiB);
  EXPECT_EQ(SegmentBytesFor(30 * kMiB, o), 30 * kMiB);
  EXPECT_EQ(SegmentBytesFor(31 * kMiB, o), 32 * kMiB);
  AllocatorOptions big = o;
  big.large_segment_bytes = 64 * kMiB;
  EXPECT_EQ(SegmentBytesFor(5 * kMiB, big), 64 * kMiB);
}

}  // namespace
}  // namespace remat
