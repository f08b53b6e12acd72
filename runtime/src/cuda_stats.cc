#include "cuda_stats.h"

namespace remat::runtime {

CudaAllocatorStats StatsOf(const c10::CachingDeviceAllocator::DeviceStats& stats) {
  constexpr auto kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  CudaAllocatorStats s;
  s.allocated = stats.allocated_bytes[kAggregate].current;
  s.allocated_peak = stats.allocated_bytes[kAggregate].peak;
  s.reserved = stats.reserved_bytes[kAggregate].current;
  s.reserved_peak = stats.reserved_bytes[kAggregate].peak;
  return s;
}

}  // namespace remat::runtime
