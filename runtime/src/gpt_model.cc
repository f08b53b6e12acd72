#include "gpt_model.h"

#include <cmath>
#include <limits>
#include <mutex>
#include <random>
#include <tuple>

namespace remat::runtime {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr double kNormEps = 1e-5;

}  // namespace

DropoutSeeds SeedsFor(uint64_t run_seed, int64_t step, int layer) {
  const uint64_t base =
      SplitMix(SplitMix(run_seed ^ 0x5eedULL) + static_cast<uint64_t>(step) * 0x10001ULL +
               static_cast<uint64_t>(layer));
  return {SplitMix(base + 1), SplitMix(base + 2), SplitMix(base + 3)};
}

void SeedGenerator(const at::Device& device, uint64_t seed) {
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
}

Status GptModel::Supports(const ModelConfig& c) {
  if (c.architecture != Architecture::kGpt) {
    return Status::Invalid(std::string("the runtime builds GPT models only; architecture '") +
                           ToString(c.architecture) + "' can be planned (analytic) but not run");
  }
  if (c.attention != AttentionImpl::kEager) {
    return Status::Invalid(
        "the runtime implements eager attention only (attention: \"eager\"); "
        "\"flash\" can be planned but not run");
  }
  if (c.precision != Precision::kFp32 && c.precision != Precision::kBf16 &&
      c.precision != Precision::kFp16) {
    return Status::Invalid(std::string("the runtime trains in fp32, bf16 or fp16; precision '") +
                           ToString(c.precision) + "' (autocast) is not implemented");
  }
  if (c.max_position < c.seq_len) {
    return Status::Invalid("max_position " + std::to_string(c.max_position) +
                           " is smaller than seq_len " + std::to_string(c.seq_len));
  }
  return Status::Ok();
}

GptModel::GptModel(const ModelConfig& config, const at::Device& device, uint64_t seed)
    : config_(config), device_(device) {
  dtype_ = config.precision == Precision::kBf16   ? at::kBFloat16
           : config.precision == Precision::kFp16 ? at::kHalf
                                                  : at::kFloat;
  const int64_t h = config.hidden, f = config.ffn_hidden, V = config.vocab;
  std::mt19937_64 rng(SplitMix(seed));
  // Weights are drawn on the CPU in fp32 and moved, so every device and
  // dtype starts from the same numbers.
  auto normal = [&](std::vector<int64_t> sizes) {
    at::Tensor t = at::empty(sizes, at::kFloat);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    float* p = t.data_ptr<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
    return Param(t.to(device_, dtype_));
  };
  auto constant = [&](int64_t n, double value) {
    return Param(at::full({n}, value, at::TensorOptions().dtype(dtype_).device(device_)));
  };
  wte_ = normal({V, h});
  wpe_ = normal({config.max_position, h});
  blocks_.resize(config.layers);
  for (Block& b : blocks_) {
    b.ln1_w = constant(h, 1);
    b.ln1_b = constant(h, 0);
    b.qkv_w = normal({3 * h, h});
    b.qkv_b = constant(3 * h, 0);
    b.proj_w = normal({h, h});
    b.proj_b = constant(h, 0);
    b.ln2_w = constant(h, 1);
    b.ln2_b = constant(h, 0);
    b.fc1_w = normal({f, h});
    b.fc1_b = constant(f, 0);
    b.fc2_w = normal({h, f});
    b.fc2_b = constant(h, 0);
  }
  lnf_w_ = constant(h, 1);
  lnf_b_ = constant(h, 0);
  if (!config.tie_embeddings) lm_head_ = normal({V, h});
  const int64_t s = config.seq_len;
  causal_bias_ = at::full({s, s}, -std::numeric_limits<float>::infinity(),
                          at::TensorOptions().dtype(dtype_).device(device_))
                     .triu_(1);
}

at::Tensor GptModel::Param(at::Tensor t) {
  t.requires_grad_(true);
  parameters_.push_back(t);
  return t;
}

int64_t GptModel::parameter_count() const {
  int64_t n = 0;
  for (const at::Tensor& p : parameters_) n += p.numel();
  return n;
}

void GptModel::AllocateGradients() {
  for (at::Tensor& p : parameters_) {
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
  }
}

