#include "chain_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <tuple>

#include "attention.h"
#include "chunked_loss.h"
#include "dropout_regenerate.h"
#include "encoder_model.h"
#include "gpt_model.h"
#include "llama_model.h"
#include "remat/model/precision.h"
#include "remat/profile/profile.h"

namespace remat::runtime {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// `passes` times [embedding, blocks, (final_norm), head], then the loss.
std::vector<LayerKind> ChainKinds(int64_t blocks, bool final_norm, int passes) {
  std::vector<LayerKind> kinds;
  for (int p = 0; p < passes; ++p) {
    kinds.push_back(LayerKind::kEmbedding);
    kinds.insert(kinds.end(), blocks, LayerKind::kBlock);
    if (final_norm) kinds.push_back(LayerKind::kFinalNorm);
    kinds.push_back(LayerKind::kHead);
  }
  kinds.push_back(LayerKind::kLoss);
  return kinds;
}

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

Status ModelSupports(const ModelConfig& config) {
  const ModelConfig c = WithDefaults(config);
  const std::string arch = ToString(c.architecture), head = ToString(c.head);
  if (c.architecture != Architecture::kBert && c.head != Head::kLm) {
    return Status::Invalid("the runtime's " + arch + " has the lm head only; head '" + head +
                           "' can be planned (analytic) but not run (the runtime runs mlm, "
                           "pooling and classification on bert)");
  }
  if (HasLlamaVariant(c) && (c.lora_rank > 0 || c.quantization != Quantization::kNone)) {
    return Status::Invalid(
        "the runtime runs the llama variants (gemma2, gemma3, qwen3, phi3, mixtral, qwen3_moe) "
        "without LoRA: a LoRA or QLoRA job on them can be planned (analytic) but not run");
  }
  if (c.attn_softcap > 0 && c.attention == AttentionImpl::kFlash) {
    return Status::Invalid(
        "attn_softcap with attention 'flash': the runtime's flash kernel has no soft-capping; "
        "run it with attention 'eager' (or plan it, analytic)");
  }
  if (c.architecture == Architecture::kLlama) {
    if (c.head_dim % 2 != 0) {
      return Status::Invalid("head_dim " + std::to_string(c.head_dim) +
                             " is odd: rotary embeddings rotate pairs of channels");
    }
  } else if (c.max_position < c.seq_len) {
    return Status::Invalid("max_position " + std::to_string(c.max_position) +
                           " is smaller than seq_len " + std::to_string(c.seq_len));
  }
  return Status::Ok();
}

std::unique_ptr<ChainModel> MakeChainModel(const ModelConfig& config, const at::Device& device,
                                           uint64_t seed) {
  const ModelConfig c = WithDefaults(config);
  switch (c.architecture) {
    case Architecture::kLlama:
      return std::make_unique<LlamaModel>(c, device, seed);
    case Architecture::kBert:
      return std::make_unique<EncoderModel>(c, device, seed);
    case Architecture::kGpt:
      break;
  }
  return std::make_unique<GptModel>(c, device, seed);
}

ChainModel::ChainModel(const ModelConfig& config, const at::Device& device, uint64_t seed,
                       bool final_norm)
    : config_(WithDefaults(config)),
      device_(device),
      passes_(TextPasses(config)),
      batch_sequences_(SequencesPerMicroBatch(config)),
      kinds_(ChainKinds(config.layers, final_norm, TextPasses(config))),
      rng_(SplitMix(seed)),
      adapter_gen_(at::make_generator<at::CPUGeneratorImpl>(SplitMix(seed ^ 0x10a4ULL))) {
  sequences_ = passes_ > 1 ? config_.micro_batch : batch_sequences_;
  pass_length_ = static_cast<int>(config_.layers) + (final_norm ? 3 : 2);
  // 16-bit weights: bf16 / fp16 and the mixed conventions (whose fp32
  // master weights the optimizer keeps); amp_* keep fp32 weights.
  const bool bf16 =
      config.precision == Precision::kBf16 || config.precision == Precision::kMixedBf16;
  dtype_ = ConventionOf(config.precision).weight_bytes == 4 ? at::kFloat
           : bf16                                           ? at::kBFloat16
                                                            : at::kHalf;
  mixed_fp32_grads_ = ConventionOf(config.precision).master_weight_bytes > 0 &&
                      GradientBytes(config.precision, config.grad_dtype) == 4;
}

int ChainModel::pass_of(int layer) const { return std::min(layer / pass_length_, passes_ - 1); }

int ChainModel::block_index(int layer) const { return layer - pass_of(layer) * pass_length_ - 1; }

bool ChainModel::skips_to_loss(int layer) const {
  return layer_kind(layer) == LayerKind::kHead && pass_of(layer) + 1 < passes_;
}

at::Tensor ChainModel::PassBoundary() const {
  return at::empty({0}, at::TensorOptions().dtype(dtype_).device(device_));
}

std::string ChainModel::layer_name(int layer) const {
  const std::string prefix = passes_ > 1 && layer_kind(layer) != LayerKind::kLoss
                                 ? "p" + std::to_string(pass_of(layer) + 1) + "."
                                 : "";
  switch (layer_kind(layer)) {
    case LayerKind::kEmbedding:
      return prefix + "embedding";
    case LayerKind::kBlock:
      return prefix + "block" + std::to_string(block_index(layer));
    case LayerKind::kFinalNorm:
      return prefix + "final_norm";
    case LayerKind::kHead:
      return prefix + "head";
    case LayerKind::kLoss:
      return "loss";
  }
  return "?";
}

at::Tensor ChainModel::TiedEmbedding() const {
  const ModelConfig& c = config_;
  if (!c.tie_embeddings || !weights_train()) return {};
  if (c.head != Head::kLm && c.head != Head::kMlm) return {};
  return TokenEmbedding();
}

std::string ChainModel::DescribeChain() const {
  std::string s = "embedding, " + std::to_string(config_.layers) + " blocks, ";
  if (kinds_[pass_length_ - 2] == LayerKind::kFinalNorm) s += "final_norm, ";
  s += "head";
  if (passes_ > 1) s = std::to_string(passes_) + " passes of (" + s + ")";
  return s + ", loss";
}

SelectiveParts PartsOf(int option) {
  switch (option) {
    case 0:
      return {true, false};
    case 1:
      return {false, true};
    case 2:
      return {true, true};
    case 3:
      return {false, false, true};
    case 4:
      return {true, true, true};
    case 5:
      return {false, false, false, true};
    case 6:
      return {true, true, true, true};
    default:
      return {};
  }
}

SelectiveParts ChainModel::OptionParts(int option) const {
  if (config_.experts == 0 || option < 0) return PartsOf(option);
  SelectiveParts parts;
  parts.core = option != 1;
  parts.experts = option >= 1;
  return parts;
}

const char* ChainModel::OptionName(int option) const {
  if (config_.experts > 0) {
    const char* const names[] = {kAttentionCoreOption, kExpertsOption,
                                 kAttentionCoreExpertsOption};
    return names[option];
  }
  const char* const names[] = {kAttentionCoreOption, kMlpActivationOption, kAttentionCoreMlpOption,
                               kNormOutputOption,    kAllSelectiveOption,  kDropoutMaskOption,
                               kAllWithDropoutOption};
  return names[option];
}

at::Tensor ChainModel::Forward(int layer, const at::Tensor& x, const at::Tensor& batch,
                               const DropoutSeeds& seeds,
                               const std::vector<at::Tensor>& skips) const {
  if (!skips.empty()) return ForwardLoss(x, skips, batch);
  if (config_.loss_chunks > 0 && layer_kind(layer) == LayerKind::kHead) {
    const at::Tensor rows = x.reshape({-1, config_.hidden});
    return ChunkedLmLoss(rows, LmHeadWeight(), batch[1].reshape({rows.size(0)}),
                         config_.loss_chunks, config_.logit_softcap);
  }
  if (config_.loss_chunks > 0 && layer_kind(layer) == LayerKind::kLoss) return x.view_as(x);
  if (layer_kind(layer) != LayerKind::kBlock) return ForwardLayer(layer, x, batch, seeds);
  // Separate statements: the prologue's outputs are released before the
  // epilogue runs (what a forward without grad holds).
  at::Tensor context = AttentionCore(layer, Prologue(layer, x, seeds), seeds);
  return Epilogue(layer, x, context, seeds);
}

at::Tensor ChainModel::ForwardLoss(const at::Tensor& x, const std::vector<at::Tensor>& /*skips*/,
                                   const at::Tensor& batch) const {
  return ForwardLayer(num_layers() - 1, x, batch, DropoutSeeds{});
}

at::Tensor ChainModel::Keep(at::Tensor t, bool trainable) {
  if (trainable) {
    t.requires_grad_(true);
    parameters_.push_back(t);
  } else {
    frozen_.push_back(t);
  }
  return t;
}

at::Tensor ChainModel::DrawNormal(const std::vector<int64_t>& sizes) {
  at::Tensor t = at::empty(sizes, at::kFloat);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng_);
  return t;
}

