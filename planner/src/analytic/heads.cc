// Heads and losses: lm, mlm, pooling (+ mnrl) and classification.
#include <algorithm>
#include <vector>

#include "analytic/parts.h"

namespace remat::analytic {
namespace {

// One token of every sequence (a view: keeps nothing, its backward needs
// only the shape). `requires_grad` false: no backward reaches it.
T SelectToken(Builder& B, const std::string& name, const T& x, bool requires_grad = true) {
  const int64_t h = B.config().hidden;
  T y = B.Tensor(name, B.Mul({B.sequences(), h}), x.elem_bytes, requires_grad);
  B.Op(name, {x}, {y}, {}, 0, 1.0);
  return y;
}

// BertPooler that AutoModel computes and nothing downstream reads: dense +
// tanh on the first token. Its graph is freed with its output, so it keeps
// nothing, has no backward, and its weights get no gradient.
void FrozenPooler(Builder& B, const T& x) {
  const int64_t h = B.config().hidden;
  T first = SelectToken(B, "pooler_first_token", x, /*requires_grad=*/false);
  T dense = B.Linear("pooler_dense", first, h, h, true, false, /*trainable=*/false);
  T out = B.Tensor("pooler_output", dense.elems, dense.elem_bytes, false);
  B.Op("pooler_tanh", {dense}, {out}, {}, 4.0 * dense.elems, 0, 0, 0, false, false);
}

// sentence-transformers' Pooling (v5+, pooling.py). Mean: the attention
// mask unsqueezed to (texts, s, 1) in the embeddings' dtype (kept by the
// multiply, which broadcasts it over the hidden size), the masked product
// (n x h, a transient), its sum over the tokens accumulated in fp32 (fp32
// for 16-bit embeddings, else their dtype), divided by the clamped fp32
// token count per text (kept by the division), the mean cast back to the
// embeddings' dtype. CLS: the first token.
T PoolTokens(Builder& B, const T& x) {
  const ModelConfig& c = B.config();
  if (c.pooling == Pooling::kCls) return SelectToken(B, "cls", x);
  const int64_t rows = B.Mul({B.sequences(), c.hidden});
  T mask = B.Tensor("mask", B.tokens(), x.elem_bytes, false);
  B.Op("mask", {}, {mask}, {}, 0, 1.0);
  // The product and its sum, one op here: the product's gradient is a
  // broadcast view of the sum's (no bytes), so in backward the sum's
  // gradient lives until the multiply has made x's.
  T masked = B.Tensor("masked", x.elems, x.elem_bytes, false);
  T sum = B.Tensor("masked_sum", rows, 4);
  B.Op("masked_sum", {x, mask}, {masked, sum}, {mask}, 2.0 * static_cast<double>(x.elems), 1.0);
  T count = B.Tensor("token_count", B.sequences(), 4, false);
  B.Op("token_count", {mask}, {count}, {}, static_cast<double>(B.tokens()), 1.0);
  T mean = B.Tensor("mean", rows, 4);
  B.Op("mean", {sum, count}, {mean}, {count}, static_cast<double>(rows), 1.0);
  if (x.elem_bytes == 4) return mean;
  T cast = B.Tensor("mean_cast", rows, x.elem_bytes);
  B.Op("mean_cast", {mean}, {cast}, {}, static_cast<double>(rows), 1.0);
  return cast;
}

// `made_targets`: the loss makes its int64 targets (mnrl's arange, a copy of
// the class-label column) rather than reading the batch's; nll_loss keeps
// them. Under autocast the logits are cast to fp32 (cross_entropy is on its
// fp32 list). `upcast`: 16-bit logits are cast to fp32 without autocast too,
// as the token losses users train with do (transformers' ForCausalLMLoss
// and ForMaskedLMLoss, torchtitan's cross_entropy_loss: logits.float()):
// the fp32 copy, its fp32 log-probabilities kept, the gradients fp32 until
// the cast's backward makes the logits' 16-bit gradient; the cast keeps
// nothing, so the 16-bit logits are not held by the loss.
T CrossEntropy(Builder& B, const T& logits, int64_t rows, bool made_targets, bool upcast) {
  T lin = logits;
  if (B.dt().autocast || (upcast && logits.elem_bytes < 4)) {
    lin = B.Tensor("logits_fp32", logits.elems, 4);
    B.Op("cast", {logits}, {lin}, {}, static_cast<double>(logits.elems), 1.0);
  }
  T logp = B.Tensor("log_probs", logits.elems, std::max(B.dt().loss, lin.elem_bytes));
  B.Op("log_softmax", {lin}, {logp}, {logp}, 5.0 * logits.elems, 1.0);
  T loss = B.Tensor("loss", 1, 4);
  std::vector<T> inputs = {logp}, saved;
  if (made_targets) {
    T targets = B.Tensor("targets", rows, 8, false);
    B.Op("targets", {}, {targets}, {}, 0, 1.0);
    inputs.push_back(targets);
    saved.push_back(targets);
  }
  B.Op("nll", inputs, {loss}, saved, static_cast<double>(rows), 1.0);
  return loss;
}

// F.normalize(x, dim=1): keeps x and, per row, the norm and its clamp.
T Normalize(Builder& B, const std::string& name, const T& x, int64_t rows) {
  T norms = B.Tensor(name + ".norms", 2 * rows, 4, false);
  B.Op(name + ".norms", {x}, {norms}, {}, 2.0 * x.elems, 2.0);
  T y = B.Tensor(name, B.Mul({rows, B.config().hidden}), x.elem_bytes);
  B.Op(name, {x, norms}, {y}, {x, norms}, 2.0 * y.elems, 2.0);
  return y;
}

// MultipleNegativesRankingLoss over the passes' embeddings, anchors (b x h)
// first, then the candidates: one pass of (t-1)b x h with merged columns
// (sentence-transformers 6: embeddings.reshape(...).unbind(0), then cat), or
// one b x h pass per column; candidates = cat(positives, negatives), a copy;
// scores = 20 * cos_sim(anchors, candidates), b x (t-1)b; cross-entropy with
// the matching positive as label.
T Mnrl(Builder& B, const std::vector<T>& reps) {
  const ModelConfig& c = B.config();
  const int64_t b = c.micro_batch, others = B.Mul({c.texts_per_example - 1, b});
  const T& anchors = reps.front();
  T cand = B.Tensor("candidates", B.Mul({others, c.hidden}), anchors.elem_bytes);
  B.Op("cat_candidates", std::vector<T>(reps.begin() + 1, reps.end()), {cand}, {}, 0, 1.0);
  T an = Normalize(B, "normalize_anchors", anchors, b);
  T cn = Normalize(B, "normalize_candidates", cand, others);
  const T a16 = B.MatmulInput(an), c16 = B.MatmulInput(cn);
  T sim = B.Tensor("similarity", B.Mul({b, others}), a16.elem_bytes);
  B.Op("similarity", {a16, c16}, {sim}, {a16, c16}, 2.0 * b * others * c.hidden, 2.0);
  T scaled = B.Tensor("scaled", sim.elems, sim.elem_bytes);
  B.Op("scale", {sim}, {scaled}, {}, static_cast<double>(sim.elems), 1.0);
  return CrossEntropy(B, scaled, b, /*made_targets=*/true, /*upcast=*/false);
}

// The LM head and its cross-entropy over ModelConfig::loss_chunks chunks
// of the n tokens (fused linear cross-entropy), as the runtime's
// ChunkedLmLoss runs it, one op: x (n x h) in; the mean loss and the
// gradient of x out, the gradient kept (scaled by the loss's gradient in
// backward, a new n x h tensor). Through the forward: the weight and x cast
// to the matmul dtype once (16-bit under autocast), the weight's gradient
// accumulated (in the weight's dtype; the head's backward hands it over as
// the parameter's gradient), and one chunk of m = ceil(n / chunks) rows at
// a time: its logits (m x V, matmul dtype), their fp32 copy (not with fp32
// logits), in which the gradient softmax - one_hot is made in place, that
// gradient cast to the matmul dtype (not in fp32), and, where the weight's
// dtype is not the matmul dtype, the chunk's weight gradient before it is
// added (V x h). With ModelConfig::logit_softcap c (Gemma 2's
// final_logit_softcapping) a chunk's fp32 logits z become t = tanh(z / c) in
// place (its matmul-dtype logits freed after the copy) and y = c * t a new
// fp32 chunk beside it, t kept until y's gradient (softmax - one_hot, made
// in place in y) is multiplied by c * dtanh = 1 - t^2 (made in place in t):
// two fp32 chunks (8 bytes an element) at once. Nothing of size n x V
// exists.
T ChunkedLmLoss(Builder& B, const T& x) {
  const ModelConfig& c = B.config();
  const int64_t h = c.hidden, V = c.vocab, n = B.tokens();
  const int64_t chunks = std::min(c.loss_chunks, n), m = (n + chunks - 1) / chunks;
  const int mdt = B.dt().matmul, param = B.dt().param;
  const bool trains = B.WeightsTrain();
  T loss = B.Tensor("loss", 1, 4);
  T grad_x = B.Tensor("chunked_loss.input_grad", x.elems, x.elem_bytes);
  const int64_t chunk_logits = B.Mul({m, V});
  const bool softcap = c.logit_softcap > 0;
  // Beside a chunk's logits, the rows' small tensors: the n targets' valid
  // mask (bool), then per chunk each row's target index (int64) and weight
  // (fp32); after the softmax's reductions each row's picked logit, max and
  // sum (fp32), and while the chunk's loss is summed the four fp32 row
  // temporaries of that one expression and their fp32 sum.
  const int64_t rows = B.Mul({m, 8 + 4}) + n;
  const int64_t reduced = rows + B.Mul({m, 3 * 4});
  const int64_t summing = reduced + B.Mul({m, 4 * 4}) + 4;
  // At the loss's sum: the fp32 logits (and t beside them, soft-capped);
  // at the cast of 16-bit logits: both; at a 16-bit weight gradient's
  // product before it is added: the chunk's gradient and that product.
  int64_t chunk_peak = B.Mul({chunk_logits, softcap ? 2 * 4 : 4}) + summing;
  if (mdt != 4) chunk_peak = std::max(chunk_peak, B.Mul({chunk_logits, mdt + 4}) + rows);
  if (trains && param != mdt) {
    chunk_peak =
        std::max(chunk_peak, B.Mul({chunk_logits, mdt}) + B.Mul({V, h, mdt}) + reduced);
  }
  int64_t workspace = chunk_peak;
  if (param != mdt) workspace += B.Mul({V, h, mdt});
  if (x.elem_bytes != mdt) workspace += B.Mul({n, h, mdt});
  if (trains) workspace += B.Mul({V, h, param});
  const double nvh = static_cast<double>(n) * V * h;
  // The soft-cap: / c, tanh (about 4), * c forward; 1 - t^2 and its product.
  const double flops =
      (trains ? 6.0 : 4.0) * nvh + (softcap ? 17.0 : 8.0) * static_cast<double>(n) * V;
  const double backward = static_cast<double>(x.elems + (trains ? V * h : 0));
  const bool tied = c.tie_embeddings;
  if (!tied) B.ParameterTensors({{V, h}});
  B.Op("chunked_lm_loss", {x}, {loss, grad_x}, {grad_x}, flops, backward / flops,
       tied ? 0 : B.Mul({V, h}), 0, false, true, tied && trains ? B.Mul({V, h}) : 0);
  B.HoldInLastOp({}, workspace);
  return loss;
}

}  // namespace

bool TiedHead(const ModelConfig& c) {
  return c.tie_embeddings && (c.head == Head::kLm || c.head == Head::kMlm);
}

T AddHead(Builder& B, const T& x) {
  const ModelConfig& c = B.config();
  const int64_t h = c.hidden, V = c.vocab;
  switch (c.head) {
    case Head::kMlm: {
      T d = B.Pointwise("gelu", B.Linear("dense", x, h, h, true), 8.0);
      T y = B.LayerNorm("norm", d, h);
      return B.Linear("lm_head", y, h, V, true, c.tie_embeddings);
    }
    case Head::kPooling:
      if (c.pooler) FrozenPooler(B, x);
      return PoolTokens(B, x);
    case Head::kClassification: {
      if (c.architecture != Architecture::kBert) {
        // GPT2/LlamaForSequenceClassification: score(last token), no bias.
        return B.Linear("score", SelectToken(B, "last_token", x), h, c.num_labels, false);
      }
      // BertForSequenceClassification: pooler (dense + tanh), dropout, classifier.
      T p = B.Linear("pooler_dense", SelectToken(B, "first_token", x), h, h, true);
      T t = B.Tensor("pooler_tanh", p.elems, p.elem_bytes);
      B.Op("pooler_tanh", {p}, {t}, {t}, 4.0 * p.elems, 2.0);
      return B.Linear("classifier", B.Dropout("dropout", t), h, c.num_labels, true);
    }
    case Head::kLm:
    case Head::kDefault:
      break;
  }
  if (c.loss_chunks > 0) return ChunkedLmLoss(B, x);
  // Vocab-parallel under tensor parallelism: each rank's logits are its
  // share of the vocabulary, and so are the loss's log-probabilities.
  return B.Linear("lm_head", x, h, V, false, c.tie_embeddings, true, Split::kColumn);
}

T AddLoss(Builder& B, const T& out, const std::vector<T>& earlier_passes) {
  const ModelConfig& c = B.config();
  if (c.loss == Loss::kMnrl) {
    std::vector<T> reps = earlier_passes;
    reps.push_back(out);
    return Mnrl(B, reps);
  }
  if (c.loss_chunks > 0) {  // the head made the loss: its gradient passes through
    T loss = B.Tensor("loss", 1, 4);
    B.Op("loss", {out}, {loss}, {}, 1.0, 1.0);
    return loss;
  }
  // The token losses (lm, mlm) upcast (ModelConfig::loss_upcast); sequence
  // classification's CrossEntropyLoss runs in the logits' dtype.
  const bool classes = c.head == Head::kClassification;
  return CrossEntropy(B, out, classes ? B.sequences() : B.tokens(), classes,
                      !classes && c.loss_upcast);
}

}  // namespace remat::analytic
