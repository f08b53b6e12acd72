// A dropout that keeps no mask (the planner's selective option
// "dropout_mask"): the forward draws the mask as at::dropout does and lets
// it die; it keeps only a copy of the generator's state from before the
// draw, from which the backward draws the same mask bits again.
#ifndef REMAT_RUNTIME_SRC_DROPOUT_REGENERATE_H_
#define REMAT_RUNTIME_SRC_DROPOUT_REGENERATE_H_

#include <ATen/ATen.h>

#include "mlp_recompute.h"

namespace remat::runtime {

// at::dropout(x, p, train=true), drawing from the default generator of x's
// device exactly as it does (so later draws from that generator are the
// same too), with the same output and the same input gradient, but saving
// no tensor for backward: the backward makes the mask again (CPU: a
// Bernoulli draw in x's dtype from the generator copy; CUDA: the fused
// kernel run on the output gradient with the default generator set to the
// saved seed and offset, then restored), timed into `timer` (may be null).
// Requires 0 < p < 1 and x dense (as at::dropout's empty_like mask).
at::Tensor RegeneratedDropout(const at::Tensor& x, double p, RecomputeTimer* timer);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_DROPOUT_REGENERATE_H_
