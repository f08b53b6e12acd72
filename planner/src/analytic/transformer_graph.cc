// The op graph of a transformer training step, tensor by tensor.
//
// Saved tensors follow what PyTorch autograd keeps (Korthikanti et al. 2022,
// section 4): a linear keeps its input, GELU its input, softmax its output,
// dropout its 1-byte mask, LayerNorm its input; residual adds keep nothing.
// Under autocast (amp_*), matmul inputs and weights are cast to 16 bits and
// the casts are what the matmul keeps; LayerNorm, softmax and the loss run in
// fp32, as torch.autocast does.
#include "analytic/transformer_graph.h"

#include "remat/profile.h"

#include <map>

#include "remat/checked_math.h"

namespace remat {
namespace {

struct Dtypes {
  int stream;    // residual stream, embeddings, norm outputs
  int matmul;    // matmul inputs (after autocast) and outputs
  int softmax;   // attention probabilities
  int loss;      // log-probabilities
  int param;     // weights and their gradients
  bool autocast;
};

Dtypes DtypesFor(Precision p) {
  switch (p) {
    case Precision::kFp32: return {4, 4, 4, 4, 4, false};
    case Precision::kBf16:
    case Precision::kFp16: return {2, 2, 2, 2, 2, false};
    case Precision::kAmpBf16:
    case Precision::kAmpFp16: return {4, 2, 4, 4, 4, true};
  }
  return {4, 4, 4, 4, 4, false};
}

struct T {
  int id = -1;
  int64_t elems = 0;
  int elem_bytes = 0;
  double bytes() const { return static_cast<double>(elems) * elem_bytes; }
};

class Builder {
 public:
  Builder(const ModelConfig& c, TransformerGraph* out)
      : c_(c), dt_(DtypesFor(c.precision)), out_(out) {
    tokens_ = Mul({c.seq_len, c.micro_batch});
  }

  bool overflow() const { return overflow_; }

  // Sums the bytes of every tensor and workspace in the graph. The chain
  // derivation adds up subsets of them (activations, workspace peaks), so a
  // total within kMaxBytes means none of its int64 sums can overflow.
  void Count(int64_t bytes) {
    total_bytes_ += CheckedInt(bytes);
    if (!total_bytes_.ok()) overflow_ = true;
  }
  int64_t tokens() const { return tokens_; }
  void Layer(const std::string& tag, const std::string& kind) {
    layer_ = tag;
    out_->kinds.emplace_back(tag, kind);
  }

  int64_t Mul(std::initializer_list<int64_t> factors) {
    CheckedInt r(1);
    for (int64_t f : factors) r = r * CheckedInt(f);
    if (!r.ok()) {
      overflow_ = true;
      return 0;
    }
    return r.value();
  }

  T Tensor(const std::string& name, int64_t elems, int elem_bytes, bool requires_grad = true) {
    const int64_t bytes = Mul({elems, elem_bytes});
    Count(bytes);
    return T{out_->graph.AddTensor(layer_ + "." + name, bytes, requires_grad), elems, elem_bytes};
  }

  // Adds an op; forward/backward costs given as flops and bytes.
  void Op(const std::string& name, const std::vector<T>& in, const std::vector<T>& outs,
          const std::vector<T>& saved, double flops, double bwd_flops_factor,
          int64_t params = 0, int64_t bwd_workspace = 0, bool core = false) {
    OpInfo op;
    op.name = layer_ + "." + name;
    op.layer = layer_;
    double bytes = static_cast<double>(params) * dt_.param;
    for (const T& t : in) {
      op.inputs.push_back(t.id);
      bytes += t.bytes();
    }
    for (const T& t : outs) {
      op.outputs.push_back(t.id);
      bytes += t.bytes();
    }
    for (const T& t : saved) op.saved.push_back(t.id);
    op.forward_flops = flops;
    op.forward_bytes = bytes;
    op.backward_flops = flops * bwd_flops_factor;
    op.backward_bytes = 2 * bytes;
    op.backward_workspace = bwd_workspace;
    op.parameters = params;
    op.attention_core = core;
    Count(bwd_workspace);
    parameters_ += CheckedInt(params);
    if (!parameters_.ok()) overflow_ = true;
    out_->parameters = parameters_.ok() ? parameters_.value() : 0;
    out_->graph.AddOp(std::move(op));
  }

  // Casts `x` to the 16-bit matmul dtype under autocast (once per tensor).
  T MatmulInput(const T& x, bool core = false) {
    if (!dt_.autocast || x.elem_bytes == dt_.matmul) return x;
    auto it = casts_.find(x.id);
    if (it != casts_.end()) return it->second;
    T y = Tensor("cast", x.elems, dt_.matmul);
    Op("cast", {x}, {y}, {}, static_cast<double>(x.elems), 1, 0, 0, core);
    casts_[x.id] = y;
    return y;
  }

