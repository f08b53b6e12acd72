// ValidateModelConfig: the ranges and cross-field rules of a ModelConfig, as
// a sequence of named checks. Each returns the first problem it finds as
// "<source>: field '<field>': <what>"; the checks run in a fixed order, so a
// config with several problems always reports the same one.
#include <algorithm>

#include "model/lora_config.h"
#include "model/model_config_limits.h"
#include "remat/model/model_config.h"
#include "remat/model/precision.h"

namespace remat {

using internal::kMaxLayers;
using internal::kMaxTexts;
using internal::kMaxTokens;
using internal::kMaxWidth;
using internal::ValidateLora;
namespace {

Status Bad(const std::string& source, const char* field, const std::string& what) {
  return Status::Invalid(source + ": field '" + field + "': " + what);
}

// `v` in [1, max], or what is accepted.
Status InRange(const std::string& source, const char* field, int64_t v, int64_t max) {
  return v >= 1 && v <= max ? Status::Ok()
                            : Bad(source, field,
                                  "expected an integer in [1, " + std::to_string(max) + "], got " +
                                      std::to_string(v));
}

// The sizes: layers, widths, tokens, and the learned positions covering the
// sequence (on the config as given, before defaults).
Status CheckSizes(const ModelConfig& c, const std::string& source) {
  REMAT_RETURN_IF_ERROR(InRange(source, "layers", c.layers, kMaxLayers));
  REMAT_RETURN_IF_ERROR(InRange(source, "hidden", c.hidden, kMaxWidth));
  REMAT_RETURN_IF_ERROR(InRange(source, "heads", c.heads, kMaxWidth));
  if (c.head_dim == 0 && c.hidden % c.heads != 0) {
    return Bad(source, "heads",
               std::to_string(c.heads) + " does not divide hidden = " + std::to_string(c.hidden) +
                   " (head size must be a whole number)");
  }
  REMAT_RETURN_IF_ERROR(InRange(source, "ffn_hidden", c.ffn_hidden, 16 * kMaxWidth));
  REMAT_RETURN_IF_ERROR(InRange(source, "vocab", c.vocab, kMaxTokens));
  REMAT_RETURN_IF_ERROR(InRange(source, "seq_len", c.seq_len, kMaxTokens));
  REMAT_RETURN_IF_ERROR(InRange(source, "micro_batch", c.micro_batch, kMaxTokens));
  if (c.max_position > kMaxTokens) {  // 0 is fine for llama (no learned positions)
    return Bad(source, "max_position",
               "expected an integer in [1, " + std::to_string(kMaxTokens) + "]");
  }
  REMAT_RETURN_IF_ERROR(InRange(source, "grad_accumulation", c.grad_accumulation, kMaxTokens));
  if (c.architecture != Architecture::kLlama && c.max_position < c.seq_len) {
    return Bad(source, "max_position",
               std::to_string(c.max_position) + " is smaller than seq_len = " +
                   std::to_string(c.seq_len) + " (learned positions need one row per token)");
  }
  return Status::Ok();
}

// The training loop: dropout, clipping, warmup, and the gradients' dtype
// against the precision.
Status CheckTraining(const ModelConfig& c, const std::string& source) {
  if (!(c.dropout >= 0.0 && c.dropout < 1.0)) {
    return Bad(source, "dropout", "expected a number in [0, 1)");
  }
  if (!(c.max_grad_norm >= 0.0 && c.max_grad_norm <= 1e30)) {
    return Bad(source, "max_grad_norm", "expected a number in [0, 1e30] (0: no clipping)");
  }
  if (c.warmup_steps < 0 || c.warmup_steps > kMaxTokens) {
    return Bad(source, "warmup_steps",
               "expected an integer in [0, " + std::to_string(kMaxTokens) + "]");
  }
  if (const std::string why = GradDtypeProblem(c.precision, c.grad_dtype); !why.empty()) {
    return Bad(source, "grad_dtype",
               std::string(ToString(c.grad_dtype)) + " with precision " + ToString(c.precision) +
                   ": " + why);
  }
  return Status::Ok();
}

// The attention's shape: kv_heads dividing heads (llama only below heads),
// head_dim in range (llama only other than hidden / heads). The checks
// below all take a config with defaults resolved.
Status CheckAttentionShape(const ModelConfig& c, const std::string& source) {
  const bool llama = c.architecture == Architecture::kLlama;
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
  return Status::Ok();
}

// The llama family's variant fields: on llama only, one layer type per
// block, a window for sliding layers, the experts' top-k, and soft-capping
// on an attention that has it.
Status CheckLlamaVariants(const ModelConfig& c, const std::string& source) {
  const bool llama = c.architecture == Architecture::kLlama;
  const std::string arch = ToString(c.architecture);
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
  return Status::Ok();
}

// Token-type embeddings: bert's only.
Status CheckTokenTypes(const ModelConfig& c, const std::string& source) {
  if (c.architecture != Architecture::kBert && c.type_vocab != 0) {
    return Bad(source, "type_vocab",
               std::to_string(c.type_vocab) + ": only bert has token-type embeddings (" +
                   ToString(c.architecture) + " has none; accepted: 0)");
  }
  return Status::Ok();
}

// The head against the architecture: mlm on an encoder, lm on a decoder.
Status CheckHead(const ModelConfig& c, const std::string& source) {
  const bool bert = c.architecture == Architecture::kBert;
  if (c.head == Head::kMlm && !bert) {
    return Bad(source, "head",
               "\"mlm\" needs an encoder (architecture bert); for " +
                   std::string(ToString(c.architecture)) + " use lm, pooling or classification");
  }
  if (c.head == Head::kLm && bert) {
    return Bad(source, "head",
               "\"lm\" is a causal LM head; for bert use mlm, pooling or "
               "classification");
  }
  return Status::Ok();
}

// The loss against the head (mnrl with pooling only), the texts per example
// it takes, and the classification head's labels.
Status CheckLoss(const ModelConfig& c, const std::string& source) {
  const std::string head = ToString(c.head);
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
  return Status::Ok();
}

// The untrained pooler: bert's only.
Status CheckPoolerArchitecture(const ModelConfig& c, const std::string& source) {
  if (c.pooler && c.architecture != Architecture::kBert) {
    return Bad(
        source, "pooler",
        "true: only bert has a pooler (" + std::string(ToString(c.architecture)) + " has none)");
  }
  return Status::Ok();
}

// The chunked loss: a chunk count in range (or auto), on the lm head's
// cross-entropy (soft-capped logits included: each chunk is soft-capped).
Status CheckLossChunks(const ModelConfig& c, const std::string& source) {
  if (c.loss_chunks == 0) return Status::Ok();
  if (c.loss_chunks != kLossChunksAuto && (c.loss_chunks < 1 || c.loss_chunks > kMaxTokens)) {
    return Bad(source, "loss_chunks",
               "expected an integer in [1, " + std::to_string(kMaxTokens) + "] or \"auto\", got " +
                   std::to_string(c.loss_chunks));
  }
  if (c.head != Head::kLm) {
    return Bad(source, "loss_chunks",
               "the chunked loss is the lm head's cross-entropy (head is \"" +
                   std::string(ToString(c.head)) + "\"); expected head lm or no loss_chunks");
  }
  return Status::Ok();
}

// The classification head's dense layer is the pooler, trained: no second one.
Status CheckPoolerHead(const ModelConfig& c, const std::string& source) {
  if (c.pooler && c.head == Head::kClassification) {
    return Bad(source, "pooler",
               "true: the classification head's dense layer is the pooler "
               "(trained); expected false");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateModelConfig(const ModelConfig& config, const std::string& source) {
  REMAT_RETURN_IF_ERROR(CheckSizes(config, source));
  REMAT_RETURN_IF_ERROR(CheckTraining(config, source));
  REMAT_RETURN_IF_ERROR(ValidateLora(config, source));
  const ModelConfig c = WithDefaults(config);
  REMAT_RETURN_IF_ERROR(CheckAttentionShape(c, source));
  REMAT_RETURN_IF_ERROR(CheckLlamaVariants(c, source));
  REMAT_RETURN_IF_ERROR(CheckTokenTypes(c, source));
  REMAT_RETURN_IF_ERROR(CheckHead(c, source));
  REMAT_RETURN_IF_ERROR(CheckLoss(c, source));
  REMAT_RETURN_IF_ERROR(CheckPoolerArchitecture(c, source));
  REMAT_RETURN_IF_ERROR(CheckLossChunks(c, source));
  return CheckPoolerHead(c, source);
}

}  // namespace remat
