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
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "remat/device/devices.h"
#include "remat/model/model_config.h"
#include "remat/model/parallel.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat {

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
// count as optimizer state. For adafactor, muon and adamw8bit, whose state
// depends on each tensor's shape and size, `optimizer` is a matrix's bulk
// (adafactor none, muon one moment, adamw8bit two bytes); the profile
// counts their state tensor by tensor.
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

// What AnalyticProfile derives from the model's op graph: the graph, its
// layer chain (figures, tensors, selective options) and the time model. It
// reads neither the optimizer, the gradient dtype nor max_grad_norm (what
// the step does with the gradients), so one built for a config serves every
// config that differs from it there alone, with the same options' device,
// TFLOP/s and tensor and sequence degrees: AnalyticProfile(config, options,
// chain) is then AnalyticProfile(config, options), field for field.
struct AnalyticChain;
Result<std::shared_ptr<const AnalyticChain>> BuildAnalyticChain(const ModelConfig& config,
                                                                const AnalyticOptions& options);
Result<Profile> AnalyticProfile(const ModelConfig& config, const AnalyticOptions& options,
                                const AnalyticChain& chain);

}  // namespace remat

#endif  // REMAT_ANALYTIC_H_
