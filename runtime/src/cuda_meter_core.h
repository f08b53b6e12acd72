// The CUDA meter's logic, apart from the device: what it reads from the
// caching allocator is behind CudaAllocatorBackend, so the arithmetic
// (512-byte blocks, the memory fraction of a cap, peaks, the out-of-memory
// record) is tested on any machine with a fake backend
// (tests/runtime/cuda_meter_core_test.cc); cuda_memory_meter.cc supplies the
// real backend when built against a CUDA LibTorch. No torch types here.
#ifndef REMAT_RUNTIME_SRC_CUDA_METER_CORE_H_
#define REMAT_RUNTIME_SRC_CUDA_METER_CORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "memory_meter.h"

namespace remat::runtime {

// The caching allocator's aggregate counters for one device, in bytes
// (c10's DeviceStats, all pools): `allocated` is what
// torch.cuda.memory_allocated reports, `reserved` torch.cuda.memory_reserved.
struct CudaAllocatorStats {
  int64_t allocated = 0;
  int64_t allocated_peak = 0;
  int64_t reserved = 0;
  int64_t reserved_peak = 0;
};

// What the meter needs from a device's caching allocator.
class CudaAllocatorBackend {
 public:
  virtual ~CudaAllocatorBackend() = default;
  virtual CudaAllocatorStats Stats() const = 0;
  virtual void ResetPeakStats() = 0;
  // The device's memory in bytes.
  virtual int64_t TotalBytes() const = 0;
  // Caps what the allocator may reserve at `fraction` of TotalBytes().
  virtual void SetMemoryFraction(double fraction) = 0;
};

// A meter over `backend` (never null). Its cap is the backend's memory
// fraction: the allocator itself refuses past it, with
// c10::OutOfMemoryError, so TakeOom() has no record.
std::unique_ptr<MemoryMeter> MakeCudaMeterOn(std::unique_ptr<CudaAllocatorBackend> backend);

// What a tensor of `nbytes` adds to `allocated`: the caching allocator
// rounds every block up to a multiple of 512 bytes; 0 for nbytes <= 0.
int64_t CudaBlockBytes(int64_t nbytes);

// The memory fraction that caps reserved memory at `limit_bytes` of a device
// of `total_bytes`: 1.0 (no cap) for limit_bytes <= 0, at most 1.0.
double MemoryFractionFor(int64_t limit_bytes, int64_t total_bytes);

// The request size in the caching allocator's out-of-memory message ("CUDA
// out of memory. Tried to allocate 20.00 MiB. GPU 0 has ..."), in bytes as
// printed (two decimals: exact to 1% of the unit), or nullopt.
std::optional<int64_t> ParseCudaOomRequestBytes(const std::string& message);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_CUDA_METER_CORE_H_
