// The allocator's size arithmetic: how a request is rounded, which segment a
// new request gets, and the cap a memory fraction sets.
// PyTorch: DeviceCachingAllocator::round_size, roundup_power2_next_division,
// get_allocation_size (c10/cuda/CUDACachingAllocator.cpp);
// AcceleratorAllocatorConfig::roundup_power2_divisions(size)
// (c10/core/AllocatorConfig.cpp); setMemoryFraction.
#include <algorithm>

#include "remat/device/caching_allocator.h"

namespace remat {
namespace {

// -1 for 0.
int FloorLog2(uint64_t v) { return v == 0 ? -1 : 63 - __builtin_clzll(v); }

// The divisions configured for the power-of-two interval holding `size`:
// interval 0 is [1 MiB, 2 MiB) and everything below, interval 15 is 32 GiB
// and everything above.
int64_t DivisionsFor(int64_t size, const AllocatorOptions& options) {
  const int index =
      std::clamp(FloorLog2(static_cast<uint64_t>(size)) - 20, 0, kAllocRoundupIntervals - 1);
  return options.roundup_power2_divisions[static_cast<size_t>(index)];
}

// The next of `divisions` equal steps between the powers of two around
// `size` (1200 with 4 divisions: steps of 256 above 1024, so 1280).
int64_t NextPower2Division(int64_t size, int64_t divisions) {
  const auto u = static_cast<uint64_t>(size);
  if ((u & (u - 1)) == 0) return size;
  const uint64_t floor = uint64_t{1} << FloorLog2(u);
  const uint64_t step = floor >> FloorLog2(static_cast<uint64_t>(divisions));
  if (step == 0) return static_cast<int64_t>(floor << 1);
  const uint64_t down = u & ~(step - 1);
  return static_cast<int64_t>(down == u ? u : down + step);
}

}  // namespace

int64_t RoundAllocationBytes(int64_t request_bytes, const AllocatorOptions& options) {
  if (request_bytes < kAllocMinBlockBytes) return kAllocMinBlockBytes;
  const int64_t divisions = DivisionsFor(request_bytes, options);
  if (divisions > 1 && request_bytes > kAllocMinBlockBytes * divisions) {
    return NextPower2Division(request_bytes, divisions);
  }
  return (request_bytes + kAllocMinBlockBytes - 1) / kAllocMinBlockBytes * kAllocMinBlockBytes;
}

int64_t SegmentBytesFor(int64_t rounded_bytes, const AllocatorOptions& options) {
  if (rounded_bytes <= kAllocSmallRequestBytes) return kAllocSmallSegmentBytes;
  if (rounded_bytes < kAllocMinLargeAllocBytes) return options.large_segment_bytes;
  return (rounded_bytes + kAllocRoundLargeBytes - 1) / kAllocRoundLargeBytes *
         kAllocRoundLargeBytes;
}

int64_t MemoryFractionCapBytes(double fraction, int64_t card_total_bytes) {
  return static_cast<int64_t>(fraction * static_cast<double>(card_total_bytes));
}

}  // namespace remat
