#include "llama_model.h"

#include <cmath>

#include "variant_blocks.h"

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
  variant_ = HasLlamaVariant(c);
  // Gemma's norm weights start at 0 (the norm multiplies by 1 + w).
  const double norm_one = c.gemma_norms ? 0 : 1;
  const int64_t E = c.experts, fe = c.expert_ffn_hidden > 0 ? c.expert_ffn_hidden : f;
  embed_ = Normal({V, h}, train);
  blocks_.resize(c.layers);
  for (Block& b : blocks_) {
    b.rms1 = Constant(h, norm_one, train);
    if (c.fused_projections) {
      b.qkv = MakeProjection(h, q_width + 2 * kv_width, c.qkv_bias, kLoraQ | kLoraK | kLoraV);
    } else {
      b.q = MakeProjection(h, q_width, c.qkv_bias, kLoraQ);
      b.k = MakeProjection(h, kv_width, c.qkv_bias, kLoraK);
      b.v = MakeProjection(h, kv_width, c.qkv_bias, kLoraV);
    }
    b.o = MakeProjection(q_width, h, false, kLoraO);
    if (c.qk_norm) {
      b.q_norm = Constant(c.head_dim, norm_one, train);
      b.k_norm = Constant(c.head_dim, norm_one, train);
    }
    if (c.gemma_norms) b.post_attention_norm = Constant(h, norm_one, train);
    b.rms2 = Constant(h, norm_one, train);
    if (E > 0) {
      b.experts.router = Normal({E, h}, train);
      b.experts.gate_up = Normal({E, 2 * fe, h}, train);
      b.experts.down = Normal({E, h, fe}, train);
    } else if (c.fused_projections) {
      b.gate_up = MakeProjection(h, 2 * f, false, kLoraGate | kLoraUp);
      b.down = MakeProjection(f, h, false, kLoraDown);
    } else {
      b.gate = MakeProjection(h, f, false, kLoraGate);
      b.up = MakeProjection(h, f, false, kLoraUp);
      b.down = MakeProjection(f, h, false, kLoraDown);
    }
    if (c.gemma_norms) b.post_feedforward_norm = Constant(h, norm_one, train);
  }
  norm_ = Constant(h, norm_one, train);
  // transformers: hidden * torch.tensor(hidden ** 0.5, dtype=hidden.dtype).
  if (c.embedding_scale) {
    embed_scale_ = at::scalar_tensor(std::sqrt(static_cast<double>(h)), dtype()).item<double>();
  }
  if (!c.tie_embeddings) lm_head_ = Normal({V, h}, train);
  // transformers' eager mask, one (s, s) per sequence (masking_utils.
  // eager_mask); the fused kernels mask themselves.
  if (c.attention == AttentionImpl::kEager) {
    causal_bias_ = CausalBias().expand({sequences(), 1, c.seq_len, c.seq_len}).contiguous();
  }
  // HF LlamaRotaryEmbedding: inv_freq = theta^(-2i/d), angles = position *
  // inv_freq, emb = cat(angles, angles); cos and sin in fp32, then cast.
  const int64_t d = c.head_dim;
  const at::Tensor inv_freq =
      at::pow(kRopeTheta, at::arange(0, d, 2, at::kFloat) / static_cast<double>(-d));
  positions_ = at::arange(c.seq_len, at::TensorOptions().dtype(at::kLong).device(device));
  const at::Tensor angles = at::outer(positions_.to(at::kFloat), inv_freq);
  const at::Tensor emb = at::cat({angles, angles}, -1).unsqueeze(1);  // (s, 1, d)
  cos_ = emb.cos().to(device, dtype());
  sin_ = emb.sin().to(device, dtype());
}

NormKind LlamaModel::norm_kind() const {
  return config().gemma_norms ? NormKind::kGemmaRmsNorm : NormKind::kRmsNorm;
}

at::Tensor LlamaModel::RmsNorm(const at::Tensor& x, const at::Tensor& weight) const {
  return ApplyNorm(norm_kind(), x, weight, {}, kRmsEps);
}

bool LlamaModel::sliding(int layer) const {
  const auto& layers = config().sliding_layers;
  const auto index = static_cast<size_t>(block_index(layer));
  return config().sliding_window > 0 && index < layers.size() && layers[index];
}

std::vector<NormProjection> LlamaModel::QkvProjections(const Block& w) const {
  if (config().fused_projections) return {{w.qkv.weight, w.qkv.bias}};
  return {{w.q.weight, w.q.bias}, {w.k.weight, w.k.bias}, {w.v.weight, w.v.bias}};
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
      if (c.embedding_scale) return at::embedding(embed_, x[0]) * embed_scale_;
      return at::embedding(embed_, x[0]);
    case LayerKind::kFinalNorm:
      return RmsNorm(x, norm_);
    case LayerKind::kHead:
      return SoftCap(at::linear(x, c.tie_embeddings ? embed_ : lm_head_), c.logit_softcap);
    case LayerKind::kLoss:
      return TokenLoss(x, batch);
    case LayerKind::kBlock:
      break;
  }
  return {};
}

