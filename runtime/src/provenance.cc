#include "provenance.h"

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/version.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "memory_meter.h"

namespace remat::runtime {

std::string CpuModelName(const std::string& cpuinfo) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t begin = line.find_first_not_of(" \t", colon + 1);
    const size_t end = line.find_last_not_of(" \t\r");
    return begin == std::string::npos ? "" : line.substr(begin, end - begin + 1);
  }
  return "";
}

namespace {

std::string ReadCpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return CpuModelName(text.str());
}

}  // namespace

Provenance ProvenanceOf(const c10::Device& device) {
  Provenance p;
  p.torch_version = TORCH_VERSION;
  try {
    p.cpu_capability = at::get_cpu_capability();
    p.intra_op_threads = at::get_num_threads();
  } catch (const std::exception&) {
    // Left empty: a report without them, not a failed run.
  }
  if (device.is_cuda()) {
    Result<std::string> name = CudaDeviceName(device.index());
    Result<std::string> capability = CudaComputeCapability(device.index());
    if (name.ok()) p.device_name = *name;
    if (capability.ok()) p.compute_capability = *capability;
    p.allocator = "cuda-caching";
    if (const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF")) p.allocator_config = conf;
  } else {
    p.device_name = ReadCpuModelName();
    p.allocator = "cpu-meter";
  }
  return p;
}

}  // namespace remat::runtime
