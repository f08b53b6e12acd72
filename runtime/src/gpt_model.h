// The GPT training chain on LibTorch: weights built from a ModelConfig and the
// forward of each chain layer, in the analytic chain's order and names:
// "embedding", "block0".."block<N-1>", "final_norm", "head", "loss".
//
// Pre-LayerNorm causal blocks: x + drop(proj(attn(ln1(x)))), then
// + drop(fc2(gelu(fc1(ln2(.))))). Eager attention with a causal mask and
// attention dropout; the LM head shares the token embedding when
// tie_embeddings. Layers are plain functions of their input so that the
// executor decides what autograd keeps: each layer's input is a detached leaf.
//
// A block also runs in three parts for the selective option (Megatron's
// "attention core" recompute): Prologue (ln1, qkv projection, split into
// heads) -> AttentionCore (scores, mask, softmax, dropout, context) ->
// Epilogue (output projection, residuals, MLP).
#ifndef REMAT_RUNTIME_SRC_GPT_MODEL_H_
#define REMAT_RUNTIME_SRC_GPT_MODEL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "remat/model_config.h"
#include "remat/status.h"

namespace remat::runtime {

enum class LayerKind { kEmbedding, kBlock, kFinalNorm, kHead, kLoss };

// Dropout seeds of one forward of one layer. The executor derives them from
// (run seed, step, layer), so a recompute draws exactly the masks of the
// first forward without saving generator state.
struct DropoutSeeds {
  uint64_t layer = 0;  // embedding dropout, or a block's prologue
  uint64_t core = 0;   // a block's attention dropout
  uint64_t tail = 0;   // a block's residual dropouts
};
DropoutSeeds SeedsFor(uint64_t run_seed, int64_t step, int layer);

// Re-seeds the default generator of `device` (the one dropout draws from).
void SeedGenerator(const at::Device& device, uint64_t seed);

class GptModel {
 public:
  // OK if the runtime implements `config`: gpt architecture, eager attention,
  // fp32/bf16/fp16. Otherwise says what is not supported and what is.
  static Status Supports(const ModelConfig& config);

  // Random weights (normal(0, 0.02), LayerNorm 1/0) from `seed`, on `device`.
  // Requires Supports(config).
  GptModel(const ModelConfig& config, const at::Device& device, uint64_t seed);
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  const ModelConfig& config() const { return config_; }
  const at::Device& device() const { return device_; }
  at::ScalarType dtype() const { return dtype_; }

  int num_layers() const { return static_cast<int>(config_.layers) + 4; }
  std::string layer_name(int layer) const;
  LayerKind layer_kind(int layer) const;

  // A synthetic batch for `step`: (2, micro_batch, seq_len) int64 token ids,
  // row 0 the inputs, row 1 the next-token targets. This is the chain's x[0].
  at::Tensor MakeBatch(uint64_t seed, int64_t step) const;

  // The forward of chain layer `layer` on its input `x` (the batch for the
  // embedding, logits for the loss), seeding dropout from `seeds`. `batch` is
  // x[0]: the loss layer reads its targets from it.
  at::Tensor Forward(int layer, const at::Tensor& x, const at::Tensor& batch,
                     const DropoutSeeds& seeds) const;

  // Block `layer` in parts (layer_kind(layer) == kBlock). Prologue returns
  // q, k, v as one (3, batch*heads, seq, head_dim) tensor; the core returns
  // the (batch, seq, hidden) attention context.
  at::Tensor Prologue(int layer, const at::Tensor& x) const;
  at::Tensor AttentionCore(int layer, const at::Tensor& heads, const DropoutSeeds& seeds) const;
  at::Tensor Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                      const DropoutSeeds& seeds) const;

  // Trainable tensors (buffers such as the causal mask are not listed).
  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  int64_t parameter_count() const;
  // Gives every parameter a .grad of zeros, so that gradients accumulate in
  // place and live for the whole run, as the planner's model state assumes
  // (a lazily created .grad would appear in the middle of the first backward).
  void AllocateGradients();
  // Zeroes the gradients in place (no allocation).
  void ZeroGrad();

 private:
  struct Block {
    at::Tensor ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b;
    at::Tensor ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
  };
  at::Tensor Param(at::Tensor t);
  const Block& block(int layer) const { return blocks_[layer - 1]; }
  at::Tensor Dropout(const at::Tensor& x) const;

  ModelConfig config_;
  at::Device device_;
  at::ScalarType dtype_;
  std::vector<at::Tensor> parameters_;
  at::Tensor wte_, wpe_, lnf_w_, lnf_b_, lm_head_;  // lm_head_ undefined when tied
  std::vector<Block> blocks_;
  at::Tensor causal_bias_;  // (s, s): 0 on and below the diagonal, -inf above
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_GPT_MODEL_H_
