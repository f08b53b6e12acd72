// The parts of a transformer training step, each added to a Builder in the
// current layer: takes the tensor entering it, returns the one leaving it.
// Internal to the planner; transformer_graph.cc puts them together.
#ifndef REMAT_SRC_ANALYTIC_PARTS_H_
#define REMAT_SRC_ANALYTIC_PARTS_H_

#include "analytic/graph_builder.h"

namespace remat::analytic {

// decoder_blocks.cc
T GptBlock(Builder& B, const T& x);    // pre-LayerNorm, fused qkv, GELU MLP
T LlamaBlock(Builder& B, const T& x);  // pre-RMSNorm, GQA, rotary, SwiGLU

// variant_blocks.cc: the llama variants (HasLlamaVariant) as transformers
// runs them. `index`: the block's, for its layer type (sliding or full).
T VariantBlock(Builder& B, const T& x, int64_t index);
// The model's RMSNorm: Gemma's form under gemma_norms, else llama's.
T VariantNorm(Builder& B, const std::string& name, const T& x, int64_t width);
T ScaleEmbedding(Builder& B, const T& x);  // gemma: * sqrt(hidden)
// cap * tanh(logits / cap); `cap` 0: the logits.
T SoftCapLogits(Builder& B, const T& logits, double cap);

// encoder_blocks.cc
// Token ids -> embeddings: token (+ learned positions and token types for gpt
// and bert; + LayerNorm for bert) and dropout. `after` (passes after the
// first): the previous pass's boundary, which the lookup waits for; the ids
// are then read from the batch.
T Embedding(Builder& B, const T& ids, const T* after = nullptr);
T BertBlock(Builder& B, const T& x);  // post-LayerNorm, bidirectional

// heads.cc: the head layer, then the loss layer (returns the loss).
// `earlier_passes`: the head outputs of the passes before the last (mnrl),
// which the loss reads besides `head_output`.
T AddHead(Builder& B, const T& x);
T AddLoss(Builder& B, const T& head_output, const std::vector<T>& earlier_passes = {});
// Whether the head multiplies by the token embedding's weight (an lm or mlm
// head with tie_embeddings; `c` with its defaults resolved).
bool TiedHead(const ModelConfig& c);

}  // namespace remat::analytic

#endif  // REMAT_SRC_ANALYTIC_PARTS_H_
