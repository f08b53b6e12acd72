// The llama family on LibTorch (llama, mistral, qwen2; lm head), as Hugging
// Face's LlamaDecoderLayer computes it.
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
#ifndef REMAT_RUNTIME_SRC_LLAMA_MODEL_H_
#define REMAT_RUNTIME_SRC_LLAMA_MODEL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "chain_model.h"

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
  bool regenerates_masks() const override { return config().lora_rank == 0; }
  int64_t buffer_bytes() const override {
    return (causal_bias_.defined() ? static_cast<int64_t>(causal_bias_.nbytes()) : 0) +
           static_cast<int64_t>(cos_.nbytes() + sin_.nbytes());
  }

 private:
  const at::Tensor& TokenEmbedding() const override { return embed_; }
  const at::Tensor& LmHeadWeight() const override { return lm_head_.defined() ? lm_head_ : embed_; }
  struct Block {
    at::Tensor rms1;
    Projection q, k, v, o;  // q, k, v biases undefined without qkv_bias
    at::Tensor rms2;
    Projection gate, up, down;
  };

  at::Tensor ForwardLayer(int layer, const at::Tensor& x, const at::Tensor& batch,
                          const DropoutSeeds& seeds) const override;
  const Block& block(int layer) const { return blocks_[layer - 1]; }
  at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight) const;
  // (b, s, n, d) -> the same with rotary positions applied.
  at::Tensor Rotary(const at::Tensor& t) const;
  // (b, s, n, d) -> (b * a, s, d), each of the n heads repeated a / n times
  // (HF repeat_kv's order: the heads of a group are adjacent).
  at::Tensor RepeatHeads(const at::Tensor& t) const;

  at::Tensor embed_, norm_, lm_head_;  // lm_head_ undefined when tied
  std::vector<Block> blocks_;
  at::Tensor causal_bias_;  // (s, s): 0 on and below the diagonal, -inf above
  at::Tensor cos_, sin_;    // (s, 1, head_dim) in the model's dtype
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_LLAMA_MODEL_H_
