// The op graph of a transformer training step, tensor by tensor: the
// embedding, the blocks of the architecture, the final norm of decoders, the
// head and the loss (graph_builder.h says what each op keeps).
#include "analytic/transformer_graph.h"

#include "analytic/parts.h"
#include "remat/model/precision.h"
#include "remat/profile/profile.h"

namespace remat::analytic {

std::string TensorSplitError(const ModelConfig& c, const TensorSplit& split) {
  const int64_t t = split.ranks;
  if (t < 1) return "the tensor-parallel degree must be at least 1, got " + std::to_string(t);
  if (t == 1) return "";
  const std::string at = "tensor parallelism over " + std::to_string(t) + " ranks: ";
  const bool variant = c.architecture == Architecture::kLlama && HasLlamaVariant(c);
  if (c.architecture == Architecture::kBert || variant || c.head != Head::kLm ||
      TextPasses(c) > 1) {
    return at + "modeled for gpt and llama decoders (llama, mistral, qwen2) with an lm head";
  }
  if (c.lora_rank > 0) return at + "not modeled with LoRA adapters";
  if (c.loss_chunks != 0) return at + "not modeled with a chunked loss (--chunked-loss)";
  const auto divides = [&](const char* what, int64_t n) -> std::string {
    if (n % t == 0) return "";
    return at + "it must divide " + what + " (" + std::to_string(n) + ")";
  };
  for (const std::string& e :
       {divides("heads", c.heads), divides("kv_heads", c.kv_heads),
        divides("ffn_hidden", c.ffn_hidden),
        split.sequence ? divides("seq_len under sequence parallelism", c.seq_len) : ""}) {
    if (!e.empty()) return e;
  }
  return "";
}

Result<TransformerGraph> BuildTransformerGraph(const ModelConfig& config,
                                               const KernelDevice& device,
                                               const TensorSplit& split) {
  const ModelConfig c = WithDefaults(config);
  const std::string split_error = TensorSplitError(c, split);
  if (!split_error.empty()) return Status::Invalid(c.name + ": " + split_error);
  TransformerGraph out;
  Builder B(c, device, &out, split);

  // The batch, the chain's x[0]: token ids and targets (next tokens, MLM
  // labels, a class label in each text's first column; unused by mnrl),
  // (2, texts, seq) int64, as the runtime feeds it (a Hugging Face batch's
  // input_ids and labels are as large).
  const int64_t all_tokens = B.Mul({2, B.tokens()});
  T tokens;
  // With several passes (sentence-transformers' mnrl: anchors, positives,
  // negatives encoded separately) the layers repeat per pass, "p1.embedding"
  // .. "p<T>.head"; each pass's head hands a 0-byte boundary to the next
  // pass's embedding, which reads its ids from the batch, and its pooled
  // embeddings skip to the loss.
  const int passes = TextPasses(c);
  std::vector<T> earlier_passes;
  T x, boundary;
  for (int pass = 0; pass < passes; ++pass) {
    const std::string prefix = passes > 1 ? "p" + std::to_string(pass + 1) + "." : "";
    if (passes > 1) B.BeginPass(pass);
    B.Layer(prefix + "embedding", kEmbeddingKind);
    if (pass == 0) tokens = B.Tensor("tokens", all_tokens, 8, false);
    x = Embedding(B, tokens, pass > 0 ? &boundary : nullptr);
    if (c.embedding_scale) x = ScaleEmbedding(B, x);
    const bool variant = c.architecture == Architecture::kLlama && HasLlamaVariant(c);

    for (int64_t i = 0; i < c.layers; ++i) {
      B.Layer(prefix + "block" + std::to_string(i), kBlockKind);
      switch (c.architecture) {
        case Architecture::kGpt:
          x = GptBlock(B, x);
          break;
        case Architecture::kBert:
          x = BertBlock(B, x);
          break;
        case Architecture::kLlama:
          x = variant ? VariantBlock(B, x, i) : LlamaBlock(B, x);
          break;
      }
      // Room for the rest of the blocks as large as the first, and as much
      // again for the head and loss (a capacity only).
      if (i == 0 && pass == 0) {
        const size_t tensors = out.graph.tensors().size(), ops = out.graph.ops().size();
        const size_t blocks = static_cast<size_t>(c.layers) * static_cast<size_t>(passes);
        out.graph.Reserve(tensors * (blocks + 1), ops * (blocks + 1));
      }
    }

    if (c.architecture != Architecture::kBert) {
      B.Layer(prefix + "final_norm", kNormKind);
      x = c.architecture == Architecture::kLlama ? VariantNorm(B, "norm", x, c.hidden)
                                                 : B.LayerNorm("norm", x, c.hidden);
    }
    B.Layer(prefix + "head", kHeadKind);
    x = AddHead(B, x);
    // The chunked loss soft-caps each chunk itself (heads.cc ChunkedLmLoss).
    if (c.head == Head::kLm && c.loss_chunks == 0) x = SoftCapLogits(B, x, c.logit_softcap);
    if (pass + 1 < passes) {
      earlier_passes.push_back(x);
      boundary = B.Tensor("next_pass", 0, 8, false);
      B.Op("next_pass", {}, {boundary}, {}, 0, 1.0);
    }
  }
  B.Layer("loss", kLossKind);
  AddLoss(B, x, earlier_passes);

  if (c.architecture != Architecture::kBert) {
    // transformers makes these once per forward and hands them to every
    // block, so a recomputed block keeps them to its backward: eager
    // attention's causal mask (masking_utils.eager_mask: (sequences, 1, s,
    // s) in the embeddings' dtype; the fused kernels mask themselves), and
    // a rotary decoder's position ids ((1, s) int64) with the cos and sin
    // made from them ((1, s, head_dim) each, in the embeddings' dtype).
    const int64_t element = ConventionOf(c.precision).weight_bytes;
    const int64_t s = c.seq_len;
    const int64_t mask =
        c.attention == AttentionImpl::kEager ? B.Mul({B.sequences(), s, s, element}) : 0;
    const int64_t rotary = c.architecture == Architecture::kLlama
                               ? B.Mul({s, 8}) + B.Mul({s, 2 * c.head_dim, element})
                               : 0;
    out.buffer_bytes = mask + rotary;
  }

  if (B.overflow()) {
    return Status::Invalid(
        c.name +
        ": the model's byte counts overflow 64-bit arithmetic (seq_len * micro_batch * "
        "hidden or heads * seq_len^2 * micro_batch is absurdly large; the tensors of one step "
        "must add up to at most 4 EiB)");
  }
  return out;
}

}  // namespace remat::analytic
