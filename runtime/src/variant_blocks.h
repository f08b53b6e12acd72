// The pieces of the llama family's variants (gemma2, gemma3, qwen3, phi3,
// mixtral, qwen3_moe; docs/model-families.md) that LlamaModel runs beside
// its own: soft-capping and the sliding window's masks, as transformers
// 5.24 computes them. Gemma's RMSNorm is NormKind::kGemmaRmsNorm
// (norm_recompute.h), GeGLU MlpActivation::kGeGlu, the experts moe_block.h.
#ifndef REMAT_RUNTIME_SRC_VARIANT_BLOCKS_H_
#define REMAT_RUNTIME_SRC_VARIANT_BLOCKS_H_

#include <ATen/ATen.h>

#include <cstdint>

#include "attention.h"

namespace remat::runtime {

// cap * tanh(x / cap) as three statements (x / cap, tanh, * cap: each a new
// tensor; tanh keeps its output), as gemma2's final logits; cap <= 0: x.
at::Tensor SoftCap(const at::Tensor& x, double cap);

// (s, s) in `options`' dtype: 0 where query i sees key j (j <= i and
// i - j < window), -inf elsewhere: eager attention's additive mask of a
// sliding layer.
at::Tensor SlidingBias(int64_t s, int64_t window, const at::TensorOptions& options);

// SDPA over a sliding window shorter than the sequence, as transformers
// calls it then: a boolean (b, 1, s, s) mask (SDPA makes one of q's dtype of
// it and its kernel keeps that), no is_causal, and no enable_gqa: k and v
// (b, kv, s, d) are repeated to q's (b, a, s, d) heads first (repeat_kv's
// copies, kept by the kernel). Dropout at options.dropout seeded with
// options.seed. Returns the (b, a, s, d) context.
at::Tensor WindowedSdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const AttentionOptions& options);

// repeat_kv: (b, kv, s, d) -> (b, a, s, d), each key/value head copied to
// its group of a / kv query heads (one copy; a view when kv == a).
at::Tensor RepeatKv(const at::Tensor& t, int64_t a);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_VARIANT_BLOCKS_H_
