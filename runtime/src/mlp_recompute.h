// The MLP activation recomputed in backward (the planner's selective option
// "mlp_activation"; Megatron's --recompute-modules / PyTorch's selective
// checkpoint policies): the projection after the activation keeps the
// activation's input instead of its output and makes the output again in its
// backward.
#ifndef REMAT_RUNTIME_SRC_MLP_RECOMPUTE_H_
#define REMAT_RUNTIME_SRC_MLP_RECOMPUTE_H_

#include <ATen/ATen.h>

#include "backward_replay.h"
#include "device.h"

namespace remat::runtime {

enum class MlpActivation {
  kGelu,    // gelu(a) (GPT-2's approximate-free GELU, as at::gelu)
  kSwiGlu,  // silu(a) * b (llama)
  kGeGlu,   // gelu(a, approximate="tanh") * b (gemma)
};

// Where the backward adds the time it spent recomputing (on `timing`'s
// clock). Owned by the caller; outlives the backward.
// `replay` (may be null): where the forward queues the recompute, run at
// the start of the layer's backward (backward_replay.h); null: the
// function recomputes in its own backward.
struct RecomputeTimer {
  Timing timing;
  double ms = 0;
  BackwardReplay* replay = nullptr;
};

// act(a[, b]) then linear(., weight, bias) (bias may be undefined), as the
// plain ops compute it, under the same autocast. Keeps a (and b) and the
// weight, not the activation's output: the backward recomputes it from them
// (timed into `timer`, which may be null), then computes the weight, bias
// and input gradients, exactly as autograd would through the plain ops.
at::Tensor RecomputedActivationLinear(MlpActivation act, const at::Tensor& a, const at::Tensor& b,
                                      const at::Tensor& weight, const at::Tensor& bias,
                                      RecomputeTimer* timer);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_MLP_RECOMPUTE_H_
