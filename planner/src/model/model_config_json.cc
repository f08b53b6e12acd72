// ModelConfigToJson: a ModelConfig in model.json form, every field that
// has a value in this config written out (the variant, head and LoRA keys
// only where they apply).
#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "model/lora_config.h"
#include "model/model_config_names.h"
#include "remat/model/model_config.h"

namespace remat {

using internal::DumpDocument;
using internal::kLayerTypes;
using internal::LoraToJson;

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
  if (!d.loss_upcast) j["loss_upcast"] = false;
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