  T Linear(const std::string& name, const T& x, int64_t in, int64_t outf, bool bias,
           bool tied = false) {
    const T xin = MatmulInput(x);
    const int64_t weight = tied ? 0 : Mul({in, outf});
    const int64_t params = weight + (bias ? outf : 0);
    const int64_t rows = x.elems / in;
    T y = Tensor(name, Mul({rows, outf}), dt_.matmul);
    std::vector<T> saved = {xin};
    std::vector<T> outs = {y};
    if (dt_.autocast) {
      // The 16-bit copy of the weight is kept for backward too.
      T w = Tensor(name + ".weight_cast", Mul({in, outf}), dt_.matmul, false);
      outs.push_back(w);
      saved.push_back(w);
    }
    const double flops = 2.0 * rows * in * outf;
    // Backward computes the weight gradient into a fresh tensor before
    // accumulating it into .grad.
    Op(name, {xin}, outs, saved, flops, 2.0, params, Mul({in, outf, dt_.param}));
    return y;
  }

  T Norm(const std::string& name, const T& x, int64_t width, bool rms) {
    T y = Tensor(name, x.elems, dt_.stream);
    Op(name, {x}, {y}, {x}, 5.0 * x.elems, 2.0, rms ? width : 2 * width);
    return y;
  }

  T Dropout(const std::string& name, const T& x, bool core = false) {
    if (c_.dropout <= 0) return x;
    T y = Tensor(name, x.elems, x.elem_bytes);
    T mask = Tensor(name + ".mask", x.elems, 1, false);
    Op(name, {x}, {y, mask}, {mask}, 2.0 * x.elems, 1.0, 0, 0, core);
    return y;
  }

  T Add(const std::string& name, const T& a, const T& b) {
    T y = Tensor(name, a.elems, std::max(a.elem_bytes, b.elem_bytes));
    Op(name, {a, b}, {y}, {}, static_cast<double>(a.elems), 1.0);
    return y;
  }

  // An elementwise op; GELU and SiLU keep their input for backward, rotary
  // embeddings need only their (constant) angles.
  T Pointwise(const std::string& name, const T& x, double flops_per_elem, bool keeps_input = true) {
    T y = Tensor(name, x.elems, x.elem_bytes);
    Op(name, {x}, {y}, keeps_input ? std::vector<T>{x} : std::vector<T>{},
       flops_per_elem * x.elems, 2.0);
    return y;
  }

  // softmax(q k^T / sqrt(d) + mask) (dropout) v, from q, k, v tensors.
  T Attention(const T& q, const T& k, const T& v) {
    const int64_t s = c_.seq_len, b = c_.micro_batch, a = c_.heads, h = c_.hidden;
    const double qk_flops = 2.0 * b * s * s * h;
    const T qc = MatmulInput(q, true), kc = MatmulInput(k, true), vc = MatmulInput(v, true);
    if (c_.attention == AttentionImpl::kFlash) {
      T ctx = Tensor("context", Mul({s, b, h}), dt_.matmul);
      std::vector<T> in = {qc};
      if (kc.id != qc.id) in.push_back(kc);
      if (vc.id != qc.id && vc.id != kc.id) in.push_back(vc);
      std::vector<T> saved = in;
      saved.push_back(ctx);
      Op("flash_attention", in, {ctx}, saved, 2 * qk_flops, 2.5, 0, 0, true);
      return ctx;
    }
    const int64_t scores = Mul({a, s, s, b});
    T sc = Tensor("scores", scores, dt_.matmul);
    std::vector<T> qk = {qc};
    if (kc.id != qc.id) qk.push_back(kc);
    Op("scores", qk, {sc}, qk, qk_flops, 2.0, 0, 0, true);
    T masked = Tensor("masked_scores", scores, dt_.matmul);
    Op("scale_mask", {sc}, {masked}, {}, 2.0 * scores, 1.0, 0, 0, true);
    T probs = Tensor("probs", scores, dt_.softmax);
    Op("softmax", {masked}, {probs}, {probs}, 5.0 * scores, 1.0, 0, 0, true);
    T dropped = Dropout("attn_dropout", probs, true);
    const T pv = MatmulInput(dropped, true);
    T ctx = Tensor("context", Mul({s, b, h}), dt_.matmul);
    std::vector<T> in = {pv, vc};
    Op("attn_v", in, {ctx}, in, qk_flops, 2.0, 0, 0, true);
    return ctx;
  }

  const Dtypes& dt() const { return dt_; }

