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
  kBert,   // encoder (bert, roberta, distilbert): post-LayerNorm, bidirectional,
           // learned positions and token types, GELU MLP
  kLlama,  // decoder (llama, mistral, qwen2): pre-RMSNorm, causal, rotary
           // positions, SwiGLU MLP, grouped-query attention, no biases but qkv_bias
};

// What sits on top of the last block, and what the loss sees.
enum class Head {
  kDefault,         // lm for gpt and llama, mlm for bert
  kLm,              // causal LM: logits over the vocabulary for every token
  kMlm,             // masked LM (BertForMaskedLM): dense + GELU + LayerNorm, then a
                    // decoder tied to the token embedding, with a bias
  kPooling,         // a sentence embedding (sentence-transformers): pooled tokens,
                    // no vocabulary logits
  kClassification,  // sequence classification: one token -> (encoders: dense + tanh,
                    // dropout) -> num_labels logits
};

enum class Pooling {
  kMean,  // mean over the tokens (sentence-transformers' default)
  kCls,   // the first token
};

enum class Loss {
  kDefault,       // cross_entropy, or mnrl for the pooling head
  kCrossEntropy,  // over vocabulary logits (lm, mlm) or labels (classification)
  kMnrl,          // MultipleNegativesRankingLoss: each anchor against every positive
                  // and negative of the batch; cross-entropy over the
                  // b x (texts_per_example - 1) * b similarity matrix
};

// The conventions, byte for byte, are in remat/precision.h.
enum class Precision {
  kFp32,       // everything fp32
  kBf16,       // weights, grads, activations and optimizer state in bf16
  kFp16,       // same in fp16
  kAmpBf16,    // torch.autocast(bf16): fp32 weights/grads/state, bf16 matmuls
  kAmpFp16,    // torch.autocast(fp16) + GradScaler
  kMixedBf16,  // Megatron/DeepSpeed: bf16 weights and activations, fp32 master
               // weights and optimizer state, gradients per grad_dtype
  kMixedFp16,  // the same in fp16, with a dynamic loss scaler
};

// The dtype gradients are kept (and accumulated across micro-batches) in.
enum class GradDtype {
  kDefault,  // the precision's convention (precision.h)
  kFp32,
  kBf16,
  kFp16,
};

// When parameter gradients exist (model.json "gradients").
enum class Gradients {
  kDefault,  // persistent for the mixed_* precisions, else created_in_backward
  // PyTorch 2.x and HF Trainer: zero_grad() sets .grad to None, so each
  // layer's backward creates its gradients and the optimizer step frees them.
  kCreatedInBackward,
  // Megatron/DeepSpeed contiguous gradient buffers: allocated once, live
  // for the whole run (zeroed in place after each step).
  kPersistent,
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
  // torch.nn.functional.scaled_dot_product_attention (transformers' default
  // "sdpa"): a fused kernel's memory (as kFlash) on CUDA, and on CPU without
  // attention dropout; with dropout on CPU, where no fused kernel draws
  // dropout, PyTorch's math path (scaled copies of q and k, the
  // probabilities, the dropout mask and the dropped probabilities).
  kSdpa,
};

struct ModelConfig {
  std::string name = "model";
  Architecture architecture = Architecture::kGpt;
  int64_t layers = 0;             // transformer blocks (required)
  int64_t hidden = 0;             // model width h (required)
  int64_t heads = 0;              // attention heads a (required, divides hidden)
  int64_t ffn_hidden = 0;         // MLP inner width; default 4*hidden (llama: required)
  int64_t vocab = 0;              // vocabulary size (required)
  int64_t seq_len = 0;            // tokens per sequence s (required)
  int64_t micro_batch = 1;        // sequences per micro-batch b
  int64_t max_position = 0;       // learned position table size; default seq_len
  int64_t grad_accumulation = 1;  // micro-batches per optimizer step
  Precision precision = Precision::kFp32;
  GradDtype grad_dtype = GradDtype::kDefault;  // a choice for mixed_* only
  Gradients gradients = Gradients::kDefault;   // see GradientsOf
  Optimizer optimizer = Optimizer::kAdamW;
  AttentionImpl attention = AttentionImpl::kEager;
  double dropout = 0.1;        // in [0, 1); 0 removes the dropout masks
  bool tie_embeddings = true;  // LM head shares the token embedding (gpt, bert)

  // Attention shape. 0 means the default.
  int64_t kv_heads = 0;     // key/value heads (grouped-query attention); divides
                            // heads; default heads
  int64_t head_dim = 0;     // width of one head; default hidden / heads (then
                            // heads must divide hidden)
  bool qkv_bias = false;    // llama: q/k/v projections carry biases (qwen2). gpt
                            // and bert have biases on every linear regardless
  int64_t type_vocab = -1;  // bert: token-type embedding rows (bert 2, roberta 1,
                            // distilbert 0); -1: default 1. Others: must be 0 or -1

  // Head and loss.
  Head head = Head::kDefault;
  Pooling pooling = Pooling::kMean;  // pooling head only
  Loss loss = Loss::kDefault;
  // Texts per training example (mnrl: 2 = pairs, 3 = triplets; others 1);
  // micro_batch counts examples, so micro_batch * texts_per_example sequences
  // go through the model. 0: the loss's default (mnrl 2, others 1).
  int64_t texts_per_example = 0;
  int64_t num_labels = 0;  // classification only; 0: default 2
  // bert: the model holds a BertPooler (dense + tanh on the first token, as
  // AutoModel loads one) that the loss never reaches: its weights count, but
  // it gets no gradient or optimizer state. Not with the classification head
  // (its dense layer is that pooler, trained).
  bool pooler = false;
};

// The config with every default resolved (kv_heads, head_dim, type_vocab,
// head, loss, texts_per_example, num_labels set from the architecture and head).
ModelConfig WithDefaults(const ModelConfig& config);

// The gradient convention `config` trains under: `gradients`, kDefault
// resolved (kPersistent for mixed_bf16/mixed_fp16, else kCreatedInBackward).
Gradients GradientsOf(const ModelConfig& config);

// Sequences through the model per micro-batch: micro_batch * texts_per_example.
int64_t SequencesPerMicroBatch(const ModelConfig& config);

// Parses model.json text. `source` names the file in messages.
Result<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& source);

// Checks ranges and cross-field rules (heads divide hidden, ...). Parse calls it;
// call it again after changing fields (CLI overrides).
Status ValidateModelConfig(const ModelConfig& config, const std::string& source);

// Serializes to model.json form (all fields explicit).
std::string ModelConfigToJson(const ModelConfig& config);

// Names as they appear in model.json ("gpt", "amp_bf16", "adamw", "flash").
const char* ToString(Architecture v);
const char* ToString(Head v);  // kDefault -> "default"
const char* ToString(Pooling v);
const char* ToString(Loss v);  // kDefault -> "default"
const char* ToString(Precision v);
const char* ToString(GradDtype v);  // kDefault -> "default"
const char* ToString(Gradients v);  // kDefault -> "default"
const char* ToString(Optimizer v);
const char* ToString(AttentionImpl v);
Result<Precision> ParsePrecision(std::string_view text);
Result<AttentionImpl> ParseAttention(std::string_view text);
Result<Gradients> ParseGradients(std::string_view text);  // not "default"

}  // namespace remat

#endif  // REMAT_MODEL_CONFIG_H_
