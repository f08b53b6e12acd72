// A mixture-of-experts MLP (mixtral, qwen3_moe) as transformers 5.24 runs
// it with its default experts implementation, grouped_mm
// (integrations/moe.py grouped_mm_experts_forward), and the "experts"
// selective option: the dispatch, the experts and the combine recomputed in
// backward from the kept router decisions.
//
// The router: logits = linear(x, router) (x kept), probs = softmax in fp32
// (kept), top-k of the probabilities (the indices kept) renormalized in place
// (autograd keeps a clone of the top-k values). The experts, for n tokens and
// S = n * k routed rows: the rows sorted by expert (torch.sort), gathered
// (x[perm // k], the index kept) with their weights (weights[perm], perm
// kept); one grouped GEMM up (S x 2f, kept by the activation and the product
// through its gate and up views), act(gate) * up, one grouped GEMM down
// (its input kept), times the weights (both kept), unsorted (inv_perm kept)
// and summed over each token's k rows. Every expert's rows are in the same
// two GEMMs: the memory does not depend on how the router balances them.
#ifndef REMAT_RUNTIME_SRC_MOE_BLOCK_H_
#define REMAT_RUNTIME_SRC_MOE_BLOCK_H_

#include <ATen/ATen.h>

#include "mlp_recompute.h"

namespace remat::runtime {

// The experts' weights: router (E, h), gate_up (E, 2f, h), down (E, h, f),
// as transformers' MixtralExperts / Qwen3MoeExperts store them.
struct ExpertWeights {
  at::Tensor router;
  at::Tensor gate_up;
  at::Tensor down;
};

// The router's decisions for x (n, h): the renormalized top-k weights (n, k)
// in fp32 and the experts' indices (n, k).
struct Routing {
  at::Tensor weights;
  at::Tensor indices;
};
Routing Route(const at::Tensor& x, const at::Tensor& router, int64_t top_k);

// The experts on x (n, h) under `routing`: (n, h) in x's dtype.
// `activation`: kSwiGlu or kGeGlu (the gated product). `recompute` non-null:
// keeps x, the routing and the weights only and makes the rest again in
// backward, adding the time that took to `recompute` (the "experts" option).
at::Tensor Experts(const at::Tensor& x, const Routing& routing, const ExpertWeights& w,
                   MlpActivation activation, RecomputeTimer* recompute = nullptr);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_MOE_BLOCK_H_