Heads LlamaModel::Prologue(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                           RecomputeTimer* norm) const {
  Heads heads = ProjectHeads(layer, x, seeds, norm);
  const ModelConfig& c = config();
  if (c.attention == AttentionImpl::kEager && c.kv_heads != c.heads) {
    // transformers' repeat_kv runs before the attention's matmuls: its
    // copies of k and v, not the grouped heads, are what an attention core
    // recomputed (torch's selective checkpoint, the attention_core option)
    // starts from. The grouped heads die here.
    heads[1] = RepeatHeads(heads[1]);
    heads[2] = RepeatHeads(heads[2]);
  }
  return heads;
}

Heads LlamaModel::ProjectHeads(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                               RecomputeTimer* norm) const {
  const ModelConfig& c = config();
  const Block& w = block(layer);
  const int64_t b = c.micro_batch, s = c.seq_len, d = c.head_dim;
  if (c.lora_dropout > 0) SeedGenerator(device(), seeds.layer);
  if (variant_) return VariantPrologue(w, x, norm);
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

at::Tensor LlamaModel::AttentionCore(int layer, const Heads& heads,
                                     const DropoutSeeds& seeds) const {
  const ModelConfig& c = config();
  const bool slides = sliding(layer);
  // A sliding layer as long as its window or longer: transformers' mask
  // (shorter, the causal one, left to is_causal).
  const bool masked = slides && c.seq_len >= c.sliding_window;
  if (c.attention != AttentionImpl::kEager) {
    // (b, s, n, d) -> (b, n, s, d) views; the kernels take grouped k and v.
    const at::Tensor q = heads[0].transpose(1, 2), k = heads[1].transpose(1, 2),
                     v = heads[2].transpose(1, 2);
    if (c.attention == AttentionImpl::kSdpa && masked) {
      const at::Tensor context =
          WindowedSdpa(q, k, v, {true, c.dropout, seeds.core, c.sliding_window});
      return context.transpose(1, 2).reshape({q.size(0), c.seq_len, c.heads * c.head_dim});
    }
    if (c.attention == AttentionImpl::kSdpa && c.head_dim > 256) {
      // transformers' use_gqa_in_sdpa is false: repeat_kv's copies.
      return FusedAttention(q, RepeatKv(k, c.heads), RepeatKv(v, c.heads), /*causal=*/true,
                            seeds.core);
    }
    return FusedAttention(q, k, v, /*causal=*/true, seeds.core, slides ? c.sliding_window : 0);
  }
  // q to (b * a, s, d); k and v repeated to every head of their group
  // (by Prologue, with fewer key/value heads than query heads). The copies
  // are what the scores and the context keep.
  const at::Tensor q = RepeatHeads(heads[0]);
  at::Tensor context;
  {
    const bool grouped = c.kv_heads != c.heads;
    const at::Tensor k = grouped ? heads[1] : RepeatHeads(heads[1]);
    const at::Tensor v = grouped ? heads[2] : RepeatHeads(heads[2]);
    const at::Tensor bias = masked
                                ? SlidingBias(c.seq_len, c.sliding_window, causal_bias_.options())
                                : causal_bias_[0][0];
    context = EagerAttention(q, k, v, bias, /*softmax_fp32=*/true, seeds.core, seeds.regenerate,
                             c.attn_softcap);
  }
  return MergeHeads(context);
}

at::Tensor LlamaModel::Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                                const DropoutSeeds& seeds, RecomputeTimer* mlp,
                                RecomputeTimer* norm) const {
  const ModelConfig& c = config();
  const Block& w = block(layer);
  if (variant_) return VariantEpilogue(w, x, context, mlp, norm);
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

Heads LlamaModel::VariantPrologue(const Block& w, const at::Tensor& x,
                                  RecomputeTimer* norm) const {
  const ModelConfig& c = config();
  const int64_t b = x.size(0), s = c.seq_len, d = c.head_dim;
  const int64_t q_width = c.heads * d, kv_width = c.kv_heads * d;
  std::vector<at::Tensor> p;
  if (norm != nullptr) {
    // rms1's input kept, its output made again in the projections' backward.
    p = RecomputedNormLinears(norm_kind(), x, w.rms1, {}, kRmsEps, QkvProjections(w), norm);
  } else {
    const at::Tensor y = RmsNorm(x, w.rms1);
    for (const Projection* proj : {&w.qkv, &w.q, &w.k, &w.v}) {
      if (proj->weight.defined()) p.push_back(Project(y, *proj));
    }
  }
  if (c.fused_projections) {
    // qkv[..., :q], [q:q+kv], [q+kv:]: views of one output (v keeps it whole).
    const at::Tensor qkv = p[0];
    p = {qkv.narrow(-1, 0, q_width), qkv.narrow(-1, q_width, kv_width),
         qkv.narrow(-1, q_width + kv_width, kv_width)};
  }
  p[0] = p[0].view({b, s, c.heads, d});
  p[1] = p[1].view({b, s, c.kv_heads, d});
  p[2] = p[2].view({b, s, c.kv_heads, d});
  if (c.qk_norm) {  // over each head's d channels, before the rotation
    p[0] = RmsNorm(p[0], w.q_norm);
    p[1] = RmsNorm(p[1], w.k_norm);
  }
  p[0] = Rotary(p[0]);
  p[1] = Rotary(p[1]);
  return p;
}

at::Tensor LlamaModel::GatedMlp(const Block& w, std::vector<at::Tensor> gate_up,
                                RecomputeTimer* mlp) const {
  const ModelConfig& c = config();
  const MlpActivation act =
      c.activation == Activation::kGeluTanh ? MlpActivation::kGeGlu : MlpActivation::kSwiGlu;
  if (gate_up.size() == 1) {  // gate_up_proj.chunk(2): two views
    const int64_t f = gate_up[0].size(-1) / 2;
    gate_up = {gate_up[0].narrow(-1, 0, f), gate_up[0].narrow(-1, f, f)};
  }
  if (mlp != nullptr) {
    return RecomputedActivationLinear(act, gate_up[0], gate_up[1], w.down.weight, w.down.bias, mlp);
  }
  at::Tensor t = act == MlpActivation::kGeGlu ? at::gelu(gate_up[0], "tanh") : at::silu(gate_up[0]);
  gate_up[0] = at::Tensor();
  t = t * gate_up[1];
  gate_up.clear();
  return Project(t, w.down);
}

at::Tensor LlamaModel::Mlp(const Block& w, const at::Tensor& y, RecomputeTimer* mlp) const {
  const ModelConfig& c = config();
  if (c.experts > 0) {
    const at::Tensor rows = y.reshape({-1, c.hidden});
    const Routing routing = Route(rows, w.experts.router, c.experts_per_token);
    const MlpActivation act =
        c.activation == Activation::kGeluTanh ? MlpActivation::kGeGlu : MlpActivation::kSwiGlu;
    return Experts(rows, routing, w.experts, act, mlp).view(y.sizes());
  }
  if (c.fused_projections) return GatedMlp(w, {Project(y, w.gate_up)}, mlp);
  if (mlp != nullptr) {
    const at::Tensor gate = Project(y, w.gate);
    return GatedMlp(w, {gate, Project(y, w.up)}, mlp);
  }
  // act(gate_proj(y)) before up_proj(y), as the planner's op order.
  const MlpActivation act =
      c.activation == Activation::kGeluTanh ? MlpActivation::kGeGlu : MlpActivation::kSwiGlu;
  at::Tensor t = Project(y, w.gate);
  t = act == MlpActivation::kGeGlu ? at::gelu(t, "tanh") : at::silu(t);
  t = t * Project(y, w.up);
  return Project(t, w.down);
}

at::Tensor LlamaModel::VariantEpilogue(const Block& w, const at::Tensor& x,
                                       const at::Tensor& context, RecomputeTimer* mlp,
                                       RecomputeTimer* norm) const {
  const ModelConfig& c = config();
  at::Tensor mid;
  {
    // No residual dropout (the model's dropout is the attention's).
    at::Tensor t = Project(context, w.o);
    if (c.gemma_norms) t = RmsNorm(t, w.post_attention_norm);
    mid = x + t;
  }
  at::Tensor t;
  if (norm != nullptr) {
    // rms2's input kept, its output made again in the backward of the
    // projections reading it (a dense MLP: the options offer it there).
    std::vector<NormProjection> projections = {{w.gate_up.weight, w.gate_up.bias}};
    if (!c.fused_projections) projections = {{w.gate.weight, w.gate.bias}, {w.up.weight, w.up.bias}};
    t = GatedMlp(w, RecomputedNormLinears(norm_kind(), mid, w.rms2, {}, kRmsEps, projections, norm),
                 mlp);
  } else {
    t = Mlp(w, RmsNorm(mid, w.rms2), mlp);
  }
  if (c.gemma_norms) t = RmsNorm(t, w.post_feedforward_norm);
  return mid + t;
}

}  // namespace remat::runtime
