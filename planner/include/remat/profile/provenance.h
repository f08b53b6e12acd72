// What measured a profile or a training run: the LibTorch, the device and
// the kernels it ran, the threads, and the allocator whose bytes were
// counted. Two machines' figures differ with any of these (an AVX-512 CPU
// sums in another order than an AVX2 one; a CUDA allocator configuration
// changes what is reserved), so a measured profile and a train report say
// which they were. The runtime fills it (runtime/src/provenance.cc); the
// planner only carries, reads and writes it and never links LibTorch.
#ifndef REMAT_PROVENANCE_H_
#define REMAT_PROVENANCE_H_

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "remat/io/status.h"

namespace remat {

// Empty strings and 0 mean "not known": analytic profiles, and profiles
// written before a runtime recorded it, carry none (present() false).
struct Provenance {
  std::string torch_version;       // LibTorch the runtime was built with: "2.11.0"
  std::string device_name;         // the CPU's model name, or the GPU's name
  std::string cpu_capability;      // ATen's CPU kernels in use: "DEFAULT", "AVX2", "AVX512"
  std::string compute_capability;  // the CUDA device's, "9.0"; empty on CPU
  int64_t intra_op_threads = 0;    // LibTorch's intra-op threads (at::get_num_threads)
  // Whose bytes the measurement counts: "cpu-meter" (the runtime's CPU
  // allocator wrapper) or "cuda-caching" (LibTorch's CUDA caching allocator).
  std::string allocator;
  std::string allocator_config;  // PYTORCH_CUDA_ALLOC_CONF as set; empty: unset
  bool present() const { return !torch_version.empty(); }
};

// One line for reports: "LibTorch 2.11.0; Intel(R) Xeon(R) Processor, CPU
// kernels AVX512; 1 intra-op thread; allocator cpu-meter". Empty when not
// present().
std::string DescribeProvenance(const Provenance& p);

// The "provenance" object of profile and train JSON: the fields above by
// their names, empty strings and a 0 thread count left out.
nlohmann::ordered_json ProvenanceJson(const Provenance& p);

// Reads a "provenance" object (every field optional, no unknown keys);
// `where` names it in errors ("t.json: provenance").
Status ParseProvenance(const nlohmann::json& j, const std::string& where, Provenance* out);

}  // namespace remat

#endif  // REMAT_PROVENANCE_H_
