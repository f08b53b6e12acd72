// What a measurement ran on (remat/profile/provenance.h), read from LibTorch and the
// machine.
#ifndef REMAT_RUNTIME_SRC_PROVENANCE_H_
#define REMAT_RUNTIME_SRC_PROVENANCE_H_

#include <c10/core/Device.h>

#include <string>

#include "remat/profile/provenance.h"

namespace remat::runtime {

// The LibTorch version this runtime was compiled against (TORCH_VERSION),
// `device`'s name (the CPU's model name from /proc/cpuinfo, or the GPU's)
// and compute capability, the CPU kernels ATen dispatches to
// (at::get_cpu_capability, which ATEN_CPU_CAPABILITY lowers), the intra-op
// threads, and the allocator the meter reads, with PYTORCH_CUDA_ALLOC_CONF
// on CUDA. Never throws; what cannot be read stays empty.
Provenance ProvenanceOf(const c10::Device& device);

// The "model name" of /proc/cpuinfo-formatted `cpuinfo` text's first
// processor, trimmed; empty when there is none.
std::string CpuModelName(const std::string& cpuinfo);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_PROVENANCE_H_
