// BERT-family encoders on LibTorch (bert, roberta, distilbert), as Hugging
// Face's BertModel computes them, with the heads sentence-transformers and
// the HF task models put on top.
//
// Embedding: word + position (+ token type 0 when type_vocab > 0) ->
// LayerNorm -> dropout. Post-LayerNorm bidirectional blocks: separate q, k,
// v projections, eager attention without a mask, output dense + dropout +
// residual + LayerNorm, then the GELU MLP with the same epilogue. No
// final_norm layer: the chain is embedding, blocks, head, loss. Heads:
//   mlm: dense + GELU + LayerNorm, decoder tied to the word embedding (with
//        a bias); cross-entropy over the masked tokens (15%, at least one per
//        sequence; the others -100).
//   pooling: mean over the tokens (sentence-transformers v5+: the attention
//        mask as (texts, s, 1) in the model's dtype, the masked sum in fp32 /
//        the clamped fp32 count, cast back)
//        or the first token; loss mnrl: texts_per_example texts per example
//        (anchors first), anchors against cat(positives, negatives), cosine
//        similarity * 20, cross-entropy with the matching positive. As
//        sentence-transformers does, each text group is encoded in its own
//        pass (chain_model.h: "p1.embedding" .. "p<T>.head", then the loss). With
//        `pooler` a BertPooler (dense + tanh on the first token) runs but the
//        loss never reaches it: its weights get no gradient.
//   classification: pooler (dense + tanh on the first token), dropout,
//        num_labels logits; cross-entropy against random labels.
// LoRA (QLoRA): adapters on the targeted q, k, v, attention output, MLP up
// and down projections (chain_model.h MakeProjection); every other weight,
// the heads' included, frozen, as the planner's BertBlock models it.
// The prologue returns q, k and v split into heads, the core's inputs.
// Without LoRA the epilogue also runs the MLP activation's and ln1's
// recompute (mlp_activation, norm_output: GELU's and ln1's outputs made
// again in fc2's and fc1's backward); ln2's output is the block's. The
// block's residual dropouts and eager attention's can keep no mask
// (dropout_mask), regenerated in backward; the embedding's keeps its own.
#ifndef REMAT_RUNTIME_SRC_ENCODER_MODEL_H_
#define REMAT_RUNTIME_SRC_ENCODER_MODEL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "chain_model.h"

namespace remat::runtime {

class EncoderModel final : public ChainModel {
 public:
  // Random weights (normal(0, 0.02), LayerNorm 1/0, biases 0) from `seed`.
  // Requires ModelSupports(config).
  EncoderModel(const ModelConfig& config, const at::Device& device, uint64_t seed);

  // Row 0 the tokens (mlm: the masked ones replaced by id 0), row 1 mlm: the
  // original token where masked, else -100; classification: the label in
  // column 0; pooling: unused.
  at::Tensor MakeBatch(uint64_t seed, int64_t step) const override;
  Heads Prologue(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                 RecomputeTimer* norm = nullptr) const override;
  at::Tensor AttentionCore(int layer, const Heads& heads, const DropoutSeeds& seeds) const override;
  at::Tensor Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                      const DropoutSeeds& seeds, RecomputeTimer* mlp = nullptr,
                      RecomputeTimer* norm = nullptr) const override;
  // The MLP activation and ln1's output (the epilogue's) are recomputed
  // before plain projections only: not with LoRA.
  bool recomputes_mlp() const override { return config().lora_rank == 0; }
  // The residual dropouts and eager attention's regenerate their masks
  // (dropout_mask, all four) without LoRA, as the decoders'.
  bool regenerates_masks() const override { return config().lora_rank == 0; }

 private:
  const at::Tensor& TokenEmbedding() const override { return word_; }
  // The projections: dense or nf4, with LoRA adapters where targeted.
  struct Block {
    Projection q, k, v, o, fc1, fc2;
    at::Tensor ln1_w, ln1_b, ln2_w, ln2_b;
  };
  at::Tensor ForwardLayer(int layer, const at::Tensor& x, const at::Tensor& batch,
                          const DropoutSeeds& seeds) const override;
  at::Tensor ForwardLoss(const at::Tensor& x, const std::vector<at::Tensor>& skips,
                         const at::Tensor& batch) const override;
  const Block& block(int layer) const { return blocks_[block_index(layer)]; }
  at::Tensor Embed(const at::Tensor& ids, const DropoutSeeds& seeds) const;
  at::Tensor Head(const at::Tensor& x, const DropoutSeeds& seeds) const;
  at::Tensor Loss(const at::Tensor& x, const at::Tensor& batch) const;
  at::Tensor MeanPool(const at::Tensor& x) const;
  // The first token of every sequence, (sequences, hidden): a copy.
  static at::Tensor FirstToken(const at::Tensor& x);

  at::Tensor word_, position_, token_type_, emb_ln_w_, emb_ln_b_;  // token_type_: type_vocab > 0
  std::vector<Block> blocks_;
  // Heads: mlm (dense, LayerNorm, decoder bias; decoder_ when untied),
  // pooler (classification: trained; pooling with `pooler`: frozen),
  // classifier.
  at::Tensor dense_w_, dense_b_, head_ln_w_, head_ln_b_, decoder_, decoder_b_;
  at::Tensor pooler_w_, pooler_b_, classifier_w_, classifier_b_;
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_ENCODER_MODEL_H_