void GptModel::ZeroGrad() {
  for (at::Tensor& p : parameters_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

std::string GptModel::layer_name(int layer) const {
  switch (layer_kind(layer)) {
    case LayerKind::kEmbedding:
      return "embedding";
    case LayerKind::kBlock:
      return "block" + std::to_string(layer - 1);
    case LayerKind::kFinalNorm:
      return "final_norm";
    case LayerKind::kHead:
      return "head";
    case LayerKind::kLoss:
      return "loss";
  }
  return "?";
}

LayerKind GptModel::layer_kind(int layer) const {
  const int blocks = static_cast<int>(config_.layers);
  if (layer == 0) return LayerKind::kEmbedding;
  if (layer <= blocks) return LayerKind::kBlock;
  if (layer == blocks + 1) return LayerKind::kFinalNorm;
  if (layer == blocks + 2) return LayerKind::kHead;
  return LayerKind::kLoss;
}

at::Tensor GptModel::MakeBatch(uint64_t seed, int64_t step) const {
  // Arithmetic token sequences (start and stride random per sequence): the
  // next token is predictable from the context, so the loss can fall.
  const int64_t b = config_.micro_batch, s = config_.seq_len, V = config_.vocab;
  std::mt19937_64 rng(SplitMix(seed ^ 0xba7cULL) + static_cast<uint64_t>(step));
  at::Tensor cpu = at::empty({2, b, s}, at::kLong);
  int64_t* ids = cpu.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t start = static_cast<int64_t>(rng() % static_cast<uint64_t>(V));
    const int64_t stride = 1 + static_cast<int64_t>(rng() % 7);
    for (int64_t t = 0; t < s; ++t) {
      ids[i * s + t] = (start + t * stride) % V;                // inputs
      ids[b * s + i * s + t] = (start + (t + 1) * stride) % V;  // targets
    }
  }
  return device_.is_cpu() ? cpu : cpu.to(device_);
}

at::Tensor GptModel::Dropout(const at::Tensor& x) const {
  if (config_.dropout <= 0) return x;
  // native_dropout keeps a 1-byte mask for backward.
  return std::get<0>(at::native_dropout(x, config_.dropout, true));
}

at::Tensor GptModel::Forward(int layer, const at::Tensor& x, const at::Tensor& batch,
                             const DropoutSeeds& seeds) const {
  const int64_t h = config_.hidden;
  switch (layer_kind(layer)) {
    case LayerKind::kEmbedding: {
      if (config_.dropout > 0) SeedGenerator(device_, seeds.layer);
      at::Tensor e = at::embedding(wte_, x[0]) + wpe_.narrow(0, 0, config_.seq_len);
      return Dropout(e);
    }
    case LayerKind::kBlock: {
      at::Tensor context = AttentionCore(layer, Prologue(layer, x), seeds);
      return Epilogue(layer, x, context, seeds);
    }
    case LayerKind::kFinalNorm:
      return at::layer_norm(x, {h}, lnf_w_, lnf_b_, kNormEps);
    case LayerKind::kHead:
      return at::linear(x, config_.tie_embeddings ? wte_ : lm_head_);
    case LayerKind::kLoss: {
      const int64_t n = config_.micro_batch * config_.seq_len;
      at::Tensor log_probs = at::log_softmax(x.view({n, config_.vocab}), -1);
      return at::nll_loss(log_probs, batch[1].reshape({n}));
    }
  }
  return {};
}

at::Tensor GptModel::Prologue(int layer, const at::Tensor& x) const {
  const Block& b = block(layer);
  const int64_t bs = config_.micro_batch, s = config_.seq_len, a = config_.heads,
                d = config_.hidden / a;
  at::Tensor t = at::layer_norm(x, {config_.hidden}, b.ln1_w, b.ln1_b, kNormEps);
  t = at::linear(t, b.qkv_w, b.qkv_b);
  // (b, s, 3h) -> (3, b*a, s, d): one contiguous copy that q, k and v view.
  return t.view({bs, s, 3, a, d}).permute({2, 0, 3, 1, 4}).reshape({3, bs * a, s, d});
}

at::Tensor GptModel::AttentionCore(int /*layer*/, const at::Tensor& heads,
                                   const DropoutSeeds& seeds) const {
  const int64_t b = config_.micro_batch, s = config_.seq_len, a = config_.heads, h = config_.hidden,
                d = h / a;
  // Intermediates are dropped as soon as they are consumed, so that a forward
  // without grad holds as little as it can.
  at::Tensor context;
  {
    at::Tensor probs = at::softmax(at::baddbmm(causal_bias_, heads[0], heads[1].transpose(1, 2),
                                               1.0, 1.0 / std::sqrt(static_cast<double>(d))),
                                   -1);
    if (config_.dropout > 0) SeedGenerator(device_, seeds.core);
    probs = Dropout(probs);
    context = at::bmm(probs, heads[2]);
  }
  // (b*a, s, d) -> (b, s, h)
  return context.view({b, a, s, d}).permute({0, 2, 1, 3}).reshape({b, s, h});
}

at::Tensor GptModel::Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                              const DropoutSeeds& seeds) const {
  const Block& b = block(layer);
  if (config_.dropout > 0) SeedGenerator(device_, seeds.tail);
  at::Tensor t = Dropout(at::linear(context, b.proj_w, b.proj_b));
  const at::Tensor mid = x + t;
  t = at::layer_norm(mid, {config_.hidden}, b.ln2_w, b.ln2_b, kNormEps);
  t = at::linear(t, b.fc1_w, b.fc1_b);
  t = at::gelu(t);
  t = at::linear(t, b.fc2_w, b.fc2_b);
  t = Dropout(t);
  return mid + t;
}

}  // namespace remat::runtime
