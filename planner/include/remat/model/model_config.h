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
#include <vector>

#include "remat/io/status.h"

namespace remat {

enum class Architecture {
  kGpt,    // decoder, pre-LayerNorm, causal, learned positions, GELU MLP
  kBert,   // encoder (bert, roberta, distilbert): post-LayerNorm, bidirectional,
           // learned positions and token types, GELU MLP
  kLlama,  // decoder (llama, mistral, qwen2): pre-RMSNorm, causal, rotary
           // positions, SwiGLU MLP, grouped-query attention, no biases but qkv_bias;
           // with the variant fields of ModelConfig also gemma2, gemma3, qwen3, phi3
};

// The gated MLP's activation (llama family): act(gate) * up.
enum class Activation {
  kSilu,      // SwiGLU (llama, qwen, phi3)
  kGeluTanh,  // GeGLU, gelu(approximate="tanh") (gemma's gelu_pytorch_tanh)
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

// The conventions, byte for byte, are in remat/model/precision.h.
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

// The state each keeps, by parameter tensor: optimizer_state.h.
enum class Optimizer {
  kAdamW,        // two moment buffers per parameter
  kSgd,          // plain SGD (PyTorch default momentum=0): no state
  kSgdMomentum,  // one momentum buffer per parameter
  kNone,         // inference-style step: no optimizer state
  // torch.optim.Adafactor: a factored second moment (a row and a column
  // vector) of each matrix, a full one of each vector, no first moment.
  kAdafactor,
  // torch.optim.Muon on the 2-D parameters (one momentum buffer each),
  // torch.optim.AdamW on the others (Muon takes matrices only).
  kMuon,
  // bitsandbytes' AdamW8bit: both moments in 8 bits with an fp32 scale per
  // 256 elements; fp32 moments for a tensor under 4,096 elements.
  kAdamW8bit,
  // bitsandbytes' PagedAdamW8bit: AdamW8bit's state, the 8-bit moments of a
  // tensor of 100,000 elements or more in CUDA managed memory.
  kPagedAdamW8bit,
  // torchao's AdamW8bit, AdamW4bit and AdamWFp8 (torchao/optim/adam.py):
  // both moments block-wise quantized (8-bit codes, 4-bit codes, fp8 e4m3)
  // with an fp32 scale per block, for a tensor of 4,096 elements or more
  // that is a whole number of blocks; the others keep moments in the
  // parameter's dtype.
  kTorchaoAdamW8bit,
  kTorchaoAdamW4bit,
  kTorchaoAdamWFp8,
};

// The learning rate over the updates, as transformers' schedulers: a linear
// warmup from 0 over warmup_steps updates, then constant, or a linear or
// cosine decay to 0 at the run's last update.
enum class LrSchedule {
  kConstant,
  kLinear,
  kCosine,
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

// ModelConfig::loss_chunks: chosen from the vocabulary and hidden size.
constexpr int64_t kLossChunksAuto = -1;

// LoRA / QLoRA (PEFT's LoraConfig, bitsandbytes' 4-bit quantization).
// Projections an adapter can target, as bits of ModelConfig::lora_targets.
// A fused module is one adapter: GPT-2's c_attn and Phi-3's qkv_proj for
// any of q, k, v; Phi-3's gate_up_proj for gate or up. In a mixture of
// experts gate, up and down are the experts' stacked parameters (PEFT's
// target_parameters; gate and up together, one fused gate_up_proj).
enum LoraTarget : uint32_t {
  kLoraQ = 1,
  kLoraK = 2,
  kLoraV = 4,
  kLoraO = 8,
  kLoraGate = 16,  // llama gate_proj, phi3 gate_up_proj, experts' gate (Mixtral w1)
  kLoraUp = 32,    // llama up_proj, gpt c_fc, bert intermediate.dense, experts' up (w3)
  kLoraDown = 64,  // llama down_proj, gpt mlp.c_proj, bert output.dense, experts' down (w2)
  kLoraRouter = 128,  // a mixture of experts' router (PEFT's "gate" of Mixtral, Qwen3-MoE)
  kLoraAllLinear = 255,
};
// The dtype of the adapters' weights (and so of their gradients and
// optimizer state, as torch.optim keeps them); default: the model's.
enum class LoraDtype { kDefault, kFp32, kBf16, kFp16 };
enum class Quantization {
  kNone,
  kNf4,  // bitsandbytes' 4-bit NormalFloat of every linear in the blocks
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

  // The training loop: once per update (after the K-th micro-batch).
  double max_grad_norm = 0;  // clip the gradients' global L2 norm to this; 0: off
  LrSchedule lr_schedule = LrSchedule::kConstant;
  int64_t warmup_steps = 0;  // updates of linear warmup from 0

  // Attention shape. 0 means the default.
  int64_t kv_heads = 0;     // key/value heads (grouped-query attention); divides
                            // heads; default heads
  int64_t head_dim = 0;     // width of one head; default hidden / heads (then
                            // heads must divide hidden)
  bool qkv_bias = false;    // llama: q/k/v projections carry biases (qwen2). gpt
                            // and bert have biases on every linear regardless
  int64_t type_vocab = -1;  // bert: token-type embedding rows (bert 2, roberta 1,
                            // distilbert 0); -1: default 1. Others: must be 0 or -1

