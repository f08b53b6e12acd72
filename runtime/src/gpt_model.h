// GPT-2 on LibTorch (architecture gpt, lm head).
//
// Pre-LayerNorm causal blocks: x + drop(proj(attn(ln1(x)))), then
// + drop(fc2(gelu(fc1(ln2(.))))). Eager attention with a causal mask and
// attention dropout; the LM head shares the token embedding when
// tie_embeddings. The prologue is ln1 and the fused qkv projection split
// into heads: one (3, batch*heads, seq, head_dim) tensor. With LoRA (PEFT)
// every weight is frozen and the targeted projections carry adapters (c_attn
// one when any of q, k, v is targeted); with QLoRA the blocks' projections
// are nf4 (lora.h).
#ifndef REMAT_RUNTIME_SRC_GPT_MODEL_H_
#define REMAT_RUNTIME_SRC_GPT_MODEL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "chain_model.h"

namespace remat::runtime {

class GptModel final : public ChainModel {
 public:
  // Random weights (normal(0, 0.02), LayerNorm 1/0) from `seed`, on `device`.
  // Requires ModelSupports(config).
  GptModel(const ModelConfig& config, const at::Device& device, uint64_t seed);

  Heads Prologue(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                 RecomputeTimer* norm = nullptr) const override;
  at::Tensor AttentionCore(int layer, const Heads& heads, const DropoutSeeds& seeds) const override;
  at::Tensor Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                      const DropoutSeeds& seeds, RecomputeTimer* mlp = nullptr,
                      RecomputeTimer* norm = nullptr) const override;
  bool recomputes_mlp() const override { return config().lora_rank == 0; }
  bool regenerates_masks() const override { return config().lora_rank == 0; }
  int64_t buffer_bytes() const override {
    return causal_bias_.defined() ? static_cast<int64_t>(causal_bias_.nbytes()) : 0;
  }

 private:
  const at::Tensor& TokenEmbedding() const override { return wte_; }
  const at::Tensor& LmHeadWeight() const override { return lm_head_.defined() ? lm_head_ : wte_; }
  struct Block {
    at::Tensor ln1_w, ln1_b;
    Projection qkv, proj;
    at::Tensor ln2_w, ln2_b;
    Projection fc1, fc2;
  };
  at::Tensor ForwardLayer(int layer, const at::Tensor& x, const at::Tensor& batch,
                          const DropoutSeeds& seeds) const override;
  const Block& block(int layer) const { return blocks_[layer - 1]; }

  at::Tensor wte_, wpe_, lnf_w_, lnf_b_, lm_head_;  // lm_head_ undefined when tied
  std::vector<Block> blocks_;
  // (sequences, 1, s, s), each (s, s) 0 on and below the diagonal, -inf
  // above: the mask transformers makes for eager attention.
  at::Tensor causal_bias_;
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_GPT_MODEL_H_
