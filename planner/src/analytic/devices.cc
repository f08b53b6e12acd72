// Device presets: the roofline time model's peaks (vendor data sheets) and
// the memory a GPU holds besides tensors (remat/device_memory.h).
//
// Memory terms. H200: measured by scripts/gpu_run.sh on an H200 with PyTorch
// 2.11 + CUDA 13 (profiles/devices/h200.json, docs/device-memory.md); the
// others assumed, in the same units:
//   cuda_context  what torch.cuda.mem_get_info loses at init plus the first
//                 GEMM's kernels: 785,186,816 B measured on the H200 (749
//                 MiB); assumed 500 MiB on A100, 400 MiB on RTX 4090.
//   workspaces    cuBLAS's workspace per (thread, stream), allocated in the
//                 caching allocator on the first GEMM of each
//                 (aten/src/ATen/cuda/CublasHandlePool.cpp): measured 32 MiB
//                 each on the H200, for the calling thread and for
//                 autograd's backward thread, plus 1 MiB of cuBLASLt
//                 workspace (a linear with bias); 4096 KiB x 2 + 16 KiB x 8
//                 = 8,320 KiB per handle before sm90. No cuDNN: the
//                 transformers planned here run no convolutions.
//   fragmentation assumed 5% of the rounded peak for a training step with
//                 PyTorch's default (non-expandable) segments; measured on
//                 the H200 from -0.3% to +17.7% over eight plans.
// A CPU has none of them: its plans and reports are as without terms.
#include "json_fields.h"
#include "remat/analytic.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kKiB = int64_t{1} << 10;

const std::vector<DeviceSpec>& Devices() {
  // clang-format off
  static const std::vector<DeviceSpec> devices = {
      // name      16-bit TF  fp32 TF  GB/s    memory bytes                       efficiency
      //           cuda context  workspaces               fragmentation  caching allocator
      {"h200",    989.0, 67.0, 4800.0, int64_t{141} * 1000 * 1000 * 1000, 0.5,
                  749 * kMiB,    (2 * 32 + 1) * kMiB,     0.05,          true},
      {"a100",    312.0, 19.5, 2039.0, int64_t{80} * 1000 * 1000 * 1000,  0.5,
                  500 * kMiB,    2 * 8320 * kKiB,         0.05,          true},
      {"rtx4090", 165.2, 82.6, 1008.0, int64_t{24} << 30,                 0.5,
                  400 * kMiB,    2 * 8320 * kKiB,         0.05,          true},
      // A 2-core AVX2 machine with OpenBLAS (this project's CI machine kind).
      {"cpu",     0.05,  0.1,  20.0,   int64_t{24} << 30,                 0.5,
                  0,             0,                       0.0,           false},
  };
  // clang-format on
  return devices;
}

}  // namespace

std::vector<std::string> DeviceNames() {
  std::vector<std::string> names;
  for (const DeviceSpec& d : Devices()) names.push_back(d.name);
  return names;
}

Result<DeviceSpec> LookupDevice(std::string_view name) {
  for (const DeviceSpec& d : Devices()) {
    if (d.name == name) return d;
  }
  return Status::Invalid("unknown device '" + std::string(name) + "', expected " +
                         JoinAlternatives(DeviceNames()) + " (or give an achieved TFLOP/s)");
}

}  // namespace remat
