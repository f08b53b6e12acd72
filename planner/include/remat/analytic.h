// Analytic cost model: model.json -> per-layer profile.
//
// The model is built as a Boost.Graph DAG of ops (residual edges included);
// each op lists the tensors it saves for backward with their dtypes. The chain
// of layers is derived from that graph (layer groups whose boundaries carry a
// single tensor), and activation bytes, workspaces and times are summed per
// layer. For fp16/bf16 with eager attention and 1-byte dropout masks a
// transformer block keeps s*b*h*(34 + 5*a*s/h) bytes (Korthikanti et al. 2022).
#ifndef REMAT_ANALYTIC_H_
#define REMAT_ANALYTIC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remat/model_config.h"
#include "remat/parallel.h"
#include "remat/profile.h"
#include "remat/status.h"

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
  // Device memory besides tensors (remat/device_memory.h); all zero on a CPU.
  int64_t cuda_context_bytes = 0;  // CUDA context and driver reservation
  int64_t workspace_bytes = 0;     // cuBLAS/cuDNN workspaces
  bool caching_allocator = false;  // PyTorch's CUDA caching allocator (replayed)
  std::string host_link;           // the card's link to host memory (LookupHostLink), or ""
  // Random elements drawn a second (a dropout's Bernoulli mask), not scaled
  // by `efficiency`: a measured rate. 0: the draw is not a pass of its own
  // (the GPUs' fused dropout draws Philox numbers inside a memory-bound
  // kernel; the roofline covers it).
  double random_elements_per_s = 0;
};

// Host link presets for activation offload (HostLink, profile.h; sources in
// docs/offload.md): "pcie4", "pcie5", "nvlink-c2c" (overlapped: a copy
// stream beside compute), "cpu" (a memcpy in line), "none" (no offload); or
// a bandwidth, "<N>GB/s", overlapped with no latency. Lists the accepted
// names on error.
Result<HostLink> LookupHostLink(std::string_view name);

// "h200", "a100", "rtx4090", "cpu". Lists the accepted names on error.
Result<DeviceSpec> LookupDevice(std::string_view name);
std::vector<std::string> DeviceNames();

struct AnalyticOptions {
  DeviceSpec device;  // default: LookupDevice("a100")
  double tflops = 0;  // > 0: achieved TFLOP/s for every precision (overrides device)
  // The ranks the job runs on: the profile describes one rank (its tensor-
  // and sequence-parallel share of each block's activations, workspaces and
  // times: Megatron's column- and row-parallel projections, vocab-parallel
  // embedding, head and loss; docs/tensor-pipeline-parallel.md). Only
  // `tensor` and `sequence` are read here; parameters, static memory and
  // the layers' gradient_bytes stay the whole model's (the model state a
  // rank holds is the caller's to split). AnalyticProfile fails when the
  // degree does not divide the heads, kv_heads, ffn_hidden (and seq_len
  // under sequence parallelism), or for a model the split is not modeled
  // for (gpt and llama decoders with an lm head, without LoRA).
  Parallelism parallel;
};

// Parameter count from the shape (GPT-2 small: 124,439,808 with tied head):
// every weight the model holds, trained or not. -1 if the config's sizes
// overflow.
int64_t ParameterCount(const ModelConfig& config);
// The parameters the loss reaches: they get gradients and optimizer state.
// Smaller than ParameterCount when weights are held but unused (a BertPooler
// under the pooling head). -1 on overflow.
int64_t TrainableParameterCount(const ModelConfig& config);

// Model-state bytes per trained parameter for a precision convention
// (precision.h), gradient dtype and optimizer. Master weights (mixed_*)
// count as optimizer state.
struct BytesPerParameter {
  int weights = 0;
  int gradients = 0;
  int optimizer = 0;
  int total() const { return weights + gradients + optimizer; }
};
BytesPerParameter ModelStatePerParameter(Precision precision, Optimizer optimizer,
                                         GradDtype grad_dtype = GradDtype::kDefault);

// Model-state bytes of `parameters` weights of which `trainable` get
// gradients and optimizer state (the frozen rest holds weights only).
// Fails if a product overflows 64 bits.
Result<StaticMemory> ModelStateBytes(int64_t parameters, int64_t trainable, Precision precision,
                                     Optimizer optimizer,
                                     GradDtype grad_dtype = GradDtype::kDefault);

// The analytic profile: one layer per embedding, block, final norm (gpt,
// llama), head and loss. Profile::parameters counts every weight; the static
// memory gives gradients and optimizer state to the trainable ones only. Fails with a message if
// byte arithmetic would overflow.
Result<Profile> AnalyticProfile(const ModelConfig& config, const AnalyticOptions& options);

}  // namespace remat

#endif  // REMAT_ANALYTIC_H_
