// The llama family's variants as transformers 5.24 runs them: gemma2 and
// gemma3 (Gemma's RMSNorm, three more norms a block, GeGLU, the embedding
// scale, soft-capping), qwen3 (q/k norms), phi3 (fused projections), and
// the mixtures of experts mixtral and qwen3_moe.
// Op by op after modeling_<type>.py; each tensor lives until its last
// reader, as Python frees a statement's temporaries (no executor holds).
#include <algorithm>
#include <functional>

#include "analytic/parts.h"

namespace remat::analytic {
namespace {

// Gemma2RMSNorm / Gemma3RMSNorm: x.float(), x * rsqrt(mean(x^2) + eps),
// times (1 + weight) in fp32, then type_as(x). Keeps the fp32 input (x
// itself when 32-bit), the rstd per row and, for a weight that trains, the
// normalized fp32 rows; the fp32 product of a 16-bit input is a transient.
T GemmaRmsNorm(Builder& B, const std::string& name, const T& x, int64_t width) {
  const int64_t rows = x.elems / width;
  T y = B.Tensor(name, x.elems, x.elem_bytes);
  std::vector<T> outs = {y};
  T x32 = x;
  if (x.elem_bytes != 4) {
    x32 = B.Tensor(name + ".fp32", x.elems, 4);
    outs.push_back(x32);
  }
  T rstd = B.Tensor(name + ".rstd", rows, 4);
  T normalized = B.Tensor(name + ".normalized", x.elems, 4);
  outs.push_back(rstd);
  outs.push_back(normalized);
  if (x.elem_bytes != 4) outs.push_back(B.Tensor(name + ".scaled", x.elems, 4));
  std::vector<T> saved = {x32, rstd};
  if (B.WeightsTrain()) saved.push_back(normalized);
  B.Op(name, {x}, outs, saved, 6.0 * x.elems, 2.0, width);
  return y;
}

// q * cos + rotate_half(q) * sin of `elems` elements read from `src` (a
// projection, or a view of the fused one): keeps only cos and sin, shared by
// every block; the result takes their dtype, the residual stream's.
T Rotary(Builder& B, const std::string& name, const T& src, int64_t elems) {
  T y = B.Tensor(name, elems, B.dt().stream);
  B.Op(name, {src}, {y}, {}, 6.0 * elems, 2.0);
  return y;
}

// act(gate) * up of `rows` rows read from `gate_src`, with `up` made after
// the activation (act(gate(x)) * up(x)); a fused output is its own up. The
// activation keeps its input (its gate half keeps a fused output whole), the
// product both factors. `recomputable`: the "mlp_activation" option may
// recompute it (a dense MLP; the experts' product sits between two grouped
// GEMMs, which the runtime recomputes only as a whole: the "experts" option).
T GatedProduct(Builder& B, const T& gate_src, int64_t rows, int64_t f,
               const std::function<T()>& make_up, bool recomputable = true) {
  const bool gelu = B.config().activation == Activation::kGeluTanh;
  B.MlpActivation(recomputable);
  // silu and gelu(approximate="tanh") are one kernel each and keep their input.
  T act = B.Tensor(gelu ? "gelu_tanh" : "silu", B.Mul({rows, f}), gate_src.elem_bytes);
  B.Op(gelu ? "gelu_tanh" : "silu", {gate_src}, {act}, {gate_src},
       (gelu ? 8.0 : 5.0) * static_cast<double>(act.elems), 2.0);
  B.MlpActivation(false);
  const T up = make_up();
  B.MlpActivation(recomputable);
  T prod = B.Tensor(gelu ? "geglu" : "swiglu", act.elems, std::max(act.elem_bytes, up.elem_bytes));
  std::vector<T> kept;  // each factor for the other's gradient
  if (B.Grad(up)) kept.push_back(act);
  if (B.Grad(act)) kept.push_back(up);
  B.Op(gelu ? "geglu" : "swiglu", {act, up}, {prod}, kept, static_cast<double>(act.elems), 2.0);
  B.MlpActivation(false);
  return prod;
}

// A linear over stacked expert weights (E x outf x in) through
// transformers' grouped_mm: keeps its input for the weights' gradient.
// torch._grouped_mm is on no autocast list: it runs in its input's dtype
// (measured on CPU: amp_bf16 experts compute in fp32). `offsets`: the
// cumulative rows per expert (int32), which its backward keeps. `targeted`:
// LoRA adapts the stack (FoldedWeight of rank `rank`), whose folded weight
// the GEMM keeps with its input.
T GroupedLinear(Builder& B, const std::string& name, const T& x, const T& offsets, int64_t in,
                int64_t outf, bool targeted = false, int64_t rank = 0) {
  const ModelConfig& c = B.config();
  const int64_t rows = x.elems / in;
  std::vector<T> inputs = {x}, saved = {offsets};
  if (targeted) {
    const T w = B.FoldedWeight(name, c.experts, in, outf, rank);
    inputs.push_back(w);
    saved = {x, w};
  } else if (B.WeightsTrain()) {
    saved.push_back(x);
  }
  T y = B.Tensor(name, B.Mul({rows, outf}), x.elem_bytes);
  B.ParameterTensors({{c.experts, in, outf}});
  B.Op(name, inputs, {y}, saved, 2.0 * rows * in * outf, 2.0, B.Mul({c.experts, in, outf}));
  return y;
}

// The router's logits, x (n x h) -> n x E; under LoRA targeting the router
// an F.linear of x and the folded weight, which keeps both.
T RouterLogits(Builder& B, const T& y) {
  const ModelConfig& c = B.config();
  const int64_t h = c.hidden, E = c.experts;
  if (c.lora_rank == 0 || (c.lora_targets & kLoraRouter) == 0) {
    return B.Linear("router", y, h, E, false);
  }
  const T w = B.FoldedWeight("router", 1, h, E, c.lora_rank);
  const T x = B.MatmulInput(y);
  std::vector<T> inputs = {x, w}, saved = {x, w};
  if (B.dt().autocast) {  // the weight's 16-bit copy, kept in its place
    T cast = B.Tensor("router.weight_cast", w.elems, B.dt().matmul);
    B.Op("router.weight_cast", {w}, {cast}, {}, static_cast<double>(w.elems), 1.0);
    inputs[1] = saved[1] = cast;
  }
  const int64_t rows = y.elems / h;
  T logits = B.Tensor("router", B.Mul({rows, E}), B.dt().matmul);
  B.ParameterTensors({{E, h}});
  B.Op("router", inputs, {logits}, saved, 2.0 * rows * h * E, 2.0, B.Mul({h, E}));
  return logits;
}

// MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock with transformers' default
// experts implementation, grouped_mm (integrations/moe.py,
// grouped_mm_experts_forward), for n tokens and S = n * k routed rows:
// the router's fp32 probabilities (kept by softmax), top-k (its indices
// kept) renormalized in place (its input cloned and kept, with the n sums
// it divides by); the rows sorted
// by expert, gathered (hidden[perm // k], S x h, the index kept; the E
// offsets of the groups kept by both GEMMs) with their
// weights (S, perm kept); one grouped GEMM up (S x 2f, kept whole through
// the gate's view), the gated product, one grouped GEMM down (S x h),
// times the weights (both kept), unsorted (inv_perm kept) and summed over
// the k rows of each token. Every expert's rows are in the same GEMMs, so
// the memory does not depend on how evenly the router balances them.
// The dispatch, the experts and the combine are what the "experts" option
// recomputes (the router's outputs and y kept).
T ExpertsMlp(Builder& B, const T& y) {
  const ModelConfig& c = B.config();
  const int64_t h = c.hidden, E = c.experts, k = c.experts_per_token;
  const int64_t f = c.expert_ffn_hidden > 0 ? c.expert_ffn_hidden : c.ffn_hidden;
  const int64_t n = y.elems / h, S = B.Mul({n, k});
  const double sd = static_cast<double>(S);
  T logits = RouterLogits(B, y);
  T probs = B.Tensor("router_probs", B.Mul({n, E}), 4);
  B.Op("router_softmax", {logits}, {probs}, {probs}, 5.0 * static_cast<double>(probs.elems), 1.0);
  T top = B.Tensor("router_top_k", S, 4);
  T top_index = B.Tensor("router_indices", S, 8, false);
  T top_clone = B.Tensor("router_top_k.original", S, 4, false);
  // The renormalization's divisor (n x 1), kept by the in-place division.
  T top_sum = B.Tensor("router_top_k.sum", n, 4, false);
  B.Op("router_top_k", {probs}, {top, top_index, top_clone, top_sum},
       {top_index, top_clone, top_sum}, sd, 1.0);
  B.Experts(true);
  T rows_index = B.Tensor("dispatch_index", S, 8, false);
  T perm = B.Tensor("dispatch_perm", S, 8, false);
  T gathered = B.Tensor("dispatch", B.Mul({S, h}), y.elem_bytes);
  T offsets = B.Tensor("dispatch_offsets", E, 4, false);
  B.Op("dispatch", {y, top_index}, {gathered, rows_index, perm, offsets}, {rows_index}, sd * h,
       1.0);
  T weights = B.Tensor("dispatch_weights", S, top.elem_bytes);
  B.Op("dispatch_weights", {top, perm}, {weights}, {perm}, sd, 1.0);
  // LoRA on the experts: PEFT adapts the fused gate_up_proj with twice the
  // rank (one r for each of the two projections it fuses).
  const uint32_t targets = c.lora_rank > 0 ? c.lora_targets : 0;
  T gate_up = GroupedLinear(B, "experts_gate_up", gathered, offsets, h, 2 * f,
                            (targets & (kLoraGate | kLoraUp)) != 0, 2 * c.lora_rank);
  T prod = GatedProduct(B, gate_up, S, f, [&] { return gate_up; }, /*recomputable=*/false);
  T down = GroupedLinear(B, "experts_down", prod, offsets, f, h, (targets & kLoraDown) != 0,
                         c.lora_rank);
  T weighted = B.Tensor("combine_weights", down.elems, std::max(down.elem_bytes, weights.elem_bytes));
  B.Op("combine_weights", {down, weights}, {weighted}, {down, weights}, sd * h, 2.0);
  T inv_perm = B.Tensor("combine_perm", S, 8, false);
  T unsorted = B.Tensor("combine", weighted.elems, weighted.elem_bytes);
  B.Op("combine", {weighted, perm}, {unsorted, inv_perm}, {inv_perm}, sd * h, 1.0);
  T out = B.Tensor("combine_sum", y.elems, y.elem_bytes);
  B.Op("combine_sum", {unsorted}, {out}, {}, sd * h, 1.0);
  B.Experts(false);
  return out;
}

// The gated MLP: act(gate) * up, then down_proj. Phi-3's gate_up_proj is one
// output, chunked into views: the activation keeps its gate half, and so the
// whole output, which the product keeps again as its up half.
T GatedMlp(Builder& B, const T& y) {
  const ModelConfig& c = B.config();
  if (c.experts > 0) return ExpertsMlp(B, y);
  const int64_t h = c.hidden, f = c.ffn_hidden, rows = y.elems / h;
  T prod;
  if (c.fused_projections) {
    T gate_up = B.Projection("gate_up_proj", y, h, 2 * f, false, kLoraGate | kLoraUp);
    prod = GatedProduct(B, gate_up, rows, f, [&] { return gate_up; });
  } else {
    T gate = B.Projection("gate_proj", y, h, f, false, kLoraGate);
    prod = GatedProduct(B, gate, rows, f,
                        [&] { return B.Projection("up_proj", y, h, f, false, kLoraUp); });
  }
  return B.Projection("down_proj", prod, f, h, false, kLoraDown);
}

}  // namespace

T VariantNorm(Builder& B, const std::string& name, const T& x, int64_t width) {
  return B.config().gemma_norms ? GemmaRmsNorm(B, name, x, width) : B.RmsNorm(name, x, width);
}

T VariantBlock(Builder& B, const T& x, int64_t index) {
  const ModelConfig& c = B.config();
  const int64_t h = c.hidden, d = c.head_dim, rows = x.elems / h;
  const int64_t q_width = c.heads * d, kv_width = c.kv_heads * d;
  AttentionShape shape{c.heads, c.kv_heads, d, true};
  shape.softcap = c.attn_softcap;
  // A sliding layer as long as its window or longer gets an explicit mask
  // (under it, transformers' mask is the causal one, left to is_causal:
  // masking_utils._ignore_causal_mask_sdpa).
  const bool sliding = index < static_cast<int64_t>(c.sliding_layers.size()) &&
                       c.sliding_layers[static_cast<size_t>(index)];
  shape.masked = sliding && c.seq_len >= c.sliding_window;
  B.NormOutput(true);
  T y1 = VariantNorm(B, "input_norm", x, h);
  B.NormOutput(false);
  T q, k, v;
  if (c.fused_projections) {
    // qkv[..., :q], [q:q+kv], [q+kv:]: views of one output; v stays one.
    T qkv = B.Projection("qkv_proj", y1, h, q_width + 2 * kv_width, c.qkv_bias,
                         kLoraQ | kLoraK | kLoraV);
    q = Rotary(B, "rotary_q", qkv, B.Mul({rows, q_width}));
    k = Rotary(B, "rotary_k", qkv, B.Mul({rows, kv_width}));
    v = qkv;
  } else {
    q = B.Projection("q_proj", y1, h, q_width, c.qkv_bias, kLoraQ);
    k = B.Projection("k_proj", y1, h, kv_width, c.qkv_bias, kLoraK);
    v = B.Projection("v_proj", y1, h, kv_width, c.qkv_bias, kLoraV);
    if (c.qk_norm) {  // over each head's d channels, before the rotation
      q = VariantNorm(B, "q_norm", q, d);
      k = VariantNorm(B, "k_norm", k, d);
    }
    q = Rotary(B, "rotary_q", q, q.elems);
    k = Rotary(B, "rotary_k", k, k.elems);
  }
  T ctx = B.Attention(q, k, v, shape);
  // No residual dropout (the model's dropout is the attention's).
  T o = B.Projection("o_proj", ctx, q_width, h, false, kLoraO);
  if (c.gemma_norms) o = GemmaRmsNorm(B, "post_attention_norm", o, h);
  T mid = B.Add("residual1", x, o);
  B.NormOutput(true);
  T y2 = VariantNorm(B, c.gemma_norms ? "pre_feedforward_norm" : "post_attention_norm", mid, h);
  B.NormOutput(false);
  T w = GatedMlp(B, y2);
  if (c.gemma_norms) w = GemmaRmsNorm(B, "post_feedforward_norm", w, h);
  T out = B.Add("residual2", mid, w);
  return out;
}

T ScaleEmbedding(Builder& B, const T& x) {
  // * embed_scale.to(weight dtype): a 0-dim buffer, the only thing kept.
  return B.Pointwise("embed_scale", x, 1.0, false);
}

T SoftCapLogits(Builder& B, const T& logits, double cap) {
  if (cap <= 0) return logits;
  const double n = static_cast<double>(logits.elems);
  // logits / cap, tanh (keeps its output), * cap: each a new tensor.
  T div = B.Tensor("softcap_div", logits.elems, logits.elem_bytes);
  B.Op("softcap_div", {logits}, {div}, {}, n, 1.0);
  T th = B.Tensor("softcap_tanh", logits.elems, logits.elem_bytes);
  B.Op("softcap_tanh", {div}, {th}, {th}, 4.0 * n, 1.0);
  T out = B.Tensor("softcap_mul", logits.elems, logits.elem_bytes);
  B.Op("softcap_mul", {th}, {out}, {}, n, 1.0);
  return out;
}

}  // namespace remat::analytic