at::Tensor ChainModel::Normal(std::vector<int64_t> sizes, bool trainable) {
  return Keep(DrawNormal(sizes).to(device_, dtype_), trainable);
}

Projection ChainModel::MakeProjection(int64_t in, int64_t out, bool bias, uint32_t target) {
  Projection p;
  if (config_.quantization == Quantization::kNf4) {
    const at::Tensor w = DrawNormal({out, in});
    const Nf4Weight q = QuantizeNf4(w.to(dtype_), 64, config_.double_quant);
    auto moved = [&](const at::Tensor& t) { return t.defined() ? t.to(device_) : t; };
    p.nf4 = {moved(q.packed), moved(q.absmax),        moved(q.code),
             q.shape,         moved(q.nested_absmax), moved(q.offset)};
    quantized_parameters_ += w.numel();
    quantized_bytes_ += Nf4StoredBytes(p.nf4);
  } else {
    p.weight = Normal({out, in}, weights_train());
  }
  if (bias) p.bias = Constant(out, 0, weights_train());
  if (config_.lora_rank > 0 && (config_.lora_targets & target) != 0) {
    const at::ScalarType dtype = config_.lora_dtype == LoraDtype::kFp32   ? at::kFloat
                                 : config_.lora_dtype == LoraDtype::kBf16 ? at::kBFloat16
                                 : config_.lora_dtype == LoraDtype::kFp16 ? at::kHalf
                                                                          : dtype_;
    p.adapter = MakeLoraAdapter(in, out, config_.lora_rank, config_.lora_alpha,
                                at::TensorOptions().dtype(dtype).device(device_), adapter_gen_);
    parameters_.push_back(p.adapter.a);
    parameters_.push_back(p.adapter.b);
  }
  return p;
}

