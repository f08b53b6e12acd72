// The embedding layer and the encoder block (bert, roberta, distilbert).
#include "analytic/parts.h"

namespace remat::analytic {

T Embedding(Builder& B, const T& ids, const T* after) {
  const ModelConfig& c = B.config();
  const int64_t h = c.hidden, V = c.vocab, n = B.tokens();
  const int stream = B.dt().stream;
  T x = B.Tensor("token_embeddings", B.Mul({n, h}), stream);
  std::vector<T> in = {ids};
  if (after != nullptr) in.push_back(*after);
  // Its backward computes a dense V x h gradient (the op's gradient_bytes).
  // Tied to the head's weight, it is summed out of place: autograd holds the
  // head's gradient of the shared weight in the weight's input buffer (the
  // head's backward ran first) and adds the embedding's to it with
  // `old + new` (InputBuffer::accumulate; the head's gradient is a view of
  // its mm's output, which it does not add into in place), before
  // AccumulateGrad takes the sum: a second V x h transient.
  // Vocab-parallel (TensorSplit): each rank looks up its rows of the
  // vocabulary and the ranks reduce the sum (scatter it under sequence
  // parallelism); the tied gradient sum is of its rows.
  const int64_t t = B.split().ranks;
  const int64_t tied_sum = TiedHead(c) ? B.Mul({(V + t - 1) / t, h, B.dt().param}) : 0;
  B.ParameterTensors({{V, h}});
  B.Op("wte", in, {x}, {ids}, 0, 1.0, B.Mul({V, h}), tied_sum);
  x = B.ScatterSequence("wte", x);
  if (c.architecture == Architecture::kLlama) return x;
  // Learned positions (and token types) broadcast over the batch. RoBERTa's
  // position offset (padding_idx + 1) only sizes its table: max_position rows.
  const bool bert = c.architecture == Architecture::kBert;
  const int64_t positions = B.split().sequence ? c.seq_len / t : c.seq_len;
  T pos = B.Tensor("position_embeddings", B.Mul({positions, h}), stream);
  const int64_t rows = c.max_position + (bert ? c.type_vocab : 0);
  // BERT's position and token-type tables are two tensors.
  B.ParameterTensors(bert ? std::vector<std::vector<int64_t>>{{c.max_position, h},
                                                               {c.type_vocab, h}}
                          : std::vector<std::vector<int64_t>>{{rows, h}});
  B.Op("wpe", {}, {pos}, {}, 0, 1.0, B.Mul({rows, h}));
  x = B.Add("add_positions", x, pos);
  if (bert) x = B.LayerNorm("embedding_norm", x, h);
  return B.Dropout("embedding_dropout", x);
}

// HF BertLayer: separate q, k, v projections, attention, output dense +
// dropout + residual + LayerNorm, then the MLP with the same epilogue.
T BertBlock(Builder& B, const T& x) {
  const ModelConfig& c = B.config();
  const int64_t h = c.hidden, f = c.ffn_hidden;
  const AttentionShape shape{c.heads, c.heads, c.head_dim, false};
  // The residual dropouts and eager attention's keep no mask under the
  // "dropout_mask" options (as a decoder block's; not SDPA's math path).
  B.DropoutMask(true);
  T q = B.Projection("q_proj", x, h, h, true, kLoraQ);
  T k = B.Projection("k_proj", x, h, h, true, kLoraK);
  T v = B.Projection("v_proj", x, h, h, true, kLoraV);
  T ctx = B.Attention(q, k, v, shape);
  T o = B.Dropout("resid_dropout1", B.Projection("attn_proj", ctx, h, h, true, kLoraO));
  // Post-LN: ln1's output is fc1's input and the second residual's; the
  // "norm_output" option drops what fc1 keeps of it (and ln1's statistics)
  // and keeps ln1's input, which ln1 keeps anyway. ln2's output is the
  // block's output, the chain's boundary: nothing of it to drop (see
  // docs/solver.md, "Selective options").
  T r1 = B.Add("residual1", x, o);
  B.NormOutput(true);
  T y1 = B.LayerNorm("ln1", r1, h);
  B.NormOutput(false);
  T fc1 = B.Projection("fc1", y1, h, f, true, kLoraUp);
  B.MlpActivation(true);
  T u = B.Pointwise("gelu", fc1, 8.0);
  B.MlpActivation(false);
  // The runtime's block (as HF's hidden_states) holds each output in one
  // variable, reassigned only once the next statement has run: the
  // attention's dropped output until GELU's, GELU's (with LoRA, where the
  // frozen fc2 keeps nothing of it) until the second dropout's, and that
  // and y1 until the block returns. Without LoRA the variable lets GELU's
  // output go once fc2 has run, and under mlp_activation the runtime's
  // function makes and frees it inside.
  B.HoldInLastOp({o});
  T w = B.Dropout("resid_dropout2", B.Projection("fc2", u, f, h, true, kLoraDown));
  if (c.lora_rank > 0) B.HoldInLastOp({u});
  T out = B.LayerNorm("ln2", B.Add("residual2", y1, w), h);
  B.HoldInLastOp({y1, w, ctx});  // ctx: the executor's, through the epilogue
  B.DropoutMask(false);
  return out;
}

}  // namespace remat::analytic