  // Variants of the llama family (llama only; docs/model-families.md). The
  // defaults are llama's.
  Activation activation = Activation::kSilu;
  bool qk_norm = false;  // an RMSNorm over each query and key head (qwen3, gemma3)
  // gemma: every RMSNorm as Gemma's (x * (1 + w) in fp32, cast back), and
  // three more per block: on the attention's output, before and after the MLP.
  bool gemma_norms = false;
  bool embedding_scale = false;  // gemma: the embeddings times sqrt(hidden)
  double attn_softcap = 0;       // cap * tanh(scores / cap) before the softmax; 0: off
  double logit_softcap = 0;      // the same on the LM logits; 0: off
  bool fused_projections = false;  // phi3: one qkv_proj and one gate_up_proj, split as views
  int64_t sliding_window = 0;      // keys a sliding layer attends to; 0: none
  // By block: true for a sliding-window layer (model.json "layer_types",
  // "sliding_attention" / "full_attention"); empty: none slides.
  std::vector<bool> sliding_layers;
  // Mixture of experts (mixtral, qwen3_moe): every block's MLP is a router
  // and `experts` gated MLPs, each token through `experts_per_token` of them.
  int64_t experts = 0;            // 0: a dense MLP
  int64_t experts_per_token = 0;  // the router's top-k; required with experts
  int64_t expert_ffn_hidden = 0;  // each expert's inner width; 0: ffn_hidden

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
  // mnrl: how sentence-transformers groups the texts into forward passes.
  // true (sentence-transformers 6.x, embed_columns): the anchors in one pass,
  // every other column merged into a second pass of (texts_per_example - 1)
  // * micro_batch texts; false (sentence-transformers before 6, or column
  // merging disabled): one pass per column of micro_batch texts.
  bool merge_columns = true;
  // The token losses (lm, mlm) cast 16-bit logits to fp32 before the
  // cross-entropy, as transformers' ForCausalLMLoss and ForMaskedLMLoss and
  // torchtitan's loss do (logits.float()); false: the cross-entropy of the
  // 16-bit logits (BertForMaskedLM's CrossEntropyLoss). Autocast casts them
  // either way; fp32 logits have nothing to cast.
  bool loss_upcast = true;
  // The LM head and its cross-entropy computed over this many chunks of the
  // tokens (fused linear cross-entropy, as Liger-Kernel's): each chunk's
  // logits and their gradient exist one chunk at a time, the gradients of
  // the head's input and weight are made in the forward. 0: off (one
  // logits tensor); kLossChunksAuto: ceil(vocab / hidden) chunks, at most
  // one a token (Liger-Kernel's chunk size). Decoders' lm head with the
  // cross-entropy loss only.
  int64_t loss_chunks = 0;

  // LoRA / QLoRA (README "LoRA and QLoRA"). lora_rank 0: full fine-tuning.
  int64_t lora_rank = 0;      // r of every adapter; the base weights are frozen
  double lora_alpha = 8;      // scaling alpha / r (PEFT's default 8); no memory effect
  uint32_t lora_targets = 0;  // LoraTarget bits; 0 with a rank: q,v (PEFT's default)
  double lora_dropout = 0;    // PEFT's dropout of the adapter's input; in [0, 1)
  LoraDtype lora_dtype = LoraDtype::kDefault;
  Quantization quantization = Quantization::kNone;  // needs lora_rank > 0
  bool double_quant = false;  // nf4 only: 8-bit absmax, an fp32 constant per 256 blocks
};

// The config with every default resolved (kv_heads, head_dim, type_vocab,
// head, loss, texts_per_example, num_labels set from the architecture and head).
ModelConfig WithDefaults(const ModelConfig& config);

// The gradient convention `config` trains under: `gradients`, kDefault
// resolved (kPersistent for mixed_bf16/mixed_fp16, else kCreatedInBackward).
Gradients GradientsOf(const ModelConfig& config);

// Sequences through the model per micro-batch: micro_batch * texts_per_example.
int64_t SequencesPerMicroBatch(const ModelConfig& config);
// Forward passes through the encoder per micro-batch, then one loss and one
// backward: with the mnrl loss 2 (anchors, then the other columns merged;
// merge_columns) or texts_per_example (one pass per column), else 1.
int TextPasses(const ModelConfig& config);
// Sequences of forward pass `pass` (0-based, < TextPasses) and of the passes
// before it: one pass carries them all; separate columns micro_batch each;
// merged columns micro_batch, then (texts_per_example - 1) * micro_batch.
int64_t PassSequences(const ModelConfig& config, int pass);
int64_t PassOffset(const ModelConfig& config, int pass);

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
const char* ToString(LrSchedule v);
const char* ToString(Activation v);  // "silu", "gelu_tanh"
// Whether `config` uses any variant field above (a llama the runtime cannot run).
bool HasLlamaVariant(const ModelConfig& config);
Result<Precision> ParsePrecision(std::string_view text);
Result<AttentionImpl> ParseAttention(std::string_view text);
// "q,v", "q_proj,v_proj", "all-linear", GPT-2's c_attn/c_proj/c_fc and BERT's
// query/key/value/dense: LoraTarget bits, or what is accepted.
Result<uint32_t> ParseLoraTargets(std::string_view text);
std::string LoraTargetsToString(uint32_t targets);  // "q,v"
const char* ToString(LoraDtype v);                  // kDefault -> "default"
const char* ToString(Quantization v);               // "none", "nf4"
Result<Quantization> ParseQuantization(std::string_view text);
Result<Gradients> ParseGradients(std::string_view text);  // not "default"
// The head and loss names of model.json; "default" is not accepted.
Result<Head> ParseHead(std::string_view text);
Result<Pooling> ParsePooling(std::string_view text);
Result<Loss> ParseLoss(std::string_view text);
Result<Optimizer> ParseOptimizer(std::string_view text);
Result<GradDtype> ParseGradDtype(std::string_view text);  // not "default"

}  // namespace remat

#endif  // REMAT_MODEL_CONFIG_H_
