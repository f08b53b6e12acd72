// The memory-efficient attention cores of the runtime's blocks (model.json
// `attention`; eager attention is ChainModel::EagerAttention):
//
// - sdpa: at::scaled_dot_product_attention as transformers calls it on a
//   batch without padding (no mask; is_causal for decoders; enable_gqa when
//   keys and values have fewer heads). PyTorch picks the kernel: a fused one
//   (keeps q, k, v, the output and an fp32 log-sum-exp per row) on CUDA and
//   on CPU without dropout; with dropout on CPU its math path (scaled q and k
//   copies, k and v repeated to every head, the probabilities, a dropout mask
//   in the activation dtype and the dropped probabilities).
// - flash: a custom autograd function over blocks of queries that keeps only
//   q, k, v, the output and each row's fp32 log-sum-exp, with dropout too:
//   backward recomputes the scores block by block and regenerates each
//   block's dropout mask from the seed (PyTorch's CPU flash kernel refuses
//   dropout).
//
// Both take q (b, a, s, d) and k, v (b, kv, s, d), kv dividing a (any
// strides with the last dimension contiguous) and return the context
// (b, a, s, d): for flash and the fused kernels a transposed view of a
// (b, s, a, d) tensor, so that merging the heads back is a view.
#ifndef REMAT_RUNTIME_SRC_ATTENTION_H_
#define REMAT_RUNTIME_SRC_ATTENTION_H_

#include <ATen/ATen.h>

#include <cstdint>

namespace remat::runtime {

// What every attention core needs besides q, k and v.
struct AttentionOptions {
  bool causal = false;  // decoders: query i sees keys 0..i
  double dropout = 0;   // on the probabilities (training)
  uint64_t seed = 0;    // the dropout draw: the same seed redraws the same masks
  // A sliding window (causal only): query i sees keys i - window + 1..i, as
  // transformers' sliding_window_causal mask. 0: no window. FlashAttention
  // only (SDPA takes a window as a mask: variant_blocks.h).
  int64_t window = 0;
};

// at::scaled_dot_product_attention with the default scale 1/sqrt(d), its
// dropout drawn from the default generator of q's device re-seeded with
// options.seed.
at::Tensor SdpaAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const AttentionOptions& options);

// Queries per block of FlashAttention (its transients are a few
// (b, a, kFlashBlockRows, s) tensors).
inline constexpr int64_t kFlashBlockRows = 16;

// Blockwise attention with the default scale that keeps q, k, v, the output
// and an fp32 (b, a, s) log-sum-exp for backward, which recomputes the rest.
// Dropout masks are drawn per block from a generator seeded with
// options.seed and the block: the same in forward and backward, and in any
// recompute.
at::Tensor FlashAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const AttentionOptions& options);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_ATTENTION_H_
