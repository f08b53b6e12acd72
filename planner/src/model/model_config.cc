#include "remat/model/model_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "model/lora_config.h"
#include "remat/model/precision.h"

namespace remat {

using internal::DescribeJsonValue;
using internal::DumpDocument;
using internal::JoinAlternatives;
using internal::JsonObjectReader;
using internal::LoraKeys;
using internal::LoraToJson;
using internal::ParseJson;
using internal::ParseLoraFields;
using internal::ValidateLora;
namespace {

const std::vector<std::string> kArchitectures = {"gpt", "bert", "llama"};
const std::vector<std::string> kPrecisions = {"fp32",     "bf16",       "fp16",      "amp_bf16",
                                              "amp_fp16", "mixed_bf16", "mixed_fp16"};
// Indexed by enum value; "default" is never accepted in a file.
const std::vector<std::string> kGradDtypes = {"default", "fp32", "bf16", "fp16"};
const std::vector<std::string> kGradients = {"default", "created_in_backward", "persistent"};
const std::vector<std::string> kOptimizers = {"adamw", "sgd", "sgd_momentum", "none"};
const std::vector<std::string> kAttention = {"eager", "flash", "sdpa"};
const std::vector<std::string> kLrSchedules = {"constant", "linear", "cosine"};
// Indexed by enum value; "default" is never accepted in a file.
const std::vector<std::string> kHeads = {"default", "lm", "mlm", "pooling", "classification"};
const std::vector<std::string> kPoolings = {"mean", "cls"};
const std::vector<std::string> kLosses = {"default", "cross_entropy", "mnrl"};
const std::vector<std::string> kKnownKeys = {"name",
                                             "architecture",
                                             "layers",
                                             "hidden",
                                             "heads",
                                             "ffn_hidden",
                                             "vocab",
                                             "seq_len",
                                             "micro_batch",
                                             "max_position",
                                             "grad_accumulation",
                                             "precision",
                                             "grad_dtype",
                                             "gradients",
                                             "optimizer",
                                             "attention",
                                             "dropout",
                                             "tie_embeddings",
                                             "max_grad_norm",
                                             "lr_schedule",
                                             "warmup_steps",
                                             "kv_heads",
                                             "head_dim",
                                             "qkv_bias",
                                             "type_vocab",
                                             "head",
                                             "pooling",
                                             "loss",
                                             "texts_per_example",
                                             "num_labels",
                                             "pooler",
                                             "merge_columns",
                                             "loss_chunks",
                                             "activation",
                                             "qk_norm",
                                             "gemma_norms",
                                             "embedding_scale",
                                             "attn_softcap",
                                             "logit_softcap",
                                             "fused_projections",
                                             "sliding_window",
                                             "layer_types",
                                             "experts",
                                             "experts_per_token",
                                             "expert_ffn_hidden"};
const std::vector<std::string> kActivations = {"silu", "gelu_tanh"};
const std::vector<std::string> kLayerTypes = {"full_attention", "sliding_attention"};

// Generous limits: anything above is a typo, and keeps byte arithmetic far
// from overflow (see checked_math.h for the rest). Published models have up
// to ~200 blocks; the strategies' budget searches grow with the square of the
// chain (4096 blocks plan in about 25 s, 65536 would take hours).
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxWidth = 1 << 20;
constexpr int64_t kMaxTokens = 1 << 24;
constexpr int64_t kMaxTexts = 1024;

std::vector<std::string> Accepted(const std::vector<std::string>& names) {
  return std::vector<std::string>(names.begin() + 1, names.end());  // without "default"
}

template <typename E>
E FromName(const std::vector<std::string>& names, const std::string& value) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == value) return static_cast<E>(i);
  }
  return static_cast<E>(0);
}

int64_t DefaultFfn(Architecture arch, int64_t hidden) {
  if (arch == Architecture::kLlama) {
    // LLaMA: 2/3 of 4h, rounded up to a multiple of 256 (4096 -> 11008).
    const int64_t raw = 8 * hidden / 3;
    return (raw + 255) / 256 * 256;
  }
  return 4 * hidden;
}

