// The op graph of a transformer training step, tensor by tensor: the
// embedding, the blocks of the architecture, the final norm of decoders, the
// head and the loss (graph_builder.h says what each op keeps).
#include "analytic/transformer_graph.h"

#include "analytic/parts.h"
#include "remat/profile.h"

namespace remat {

Result<TransformerGraph> BuildTransformerGraph(const ModelConfig& config,
                                               const KernelDevice& device) {
  const ModelConfig c = WithDefaults(config);
  TransformerGraph out;
  Builder B(c, device, &out);

  // Embedding: token ids (int64) in, the residual stream out.
  B.Layer("embedding", kEmbeddingKind);
  T x = Embedding(B, B.Tensor("tokens", B.tokens(), 8, false));

  for (int64_t i = 0; i < c.layers; ++i) {
    B.Layer("block" + std::to_string(i), kBlockKind);
    switch (c.architecture) {
      case Architecture::kGpt:
        x = GptBlock(B, x);
        break;
      case Architecture::kBert:
        x = BertBlock(B, x);
        break;
      case Architecture::kLlama:
        x = LlamaBlock(B, x);
        break;
    }
  }

  if (c.architecture != Architecture::kBert) {
    B.Layer("final_norm", kNormKind);
    x = c.architecture == Architecture::kLlama ? B.RmsNorm("norm", x, c.hidden)
                                               : B.LayerNorm("norm", x, c.hidden);
  }
  B.Layer("head", kHeadKind);
  x = AddHead(B, x);
  B.Layer("loss", kLossKind);
  AddLoss(B, x);

  if (B.overflow()) {
    return Status::Invalid(
        c.name +
        ": the model's byte counts overflow 64-bit arithmetic (seq_len * micro_batch * "
        "hidden or heads * seq_len^2 * micro_batch is absurdly large; the tensors of one step "
        "must add up to at most 4 EiB)");
  }
  return out;
}

}  // namespace remat
