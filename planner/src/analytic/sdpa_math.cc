// SDPA's math path: PyTorch 2.11's _scaled_dot_product_attention_math
// (aten/src/ATen/native/transformers/attention.cpp), op by op, on q, k and v
// as transformers and the runtime pass them: transposed views of
// (b, s, heads, d) projections. What it keeps for backward and what it holds
// while it runs were metered op by op with remat's CPU meter
// (bench/fidelity/sdpa_math_meter.py; docs/analytic-model.md, "SDPA's math path").
#include <algorithm>

#include "analytic/graph_builder.h"

namespace remat::analytic {

T Builder::SdpaMath(const T& q, const T& k, const T& v, const AttentionShape& shape) {
  const int64_t s = c_.seq_len, b = sequences_, a = shape.heads, d = shape.head_dim;
  const double qk_flops = 2.0 * b * s * s * a * d;
  const int64_t ctx_elems = Mul({s, b, a, d});
  const int64_t kv_elems = Mul({s, b, shape.kv_heads, d});
  const int64_t scores = Mul({a, s, s, b});
  // SDPA takes its inputs as autocast casts them. q, k and v may be one fused
  // projection (gpt's qkv): each op below reads q (a heads) or k or v alone.
  const T qc = MatmulInput(q, true), kc = MatmulInput(k, true), vc = MatmulInput(v, true);
  const int in_bytes = qc.elem_bytes;
  const int acc = std::max(in_bytes, 4);  // 16-bit inputs are computed in fp32
  auto copy = [&](const std::string& name, const T& x, int64_t elems, int bytes) {
    T y = Tensor(name, elems, bytes);
    Op(name, {x}, {y}, {}, static_cast<double>(elems), 1.0, 0, 0, true);
    return y;
  };
  // The function's locals, held until it returns.
  std::vector<T> locals;
  // query_acc, key_acc, value_acc: 16-bit inputs cast to fp32 (to() keeps
  // their layout); 32-bit ones are the inputs themselves.
  T q32 = qc, k32 = kc, v32 = vc;
  if (in_bytes < acc) {
    q32 = copy("q_fp32", qc, ctx_elems, acc);
    k32 = copy("k_fp32", kc, kv_elems, acc);
    v32 = copy("v_fp32", vc, kv_elems, acc);
    locals = {q32, k32, v32};
  }
  // query = query_acc * sqrt(scale), in the projection's layout.
  const T qs = copy("q_scaled", q32, ctx_elems, acc);
  locals.push_back(qs);
  // GQA (pre_process_group_query_attention_input): repeat_interleave copies
  // each key/value head to its group, contiguous (b, a, s, d).
  const bool repeated = shape.kv_heads != a;
  T kx = k32, vx = v32;
  if (repeated) {
    kx = copy("k_repeated", k32, ctx_elems, acc);
    vx = copy("v_repeated", v32, ctx_elems, acc);
    locals.push_back(kx);
    locals.push_back(vx);
  }
  // matmul(query, key^T * sqrt(scale)): the scaled k^T is a temporary of the
  // statement; matmul folds the (b, a, s, d) operands to (b*a, s, d), which
  // copies what is not contiguous in that order (q always; k and v unless
  // repeated), and bmm keeps the folded operands.
  const T ks = copy("k_scaled", kx, ctx_elems, acc);
  const T qm = copy("q_contiguous", qs, ctx_elems, acc);
  const T km = repeated ? ks : copy("k_contiguous", ks, ctx_elems, acc);
  T sc = Tensor("scores", scores, acc);
  std::vector<T> qk_saved;
  if (Grad(km)) qk_saved.push_back(qm);
  if (Grad(qm)) qk_saved.push_back(km);
  Op("scores", {qm, km}, {sc}, qk_saved, qk_flops, 2.0, 0, 0, true);
  if (!repeated) HoldInLastOp({ks});
  // _safe_softmax keeps its output; within it, a bool mask of the -inf
  // scores and one of the rows that are all -inf.
  T probs = Tensor("probs", scores, acc);
  Op("softmax", {sc}, {probs}, {probs}, 5.0 * scores, 1.0, 0, 0, true);
  HoldInLastOp({}, scores + Mul({b, a, s}));
  // attn, the (dropped) probabilities, is a local too.
  // Its mask is made inside the ATen op, which keeps it: not the
  // "dropout_mask" option's (DropoutMask).
  const bool marking = dropout_mask_;
  dropout_mask_ = false;
  const T dropped = Dropout("attn_dropout", probs, true);
  dropout_mask_ = marking;
  locals.push_back(dropped);
  // return make_tuple(matmul(attn, value).to(dtype), attn.to(dtype)): the
  // arguments are evaluated last to first, so a 16-bit input's probabilities
  // are copied first (returned, then dropped by the caller).
  if (in_bytes < acc) locals.push_back(copy("probs_copy", dropped, scores, in_bytes));
  const T vm = repeated ? vx : copy("v_contiguous", vx, kv_elems, acc);
  std::vector<T> pv_saved;
  if (Grad(vm)) pv_saved.push_back(dropped);
  if (Grad(dropped)) pv_saved.push_back(vm);
  T ctx = Tensor(in_bytes < acc ? "context_fp32" : "context", ctx_elems, acc);
  Op("attn_v", {dropped, vm}, {ctx}, pv_saved, qk_flops, 2.0, 0, 0, true);
  if (in_bytes < acc) ctx = copy("context", ctx, ctx_elems, in_bytes);
  HoldInLastOp(locals);
  // Laid out (b, a, s, d): merging the heads copies it (the fused kernels'
  // outputs are laid out (b, s, a, d), merged as a view).
  return MergeHeads(ctx);
}

}  // namespace remat::analytic
