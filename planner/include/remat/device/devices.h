// Device presets: the cards the planner knows (peak FLOP/s, memory
// bandwidth and size, memory besides tensors) and the host links activation
// offload copies over.
#ifndef REMAT_DEVICE_DEVICES_H_
#define REMAT_DEVICE_DEVICES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remat/io/status.h"
#include "remat/profile/profile.h"

namespace remat {

// A device for the roofline time model: an op takes
// max(flops / (peak * efficiency), bytes / (bandwidth * efficiency)), plus
// elements / random_elements_per_s for the random draws it makes (a
// dropout's mask, where drawing it is a pass of its own).
struct DeviceSpec {
  std::string name;
  double tflops_16bit = 0;    // dense bf16/fp16 tensor peak, TFLOP/s
  double tflops_fp32 = 0;     // fp32 peak (TF32 tensor cores not assumed)
  double bandwidth_gbps = 0;  // memory bandwidth, GB/s
  int64_t memory_bytes = 0;   // device memory, bytes
  double efficiency = 0.5;    // fraction of peak achieved
  // Device memory besides tensors (remat/device/device_memory.h); all zero on a CPU.
  int64_t cuda_context_bytes = 0;  // CUDA context and driver reservation
  int64_t workspace_bytes = 0;     // cuBLAS/cuDNN workspaces
  bool caching_allocator = false;  // PyTorch's CUDA caching allocator (replayed)
  std::string host_link;           // the card's link to host memory (LookupHostLink), or ""
  // Random elements drawn a second (a dropout's Bernoulli mask), not scaled
  // by `efficiency`: a measured rate. 0: the draw is not a pass of its own
  // (the GPUs' fused dropout draws Philox numbers inside a memory-bound
  // kernel; the roofline covers it).
  double random_elements_per_s = 0;
  // CUDA compute capability (9.0 for an H100), which picks the SDPA kernel
  // (analytic/sdpa_backend.h); 0.0 for a CPU. A ROCm card gives what
  // torch.cuda.get_device_capability reports there (gfx942: 9.4).
  int sm_major = 0;
  int sm_minor = 0;
  bool cudnn = false;  // PyTorch's build for the card ships cuDNN (CUDA: yes; ROCm: no)
};

// Host link presets for activation offload (HostLink, profile.h; sources in
// docs/offload.md): "pcie4", "pcie5", "nvlink-c2c" (overlapped: a copy
// stream beside compute), "cpu" (a memcpy in line), "none" (no offload); or
// a bandwidth, "<N>GB/s", overlapped with no latency. Lists the accepted
// names on error.
Result<HostLink> LookupHostLink(std::string_view name);

// A preset by name (DeviceNames; docs/devices.md lists them with their data
// sheets). Lists the accepted names on error.
Result<DeviceSpec> LookupDevice(std::string_view name);
std::vector<std::string> DeviceNames();

}  // namespace remat

#endif  // REMAT_DEVICE_DEVICES_H_
