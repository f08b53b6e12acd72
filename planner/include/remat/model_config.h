// model.json: the description of one transformer training job.
//
// Every field, its default and accepted values are documented in README.md
// ("model.json"). Parsing validates everything and reports the file and field
// of the first problem.
#ifndef REMAT_MODEL_CONFIG_H_
#define REMAT_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "remat/status.h"

namespace remat {

enum class Architecture {
  kGpt,    // decoder, pre-LayerNorm, causal, learned positions, GELU MLP
  kBert,   // encoder, post-LayerNorm, bidirectional, learned positions, MLM head
  kLlama,  // decoder, pre-RMSNorm, causal, rotary positions, SwiGLU MLP, no biases
};

enum class Precision {
  kFp32,     // everything fp32
  kBf16,     // weights, grads, activations and optimizer state in bf16
  kFp16,     // same in fp16
  kAmpBf16,  // torch.autocast(bf16): fp32 weights/grads/state, bf16 matmuls
  kAmpFp16,  // torch.autocast(fp16) + GradScaler
};

enum class Optimizer {
  kAdamW,        // two moment buffers per parameter
  kSgd,          // plain SGD (PyTorch default momentum=0): no state
  kSgdMomentum,  // one momentum buffer per parameter
  kNone,         // inference-style step: no optimizer state
};

enum class AttentionImpl {
  kEager,  // materializes the (s x s) score, softmax and dropout tensors
  kFlash,  // fused kernel: no s^2 tensors are kept
};

struct ModelConfig {
  std::string name = "model";
  Architecture architecture = Architecture::kGpt;
  int64_t layers = 0;        // transformer blocks (required)
  int64_t hidden = 0;        // model width h (required)
  int64_t heads = 0;         // attention heads a (required, divides hidden)
  int64_t ffn_hidden = 0;    // MLP inner width; default 4*hidden (llama: required)
  int64_t vocab = 0;         // vocabulary size (required)
  int64_t seq_len = 0;       // tokens per sequence s (required)
  int64_t micro_batch = 1;   // sequences per micro-batch b
  int64_t max_position = 0;  // learned position table size; default seq_len
  int64_t grad_accumulation = 1;  // micro-batches per optimizer step
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kAdamW;
  AttentionImpl attention = AttentionImpl::kEager;
  double dropout = 0.1;      // in [0, 1); 0 removes the dropout masks
  bool tie_embeddings = true;  // LM head shares the token embedding (gpt, bert)
};

// Parses model.json text. `source` names the file in messages.
Result<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& source);

// Checks ranges and cross-field rules (heads divide hidden, ...). Parse calls it;
// call it again after changing fields (CLI overrides).
Status ValidateModelConfig(const ModelConfig& config, const std::string& source);

// Serializes to model.json form (all fields explicit).
std::string ModelConfigToJson(const ModelConfig& config);

// Names as they appear in model.json ("gpt", "amp_bf16", "adamw", "flash").
const char* ToString(Architecture v);
const char* ToString(Precision v);
const char* ToString(Optimizer v);
const char* ToString(AttentionImpl v);
Result<Precision> ParsePrecision(std::string_view text);

}  // namespace remat

#endif  // REMAT_MODEL_CONFIG_H_
