#include "encoder_model.h"

#include <random>

namespace remat::runtime {
namespace {

constexpr double kNormEps = 1e-12;  // BertConfig.layer_norm_eps
constexpr double kMnrlScale = 20.0;
constexpr int64_t kIgnore = -100;

}  // namespace

EncoderModel::EncoderModel(const ModelConfig& config, const at::Device& device, uint64_t seed)
    : ChainModel(config, device, seed, /*final_norm=*/false) {
  const ModelConfig& c = this->config();
  const int64_t h = c.hidden, f = c.ffn_hidden, V = c.vocab;
  // With LoRA every weight but the adapters' is frozen (PEFT; the planner's
  // Builder::WeightsTrain), the heads' too.
  const bool train = weights_train();
  word_ = Normal({V, h}, train);
  position_ = Normal({c.max_position, h}, train);
  if (c.type_vocab > 0) token_type_ = Normal({c.type_vocab, h}, train);
  emb_ln_w_ = Constant(h, 1, train);
  emb_ln_b_ = Constant(h, 0, train);
  blocks_.resize(c.layers);
  for (Block& b : blocks_) {
    // HF BertLayer's query, key, value, attention output dense,
    // intermediate dense and output dense: LoRA's q, k, v, o, up, down.
    b.q = MakeProjection(h, h, true, kLoraQ);
    b.k = MakeProjection(h, h, true, kLoraK);
    b.v = MakeProjection(h, h, true, kLoraV);
    b.o = MakeProjection(h, h, true, kLoraO);
    b.ln1_w = Constant(h, 1, train);
    b.ln1_b = Constant(h, 0, train);
    b.fc1 = MakeProjection(h, f, true, kLoraUp);
    b.fc2 = MakeProjection(f, h, true, kLoraDown);
    b.ln2_w = Constant(h, 1, train);
    b.ln2_b = Constant(h, 0, train);
  }
  switch (c.head) {
    case Head::kMlm:
      dense_w_ = Normal({h, h}, train);
      dense_b_ = Constant(h, 0, train);
      head_ln_w_ = Constant(h, 1, train);
      head_ln_b_ = Constant(h, 0, train);
      if (!c.tie_embeddings) decoder_ = Normal({V, h}, train);
      decoder_b_ = Constant(V, 0, train);
      break;
    case Head::kPooling:
      if (c.pooler) {
        pooler_w_ = Normal({h, h}, /*trainable=*/false);
        pooler_b_ = Constant(h, 0, /*trainable=*/false);
      }
      break;
    case Head::kClassification:
      pooler_w_ = Normal({h, h}, train);
      pooler_b_ = Constant(h, 0, train);
      classifier_w_ = Normal({c.num_labels, h}, train);
      classifier_b_ = Constant(c.num_labels, 0, train);
      break;
    case Head::kDefault:
    case Head::kLm:
      break;
  }
}

at::Tensor EncoderModel::MakeBatch(uint64_t seed, int64_t step) const {
  const ModelConfig& c = config();
  at::Tensor batch = ArithmeticBatch(seed, step);
  const int64_t b = batch_sequences(), s = c.seq_len;
  int64_t* tokens = batch.data_ptr<int64_t>();
  int64_t* targets = tokens + b * s;
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(step) + 0x3a5c);
  for (int64_t i = 0; i < b; ++i) {
    int64_t* row = tokens + i * s;
    int64_t* target = targets + i * s;
    if (c.head == Head::kMlm) {
      const int64_t always = static_cast<int64_t>(rng() % static_cast<uint64_t>(s));
      for (int64_t t = 0; t < s; ++t) {
        const bool masked = t == always || rng() % 100 < 15;
        target[t] = masked ? row[t] : kIgnore;
        if (masked) row[t] = 0;
      }
    } else if (c.head == Head::kClassification) {
      target[0] = row[0] % c.num_labels;
    }
  }
  return ToDevice(batch);
}

at::Tensor EncoderModel::Embed(const at::Tensor& ids, const DropoutSeeds& seeds) const {
  const ModelConfig& c = config();
  if (c.dropout > 0) SeedGenerator(device(), seeds.layer);
  at::Tensor positions = position_.narrow(0, 0, c.seq_len);
  if (token_type_.defined()) positions = positions + token_type_[0];  // token_type_ids 0
  at::Tensor e = at::embedding(word_, ids) + positions;
  e = at::layer_norm(e, {c.hidden}, emb_ln_w_, emb_ln_b_, kNormEps);
  return Dropout(e);
}

