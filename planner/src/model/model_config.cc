// The defaults of a ModelConfig and the quantities derived from it (the
// gradient convention, the sequences and forward passes per micro-batch).
// Its names, parsing, validation and JSON form are in model_config_*.cc.
#include "remat/model/model_config.h"

#include <algorithm>

namespace remat {
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

bool HasLlamaVariant(const ModelConfig& c) {
  return c.activation != Activation::kSilu || c.qk_norm || c.gemma_norms || c.embedding_scale ||
         c.attn_softcap > 0 || c.logit_softcap > 0 || c.fused_projections || c.sliding_window > 0 ||
         !c.sliding_layers.empty() || c.experts > 0;
}

}  // namespace remat