 private:
  const ModelConfig& c_;
  Dtypes dt_;
  TransformerGraph* out_;
  std::string layer_;
  int64_t tokens_ = 0;
  bool overflow_ = false;
  CheckedInt total_bytes_{0};
  CheckedInt parameters_{0};
  std::map<int, T> casts_;
};

}  // namespace

Result<TransformerGraph> BuildTransformerGraph(const ModelConfig& c) {
  TransformerGraph out;
  Builder B(c, &out);
  const int64_t h = c.hidden, f = c.ffn_hidden, V = c.vocab, n = B.tokens();
  const bool gpt = c.architecture == Architecture::kGpt;
  const bool bert = c.architecture == Architecture::kBert;
  const bool llama = c.architecture == Architecture::kLlama;
  const int stream = B.dt().stream;

  // Embedding: token ids (int64) in, the residual stream out.
  B.Layer("embedding", kEmbeddingKind);
  T ids = B.Tensor("tokens", n, 8, false);
  T x = B.Tensor("token_embeddings", B.Mul({n, h}), stream);
  B.Op("wte", {ids}, {x}, {ids}, 0, 1.0, B.Mul({V, h}), B.Mul({V, h, B.dt().param}));
  if (!llama) {
    // Learned positions (and RoBERTa's single token-type row) broadcast over the batch.
    T pos = B.Tensor("position_embeddings", B.Mul({c.seq_len, h}), stream);
    const int64_t rows = c.max_position + (bert ? 1 : 0);
    B.Op("wpe", {}, {pos}, {}, 0, 1.0, B.Mul({rows, h}));
    x = B.Add("add_positions", x, pos);
    if (bert) x = B.Norm("embedding_norm", x, h, false);
    x = B.Dropout("embedding_dropout", x);
  }

  for (int64_t i = 0; i < c.layers; ++i) {
    B.Layer("block" + std::to_string(i), kBlockKind);
    if (gpt) {
      T y1 = B.Norm("ln1", x, h, false);
      T qkv = B.Linear("qkv", y1, h, 3 * h, true);
      T ctx = B.Attention(qkv, qkv, qkv);
      T o = B.Dropout("resid_dropout1", B.Linear("attn_proj", ctx, h, h, true));
      T mid = B.Add("residual1", x, o);
      T y2 = B.Norm("ln2", mid, h, false);
      T u = B.Pointwise("gelu", B.Linear("fc1", y2, h, f, true), 8.0);
      T w = B.Dropout("resid_dropout2", B.Linear("fc2", u, f, h, true));
      x = B.Add("residual2", mid, w);
    } else if (bert) {
      T qkv = B.Linear("qkv", x, h, 3 * h, true);
      T ctx = B.Attention(qkv, qkv, qkv);
      T o = B.Dropout("resid_dropout1", B.Linear("attn_proj", ctx, h, h, true));
      T y1 = B.Norm("ln1", B.Add("residual1", x, o), h, false);
      T u = B.Pointwise("gelu", B.Linear("fc1", y1, h, f, true), 8.0);
      T w = B.Dropout("resid_dropout2", B.Linear("fc2", u, f, h, true));
      x = B.Norm("ln2", B.Add("residual2", y1, w), h, false);
    } else {
      T y1 = B.Norm("rms1", x, h, true);
      T q = B.Pointwise("rotary_q", B.Linear("q_proj", y1, h, h, false), 6.0, false);
      T k = B.Pointwise("rotary_k", B.Linear("k_proj", y1, h, h, false), 6.0, false);
      T v = B.Linear("v_proj", y1, h, h, false);
      T ctx = B.Attention(q, k, v);
      T o = B.Dropout("resid_dropout1", B.Linear("o_proj", ctx, h, h, false));
      T mid = B.Add("residual1", x, o);
      T y2 = B.Norm("rms2", mid, h, true);
      T gate = B.Pointwise("silu", B.Linear("gate_proj", y2, h, f, false), 5.0);
      T up = B.Linear("up_proj", y2, h, f, false);
      T prod = B.Tensor("swiglu", gate.elems, gate.elem_bytes);
      B.Op("swiglu", {gate, up}, {prod}, {gate, up}, static_cast<double>(gate.elems), 2.0);
      T w = B.Dropout("resid_dropout2", B.Linear("down_proj", prod, f, h, false));
      x = B.Add("residual2", mid, w);
    }
  }

  if (!bert) {
    B.Layer("final_norm", kNormKind);
    x = B.Norm("norm", x, h, llama);
  }
  B.Layer("head", kHeadKind);
  if (bert) {
    T d = B.Pointwise("gelu", B.Linear("dense", x, h, h, true), 8.0);
    x = B.Norm("norm", d, h, false);
  }
  T logits = B.Linear("lm_head", x, h, V, bert, c.tie_embeddings);

  B.Layer("loss", kLossKind);
  T lin = logits;
  if (B.dt().autocast) {
    lin = B.Tensor("logits_fp32", logits.elems, 4);
    B.Op("cast", {logits}, {lin}, {}, static_cast<double>(logits.elems), 1.0);
  }
  T logp = B.Tensor("log_probs", logits.elems, B.dt().loss);
  B.Op("log_softmax", {lin}, {logp}, {logp}, 5.0 * logits.elems, 1.0);
  T loss = B.Tensor("loss", 1, 4);
  B.Op("nll", {logp}, {loss}, {}, static_cast<double>(n), 1.0);

  if (B.overflow()) {
    return Status::Invalid(
        c.name + ": the model's byte counts overflow 64-bit arithmetic (seq_len * micro_batch * "
        "hidden or heads * seq_len^2 * micro_batch is absurdly large; the tensors of one step "
        "must add up to at most 4 EiB)");
  }
  return out;
}

}  // namespace remat
