// The LoRA / QLoRA keys of model.json (lora_rank, lora_alpha, lora_targets,
// lora_dropout, lora_dtype, quantization, double_quant): parsing and the
// cross-field rules. Internal to the planner; model_config_parse.cc,
// model_config_validate.cc and model_config_json.cc call them.
#ifndef REMAT_SRC_LORA_CONFIG_H_
#define REMAT_SRC_LORA_CONFIG_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/json_fields.h"
#include "remat/model/model_config.h"

namespace remat::internal {

// The keys this file reads, for NoUnknownKeys.
const std::vector<std::string>& LoraKeys();

// Reads the LoRA keys of `doc` (an object) into `c`. lora_targets is an
// array of names or one string ("q,v", "all-linear").
Status ParseLoraFields(const nlohmann::json& doc, const JsonObjectReader& r, ModelConfig* c);

// Ranges and cross-field rules: a rank for every other LoRA key, targets the
// architecture has, double_quant with nf4 only.
Status ValidateLora(const ModelConfig& c, const std::string& source);

// Adds the LoRA keys to a model.json document (only when lora_rank > 0).
void LoraToJson(const ModelConfig& c, nlohmann::ordered_json* j);

}  // namespace remat::internal

#endif  // REMAT_SRC_LORA_CONFIG_H_
