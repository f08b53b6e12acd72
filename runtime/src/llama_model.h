// The llama family on LibTorch (llama, mistral, qwen2 and the variants
// gemma2, gemma3, qwen3, phi3, mixtral, qwen3_moe; lm head), as Hugging
// Face's LlamaDecoderLayer and the variants' decoder layers compute it.
//
// Pre-RMSNorm causal blocks: x + drop(o_proj(attn(rope(q), rope(k), v))),
// then + drop(down_proj(silu(gate_proj(.)) * up_proj(.))) on rms2 of it.
// RMSNorm: the variance in fp32, weight * (x * rsqrt(var + eps)) cast back;
// rotary embeddings: q * cos + rotate_half(q) * sin from a (seq, head_dim)
// cos/sin cache (a buffer, computed once); grouped-query attention: kv_heads
// key/value heads, each repeated to its group of heads (repeat_kv) in the
// attention core; softmax in fp32, cast back; optional q/k/v biases (qwen2);
// tied or untied LM head. Dropout (residual and attention) at the model's
// rate, as the planner's op model has it (HF llama's attention_dropout; 0
// removes it). The prologue returns q and k after rotary, in (batch, seq,
// heads, head_dim) layout, and v, the core's inputs. With LoRA (PEFT) every
// weight is frozen and the targeted projections carry adapters; with QLoRA
// the blocks' projections are nf4 (lora.h).
//
// The variant fields (HasLlamaVariant; the planner's analytic/
// variant_blocks.cc, op for op): Gemma's RMSNorm everywhere and its three
// more norms a block (post-attention, pre- and post-feedforward), GeGLU,
// embeddings times sqrt(hidden), per-head q/k norms before the rotation,
// soft-capped scores (eager) and logits, sliding-window layers (their mask
// once the sequence reaches the window), Phi-3's fused qkv_proj and
// gate_up_proj (views of one output), and a mixture of experts instead of
// the MLP (moe_block.h); no residual dropout (the model's dropout is the
// attention's). The projections are all projected before the q/k norms and
// the rotation, as transformers does. No LoRA on the variants.
#ifndef REMAT_RUNTIME_SRC_LLAMA_MODEL_H_
#define REMAT_RUNTIME_SRC_LLAMA_MODEL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "chain_model.h"
#include "moe_block.h"

namespace remat::runtime {

class LlamaModel final : public ChainModel {
 public:
  // Random weights (normal(0, 0.02), RMSNorm 1, biases 0) from `seed`.
  // Requires ModelSupports(config).
  LlamaModel(const ModelConfig& config, const at::Device& device, uint64_t seed);

  Heads Prologue(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                 RecomputeTimer* norm = nullptr) const override;
  at::Tensor AttentionCore(int layer, const Heads& heads, const DropoutSeeds& seeds) const override;
  at::Tensor Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                      const DropoutSeeds& seeds, RecomputeTimer* mlp = nullptr,
                      RecomputeTimer* norm = nullptr) const override;
  bool recomputes_mlp() const override { return config().lora_rank == 0; }
  // Not the variants': their one dropout is the attention's, inside the
  // fused kernels (the planner offers no dropout_mask option there).
  bool regenerates_masks() const override { return config().lora_rank == 0 && !variant_; }
  int64_t buffer_bytes() const override {
    return (causal_bias_.defined() ? static_cast<int64_t>(causal_bias_.nbytes()) : 0) +
           static_cast<int64_t>(positions_.nbytes() + cos_.nbytes() + sin_.nbytes());
  }

 private:
  const at::Tensor& TokenEmbedding() const override { return embed_; }
  const at::Tensor& LmHeadWeight() const override { return lm_head_.defined() ? lm_head_ : embed_; }
  struct Block {
    at::Tensor rms1;
    Projection q, k, v, o;  // q, k, v biases undefined without qkv_bias
    Projection qkv;         // fused_projections: q, k and v undefined
    at::Tensor q_norm, k_norm;  // qk_norm: (head_dim) each
    at::Tensor post_attention_norm, post_feedforward_norm;  // gemma_norms
    at::Tensor rms2;
    Projection gate, up, down;  // down only with fused_projections
    Projection gate_up;         // fused_projections
    ExpertWeights experts;      // experts > 0: no gate, up, down
  };

  at::Tensor ForwardLayer(int layer, const at::Tensor& x, const at::Tensor& batch,
                          const DropoutSeeds& seeds) const override;
  const Block& block(int layer) const { return blocks_[layer - 1]; }
  // The model's RMSNorm (Gemma's with gemma_norms).
  at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight) const;
  NormKind norm_kind() const;
  // The projections reading rms1's output (q, k, v or the fused qkv).
  std::vector<NormProjection> QkvProjections(const Block& w) const;
  // The MLP on y (the pre-MLP norm's output): dense, fused or the experts;
  // `mlp` non-null: its activation (the experts) recomputed in backward.
  at::Tensor Mlp(const Block& w, const at::Tensor& y, RecomputeTimer* mlp) const;
  // The dense MLP from the projections that read the norm's output (gate and
  // up, or gate_up).
  at::Tensor GatedMlp(const Block& w, std::vector<at::Tensor> gate_up, RecomputeTimer* mlp) const;
  // Whether block `layer` (a chain index) is a sliding-window layer.
  bool sliding(int layer) const;
  // The variants' prologue and epilogue (HasLlamaVariant).
  Heads VariantPrologue(const Block& w, const at::Tensor& x, RecomputeTimer* norm) const;
  // q, k and v of block `layer` as (b, s, heads, d) (Prologue's, before
  // eager attention repeats k and v).
  Heads ProjectHeads(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                     RecomputeTimer* norm) const;
  at::Tensor VariantEpilogue(const Block& w, const at::Tensor& x, const at::Tensor& context,
                             RecomputeTimer* mlp, RecomputeTimer* norm) const;
  // (b, s, n, d) -> the same with rotary positions applied.
  at::Tensor Rotary(const at::Tensor& t) const;
  // (b, s, n, d) -> (b * a, s, d), each of the n heads repeated a / n times
  // (HF repeat_kv's order: the heads of a group are adjacent).
  at::Tensor RepeatHeads(const at::Tensor& t) const;

  at::Tensor embed_, norm_, lm_head_;  // lm_head_ undefined when tied
  std::vector<Block> blocks_;
  // (sequences, 1, s, s), each (s, s) 0 on and below the diagonal, -inf
  // above: the mask transformers makes for eager attention.
  at::Tensor causal_bias_;
  // (s,) int64: the position ids, as transformers' blocks get them.
  at::Tensor positions_;
  at::Tensor cos_, sin_;    // (s, 1, head_dim) in the model's dtype
  bool variant_ = false;     // HasLlamaVariant(config())
  double embed_scale_ = 0;   // embedding_scale: sqrt(hidden) in the model's dtype
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_LLAMA_MODEL_H_
