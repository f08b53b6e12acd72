// The planner's input file: a model.json, a Hugging Face config.json, or a
// profile JSON (measured or hand-written). The kind is detected from the keys.
#ifndef REMAT_INPUT_H_
#define REMAT_INPUT_H_

#include <string>
#include <string_view>

#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat {

// The sequence length a config.json's job gets where it sets none (no
// "remat" seq_len): the length Llama 2 was trained at and a common
// fine-tuning length, or the model's maximum where that is shorter (BERT's
// 512, GPT-2's 1,024). A model's context limit (Llama 3.1's 131,072
// positions) is what it can read, not what people train at.
inline constexpr int64_t kDefaultSeqLen = 4096;

struct PlannerInput {
  enum class Kind { kModel, kHfConfig, kProfile };
  Kind kind = Kind::kModel;
  std::string path;
  ModelConfig config;  // kModel, kHfConfig
  Profile profile;     // kProfile
  // kHfConfig: the file sets no sequence length, config.seq_len is the
  // default (kDefaultSeqLen, or the model's maximum where shorter).
  bool default_seq_len = false;
};

// "model.json", "config.json" or "profile".
const char* ToString(PlannerInput::Kind kind);

// Detection: a top-level "layers" array -> profile; a "model_type" key ->
// Hugging Face config.json; otherwise model.json.
Result<PlannerInput> LoadPlannerInput(const std::string& path);
Result<PlannerInput> ParsePlannerInput(std::string_view text, const std::string& source);

// Hugging Face config.json (gpt2, llama/mistral, bert/roberta families) ->
// ModelConfig. Training-job fields HF does not have (seq_len, micro_batch,
// precision, optimizer) get model.json defaults; seq_len defaults to
// kDefaultSeqLen, or the model's maximum position count where shorter.
Result<ModelConfig> ParseHfConfig(std::string_view json_text, const std::string& source);

}  // namespace remat

#endif  // REMAT_INPUT_H_
