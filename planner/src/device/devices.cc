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

constexpr int64_t kGB = 1000 * 1000 * 1000;

// A GPU preset: peaks and memory from the data sheet, the memory besides
// tensors (above), the host link, the compute capability and whether the
// build ships cuDNN.
DeviceSpec Gpu(const char* name, double tflops_16bit, double tflops_fp32, double bandwidth_gbps,
               int64_t memory_bytes, int64_t cuda_context_bytes, int64_t workspace_bytes,
               const char* host_link, int sm_major, int sm_minor, bool cudnn = true) {
  DeviceSpec d;
  d.name = name;
  d.tflops_16bit = tflops_16bit;
  d.tflops_fp32 = tflops_fp32;
  d.bandwidth_gbps = bandwidth_gbps;
  d.memory_bytes = memory_bytes;
  d.cuda_context_bytes = cuda_context_bytes;
  d.workspace_bytes = workspace_bytes;
  d.caching_allocator = true;
  d.host_link = host_link;
  d.sm_major = sm_major;
  d.sm_minor = sm_minor;
  d.cudnn = cudnn;
  return d;
}

const std::vector<DeviceSpec>& Devices() {
  // Terms of the Hopper and Blackwell data-center cards: the H200's measured
  // ones (same driver stack, 32 MiB cuBLAS workspaces on sm90); of the
  // others: the A100's or RTX 4090's assumed ones, 8,320 KiB a handle.
  constexpr int64_t kHopperContext = 749 * kMiB, kHopperWorkspaces = (2 * 32 + 1) * kMiB;
  constexpr int64_t kPreHopperWorkspaces = 2 * 8320 * kKiB;
  // Peaks: dense (no 2:4 sparsity) bf16/fp16 tensor TFLOP/s with fp32
  // accumulation, fp32 non-tensor TFLOP/s; bandwidth GB/s; memory as the
  // sheet gives it. Sources per card: docs/devices.md.
  // clang-format off
  static const std::vector<DeviceSpec> devices = {
      //   name        16-bit TF fp32 TF  GB/s    memory             cuda context  workspaces            host link     sm
      Gpu("h200",      989.0,  67.0,  4800.0, 141 * kGB,          kHopperContext, kHopperWorkspaces,   "pcie5",      9, 0),
      Gpu("h100",      989.4,  67.0,  3350.0, 80 * kGB,           kHopperContext, kHopperWorkspaces,   "pcie5",      9, 0),
      Gpu("h100-nvl",  835.5,  60.0,  3900.0, 94 * kGB,           kHopperContext, kHopperWorkspaces,   "pcie5",      9, 0),
      Gpu("gh200",     989.5,  67.0,  4000.0, 96 * kGB,           kHopperContext, kHopperWorkspaces,   "nvlink-c2c", 9, 0),
      Gpu("b200",      2250.0, 75.0,  8000.0, 180 * kGB,          kHopperContext, kHopperWorkspaces,   "pcie5",      10, 0),
      Gpu("a100",      312.0,  19.5,  2039.0, 80 * kGB,           500 * kMiB,     kPreHopperWorkspaces, "",          8, 0),
      Gpu("a10g",      125.0,  31.2,  600.0,  24 * kGB,           500 * kMiB,     kPreHopperWorkspaces, "pcie4",     8, 6),
      Gpu("l4",        121.0,  30.3,  300.0,  24 * kGB,           500 * kMiB,     kPreHopperWorkspaces, "pcie4",     8, 9),
      Gpu("l40s",      362.05, 91.6,  864.0,  48 * kGB,           500 * kMiB,     kPreHopperWorkspaces, "pcie4",     8, 9),
      Gpu("rtx3090",   71.0,   35.6,  936.0,  24 * kGB,           400 * kMiB,     kPreHopperWorkspaces, "pcie4",     8, 6),
      Gpu("rtx4090",   165.2,  82.6,  1008.0, int64_t{24} << 30,  400 * kMiB,     kPreHopperWorkspaces, "",          8, 9),
      Gpu("rtx5090",   209.5,  104.8, 1792.0, 32 * kGB,           400 * kMiB,     kPreHopperWorkspaces, "pcie5",     12, 0),
      // ROCm: no cuDNN; hipBLASLt's workspaces assumed as cuBLAS's on sm90.
      Gpu("mi300x",    1307.4, 163.4, 5300.0, 192 * kGB,          kHopperContext, kHopperWorkspaces,   "pcie5",      9, 4, false),
  };
  // clang-format on
  return devices;
}

// The CPU preset: a 2-core AVX2 machine with OpenBLAS (this project's CI
// machine kind), no memory besides tensors, random draws 1.1e8 elements/s
// (above).
const DeviceSpec& Cpu() {
  static const DeviceSpec cpu = [] {
    DeviceSpec d;
    d.name = "cpu";
    d.tflops_16bit = 0.05;
    d.tflops_fp32 = 0.1;
    d.bandwidth_gbps = 20.0;
    d.memory_bytes = int64_t{24} << 30;
    d.random_elements_per_s = 1.1e8;
    return d;
  }();
  return cpu;
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
  names.push_back(Cpu().name);
  return names;
}

Result<DeviceSpec> LookupDevice(std::string_view name) {
  for (const DeviceSpec& d : Devices()) {
    if (d.name == name) return d;
  }
  if (name == Cpu().name) return Cpu();
  return Status::Invalid("unknown device '" + std::string(name) + "', expected " +
                         JoinAlternatives(DeviceNames()) + " (or give an achieved TFLOP/s)");
}

}  // namespace remat