at::Tensor ChainModel::Constant(int64_t n, double value, bool trainable) {
  return Keep(at::full({n}, value, at::TensorOptions().dtype(dtype_).device(device_)), trainable);
}

at::Tensor ChainModel::CausalBias() const {
  const int64_t s = config_.seq_len;
  return at::full({s, s}, -std::numeric_limits<float>::infinity(),
                  at::TensorOptions().dtype(dtype_).device(device_))
      .triu_(1);
}

int64_t ChainModel::parameter_count() const {
  int64_t n = 0;
  for (const at::Tensor& p : parameters_) n += p.numel();
  for (const at::Tensor& p : frozen_) n += p.numel();
  return n + quantized_parameters_;
}

void ChainModel::AllocateGradients() const {
  for (const at::Tensor& p : parameters_) {
    if (!p.grad().defined())
      p.mutable_grad() = at::zeros_like(p, p.options().dtype(GradientDtype(p)));
  }
}

c10::ScalarType ChainModel::GradientDtype(const at::Tensor& param) const {
  return mixed_fp32_grads_ ? at::kFloat : param.scalar_type();
}

void ChainModel::PromoteGradients() const {
  if (!mixed_fp32_grads_) return;
  const c10::AutoGradMode no_grad(false);
  for (const at::Tensor& p : parameters_) {
    const at::Tensor& g = p.grad();
    if (g.defined() && g.scalar_type() != at::kFloat) p.mutable_grad() = g.to(at::kFloat);
  }
}

bool ChainModel::keeps_input(int layer) const {
  switch (layer_kind(layer)) {
    case LayerKind::kLoss:
      // cross_entropy's log_softmax keeps its output; mnrl's normalize its input.
      return config_.loss == Loss::kMnrl;
    case LayerKind::kHead:
      // Mean pooling's masked sum keeps the mask; a frozen linear (LoRA's
      // LM head, the MLM head's dense) keeps its weight. Neither head
      // computes a parameter gradient, so it can run on its producer's
      // graph. CLS pooling and classification keep theirs: the first token
      // is a view of the input (a copy but for one text), the classifier trains.
      if (config_.head == Head::kPooling) return config_.pooling != Pooling::kMean;
      if (config_.head == Head::kClassification) return true;
      return weights_train();
    default:
      return true;
  }
}

bool ChainModel::persistent_gradients() const {
  return GradientsOf(config_) == Gradients::kPersistent;
}

void ChainModel::ReleaseGradients() const {
  for (const at::Tensor& p : parameters_) p.mutable_grad().reset();
}