at::Tensor EncoderModel::FirstToken(const at::Tensor& x) { return x.select(1, 0).contiguous(); }

at::Tensor EncoderModel::MeanPool(const at::Tensor& x) const {
  // sentence-transformers' mean pooling (v5+): the attention mask (all ones:
  // no padding) as (texts, s, 1) in x's dtype, the masked sum over the tokens
  // accumulated in fp32 for 16-bit x, divided by the clamped token count,
  // cast back to x's dtype.
  const at::Tensor mask =
      at::ones({x.size(0), x.size(1)}, at::TensorOptions().dtype(at::kLong).device(device()))
          .unsqueeze(-1)
          .to(x.scalar_type());
  const at::Tensor sum = (x * mask).sum(1, /*keepdim=*/false, at::kFloat);
  const at::Tensor count = mask.sum(1, /*keepdim=*/false, at::kFloat).clamp_min(1e-9);
  return (sum / count).to(x.scalar_type());
}

at::Tensor EncoderModel::Head(const at::Tensor& x, const DropoutSeeds& seeds) const {
  const ModelConfig& c = config();
  switch (c.head) {
    case Head::kMlm: {
      at::Tensor t = at::gelu(at::linear(x, dense_w_, dense_b_));
      t = at::layer_norm(t, {c.hidden}, head_ln_w_, head_ln_b_, kNormEps);
      return at::linear(t, c.tie_embeddings ? word_ : decoder_, decoder_b_);
    }
    case Head::kPooling:
      if (c.pooler) {
        // AutoModel's BertPooler: computed, never read; its graph dies here.
        (void)at::tanh(at::linear(FirstToken(x), pooler_w_, pooler_b_));
      }
      return c.pooling == Pooling::kCls ? FirstToken(x) : MeanPool(x);
    case Head::kClassification: {
      const at::Tensor pooled = at::tanh(at::linear(FirstToken(x), pooler_w_, pooler_b_));
      if (c.dropout > 0) SeedGenerator(device(), seeds.layer);
      return at::linear(Dropout(pooled), classifier_w_, classifier_b_);
    }
    case Head::kDefault:
    case Head::kLm:
      break;
  }
  return {};
}

at::Tensor EncoderModel::Loss(const at::Tensor& x, const at::Tensor& batch) const {
  const ModelConfig& c = config();
  switch (c.head) {
    case Head::kMlm:
      return TokenLoss(x, batch);
    case Head::kClassification:
      return CrossEntropy(x, batch[1].select(1, 0).contiguous());
    case Head::kPooling:
      return ForwardLoss(x, {}, batch);
    case Head::kDefault:
    case Head::kLm:
      break;
  }
  return {};
}

at::Tensor EncoderModel::ForwardLoss(const at::Tensor& x, const std::vector<at::Tensor>& skips,
                                     const at::Tensor& /*batch*/) const {
  // MultipleNegativesRankingLoss: anchors (the first micro_batch texts)
  // against every positive and negative, cosine similarity * 20. With
  // several passes the anchors are the first pass's embeddings (a skip)
  // and the candidates cat(the other skips, x): x alone with merged columns
  // (its (texts - 1) * b rows, copied by the cat as sentence-transformers'
  // torch.cat of the unbound columns does); in one pass, narrows of x.
  const ModelConfig& c = config();
  const int64_t b = c.micro_batch;
  std::vector<at::Tensor> others;
  at::Tensor anchors;
  if (skips.empty()) {
    anchors = x.narrow(0, 0, b);
    for (int64_t t = 1; t < c.texts_per_example; ++t) others.push_back(x.narrow(0, t * b, b));
  } else {
    anchors = skips.front();
    others.assign(skips.begin() + 1, skips.end());
    others.push_back(x);
  }
  const at::Tensor candidates = at::cat(others);
  auto normalize = [](const at::Tensor& e) {
    return e / at::norm(e, 2, {1}, true).clamp_min(1e-12).expand_as(e);
  };
  const at::Tensor scores = at::mm(normalize(anchors), normalize(candidates).t()) * kMnrlScale;
  return CrossEntropy(scores, at::arange(b, at::TensorOptions().dtype(at::kLong).device(device())));
}

