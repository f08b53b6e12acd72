#include "llama_model.h"

#include <cmath>

namespace remat::runtime {
namespace {

constexpr double kRmsEps = 1e-6;
constexpr double kRopeTheta = 10000.0;

at::Tensor RotateHalf(const at::Tensor& t) {
  const int64_t half = t.size(-1) / 2;
  return at::cat({-t.narrow(-1, half, half), t.narrow(-1, 0, half)}, -1);
}

}  // namespace

LlamaModel::LlamaModel(const ModelConfig& config, const at::Device& device, uint64_t seed)
    : ChainModel(config, device, seed, /*final_norm=*/true) {
  const ModelConfig& c = this->config();
  const int64_t h = c.hidden, f = c.ffn_hidden, V = c.vocab;
  const int64_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const bool train = weights_train();
  embed_ = Normal({V, h}, train);
  blocks_.resize(c.layers);
  for (Block& b : blocks_) {
    b.rms1 = Constant(h, 1, train);
    b.q = MakeProjection(h, q_width, c.qkv_bias, kLoraQ);
    b.k = MakeProjection(h, kv_width, c.qkv_bias, kLoraK);
    b.v = MakeProjection(h, kv_width, c.qkv_bias, kLoraV);
    b.o = MakeProjection(q_width, h, false, kLoraO);
    b.rms2 = Constant(h, 1, train);
    b.gate = MakeProjection(h, f, false, kLoraGate);
    b.up = MakeProjection(h, f, false, kLoraUp);
    b.down = MakeProjection(f, h, false, kLoraDown);
  }
  norm_ = Constant(h, 1, train);
  if (!c.tie_embeddings) lm_head_ = Normal({V, h}, train);
  if (c.attention == AttentionImpl::kEager) causal_bias_ = CausalBias();  // fused kernels mask themselves
  // HF LlamaRotaryEmbedding: inv_freq = theta^(-2i/d), angles = position *
  // inv_freq, emb = cat(angles, angles); cos and sin in fp32, then cast.
  const int64_t d = c.head_dim;
  const at::Tensor inv_freq =
      at::pow(kRopeTheta, at::arange(0, d, 2, at::kFloat) / static_cast<double>(-d));
  const at::Tensor angles = at::outer(at::arange(c.seq_len, at::kFloat), inv_freq);
  const at::Tensor emb = at::cat({angles, angles}, -1).unsqueeze(1);  // (s, 1, d)
  cos_ = emb.cos().to(device, dtype());
  sin_ = emb.sin().to(device, dtype());
}

at::Tensor LlamaModel::RmsNorm(const at::Tensor& x, const at::Tensor& weight) const {
  return ApplyNorm(NormKind::kRmsNorm, x, weight, {}, kRmsEps);
}

at::Tensor LlamaModel::Rotary(const at::Tensor& t) const {
  // Keeps nothing but cos and sin (the buffers).
  return t * cos_ + RotateHalf(t) * sin_;
}

at::Tensor LlamaModel::RepeatHeads(const at::Tensor& t) const {
  const ModelConfig& c = config();
  const int64_t b = t.size(0), s = t.size(1), n = t.size(2), d = t.size(3);
  const int64_t rep = c.heads / n;
  // (b, s, n, rep, d) -> (b, n, rep, s, d) -> (b * n * rep, s, d): one copy.
  return t.unsqueeze(3)
      .expand({b, s, n, rep, d})
      .permute({0, 2, 3, 1, 4})
      .reshape({b * n * rep, s, d});
}

at::Tensor LlamaModel::ForwardLayer(int layer, const at::Tensor& x, const at::Tensor& batch,
                                    const DropoutSeeds& /*seeds*/) const {
  const ModelConfig& c = config();
  switch (layer_kind(layer)) {
    case LayerKind::kEmbedding:
      return at::embedding(embed_, x[0]);
    case LayerKind::kFinalNorm:
      return RmsNorm(x, norm_);
    case LayerKind::kHead:
      return at::linear(x, c.tie_embeddings ? embed_ : lm_head_);
    case LayerKind::kLoss:
      return TokenLoss(x, batch);
    case LayerKind::kBlock:
      break;
  }
  return {};
}

Heads LlamaModel::Prologue(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                           RecomputeTimer* norm) const {
  const ModelConfig& c = config();
  const Block& w = block(layer);
  const int64_t b = c.micro_batch, s = c.seq_len, d = c.head_dim;
  if (c.lora_dropout > 0) SeedGenerator(device(), seeds.layer);
  if (norm != nullptr) {
    // rms1's input kept, its output made again in the backward of the
    // q, k and v projections.
    std::vector<at::Tensor> qkv = RecomputedNormLinears(
        NormKind::kRmsNorm, x, w.rms1, {}, kRmsEps,
        {{w.q.weight, w.q.bias}, {w.k.weight, w.k.bias}, {w.v.weight, w.v.bias}}, norm);
    // Each projection's output dies once its rotary copy is made.
    qkv[0] = Rotary(qkv[0].view({b, s, c.heads, d}));
    qkv[1] = Rotary(qkv[1].view({b, s, c.kv_heads, d}));
    qkv[2] = qkv[2].view({b, s, c.kv_heads, d});
    return qkv;
  }
  const at::Tensor y = RmsNorm(x, w.rms1);
  at::Tensor q = Rotary(Project(y, w.q).view({b, s, c.heads, d}));
  at::Tensor k = Rotary(Project(y, w.k).view({b, s, c.kv_heads, d}));
  at::Tensor v = Project(y, w.v).view({b, s, c.kv_heads, d});
  return {std::move(q), std::move(k), std::move(v)};
}

at::Tensor LlamaModel::AttentionCore(int /*layer*/, const Heads& heads,
                                     const DropoutSeeds& seeds) const {
  if (config().attention != AttentionImpl::kEager) {
    // (b, s, n, d) -> (b, n, s, d) views; the kernels take grouped k and v.
    return FusedAttention(heads[0].transpose(1, 2), heads[1].transpose(1, 2),
                          heads[2].transpose(1, 2), /*causal=*/true, seeds.core);
  }
  // q to (b * a, s, d); k and v repeated to every head of their group. The
  // copies are what the scores and the context keep.
  const at::Tensor q = RepeatHeads(heads[0]);
  at::Tensor context;
  {
    const at::Tensor k = RepeatHeads(heads[1]), v = RepeatHeads(heads[2]);
    context = EagerAttention(q, k, v, causal_bias_, /*softmax_fp32=*/true, seeds.core,
                             seeds.regenerate);
  }
  return MergeHeads(context);
}

at::Tensor LlamaModel::Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                                const DropoutSeeds& seeds, RecomputeTimer* mlp,
                                RecomputeTimer* norm) const {
  const ModelConfig& c = config();
  const Block& w = block(layer);
  if (c.dropout > 0 || c.lora_dropout > 0) SeedGenerator(device(), seeds.tail);
  at::Tensor t = Dropout(Project(context, w.o), seeds.regenerate);
  const at::Tensor mid = x + t;
  if (norm != nullptr) {
    // rms2's input kept, its output made again in the backward of the gate
    // and up projections.
    std::vector<at::Tensor> gate_up =
        RecomputedNormLinears(NormKind::kRmsNorm, mid, w.rms2, {}, kRmsEps,
                              {{w.gate.weight, w.gate.bias}, {w.up.weight, w.up.bias}}, norm);
    if (mlp != nullptr) {
      t = RecomputedActivationLinear(MlpActivation::kSwiGlu, gate_up[0], gate_up[1], w.down.weight,
                                     w.down.bias, mlp);
    } else {
      t = Project(at::silu(gate_up[0]) * gate_up[1], w.down);
    }
    gate_up.clear();
    return mid + Dropout(t, seeds.regenerate);
  }
  const at::Tensor y = RmsNorm(mid, w.rms2);
  if (mlp != nullptr) {
    // The gate's and up's outputs kept; silu(gate) * up made again in
    // down's backward.
    const at::Tensor gate = Project(y, w.gate);
    t = RecomputedActivationLinear(MlpActivation::kSwiGlu, gate, Project(y, w.up), w.down.weight,
                                   w.down.bias, mlp);
    t = Dropout(t, seeds.regenerate);
  } else {
    t = at::silu(Project(y, w.gate)) * Project(y, w.up);
    t = Dropout(Project(t, w.down), seeds.regenerate);
  }
  return mid + t;
}

}  // namespace remat::runtime