void ChainModel::ZeroGrad() {
  for (at::Tensor& p : parameters_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

at::Tensor ChainModel::Dropout(const at::Tensor& x, RecomputeTimer* regenerate) const {
  if (config_.dropout <= 0) return x;
  if (regenerate != nullptr) return RegeneratedDropout(x, config_.dropout, regenerate);
  return at::dropout(x, config_.dropout, /*train=*/true);
}

at::Tensor ChainModel::SplitHeads(const at::Tensor& t, int64_t n) const {
  const int64_t b = t.size(0), s = config_.seq_len, d = t.size(-1) / n;
  return t.view({b, s, n, d}).transpose(1, 2).reshape({b * n, s, d});
}

at::Tensor ChainModel::MergeHeads(const at::Tensor& context) const {
  const int64_t a = config_.heads, b = context.size(0) / a, s = config_.seq_len,
                d = context.size(-1);
  return context.view({b, a, s, d}).transpose(1, 2).reshape({b, s, a * d});
}

at::Tensor ChainModel::EagerAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& bias, bool softmax_fp32, uint64_t seed,
                                      RecomputeTimer* regenerate, double softcap) const {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  // Intermediates are dropped as soon as they are consumed, so that a forward
  // without grad holds as little as it can.
  at::Tensor probs;
  if (softcap > 0) {
    // scores * scale, / cap, tanh, * cap, + bias: each a new tensor, the
    // one before freed once read (tanh keeps its output).
    probs = at::bmm(q, k.transpose(1, 2)).mul_(scale);
    probs = probs / softcap;
    probs = at::tanh(probs);
    probs = probs * softcap;
    if (bias.defined()) probs = probs + bias;
  } else {
    probs = bias.defined() ? at::baddbmm(bias, q, k.transpose(1, 2), 1.0, scale)
                           : at::bmm(q, k.transpose(1, 2)).mul_(scale);
  }
  probs = softmax_fp32 ? at::softmax(probs, -1, at::kFloat).to(q.scalar_type())
                       : at::softmax(probs, -1);
  if (config_.dropout > 0) SeedGenerator(device_, seed);
  probs = Dropout(probs, regenerate);
  return at::bmm(probs, v);
}

at::Tensor ChainModel::FusedAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      bool causal, uint64_t seed, int64_t window) const {
  const AttentionOptions options{causal, config_.dropout, seed, window};
  const at::Tensor context = config_.attention == AttentionImpl::kFlash
                                 ? runtime::FlashAttention(q, k, v, options)
                                 : SdpaAttention(q, k, v, options);
  const int64_t b = context.size(0), a = context.size(1), s = context.size(2);
  return context.transpose(1, 2).reshape({b, s, a * context.size(3)});
}

at::Tensor ChainModel::CrossEntropy(const at::Tensor& logits, const at::Tensor& targets) {
  // F.cross_entropy's op, not log_softmax + nll_loss: CPU autocast's fp32
  // policy lists cross_entropy_loss, so 16-bit logits are cast to fp32 and
  // only the fp32 log-probabilities are kept (torch 2.11, measured). Called
  // apart, CPU autocast runs log_softmax in the logits' dtype (kept) and
  // nll_loss on an fp32 copy (kept too). CUDA's policy runs log_softmax in
  // fp32 either way; without autocast both are the same ops.
  return at::cross_entropy_loss(logits, targets, {}, at::Reduction::Mean, -100);
}

at::Tensor ChainModel::TokenLoss(const at::Tensor& logits, const at::Tensor& batch) const {
  const int64_t n = sequences_ * config_.seq_len;
  // 16-bit logits upcast first (ModelConfig::loss_upcast), as
  // transformers' ForCausalLMLoss and torchtitan's loss do
  // (logits.float()): the fp32 log-probabilities are kept, the gradients
  // stay fp32 until the cast's backward, and the copy keeps nothing of the
  // 16-bit logits. Under autocast the copy is the cast cross_entropy_loss
  // would make.
  const at::Tensor flat = logits.view({n, config_.vocab});
  return CrossEntropy(config_.loss_upcast ? flat.to(at::kFloat) : flat, batch[1].reshape({n}));
}

at::Tensor ChainModel::MakeBatch(uint64_t seed, int64_t step) const {
  return ToDevice(ArithmeticBatch(seed, step));
}

at::Tensor ChainModel::ArithmeticBatch(uint64_t seed, int64_t step) const {
  const int64_t b = batch_sequences_, s = config_.seq_len, V = config_.vocab;
  std::mt19937_64 rng(SplitMix(seed ^ 0xba7cULL) + static_cast<uint64_t>(step));
  at::Tensor cpu = at::empty({2, b, s}, at::kLong);
  int64_t* ids = cpu.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t start = static_cast<int64_t>(rng() % static_cast<uint64_t>(V));
    const int64_t stride = 1 + static_cast<int64_t>(rng() % 7);
    for (int64_t t = 0; t < s; ++t) {
      ids[i * s + t] = (start + t * stride) % V;                // tokens
      ids[b * s + i * s + t] = (start + (t + 1) * stride) % V;  // next tokens
    }
  }
  return cpu;
}

at::Tensor ChainModel::ToDevice(const at::Tensor& cpu) const {
  return device_.is_cpu() ? cpu : cpu.to(device_);
}

}  // namespace remat::runtime
