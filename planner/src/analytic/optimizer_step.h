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
// Adafactor (torch/optim/_adafactor.py; per parameter on every device:
// its foreach path is taken only when asked for) makes, per matrix, the
// row and column means of the squared gradient and the estimate row_var @
// col_var of the gradient's size, which becomes the update in place; per
// vector grad * grad and a clone of the variance. The loop's locals (the
// update, the row and column means, the squared gradient) live until
// reassigned, into the next parameters' iterations.
// Muon (torch/optim/_muon.py, nesterov on by default) makes per matrix the
// nesterov update grad.lerp(buf) in the gradient's dtype, its bf16 copy
// (none if it is bf16 already) and, over 5 Newton-Schulz iterations, the
// q x q Gram matrix (q the smaller size), its polynomial and the next bf16
// iterate, each pair of the previous iteration living while the next is
// made; the bf16 result lives into the next matrix's iteration, and on the
// CPU param.add_ copies it into the parameter's dtype. The other tensors
// are AdamW's (below) in a step of their own.
// bitsandbytes' AdamW8bit on the CPU (backends/cpu/ops.py) dequantizes both
// moments to fp32, scales an fp32 copy of the gradient, copies a 16-bit
// weight to fp32, and makes sqrt(v) and its quotient: 5 (6 with a 16-bit
// weight) fp32 copies of the tensor; under 4,096 elements, its 32-bit path,
// 3 (4). On a GPU its kernels update the moments and weights in place.
// PagedAdamW8bit runs the same kernels and CPU path (is_paged only moves
// where its state lives): the same temporaries.
// torchao's AdamW8bit, AdamW4bit and AdamWFp8 step each parameter through
// torch.compile(single_param_adam, fullgraph=True): one graph that
// dequantizes both moments, updates them and the weight in fp32 and
// quantizes them again, fused by inductor. What its generated kernels
// allocate between their launches is not derived here: the planner counts
// none (docs/optimizers.md says so; no test meters it).
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

// The step's matmul flops: Muon's Newton-Schulz iterations, per matrix of
// sizes q <= p 5 x (a Gram matrix 2 q^2 p, its polynomial 2 q^3, the next
// iterate 2 q^2 p); 0 for the others (their work is the bytes they touch).
double OptimizerStepFlops(const std::vector<TrainedTensor>& tensors, const ModelConfig& c);

}  // namespace remat::analytic

#endif  // REMAT_SRC_ANALYTIC_OPTIMIZER_STEP_H_