Status ParseHeadFields(const JsonObjectReader& r, ModelConfig* c) {
  std::string head = "default", pooling = "mean", loss = "default";
  REMAT_RETURN_IF_ERROR(r.Enum("head", &head, Accepted(kHeads), false));
  c->head = FromName<Head>(kHeads, head);
  REMAT_RETURN_IF_ERROR(r.Enum("pooling", &pooling, kPoolings, false));
  c->pooling = FromName<Pooling>(kPoolings, pooling);
  REMAT_RETURN_IF_ERROR(r.Enum("loss", &loss, Accepted(kLosses), false));
  c->loss = FromName<Loss>(kLosses, loss);
  REMAT_RETURN_IF_ERROR(r.Int("texts_per_example", &c->texts_per_example, false, 1, kMaxTexts));
  REMAT_RETURN_IF_ERROR(r.Int("num_labels", &c->num_labels, false, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Bool("pooler", &c->pooler, false));
  REMAT_RETURN_IF_ERROR(r.Bool("merge_columns", &c->merge_columns, false));
  if (r.Has("loss_chunks")) {
    std::string text;
    if (r.String("loss_chunks", &text, false).ok()) {
      if (text != "auto") {
        return r.Error("loss_chunks",
                       "expected a number of chunks (1 or more) or \"auto\", got \"" + text + "\"");
      }
      c->loss_chunks = kLossChunksAuto;
    } else {
      REMAT_RETURN_IF_ERROR(r.Int("loss_chunks", &c->loss_chunks, false, 1, kMaxTokens));
    }
  }
  const Head resolved = WithDefaults(*c).head;
  if (r.Has("pooling") && resolved != Head::kPooling) {
    return r.Error("pooling",
                   std::string("only the pooling head pools (head is ") + ToString(resolved) + ")");
  }
  if (r.Has("num_labels") && resolved != Head::kClassification) {
    return r.Error("num_labels", std::string("only the classification head has labels (head is ") +
                                     ToString(resolved) + ")");
  }
  return Status::Ok();
}

// The llama family's variant fields (model_config.h).
Status ParseVariantFields(const nlohmann::json& doc, const JsonObjectReader& r, ModelConfig* c) {
  std::string activation = "silu";
  REMAT_RETURN_IF_ERROR(r.Enum("activation", &activation, kActivations, false));
  c->activation = FromName<Activation>(kActivations, activation);
  REMAT_RETURN_IF_ERROR(r.Bool("qk_norm", &c->qk_norm, false));
  REMAT_RETURN_IF_ERROR(r.Bool("gemma_norms", &c->gemma_norms, false));
  REMAT_RETURN_IF_ERROR(r.Bool("embedding_scale", &c->embedding_scale, false));
  REMAT_RETURN_IF_ERROR(r.Double("attn_softcap", &c->attn_softcap, false, 0.0, 1e30));
  REMAT_RETURN_IF_ERROR(r.Double("logit_softcap", &c->logit_softcap, false, 0.0, 1e30));
  REMAT_RETURN_IF_ERROR(r.Bool("fused_projections", &c->fused_projections, false));
  REMAT_RETURN_IF_ERROR(r.Int("sliding_window", &c->sliding_window, false, 0, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("experts", &c->experts, false, 0, kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Int("experts_per_token", &c->experts_per_token, false, 1, kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Int("expert_ffn_hidden", &c->expert_ffn_hidden, false, 1, 16 * kMaxWidth));
  if (!r.Has("layer_types") || doc["layer_types"].is_null()) return Status::Ok();
  const nlohmann::json& types = doc["layer_types"];
  if (!types.is_array()) {
    return r.Error("layer_types", "expected an array of " + JoinAlternatives(kLayerTypes) +
                                      ", one per block, got " + DescribeJsonValue(types));
  }
  for (const nlohmann::json& t : types) {
    if (!t.is_string() || (t != kLayerTypes[0] && t != kLayerTypes[1])) {
      return r.Error("layer_types", "expected " + JoinAlternatives(kLayerTypes) + ", got " +
                                        DescribeJsonValue(t));
    }
    c->sliding_layers.push_back(t == kLayerTypes[1]);
  }
  return Status::Ok();
}

Status Bad(const std::string& source, const char* field, const std::string& what) {
  return Status::Invalid(source + ": field '" + field + "': " + what);
}

// Cross-field rules of the attention shape and the head, on a config with
// defaults resolved.
Status ValidateShapeAndHead(const ModelConfig& c, const std::string& source) {
  const bool llama = c.architecture == Architecture::kLlama;
  const bool bert = c.architecture == Architecture::kBert;
  const std::string arch = ToString(c.architecture);
  if (c.kv_heads < 1 || c.kv_heads > c.heads || c.heads % c.kv_heads != 0) {
    return Bad(source, "kv_heads",
               std::to_string(c.kv_heads) + " does not divide heads = " + std::to_string(c.heads) +
                   " (each key/value head serves a whole group of query heads)");
  }
  if (!llama && c.kv_heads != c.heads) {
    return Bad(source, "kv_heads",
               std::to_string(c.kv_heads) + " differs from heads = " + std::to_string(c.heads) +
                   ": grouped-query attention is for llama only (" + arch +
                   " has one key/value head per query head)");
  }
  if (c.head_dim < 1 || c.head_dim > kMaxWidth || c.head_dim * c.heads > 16 * kMaxWidth) {
    return Bad(source, "head_dim",
               "expected an integer in [1, " + std::to_string(kMaxWidth) +
                   "] with heads * "
                   "head_dim at most " +
                   std::to_string(16 * kMaxWidth) + ", got " + std::to_string(c.head_dim));
  }
  if (!llama && c.head_dim * c.heads != c.hidden) {
    return Bad(source, "head_dim",
               std::to_string(c.head_dim) +
                   " is not hidden / heads = " + std::to_string(c.hidden / c.heads) +
                   ": only llama sets "
                   "its own head width");
  }
  if (!llama && HasLlamaVariant(c)) {
    return Bad(source, "architecture",
               "\"" + arch +
                   "\" with a llama variant field (activation, qk_norm, gemma_norms, "
                   "embedding_scale, attn_softcap, logit_softcap, fused_projections, "
                   "sliding_window, layer_types, experts): expected \"llama\"");
  }
  if (!c.sliding_layers.empty() && static_cast<int64_t>(c.sliding_layers.size()) != c.layers) {
    return Bad(source, "layer_types",
               std::to_string(c.sliding_layers.size()) + " entries for " +
                   std::to_string(c.layers) + " layers: expected one per block");
  }
  const bool slides =
      std::find(c.sliding_layers.begin(), c.sliding_layers.end(), true) != c.sliding_layers.end();
  if (slides && c.sliding_window < 1) {
    return Bad(source, "sliding_window",
               "a sliding_attention layer needs a window: expected an integer >= 1");
  }
  if (c.experts > 0 && (c.experts_per_token < 1 || c.experts_per_token > c.experts)) {
    return Bad(source, "experts_per_token",
               std::to_string(c.experts_per_token) + ": expected an integer in [1, experts = " +
                   std::to_string(c.experts) + "] (the router's top-k)");
  }
  if (c.experts == 0 && (c.experts_per_token != 0 || c.expert_ffn_hidden != 0)) {
    return Bad(source, c.experts_per_token != 0 ? "experts_per_token" : "expert_ffn_hidden",
               "set without experts (a dense MLP); expected experts >= 1 or no such field");
  }
  if (c.attn_softcap > 0 && c.attention == AttentionImpl::kSdpa) {
    return Bad(source, "attn_softcap",
               "scaled_dot_product_attention has no soft-capping (transformers runs a "
               "soft-capped model with eager or flash_attention_2); expected attention eager "
               "or flash, or attn_softcap 0");
  }
  if (!bert && c.type_vocab != 0) {
    return Bad(source, "type_vocab",
               std::to_string(c.type_vocab) + ": only bert has token-type embeddings (" + arch +
                   " has none; accepted: 0)");
  }
  const std::string head = ToString(c.head);
  if (c.head == Head::kMlm && !bert) {
    return Bad(source, "head",
               "\"mlm\" needs an encoder (architecture bert); for " + arch +
                   " use lm, pooling or classification");
  }
  if (c.head == Head::kLm && bert) {
    return Bad(source, "head",
               "\"lm\" is a causal LM head; for bert use mlm, pooling or "
               "classification");
  }
  if ((c.loss == Loss::kMnrl) != (c.head == Head::kPooling)) {
    return Bad(source, "loss",
               std::string("\"") + ToString(c.loss) + "\" does not fit head \"" + head +
                   "\" (pooling takes mnrl; lm, mlm and classification "
                   "take cross_entropy)");
  }
  if (c.loss == Loss::kMnrl && (c.texts_per_example < 2 || c.texts_per_example > kMaxTexts)) {
    return Bad(source, "texts_per_example",
               std::to_string(c.texts_per_example) +
                   ": mnrl needs an anchor and at least one "
                   "positive per example; expected an integer in [2, " +
                   std::to_string(kMaxTexts) + "] (2 pairs, 3 triplets)");
  }
  if (c.loss != Loss::kMnrl && c.texts_per_example != 1) {
    return Bad(source, "texts_per_example",
               std::to_string(c.texts_per_example) + ": head \"" + head +
                   "\" takes one text per example; expected 1");
  }
  if (c.num_labels < 1 || c.num_labels > kMaxTokens) {
    return Bad(source, "num_labels",
               "expected an integer in [1, " + std::to_string(kMaxTokens) + "], got " +
                   std::to_string(c.num_labels));
  }
  if (c.pooler && !bert) {
    return Bad(source, "pooler", "true: only bert has a pooler (" + arch + " has none)");
  }
  if (c.loss_chunks != 0) {
    if (c.loss_chunks != kLossChunksAuto && (c.loss_chunks < 1 || c.loss_chunks > kMaxTokens)) {
      return Bad(source, "loss_chunks",
                 "expected an integer in [1, " + std::to_string(kMaxTokens) +
                     "] or \"auto\", got " + std::to_string(c.loss_chunks));
    }
    if (c.head != Head::kLm) {
      return Bad(source, "loss_chunks",
                 "the chunked loss is the lm head's cross-entropy (head is \"" + head +
                     "\"); expected head lm or no loss_chunks");
    }
    if (c.logit_softcap > 0) {
      return Bad(source, "loss_chunks",
                 "the chunked loss does not soft-cap its logits (logit_softcap is set); "
                 "expected logit_softcap 0 or no loss_chunks");
    }
  }
  if (c.pooler && c.head == Head::kClassification) {
    return Bad(source, "pooler",
               "true: the classification head's dense layer is the pooler "
               "(trained); expected false");
  }
  return Status::Ok();
}

}  // namespace

const char* ToString(Architecture v) { return kArchitectures[static_cast<int>(v)].c_str(); }
const char* ToString(Precision v) { return kPrecisions[static_cast<int>(v)].c_str(); }
const char* ToString(GradDtype v) { return kGradDtypes[static_cast<int>(v)].c_str(); }
const char* ToString(Gradients v) { return kGradients[static_cast<int>(v)].c_str(); }
const char* ToString(Optimizer v) { return kOptimizers[static_cast<int>(v)].c_str(); }
const char* ToString(AttentionImpl v) { return kAttention[static_cast<int>(v)].c_str(); }
const char* ToString(LrSchedule v) { return kLrSchedules[static_cast<int>(v)].c_str(); }
const char* ToString(Head v) { return kHeads[static_cast<int>(v)].c_str(); }
const char* ToString(Pooling v) { return kPoolings[static_cast<int>(v)].c_str(); }
const char* ToString(Loss v) { return kLosses[static_cast<int>(v)].c_str(); }
const char* ToString(Activation v) { return kActivations[static_cast<int>(v)].c_str(); }

bool HasLlamaVariant(const ModelConfig& c) {
  return c.activation != Activation::kSilu || c.qk_norm || c.gemma_norms || c.embedding_scale ||
         c.attn_softcap > 0 || c.logit_softcap > 0 || c.fused_projections ||
         c.sliding_window > 0 || !c.sliding_layers.empty() || c.experts > 0;
}

namespace {

// Liger-Kernel's chunk size (LigerFusedLinearCrossEntropyFunction): the
// tokens over ceil(vocab / hidden), rounded up to a power of two.
int64_t AutoLossChunks(const ModelConfig& c) {
  const int64_t tokens = std::max<int64_t>(1, c.micro_batch * c.seq_len);
  const int64_t factor =
      std::max<int64_t>(1, (c.vocab + c.hidden - 1) / std::max<int64_t>(1, c.hidden));
  const int64_t want = (tokens + factor - 1) / factor;
  int64_t size = 1;
  while (size < want) size *= 2;
  return (tokens + size - 1) / size;
}

}  // namespace

ModelConfig WithDefaults(const ModelConfig& config) {
  ModelConfig c = config;
  const bool bert = c.architecture == Architecture::kBert;
  if (c.kv_heads == 0) c.kv_heads = c.heads;
  if (c.head_dim == 0 && c.heads > 0) c.head_dim = c.hidden / c.heads;
  if (c.type_vocab < 0) c.type_vocab = bert ? 1 : 0;
  if (c.head == Head::kDefault) c.head = bert ? Head::kMlm : Head::kLm;
  if (c.loss == Loss::kDefault) {
    c.loss = c.head == Head::kPooling ? Loss::kMnrl : Loss::kCrossEntropy;
  }
  if (c.texts_per_example == 0) c.texts_per_example = c.loss == Loss::kMnrl ? 2 : 1;
  if (c.num_labels == 0) c.num_labels = 2;
  if (c.lora_rank > 0 && c.lora_targets == 0) c.lora_targets = kLoraQ | kLoraV;
  if (c.loss_chunks == kLossChunksAuto) c.loss_chunks = AutoLossChunks(c);
  return c;
}

Gradients GradientsOf(const ModelConfig& config) {
  if (config.gradients != Gradients::kDefault) return config.gradients;
  const bool mixed =
      config.precision == Precision::kMixedBf16 || config.precision == Precision::kMixedFp16;
  return mixed ? Gradients::kPersistent : Gradients::kCreatedInBackward;
}

int64_t SequencesPerMicroBatch(const ModelConfig& config) {
  return config.micro_batch * WithDefaults(config).texts_per_example;
}

int TextPasses(const ModelConfig& config) {
  const ModelConfig c = WithDefaults(config);
  if (c.loss != Loss::kMnrl) return 1;
  return c.merge_columns ? 2 : static_cast<int>(c.texts_per_example);
}

int64_t PassSequences(const ModelConfig& config, int pass) {
  const ModelConfig c = WithDefaults(config);
  if (TextPasses(c) == 1) return SequencesPerMicroBatch(c);
  return c.merge_columns && pass > 0 ? (c.texts_per_example - 1) * c.micro_batch : c.micro_batch;
}

int64_t PassOffset(const ModelConfig& config, int pass) {
  int64_t n = 0;
  for (int p = 0; p < pass; ++p) n += PassSequences(config, p);
  return n;
}

namespace {

// `text` as one of `names` (an enum's values in order), or what is accepted.
template <typename E>
Result<E> ParseName(const std::vector<std::string>& names, std::string_view text,
                    const char* what) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<E>(i);
  }
  return Status::Invalid(std::string("unknown ") + what + " '" + std::string(text) +
                         "', expected " + JoinAlternatives(names));
}

// The same for an enum whose first value, "default", files never name.
template <typename E>
Result<E> ParseNamedNotDefault(const std::vector<std::string>& names, std::string_view text,
                               const char* what) {
  Result<E> v = ParseName<E>(Accepted(names), text, what);
  if (!v.ok()) return v.status();
  return static_cast<E>(static_cast<int>(*v) + 1);  // Accepted drops "default"
}

}  // namespace

Result<Precision> ParsePrecision(std::string_view text) {
  return ParseName<Precision>(kPrecisions, text, "precision");
}

Result<AttentionImpl> ParseAttention(std::string_view text) {
  return ParseName<AttentionImpl>(kAttention, text, "attention");
}

Result<Head> ParseHead(std::string_view text) {
  return ParseNamedNotDefault<Head>(kHeads, text, "head");
}

Result<Pooling> ParsePooling(std::string_view text) {
  return ParseName<Pooling>(kPoolings, text, "pooling");
}

Result<Loss> ParseLoss(std::string_view text) {
  return ParseNamedNotDefault<Loss>(kLosses, text, "loss");
}

Result<Optimizer> ParseOptimizer(std::string_view text) {
  return ParseName<Optimizer>(kOptimizers, text, "optimizer");
}

Result<GradDtype> ParseGradDtype(std::string_view text) {
  return ParseNamedNotDefault<GradDtype>(kGradDtypes, text, "grad_dtype");
}

Result<Gradients> ParseGradients(std::string_view text) {
  return ParseNamedNotDefault<Gradients>(kGradients, text, "gradients");
}

Result<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json_text, source));
  if (!doc.is_object()) {
    return Status::Invalid(source + ": expected a JSON object describing the model, got " +
                           DescribeJsonValue(doc));
  }
  JsonObjectReader r(doc, source);
  std::vector<std::string> known = kKnownKeys;
  known.insert(known.end(), LoraKeys().begin(), LoraKeys().end());
  REMAT_RETURN_IF_ERROR(r.NoUnknownKeys(known));
  ModelConfig c;
  std::string arch = "gpt", precision = "fp32", optimizer = "adamw", attention = "eager";
  REMAT_RETURN_IF_ERROR(r.String("name", &c.name, false));
  REMAT_RETURN_IF_ERROR(r.Enum("architecture", &arch, kArchitectures, false));
  c.architecture = FromName<Architecture>(kArchitectures, arch);
  REMAT_RETURN_IF_ERROR(r.Int("layers", &c.layers, true, 1, kMaxLayers));
  REMAT_RETURN_IF_ERROR(r.Int("hidden", &c.hidden, true, 1, kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Int("heads", &c.heads, true, 1, kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Int("ffn_hidden", &c.ffn_hidden, false, 1, 16 * kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Int("vocab", &c.vocab, true, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("seq_len", &c.seq_len, true, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("micro_batch", &c.micro_batch, false, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("max_position", &c.max_position, false, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("grad_accumulation", &c.grad_accumulation, false, 1, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Enum("precision", &precision, kPrecisions, false));
  c.precision = FromName<Precision>(kPrecisions, precision);
  std::string grad_dtype = "default";
  REMAT_RETURN_IF_ERROR(r.Enum("grad_dtype", &grad_dtype, Accepted(kGradDtypes), false));
  c.grad_dtype = FromName<GradDtype>(kGradDtypes, grad_dtype);
  std::string gradients = "default";
  REMAT_RETURN_IF_ERROR(r.Enum("gradients", &gradients, Accepted(kGradients), false));
  c.gradients = FromName<Gradients>(kGradients, gradients);
  REMAT_RETURN_IF_ERROR(r.Enum("optimizer", &optimizer, kOptimizers, false));
  c.optimizer = FromName<Optimizer>(kOptimizers, optimizer);
  REMAT_RETURN_IF_ERROR(r.Enum("attention", &attention, kAttention, false));
  c.attention = FromName<AttentionImpl>(kAttention, attention);
  REMAT_RETURN_IF_ERROR(r.Double("dropout", &c.dropout, false, 0.0, 0.999999));
  c.tie_embeddings = c.architecture != Architecture::kLlama;
  REMAT_RETURN_IF_ERROR(r.Bool("tie_embeddings", &c.tie_embeddings, false));
  REMAT_RETURN_IF_ERROR(r.Double("max_grad_norm", &c.max_grad_norm, false, 0.0, 1e30));
  std::string lr_schedule = "constant";
  REMAT_RETURN_IF_ERROR(r.Enum("lr_schedule", &lr_schedule, kLrSchedules, false));
  c.lr_schedule = FromName<LrSchedule>(kLrSchedules, lr_schedule);
  REMAT_RETURN_IF_ERROR(r.Int("warmup_steps", &c.warmup_steps, false, 0, kMaxTokens));
  REMAT_RETURN_IF_ERROR(r.Int("kv_heads", &c.kv_heads, false, 1, kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Int("head_dim", &c.head_dim, false, 1, kMaxWidth));
  REMAT_RETURN_IF_ERROR(r.Bool("qkv_bias", &c.qkv_bias, false));
  REMAT_RETURN_IF_ERROR(r.Int("type_vocab", &c.type_vocab, false, 0, kMaxTokens));
  REMAT_RETURN_IF_ERROR(ParseHeadFields(r, &c));
  REMAT_RETURN_IF_ERROR(ParseVariantFields(doc, r, &c));
  REMAT_RETURN_IF_ERROR(ParseLoraFields(doc, r, &c));
  if (c.ffn_hidden == 0) c.ffn_hidden = DefaultFfn(c.architecture, c.hidden);
  if (c.max_position == 0) c.max_position = c.seq_len;
  REMAT_RETURN_IF_ERROR(ValidateModelConfig(c, source));
  return WithDefaults(c);
}

Status ValidateModelConfig(const ModelConfig& c, const std::string& source) {
  auto bad = [&](const char* field, const std::string& what) {
    return Status::Invalid(source + ": field '" + field + "': " + what);
  };
  auto in_range = [&](const char* field, int64_t v, int64_t max) {
    return v >= 1 && v <= max ? Status::Ok()
                              : bad(field, "expected an integer in [1, " + std::to_string(max) +
                                               "], got " + std::to_string(v));
  };
  REMAT_RETURN_IF_ERROR(in_range("layers", c.layers, kMaxLayers));
  REMAT_RETURN_IF_ERROR(in_range("hidden", c.hidden, kMaxWidth));
  REMAT_RETURN_IF_ERROR(in_range("heads", c.heads, kMaxWidth));
  if (c.head_dim == 0 && c.hidden % c.heads != 0) {
    return bad("heads", std::to_string(c.heads) + " does not divide hidden = " +
                            std::to_string(c.hidden) + " (head size must be a whole number)");
  }
  REMAT_RETURN_IF_ERROR(in_range("ffn_hidden", c.ffn_hidden, 16 * kMaxWidth));
  REMAT_RETURN_IF_ERROR(in_range("vocab", c.vocab, kMaxTokens));
  REMAT_RETURN_IF_ERROR(in_range("seq_len", c.seq_len, kMaxTokens));
  REMAT_RETURN_IF_ERROR(in_range("micro_batch", c.micro_batch, kMaxTokens));
  if (c.max_position > kMaxTokens) {  // 0 is fine for llama (no learned positions)
    return bad("max_position", "expected an integer in [1, " + std::to_string(kMaxTokens) + "]");
  }
  REMAT_RETURN_IF_ERROR(in_range("grad_accumulation", c.grad_accumulation, kMaxTokens));
  if (c.architecture != Architecture::kLlama && c.max_position < c.seq_len) {
    return bad("max_position", std::to_string(c.max_position) +
                                   " is smaller than seq_len = " + std::to_string(c.seq_len) +
                                   " (learned positions need one row per token)");
  }
  if (!(c.dropout >= 0.0 && c.dropout < 1.0)) return bad("dropout", "expected a number in [0, 1)");
  if (!(c.max_grad_norm >= 0.0 && c.max_grad_norm <= 1e30)) {
    return bad("max_grad_norm", "expected a number in [0, 1e30] (0: no clipping)");
  }
  if (c.warmup_steps < 0 || c.warmup_steps > kMaxTokens) {
    return bad("warmup_steps", "expected an integer in [0, " + std::to_string(kMaxTokens) + "]");
  }
  if (const std::string why = GradDtypeProblem(c.precision, c.grad_dtype); !why.empty()) {
    return bad("grad_dtype", std::string(ToString(c.grad_dtype)) + " with precision " +
                                 ToString(c.precision) + ": " + why);
  }
  REMAT_RETURN_IF_ERROR(ValidateLora(c, source));
  return ValidateShapeAndHead(WithDefaults(c), source);
}

std::string ModelConfigToJson(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["architecture"] = ToString(c.architecture);
  j["layers"] = c.layers;
  j["hidden"] = c.hidden;
  j["heads"] = c.heads;
  j["ffn_hidden"] = c.ffn_hidden;
  j["vocab"] = c.vocab;
  j["seq_len"] = c.seq_len;
  j["micro_batch"] = c.micro_batch;
  j["max_position"] = c.max_position;
  j["grad_accumulation"] = c.grad_accumulation;
  j["precision"] = ToString(c.precision);
  if (c.grad_dtype != GradDtype::kDefault) j["grad_dtype"] = ToString(c.grad_dtype);
  if (c.gradients != Gradients::kDefault) j["gradients"] = ToString(c.gradients);
  j["optimizer"] = ToString(c.optimizer);
  j["attention"] = ToString(c.attention);
  j["dropout"] = c.dropout;
  j["tie_embeddings"] = c.tie_embeddings;
  if (c.max_grad_norm != 0) j["max_grad_norm"] = c.max_grad_norm;
  if (c.lr_schedule != LrSchedule::kConstant) j["lr_schedule"] = ToString(c.lr_schedule);
  if (c.warmup_steps != 0) j["warmup_steps"] = c.warmup_steps;
  const ModelConfig d = WithDefaults(c);
  j["kv_heads"] = d.kv_heads;
  j["head_dim"] = d.head_dim;
  j["qkv_bias"] = d.qkv_bias;
  j["type_vocab"] = d.type_vocab;
  j["head"] = ToString(d.head);
  if (d.head == Head::kPooling) j["pooling"] = ToString(d.pooling);
  j["loss"] = ToString(d.loss);
  j["texts_per_example"] = d.texts_per_example;
  if (d.head == Head::kClassification) j["num_labels"] = d.num_labels;
  j["pooler"] = d.pooler;
  if (d.loss == Loss::kMnrl) j["merge_columns"] = d.merge_columns;
  if (c.loss_chunks == kLossChunksAuto) j["loss_chunks"] = "auto";
  if (c.loss_chunks > 0) j["loss_chunks"] = c.loss_chunks;
  // The llama variants, where set (a plain llama's file stays as it was).
  if (d.activation != Activation::kSilu) j["activation"] = ToString(d.activation);
  if (d.qk_norm) j["qk_norm"] = true;
  if (d.gemma_norms) j["gemma_norms"] = true;
  if (d.embedding_scale) j["embedding_scale"] = true;
  if (d.attn_softcap > 0) j["attn_softcap"] = d.attn_softcap;
  if (d.logit_softcap > 0) j["logit_softcap"] = d.logit_softcap;
  if (d.fused_projections) j["fused_projections"] = true;
  if (d.sliding_window > 0) j["sliding_window"] = d.sliding_window;
  if (!d.sliding_layers.empty()) {
    j["layer_types"] = nlohmann::ordered_json::array();
    for (bool s : d.sliding_layers) j["layer_types"].push_back(kLayerTypes[s ? 1 : 0]);
  }
  if (d.experts > 0) {
    j["experts"] = d.experts;
    j["experts_per_token"] = d.experts_per_token;
    if (d.expert_ffn_hidden > 0) j["expert_ffn_hidden"] = d.expert_ffn_hidden;
  }
  LoraToJson(d, &j);
  return DumpDocument(j);
}

}  // namespace remat
