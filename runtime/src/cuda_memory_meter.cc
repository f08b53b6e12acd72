// The CUDA meter on a real device: the caching allocator behind
// CudaAllocatorBackend (cuda_meter_core.h has the meter's logic, tested
// without a GPU). Compiled with REMAT_HAVE_CUDA_TORCH only when building
// against a CUDA LibTorch; other builds get a MakeCudaMeter that says why
// there is none.
#include "memory_meter.h"

#ifdef REMAT_HAVE_CUDA_TORCH
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/cuda.h>

#include "cuda_meter_core.h"
#include "cuda_stats.h"
#endif

namespace remat::runtime {

#ifdef REMAT_HAVE_CUDA_TORCH
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

class CachingAllocatorBackend final : public CudaAllocatorBackend {
 public:
  explicit CachingAllocatorBackend(int device) : device_(static_cast<c10::DeviceIndex>(device)) {}
  CudaAllocatorStats Stats() const override { return StatsOf(alloc::getDeviceStats(device_)); }
  void ResetPeakStats() override { alloc::resetPeakStats(device_); }
  int64_t TotalBytes() const override {
    return static_cast<int64_t>(at::cuda::getDeviceProperties(device_)->totalGlobalMem);
  }
  void SetMemoryFraction(double fraction) override { alloc::setMemoryFraction(fraction, device_); }

 private:
  c10::DeviceIndex device_;
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

// The caching allocator sets up its per-device state on the first CUDA
// allocation; before it, LibTorch 2.x's getDeviceStats and
// setMemoryFraction throw ("Invalid device argument", "Allocator not
// initialized for device"). A one-byte tensor, freed at once, sets it up.
Status InitAllocator(int device) {
  try {
    at::empty({1}, at::TensorOptions().dtype(at::kByte).device(
                       c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device))));
    (void)alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  } catch (const std::exception& e) {
    return Status::Invalid("CUDA device " + std::to_string(device) +
                           ": the caching allocator did not start: " + e.what());
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<MemoryMeter>> MakeCudaMeter(int device) {
  REMAT_RETURN_IF_ERROR(CheckDevice(device));
  REMAT_RETURN_IF_ERROR(InitAllocator(device));
  return MakeCudaMeterOn(std::make_unique<CachingAllocatorBackend>(device));
}

Result<std::string> CudaDeviceName(int device) {
  REMAT_RETURN_IF_ERROR(CheckDevice(device));
  return std::string(at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device))->name);
}

Result<std::string> CudaComputeCapability(int device) {
  REMAT_RETURN_IF_ERROR(CheckDevice(device));
  const auto* props = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device));
  return std::to_string(props->major) + "." + std::to_string(props->minor);
}

#else

namespace {

Status NoCuda() {
  return Status::Invalid(
      "--runtime-device cuda: this planner was built against a CPU-only LibTorch; build where "
      "the CUDA toolkit is installed (nvcc), with PyTorch's CUDA wheel (docs/runtime.md)");
}

}  // namespace

Result<std::unique_ptr<MemoryMeter>> MakeCudaMeter(int /*device*/) { return NoCuda(); }
Result<std::string> CudaDeviceName(int /*device*/) { return NoCuda(); }
Result<std::string> CudaComputeCapability(int /*device*/) { return NoCuda(); }

#endif

}  // namespace remat::runtime
