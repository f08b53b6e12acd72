#include "gpt_model.h"

namespace remat::runtime {
namespace {

constexpr double kNormEps = 1e-5;

}  // namespace

GptModel::GptModel(const ModelConfig& config, const at::Device& device, uint64_t seed)
    : ChainModel(config, device, seed, /*final_norm=*/true) {
  const ModelConfig& c = this->config();
  const int64_t h = c.hidden, f = c.ffn_hidden, V = c.vocab;
  const bool train = weights_train();
  wte_ = Normal({V, h}, train);
  wpe_ = Normal({c.max_position, h}, train);
  blocks_.resize(c.layers);
  for (Block& b : blocks_) {
    b.ln1_w = Constant(h, 1, train);
    b.ln1_b = Constant(h, 0, train);
    b.qkv = MakeProjection(h, 3 * h, true, kLoraQ | kLoraK | kLoraV);
    b.proj = MakeProjection(h, h, true, kLoraO);
    b.ln2_w = Constant(h, 1, train);
    b.ln2_b = Constant(h, 0, train);
    b.fc1 = MakeProjection(h, f, true, kLoraUp);
    b.fc2 = MakeProjection(f, h, true, kLoraDown);
  }
  lnf_w_ = Constant(h, 1, train);
  lnf_b_ = Constant(h, 0, train);
  if (!c.tie_embeddings) lm_head_ = Normal({V, h}, train);
  // transformers' eager mask, one (s, s) per sequence (masking_utils.
  // eager_mask); the fused kernels mask themselves.
  if (c.attention == AttentionImpl::kEager) {
    causal_bias_ = CausalBias().expand({sequences(), 1, c.seq_len, c.seq_len}).contiguous();
  }
}

at::Tensor GptModel::ForwardLayer(int layer, const at::Tensor& x, const at::Tensor& batch,
                                  const DropoutSeeds& seeds) const {
  const ModelConfig& c = config();
  switch (layer_kind(layer)) {
    case LayerKind::kEmbedding: {
      if (c.dropout > 0) SeedGenerator(device(), seeds.layer);
      at::Tensor e = at::embedding(wte_, x[0]) + wpe_.narrow(0, 0, c.seq_len);
      return Dropout(e);
    }
    case LayerKind::kFinalNorm:
      return at::layer_norm(x, {c.hidden}, lnf_w_, lnf_b_, kNormEps);
    case LayerKind::kHead:
      return at::linear(x, c.tie_embeddings ? wte_ : lm_head_);
    case LayerKind::kLoss:
      return TokenLoss(x, batch);
    case LayerKind::kBlock:
      break;
  }
  return {};
}

Heads GptModel::Prologue(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                         RecomputeTimer* norm) const {
  const ModelConfig& c = config();
  const Block& b = block(layer);
  const int64_t bs = c.micro_batch, s = c.seq_len, a = c.heads, d = c.head_dim;
  if (c.lora_dropout > 0) SeedGenerator(device(), seeds.layer);
  at::Tensor t;
  if (norm != nullptr) {
    // ln1's input kept, its output made again in the qkv projection's
    // backward.
    t = RecomputedNormLinears(NormKind::kLayerNorm, x, b.ln1_w, b.ln1_b, kNormEps,
                              {{b.qkv.weight, b.qkv.bias}}, norm)[0];
  } else {
    t = Project(at::layer_norm(x, {c.hidden}, b.ln1_w, b.ln1_b, kNormEps), b.qkv);
  }
  // (b, s, 3h) -> (3, b, a, s, d): views of the projection, as HF GPT-2
  // hands them to sdpa (the kernel's output then is laid out (b, s, a, d)).
  const at::Tensor heads = t.view({bs, s, 3, a, d}).permute({2, 0, 3, 1, 4});
  if (c.attention != AttentionImpl::kEager) return {heads};
  // Eager: (3, b*a, s, d), one contiguous copy that q, k and v view.
  return {heads.reshape({3, bs * a, s, d})};
}

at::Tensor GptModel::AttentionCore(int /*layer*/, const Heads& heads,
                                   const DropoutSeeds& seeds) const {
  const at::Tensor& qkv = heads[0];
  if (config().attention != AttentionImpl::kEager) {
    return FusedAttention(qkv[0], qkv[1], qkv[2], /*causal=*/true, seeds.core);
  }
  return MergeHeads(EagerAttention(qkv[0], qkv[1], qkv[2], causal_bias_[0][0], false, seeds.core,
                                   seeds.regenerate));
}

at::Tensor GptModel::Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                              const DropoutSeeds& seeds, RecomputeTimer* mlp,
                              RecomputeTimer* norm) const {
  const ModelConfig& c = config();
  const Block& b = block(layer);
  if (c.dropout > 0 || c.lora_dropout > 0) SeedGenerator(device(), seeds.tail);
  at::Tensor t = Dropout(Project(context, b.proj), seeds.regenerate);
  const at::Tensor mid = x + t;
  if (norm != nullptr) {
    t = RecomputedNormLinears(NormKind::kLayerNorm, mid, b.ln2_w, b.ln2_b, kNormEps,
                              {{b.fc1.weight, b.fc1.bias}}, norm)[0];
  } else {
    t = Project(at::layer_norm(mid, {c.hidden}, b.ln2_w, b.ln2_b, kNormEps), b.fc1);
  }
  if (mlp != nullptr) {
    // GELU's input kept, its output made again in fc2's backward.
    t = RecomputedActivationLinear(MlpActivation::kGelu, t, {}, b.fc2.weight, b.fc2.bias, mlp);
  } else {
    t = at::gelu(t);
    t = Project(t, b.fc2);
  }
  t = Dropout(t, seeds.regenerate);
  return mid + t;
}

}  // namespace remat::runtime
