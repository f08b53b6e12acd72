// The CUDA meter: the caching allocator's device statistics. Compiled with
// REMAT_HAVE_CUDA_TORCH only when building against a CUDA LibTorch; other
// builds get a MakeCudaMeter that says why there is none.
#include <algorithm>

#include "memory_meter.h"

#ifdef REMAT_HAVE_CUDA_TORCH
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/cuda.h>
#endif

namespace remat::runtime {

#ifdef REMAT_HAVE_CUDA_TORCH
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

// Stat arrays are indexed by StatType; 0 is AGGREGATE (all pools) in
// LibTorch 1.13 and 2.x alike.
constexpr size_t kAggregate = 0;

class CudaMeterImpl final : public MemoryMeter {
 public:
  explicit CudaMeterImpl(int device) : device_(static_cast<c10::DeviceIndex>(device)) {}
  std::string name() const override { return "cuda caching allocator stats"; }
  int64_t current_bytes() const override {
    return alloc::getDeviceStats(device_).allocated_bytes[kAggregate].current;
  }
  int64_t peak_bytes() const override {
    return alloc::getDeviceStats(device_).allocated_bytes[kAggregate].peak;
  }
  int64_t reserved_bytes() const override {
    return alloc::getDeviceStats(device_).reserved_bytes[kAggregate].current;
  }
  int64_t reserved_peak_bytes() const override {
    return alloc::getDeviceStats(device_).reserved_bytes[kAggregate].peak;
  }
  void ResetPeak() override { alloc::resetPeakStats(device_); }
  int64_t AllocationBytes(int64_t nbytes) const override {
    return nbytes <= 0 ? 0 : (nbytes + 511) / 512 * 512;
  }
  // The caching allocator caps what it reserves, as a fraction of the device.
  Status SetLimit(int64_t bytes) override {
    const double total =
        static_cast<double>(at::cuda::getDeviceProperties(device_)->totalGlobalMem);
    limit_ = bytes;
    alloc::setMemoryFraction(bytes > 0 ? std::min(1.0, bytes / total) : 1.0, device_);
    return Status::Ok();
  }
  int64_t limit_bytes() const override { return limit_; }
  // The caching allocator throws c10::OutOfMemoryError itself, with the size
  // it wanted in its message; there is no record to take.
  std::optional<OomEvent> TakeOom() override { return std::nullopt; }

 private:
  c10::DeviceIndex device_;
  int64_t limit_ = 0;
};

Status CheckDevice(int device) {
  if (!torch::cuda::is_available()) {
    return Status::Invalid("--runtime-device cuda: no CUDA device is visible to LibTorch");
  }
  if (device < 0 || device >= static_cast<int>(torch::cuda::device_count())) {
    return Status::Invalid("CUDA device " + std::to_string(device) + " does not exist (" +
                           std::to_string(torch::cuda::device_count()) + " visible)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<MemoryMeter>> MakeCudaMeter(int device) {
  REMAT_RETURN_IF_ERROR(CheckDevice(device));
  return std::unique_ptr<MemoryMeter>(new CudaMeterImpl(device));
}

Result<std::string> CudaDeviceName(int device) {
  REMAT_RETURN_IF_ERROR(CheckDevice(device));
  return std::string(at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device))->name);
}

#else

namespace {

Status NoCuda() {
  return Status::Invalid(
      "--runtime-device cuda: this planner was built against a CPU-only LibTorch; build against "
      "a CUDA LibTorch (see docs/runtime.md, scripts/gpu_run.sh)");
}

}  // namespace

Result<std::unique_ptr<MemoryMeter>> MakeCudaMeter(int /*device*/) { return NoCuda(); }
Result<std::string> CudaDeviceName(int /*device*/) { return NoCuda(); }

#endif

}  // namespace remat::runtime
