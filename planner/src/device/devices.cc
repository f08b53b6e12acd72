// Device presets: the roofline time model's peaks (vendor data sheets) and
// the memory a GPU holds besides tensors (remat/device/device_memory.h).
//
// Memory terms. H200: measured by scripts/gpu_run.sh on an H200 with PyTorch
// 2.11 + CUDA 13 (profiles/results/devices/h200.json, docs/device-memory.md); the
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
//   reserved      what the caching allocator holds above the allocated
//                 bytes is not a preset: each plan's steps are replayed
//                 through the allocator model (remat/device/caching_allocator.h).
// A CPU has none of them: its plans and reports are as without terms.
//
// Random draws (DeviceSpec::random_elements_per_s): only the cpu preset has
// a rate. at::dropout on the CPU draws its mask with bernoulli_, an element
// at a time, before the div_ and mul the roofline times; measured with
// PyTorch 2.11 in .venv, one thread (OMP_NUM_THREADS=1, as the runtime
// runs), the thread's CPU time of `torch.empty_like(x).bernoulli_(0.9)` on
// 262,144 elements, fastest of 100: 2.266 ms fp32 (8.64 ns an element),
// 2.505 ms bf16 (9.55 ns); at::dropout whole 9.5 ns fp32: draw plus its
// memory-bound passes. 1.1e8 elements/s (9.1 ns) for both dtypes. On the
// GPUs the fused dropout kernel draws Philox numbers inside a memory-bound
// pass: no term.
//
// Host links (activation offload, docs/offload.md): effective one-way
// copy rates of pinned memory as measured, not the signalling rate.
//   pcie4       25 GB/s: nvbandwidth host_to_device_memcpy_ce, 24-26 GB/s
//               on RTX 4090s (NVIDIA/nvbandwidth#15), 25.1 GB/s on an A100
//               SXM (NVIDIA/nvbandwidth#42); the raw x16 rate is 31.5 GB/s.
//   pcie5       50 GB/s: nvbandwidth device_to_host_memcpy_sm 52.8 GB/s on
//               H100s (NVIDIA/nvbandwidth#24); raw x16 63 GB/s. The H200
//               SXM's host link is PCIe 5.0 x16 (profiles/results/devices/h200.json).
//   nvlink-c2c  300 GB/s: GH200 host-to-device memcpy 346 GB/s (CE),
//               device-to-host about 15% lower (NVIDIA/nvbandwidth#23);
//               450 GB/s a direction on paper.
//   cpu         10 GB/s in line: a memcpy reads and writes each byte, half
//               the cpu preset's 20 GB/s memory bandwidth.
// Latencies (a copy's launch and DMA setup) are assumed: 10 us over PCIe,
// 5 us over C2C, 1 us for a memcpy.
#include <cstdlib>

#include "io/json_fields.h"
#include "remat/device/devices.h"

namespace remat {

using internal::JoinAlternatives;
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kKiB = int64_t{1} << 10;

const std::vector<DeviceSpec>& Devices() {
  // clang-format off
  static const std::vector<DeviceSpec> devices = {
      // name      16-bit TF  fp32 TF  GB/s    memory bytes                       efficiency
      //           cuda context  workspaces               caching allocator
      {"h200",    989.0, 67.0, 4800.0, int64_t{141} * 1000 * 1000 * 1000, 0.5,
                  749 * kMiB,    (2 * 32 + 1) * kMiB,     true, "pcie5"},
      {"a100",    312.0, 19.5, 2039.0, int64_t{80} * 1000 * 1000 * 1000,  0.5,
                  500 * kMiB,    2 * 8320 * kKiB,         true, ""},
      {"rtx4090", 165.2, 82.6, 1008.0, int64_t{24} << 30,                 0.5,
                  400 * kMiB,    2 * 8320 * kKiB,         true, ""},
      // A 2-core AVX2 machine with OpenBLAS (this project's CI machine kind).
      // Random draws: 1.1e8 elements/s (above).
      {"cpu",     0.05,  0.1,  20.0,   int64_t{24} << 30,                 0.5,
                  0,             0,                       false, "", 1.1e8},
  };
  // clang-format on
  return devices;
}

const std::vector<HostLink>& HostLinks() {
  // clang-format off
  static const std::vector<HostLink> links = {
      // name         GB/s   latency us  overlapped
      {"pcie4",       25.0,  10.0,       true},
      {"pcie5",       50.0,  10.0,       true},
      {"nvlink-c2c",  300.0, 5.0,        true},
      {"cpu",         10.0,  1.0,        false},
  };
  // clang-format on
  return links;
}

}  // namespace

Result<HostLink> LookupHostLink(std::string_view name) {
  if (name == "none") return HostLink{};
  std::vector<std::string> names;
  for (const HostLink& l : HostLinks()) {
    if (l.name == name) return l;
    names.push_back(l.name);
  }
  const std::string_view unit = "GB/s";
  if (name.size() > unit.size() && name.substr(name.size() - unit.size()) == unit) {
    const std::string number(name.substr(0, name.size() - unit.size()));
    char* end = nullptr;
    const double gbps = std::strtod(number.c_str(), &end);
    if (end == number.c_str() + number.size() && gbps > 0 && gbps <= 1e6) {
      return HostLink{std::string(name), gbps, 0, true};
    }
    return Status::Invalid("host link '" + std::string(name) +
                           "': expected a bandwidth above 0 and at most 1e6 GB/s, e.g. 64GB/s");
  }
  names.push_back("none");
  names.push_back("<N>GB/s");
  return Status::Invalid("unknown host link '" + std::string(name) + "', expected " +
                         JoinAlternatives(names));
}

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
