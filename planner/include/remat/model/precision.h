// Precision conventions: what each `precision` keeps, in which dtype, byte
// for byte per parameter (the README's table is this one).
//
//   precision   weights  master  grads (grad_dtype)  moments  activations  loss scaler
//   fp32        4        -       4                   4 each   fp32         no
//   bf16, fp16  2        -       2                   2 each   16-bit       no (1)
//   amp_bf16    4        -       4                   4 each   16-bit (2)   no
//   amp_fp16    4        -       4                   4 each   16-bit (2)   yes
//   mixed_bf16  2        4       4 or 2 (3)          4 each   16-bit       no
//   mixed_fp16  2        4       4 or 2 (3)          4 each   16-bit       yes
//
// (1) PyTorch's GradScaler refuses 16-bit gradients: pure fp16 runs
//     unscaled, and small gradients underflow.
// (2) torch.autocast: matmul inputs and weights are cast to 16 bits and the
//     casts are kept for backward; LayerNorm, softmax and the loss run in fp32.
// (3) Megatron keeps fp32 main_grad buffers (18 B/param with AdamW; the
//     default: sums over micro-batches in fp32); DeepSpeed and the ZeRO paper
//     keep 16-bit gradients (2+2+4+4+4 = 16 B/param; grad_dtype bf16/fp16).
// The fp32 master weights count as optimizer state, as DeepSpeed reports them.
#ifndef REMAT_PRECISION_H_
#define REMAT_PRECISION_H_

#include <string>
#include <vector>

#include "remat/model/model_config.h"

namespace remat {

struct PrecisionConvention {
  Precision precision = Precision::kFp32;
  int weight_bytes = 4;         // the weights forward and backward read
  int master_weight_bytes = 0;  // fp32 copy the optimizer updates (mixed_*), else 0
  int grad_bytes = 4;           // default gradient dtype: what accumulation sums in
  int moment_bytes = 4;         // each optimizer moment (AdamW has two)
  int activation_bytes = 4;     // matmul inputs and outputs
  bool autocast = false;        // torch.autocast: fp32 weights cast per matmul
  bool loss_scaler = false;     // dynamic loss scaling; unscaling adds a pass over the gradients
  const char* summary = "";     // one line for people
};

// Every convention, in Precision order.
const std::vector<PrecisionConvention>& PrecisionConventions();
const PrecisionConvention& ConventionOf(Precision precision);

// Bytes per gradient element with `grad_dtype` resolved.
int GradientBytes(Precision precision, GradDtype grad_dtype);

// Why `grad_dtype` cannot go with `precision` (empty when it can): only
// mixed_* choose, between fp32 and their 16-bit type; PyTorch keeps the
// gradients of other precisions in the weights' dtype.
std::string GradDtypeProblem(Precision precision, GradDtype grad_dtype);

}  // namespace remat

#endif  // REMAT_PRECISION_H_
