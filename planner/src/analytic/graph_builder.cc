#include "analytic/graph_builder.h"

#include <algorithm>

#include "remat/precision.h"

namespace remat {

Dtypes DtypesFor(Precision p) {
  const PrecisionConvention& c = ConventionOf(p);
  if (c.autocast) return {4, c.activation_bytes, 4, 4, c.weight_bytes, true};
  const int a = c.activation_bytes;
  return {a, a, a, a, c.weight_bytes, false};
}

Builder::Builder(const ModelConfig& c, const KernelDevice& device, TransformerGraph* out)
    : c_(c), device_(device), dt_(DtypesFor(c.precision)), out_(out) {
  sequences_ = Mul({c.micro_batch, c.texts_per_example});
  tokens_ = Mul({c.seq_len, sequences_});
}

// Sums the bytes of every tensor and workspace in the graph. The chain
// derivation adds up subsets of them (activations, workspace peaks), so a
// total within kMaxBytes means none of its int64 sums can overflow.
void Builder::Count(int64_t bytes) {
  total_bytes_ += CheckedInt(bytes);
  if (!total_bytes_.ok()) overflow_ = true;
}

void Builder::Layer(const std::string& tag, const std::string& kind) {
  layer_ = tag;
  out_->kinds.emplace_back(tag, kind);
}

int64_t Builder::Mul(std::initializer_list<int64_t> factors) {
  CheckedInt r(1);
  for (int64_t f : factors) r = r * CheckedInt(f);
  if (!r.ok()) {
    overflow_ = true;
    return 0;
  }
  return r.value();
}

T Builder::Tensor(const std::string& name, int64_t elems, int elem_bytes, bool requires_grad) {
  const int64_t bytes = Mul({elems, elem_bytes});
  Count(bytes);
  return T{out_->graph.AddTensor(layer_ + "." + name, bytes, requires_grad), elems, elem_bytes};
}

void Builder::Op(const std::string& name, const std::vector<T>& in, const std::vector<T>& outs,
                 const std::vector<T>& saved, double flops, double bwd_flops_factor, int64_t params,
                 int64_t bwd_workspace, bool core, bool trainable) {
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
  op.backward_flops = trainable ? flops * bwd_flops_factor : 0;
  op.backward_bytes = trainable ? 2 * bytes : 0;
  op.backward_workspace = trainable ? bwd_workspace : 0;
  op.parameters = params;
  op.trainable = trainable;
  op.attention_core = core;
  Count(bwd_workspace);
  parameters_ += CheckedInt(params);
  if (trainable) trainable_ += CheckedInt(params);
  if (!parameters_.ok() || !trainable_.ok()) overflow_ = true;
  out_->parameters = parameters_.ok() ? parameters_.value() : 0;
  out_->trainable_parameters = trainable_.ok() ? trainable_.value() : 0;
  out_->graph.AddOp(std::move(op));
}

T Builder::MatmulInput(const T& x, bool core) {
  if (!dt_.autocast || x.elem_bytes == dt_.matmul) return x;
  auto it = casts_.find(x.id);
  if (it != casts_.end()) return it->second;
  T y = Tensor("cast", x.elems, dt_.matmul);
  Op("cast", {x}, {y}, {}, static_cast<double>(x.elems), 1, 0, 0, core);
  casts_[x.id] = y;
  return y;
}

T Builder::Linear(const std::string& name, const T& x, int64_t in, int64_t outf, bool bias,
                  bool tied, bool trainable) {
  const T xin = MatmulInput(x);
  const int64_t weight = tied ? 0 : Mul({in, outf});
  const int64_t params = weight + (bias ? outf : 0);
  const int64_t rows = x.elems / in;
  T y = Tensor(name, Mul({rows, outf}), dt_.matmul, trainable);
  std::vector<T> saved = {xin};
  std::vector<T> outs = {y};
  if (dt_.autocast) {
    // The 16-bit copy of the weight is kept for backward too.
    T w = Tensor(name + ".weight_cast", Mul({in, outf}), dt_.matmul, false);
    outs.push_back(w);
    saved.push_back(w);
  }
  if (!trainable) saved.clear();  // its graph dies with the unused output
  const double flops = 2.0 * rows * in * outf;
  // Backward computes the weight gradient into a fresh tensor before
  // accumulating it into .grad.
  Op(name, {xin}, outs, saved, flops, 2.0, params, Mul({in, outf, dt_.param}), false, trainable);
  return y;
}

T Builder::LayerNorm(const std::string& name, const T& x, int64_t width) {
  T y = Tensor(name, x.elems, dt_.stream);
  // native_layer_norm keeps its input and, per row, the mean and rstd: fp32
  // on CUDA, in the input's dtype on CPU.
  const int64_t rows = x.elems / width;
  const int stat_bytes = device_.cpu ? x.elem_bytes : 4;
  T mean = Tensor(name + ".mean", rows, stat_bytes, false);
  T rstd = Tensor(name + ".rstd", rows, stat_bytes, false);
  Op(name, {x}, {y, mean, rstd}, {x, mean, rstd}, 5.0 * x.elems, 2.0, 2 * width);
  return y;
}

T Builder::RmsNorm(const std::string& name, const T& x, int64_t width) {
  const int64_t rows = x.elems / width;
  std::vector<T> outs, saved;
  T x32 = x;
  if (x.elem_bytes != 4) {
    x32 = Tensor(name + ".fp32", x.elems, 4);
    outs.push_back(x32);
  }
  T rstd = Tensor(name + ".rstd", rows, 4);
  T normalized = Tensor(name + ".normalized", x.elems, x.elem_bytes);
  T y = Tensor(name, x.elems, std::max(x.elem_bytes, dt_.param));
  outs.insert(outs.begin(), y);
  outs.push_back(rstd);
  outs.push_back(normalized);
  Op(name, {x}, outs, {x32, rstd, normalized}, 5.0 * x.elems, 2.0, width);
  return y;
}

T Builder::Dropout(const std::string& name, const T& x, bool core) {
  if (c_.dropout <= 0) return x;
  T y = Tensor(name, x.elems, x.elem_bytes);
  // CUDA's fused dropout keeps a bool mask; at::dropout on CPU multiplies by
  // a mask of the input's dtype and keeps that.
  T mask = Tensor(name + ".mask", x.elems, device_.cpu ? x.elem_bytes : 1, false);
  Op(name, {x}, {y, mask}, {mask}, 2.0 * x.elems, 1.0, 0, 0, core);
  return y;
}

T Builder::Add(const std::string& name, const T& a, const T& b) {
  T y = Tensor(name, a.elems, std::max(a.elem_bytes, b.elem_bytes));
  Op(name, {a, b}, {y}, {}, static_cast<double>(a.elems), 1.0);
  return y;
}

T Builder::Pointwise(const std::string& name, const T& x, double flops_per_elem, bool keeps_input,
                     int out_bytes) {
  T y = Tensor(name, x.elems, out_bytes > 0 ? out_bytes : x.elem_bytes);
  Op(name, {x}, {y}, keeps_input ? std::vector<T>{x} : std::vector<T>{}, flops_per_elem * x.elems,
     2.0);
  return y;
}

T Builder::FusedAttention(const T& q, const T& k, const T& v, int64_t ctx_elems, double qk_flops) {
  const int64_t s = c_.seq_len, b = sequences_, a = c_.heads;
  const T qc = MatmulInput(q, true), kc = MatmulInput(k, true), vc = MatmulInput(v, true);
  T ctx = Tensor("context", ctx_elems, dt_.matmul);
  // The softmax statistics backward needs: one fp32 logsumexp per row of
  // scores (PyTorch's flash and efficient SDPA kernels, CPU and CUDA).
  T lse = Tensor("logsumexp", Mul({a, s, b}), 4, false);
  std::vector<T> in = {qc};
  if (kc.id != qc.id) in.push_back(kc);
  if (vc.id != qc.id && vc.id != kc.id) in.push_back(vc);
  std::vector<T> saved = in;
  saved.push_back(ctx);
  saved.push_back(lse);
  Op("flash_attention", in, {ctx, lse}, saved, 2 * qk_flops, 2.5, 0, 0, true);
  return ctx;
}

T Builder::Attention(const T& q, const T& k, const T& v, const AttentionShape& shape) {
  const int64_t s = c_.seq_len, b = sequences_, a = shape.heads, d = shape.head_dim;
  const double qk_flops = 2.0 * b * s * s * a * d;
  const int64_t ctx_elems = Mul({s, b, a, d});
  // SDPA draws dropout in a fused kernel on CUDA only.
  const bool fused = c_.attention == AttentionImpl::kFlash ||
                     (c_.attention == AttentionImpl::kSdpa && !(device_.cpu && c_.dropout > 0));
  if (fused) return FusedAttention(q, k, v, ctx_elems, qk_flops);
  T kr = k, vr = v;
  if (shape.kv_heads != a) {
    // repeat_kv: expand + reshape copies each key/value head to its group.
    kr = Tensor("k_repeated", ctx_elems, k.elem_bytes);
    Op("repeat_k", {k}, {kr}, {}, 0, 1.0, 0, 0, true);
    vr = Tensor("v_repeated", ctx_elems, v.elem_bytes);
    Op("repeat_v", {v}, {vr}, {}, 0, 1.0, 0, 0, true);
  }
  T qc = MatmulInput(q, true), kc = MatmulInput(kr, true);
  const T vc = MatmulInput(vr, true);
  if (c_.attention == AttentionImpl::kSdpa) {
    // The math path scales q and k by sqrt(scale) each before q k^T, and
    // the matmul keeps the scaled copies.
    T qs = Tensor("q_scaled", qc.elems, qc.elem_bytes);
    Op("scale_q", {qc}, {qs}, {}, static_cast<double>(qc.elems), 1.0, 0, 0, true);
    T ks = Tensor("k_scaled", kc.elems, kc.elem_bytes);
    Op("scale_k", {kc}, {ks}, {}, static_cast<double>(kc.elems), 1.0, 0, 0, true);
    qc = qs;
    kc = ks;
  }
  const int64_t scores = Mul({a, s, s, b});
  T sc = Tensor("scores", scores, dt_.matmul);
  std::vector<T> qk = {qc};
  if (kc.id != qc.id) qk.push_back(kc);
  Op("scores", qk, {sc}, qk, qk_flops, 2.0, 0, 0, true);
  const bool sdpa = c_.attention == AttentionImpl::kSdpa;
  T masked = sc;  // SDPA's math path adds the mask in place
  if (!sdpa) {
    masked = Tensor("masked_scores", scores, dt_.matmul);
    Op("scale_mask", {sc}, {masked}, {}, 2.0 * scores, 1.0, 0, 0, true);
  }
  // HF's eager llama upcasts the softmax; SDPA's runs in the input dtype.
  const bool softmax_fp32 = shape.softmax_fp32 && !sdpa;
  T probs = Tensor("probs", scores, softmax_fp32 ? 4 : dt_.softmax);
  Op("softmax", {masked}, {probs}, {probs}, 5.0 * scores, 1.0, 0, 0, true);
  if (softmax_fp32 && q.elem_bytes != 4) {
    // .to(query.dtype): a copy, kept by what follows.
    T cast = Tensor("probs_cast", scores, q.elem_bytes);
    Op("probs_cast", {probs}, {cast}, {}, static_cast<double>(scores), 1.0, 0, 0, true);
    probs = cast;
  }
  T dropped = Dropout("attn_dropout", probs, true);
  const T pv = MatmulInput(dropped, true);
  T ctx = Tensor("context", ctx_elems, dt_.matmul);
  std::vector<T> in = {pv, vc};
  Op("attn_v", in, {ctx}, in, qk_flops, 2.0, 0, 0, true);
  return ctx;
}

}  // namespace remat
