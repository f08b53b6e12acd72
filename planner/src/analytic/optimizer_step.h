// The optimizer step's temporaries: what torch.optim (PyTorch 2.11) allocates
// and frees on top of the model state while it updates the trained
// parameters. Internal to the planner.
//
// AdamW (torch/optim/adam.py, decoupled weight decay, capturable and fused
// off, PyTorch's defaults) updates the weights, the moments and the step
// counters in place; what it allocates is the denominator
// sqrt(v / (1 - beta2^t)) + eps of each parameter, in the moments' dtype:
//  - per parameter (_single_tensor_adam, the default where the parameters
//    are on the CPU: foreach is the default only on CUDA and other
//    accelerators): `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)
//    .add_(eps)` makes the square root and the quotient (the square root
//    dies after the division), while the previous parameter's denom, the
//    loop's local, lives until this one is assigned: at parameter i,
//    d[i-1] + 2 d[i] bytes (d: a parameter's moment bytes), and the
//    division's scalar operand, which ATen wraps in a 0-dim double tensor
//    and casts to the moments' dtype (8 + 4 B in fp32); the step's peak the
//    largest of those;
//  - foreach (_multi_tensor_adam, the default on CUDA): `exp_avg_sq_sqrt =
//    torch._foreach_sqrt(device_exp_avg_sqs)` makes every parameter's at
//    once, then divides, adds and applies them in place: the sum of d.
// SGD, with or without momentum (torch/optim/sgd.py, weight decay 0: the
// default), adds into the weights and the momentum buffers in place: no
// temporaries but, per parameter on the CPU, the momentum multiply's
// wrapped scalar (8 + 4 B in fp32). Neither does an optimizer with master
// weights (mixed_*: Megatron's and DeepSpeed's fused optimizers; remat's
// runtime updates the masters 64 Ki elements at a time).
#ifndef REMAT_SRC_ANALYTIC_OPTIMIZER_STEP_H_
#define REMAT_SRC_ANALYTIC_OPTIMIZER_STEP_H_

#include <cstdint>
#include <vector>

#include "analytic/transformer_graph.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"

namespace remat::analytic {

struct StepWorkspace {
  int64_t bytes = 0;    // at the step's peak, above the model state
  TensorSizes tensors;  // the allocations live then (adding up to bytes)
};

// The step's temporaries for the trained `tensors` (in the order the
// optimizer visits them) of a job `c` (defaults resolved): per parameter,
// or all at once where `foreach`.
StepWorkspace OptimizerStepWorkspace(const std::vector<TrainedTensor>& tensors,
                                     const ModelConfig& c, bool foreach);

}  // namespace remat::analytic

#endif  // REMAT_SRC_ANALYTIC_OPTIMIZER_STEP_H_
