// c10's caching-allocator statistics as the CUDA meter reads them. Device
// free (c10/core only), so it is compiled and tested in every build.
#ifndef REMAT_RUNTIME_SRC_CUDA_STATS_H_
#define REMAT_RUNTIME_SRC_CUDA_STATS_H_

#include <c10/core/CachingDeviceAllocator.h>

#include "cuda_meter_core.h"

namespace remat::runtime {

// The aggregate (all pools) allocated and reserved bytes, current and peak.
// c10 indexes each StatArray by StatType; AGGREGATE is the sum of the small
// and large pools.
CudaAllocatorStats StatsOf(const c10::CachingDeviceAllocator::DeviceStats& stats);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_CUDA_STATS_H_
