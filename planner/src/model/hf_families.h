// config.json of the llama family's variants: gemma2, gemma3_text (and
// gemma3's text_config), qwen3, phi3 (Phi-3 and Phi-4), and the mixtures of
// experts mixtral and qwen3_moe. Internal to the planner; hf_config.cc
// calls it.
#ifndef REMAT_SRC_HF_FAMILIES_H_
#define REMAT_SRC_HF_FAMILIES_H_

#include <string>

#include <nlohmann/json.hpp>

#include "remat/model/model_config.h"
#include "remat/io/status.h"

namespace remat::internal {

// Whether ParseHfVariant reads `model_type`.
bool IsHfVariant(const std::string& model_type);

// Sets the shape and the variant fields of `c` (architecture llama) from
// `doc`, a config of `model_type` (IsHfVariant): a key absent or null takes
// transformers' default (configuration_<type>.py). `dropout` receives the
// attention dropout. Fails naming the field and what is accepted.
Status ParseHfVariant(const std::string& model_type, const nlohmann::json& doc,
                      const std::string& source, ModelConfig* c, double* dropout);

// config.json model types with mixture-of-experts blocks other than
// mixtral's and qwen3_moe's, refused with what is accepted instead.
bool IsHfMixtureOfExperts(const std::string& model_type);

}  // namespace remat::internal

#endif  // REMAT_SRC_HF_FAMILIES_H_