at::Tensor EncoderModel::ForwardLayer(int layer, const at::Tensor& x, const at::Tensor& batch,
                                      const DropoutSeeds& seeds) const {
  switch (layer_kind(layer)) {
    case LayerKind::kEmbedding:
      // With several passes, pass k embeds its texts of the batch
      // (PassOffset, PassSequences: the anchors, then the other columns
      // merged or one pass each); x is the previous pass's empty boundary
      // from the second on.
      if (passes() > 1) {
        const int pass = pass_of(layer);
        return Embed(batch[0].narrow(0, PassOffset(config(), pass), PassSequences(config(), pass)),
                     seeds);
      }
      return Embed(x[0], seeds);
    case LayerKind::kHead:
      return Head(x, seeds);
    case LayerKind::kLoss:
      return Loss(x, batch);
    case LayerKind::kBlock:
    case LayerKind::kFinalNorm:
      break;
  }
  return {};
}

Heads EncoderModel::Prologue(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                             RecomputeTimer* /*norm*/) const {
  const Block& w = block(layer);
  const int64_t a = config().heads;
  if (config().lora_dropout > 0) SeedGenerator(device(), seeds.layer);
  if (config().attention != AttentionImpl::kEager) {
    // (b, s, h) -> (b, a, s, d) views, as HF BERT hands them to sdpa (b:
    // this pass's texts).
    auto split = [&](const at::Tensor& t) {
      return t.view({x.size(0), config().seq_len, a, -1}).transpose(1, 2);
    };
    return {split(Project(x, w.q)), split(Project(x, w.k)), split(Project(x, w.v))};
  }
  return {SplitHeads(Project(x, w.q), a), SplitHeads(Project(x, w.k), a),
          SplitHeads(Project(x, w.v), a)};
}

at::Tensor EncoderModel::AttentionCore(int /*layer*/, const Heads& heads,
                                       const DropoutSeeds& seeds) const {
  if (config().attention != AttentionImpl::kEager) {
    // Bidirectional, no mask (no padding).
    return FusedAttention(heads[0], heads[1], heads[2], /*causal=*/false, seeds.core);
  }
  return MergeHeads(EagerAttention(heads[0], heads[1], heads[2], at::Tensor(),
                                   /*softmax_fp32=*/false, seeds.core, seeds.regenerate));
}

at::Tensor EncoderModel::Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                                  const DropoutSeeds& seeds, RecomputeTimer* mlp,
                                  RecomputeTimer* norm) const {
  const ModelConfig& c = config();
  const Block& w = block(layer);
  if (c.dropout > 0 || c.lora_dropout > 0) SeedGenerator(device(), seeds.tail);
  // t, as HF's hidden_states, holds each output until the next statement
  // has run: the attention's dropped output until GELU's.
  // Under the dropout masks' options (seeds.regenerate) the residual
  // dropouts keep no mask (dropout_regenerate.h).
  at::Tensor t = Dropout(Project(context, w.o), seeds.regenerate);
  at::Tensor y, u;  // ln1's output, fc1's
  if (norm != nullptr) {
    // ln1's input kept (ln1 keeps it anyway), its output made again in
    // fc1's backward; the output is also the second residual's operand.
    std::vector<at::Tensor> out = RecomputedNormLinears(
        NormKind::kLayerNorm, x + t, w.ln1_w, w.ln1_b, kNormEps, {{w.fc1.weight, w.fc1.bias}},
        norm, /*with_norm=*/true);
    u = std::move(out[0]);
    y = std::move(out[1]);
  } else {
    y = at::layer_norm(x + t, {c.hidden}, w.ln1_w, w.ln1_b, kNormEps);
    u = Project(y, w.fc1);
  }
  if (mlp != nullptr) {
    // GELU's input kept, its output made again in fc2's backward. The
    // attention's output goes first: inside the function GELU's output
    // takes its place until fc2's is made.
    t = at::Tensor();
    t = Dropout(
        RecomputedActivationLinear(MlpActivation::kGelu, u, {}, w.fc2.weight, w.fc2.bias, mlp),
        seeds.regenerate);
  } else if (c.lora_rank > 0) {
    // The frozen fc2 keeps nothing of GELU's output: t holds it through
    // the second dropout.
    t = at::gelu(u);
    u = at::Tensor();
    t = Dropout(Project(t, w.fc2));
  } else {
    // fc2 keeps GELU's output (with grad); t lets it go once fc2 has run.
    t = at::gelu(u);
    u = at::Tensor();
    t = Project(t, w.fc2);
    t = Dropout(t, seeds.regenerate);
  }
  return at::layer_norm(y + t, {c.hidden}, w.ln2_w, w.ln2_b, kNormEps);
}

}  // namespace remat::runtime
