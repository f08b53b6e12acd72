// ParseModelConfig: model.json text to a ModelConfig, field by field, then
// ValidateModelConfig (model_config_validate.cc) for the cross-field rules.
#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "model/lora_config.h"
#include "model/model_config_limits.h"
#include "model/model_config_names.h"
#include "remat/model/model_config.h"

namespace remat {

using internal::Accepted;
using internal::DescribeJsonValue;
using internal::FromName;
using internal::JoinAlternatives;
using internal::JsonObjectReader;
using internal::kActivations;
using internal::kArchitectures;
using internal::kAttention;
using internal::kGradDtypes;
using internal::kGradients;
using internal::kHeads;
using internal::kLayerTypes;
using internal::kLosses;
using internal::kLrSchedules;
using internal::kMaxLayers;
using internal::kMaxTexts;
using internal::kMaxTokens;
using internal::kMaxWidth;
using internal::kOptimizers;
using internal::kPoolings;
using internal::kPrecisions;
using internal::LoraKeys;
using internal::ParseJson;
using internal::ParseLoraFields;
namespace {

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
                                             "loss_upcast",
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

// ffn_hidden when the file leaves it out: 4 * hidden, or llama's 2/3 of it.
int64_t DefaultFfn(Architecture arch, int64_t hidden) {
  if (arch == Architecture::kLlama) {
    // LLaMA: 2/3 of 4h, rounded up to a multiple of 256 (4096 -> 11008).
    const int64_t raw = 8 * hidden / 3;
    return (raw + 255) / 256 * 256;
  }
  return 4 * hidden;
}

// The head and loss fields (head, pooling, loss, texts_per_example,
// num_labels, pooler, merge_columns, loss_upcast, loss_chunks) into `c`;
// pooling and
// num_labels only where the resolved head has them.
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
  REMAT_RETURN_IF_ERROR(r.Bool("loss_upcast", &c->loss_upcast, false));
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
  REMAT_RETURN_IF_ERROR(
      r.Int("expert_ffn_hidden", &c->expert_ffn_hidden, false, 1, 16 * kMaxWidth));
  if (!r.Has("layer_types") || doc["layer_types"].is_null()) return Status::Ok();
  const nlohmann::json& types = doc["layer_types"];
  if (!types.is_array()) {
    return r.Error("layer_types", "expected an array of " + JoinAlternatives(kLayerTypes) +
                                      ", one per block, got " + DescribeJsonValue(types));
  }
  for (const nlohmann::json& t : types) {
    if (!t.is_string() || (t != kLayerTypes[0] && t != kLayerTypes[1])) {
      return r.Error("layer_types",
                     "expected " + JoinAlternatives(kLayerTypes) + ", got " + DescribeJsonValue(t));
    }
    c->sliding_layers.push_back(t == kLayerTypes[1]);
  }
  return Status::Ok();
}

}  // namespace

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

}  // namespace remat
