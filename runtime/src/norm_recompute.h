// A pre-norm's output recomputed in backward (the planner's selective option
// "norm_output"): the projections after the norm keep the norm's input
// instead of its output, and their backward makes the output again.
#ifndef REMAT_RUNTIME_SRC_NORM_RECOMPUTE_H_
#define REMAT_RUNTIME_SRC_NORM_RECOMPUTE_H_

#include <ATen/ATen.h>

#include <vector>

#include "mlp_recompute.h"

namespace remat::runtime {

enum class NormKind {
  kLayerNorm,  // at::layer_norm over the last dimension (weight and bias)
  kRmsNorm,    // HF LlamaRMSNorm: weight * (x32 * rsqrt(mean(x32^2) + eps)).to(x's dtype)
  // HF Gemma2RMSNorm / Gemma3RMSNorm: ((x32 * rsqrt(mean(x32^2) + eps)) *
  // (1 + weight32)).to(x's dtype), the weight starting at 0
  kGemmaRmsNorm,
};

// The norm as the plain ops compute it (`bias` undefined for kRmsNorm).
at::Tensor ApplyNorm(NormKind kind, const at::Tensor& x, const at::Tensor& weight,
                     const at::Tensor& bias, double eps);

// One projection reading the norm's output: its weight (out, in) and bias
// (undefined: none).
struct NormProjection {
  at::Tensor weight;
  at::Tensor bias;
};

// linear(norm(x), w_i, b_i) for each of `projections` (at least one; all
// with a bias or all without), as the plain ops compute them under the same
// autocast. Keeps x and the weights, not the norm's output or statistics:
// the backward recomputes the norm from x (timed into `timer`, which may be
// null), then computes every projection's weight, bias and input gradients
// and the norm's, exactly as autograd would through the plain ops.
// `with_norm`: the norm's output is returned too, last (a post-norm block's
// residual reads it); its gradient joins the projections' before the
// norm's backward. The function keeps no reference to it.
std::vector<at::Tensor> RecomputedNormLinears(NormKind kind, const at::Tensor& x,
                                              const at::Tensor& norm_weight,
                                              const at::Tensor& norm_bias, double eps,
                                              const std::vector<NormProjection>& projections,
                                              RecomputeTimer* timer, bool with_norm = false);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_NORM_RECOMPUTE_H_
