// Decoder blocks: GPT-2 and the llama family (llama, mistral, qwen2).
#include "analytic/parts.h"

namespace remat::analytic {

T GptBlock(Builder& B, const T& x) {
  const ModelConfig& c = B.config();
  const int64_t h = c.hidden, f = c.ffn_hidden;
  const AttentionShape shape{B.RankHeads(c.heads), B.RankHeads(c.heads), c.head_dim, false};
  B.DropoutMask(true);
  B.NormOutput(true);
  T y1 = B.LayerNorm("ln1", x, h);
  B.NormOutput(false);
  // c_attn is one module: targeting q, k or v puts one adapter on it.
  T qkv = B.Projection("qkv", y1, h, 3 * h, true, kLoraQ | kLoraK | kLoraV, Split::kColumn);
  T ctx = B.Attention(qkv, qkv, qkv, shape);
  T o = B.Dropout("resid_dropout1", B.Projection("attn_proj", ctx, h, h, true, kLoraO, Split::kRow));
  T mid = B.Add("residual1", x, o);
  B.NormOutput(true);
  T y2 = B.LayerNorm("ln2", mid, h);
  B.HoldInLastOp({o});  // the runtime's variable, reassigned to ln2's output
  B.NormOutput(false);
  T fc1 = B.Projection("fc1", y2, h, f, true, kLoraUp, Split::kColumn);
  B.MlpActivation(true);
  T u = B.Pointwise("gelu", fc1, 8.0);
  B.MlpActivation(false);
  T w = B.Dropout("resid_dropout2", B.Projection("fc2", u, f, h, true, kLoraDown, Split::kRow));
  T out = B.Add("residual2", mid, w);
  B.HoldInLastOp({ctx});  // the executor's context, through the epilogue
  B.DropoutMask(false);
  return out;
}

// HF LlamaDecoderLayer. Rotary embeddings, q * cos + rotate_half(q) * sin,
// keep only cos and sin (the muls' constant operands, computed once per step
// and shared by every block, so not counted per block); their result is
// promoted to the dtype of cos/sin, the residual stream's. The softmax runs
// in fp32 and is cast back to the query's dtype.
T LlamaBlock(Builder& B, const T& x) {
  const ModelConfig& c = B.config();
  const int64_t h = c.hidden, f = c.ffn_hidden;
  const int64_t q_width = c.heads * c.head_dim, kv_width = c.kv_heads * c.head_dim;
  const int stream = B.dt().stream;
  const AttentionShape shape{B.RankHeads(c.heads), B.RankHeads(c.kv_heads), c.head_dim, true};
  B.DropoutMask(true);
  B.NormOutput(true);
  T y1 = B.RmsNorm("rms1", x, h);
  B.NormOutput(false);
  T q = B.Pointwise("rotary_q", B.Projection("q_proj", y1, h, q_width, c.qkv_bias, kLoraQ, Split::kColumn), 6.0,
                    false, stream);
  T k = B.Pointwise("rotary_k", B.Projection("k_proj", y1, h, kv_width, c.qkv_bias, kLoraK, Split::kColumn), 6.0,
                    false, stream);
  T v = B.Projection("v_proj", y1, h, kv_width, c.qkv_bias, kLoraV, Split::kColumn);
  T ctx = B.Attention(q, k, v, shape);
  T o = B.Dropout("resid_dropout1", B.Projection("o_proj", ctx, q_width, h, false, kLoraO, Split::kRow));
  T mid = B.Add("residual1", x, o);
  B.NormOutput(true);
  T y2 = B.RmsNorm("rms2", mid, h);
  B.NormOutput(false);
  // The MLP activation: silu and the product (not up_proj between them).
  T gate_in = B.Projection("gate_proj", y2, h, f, false, kLoraGate, Split::kColumn);
  B.MlpActivation(true);
  T gate = B.Pointwise("silu", gate_in, 5.0);
  B.MlpActivation(false);
  T up = B.Projection("up_proj", y2, h, f, false, kLoraUp, Split::kColumn);
  B.MlpActivation(true);
  T prod = B.Tensor("swiglu", gate.elems, gate.elem_bytes);
  // silu(gate) * up keeps each factor for the other's gradient.
  std::vector<T> kept;
  if (B.Grad(up)) kept.push_back(gate);
  if (B.Grad(gate)) kept.push_back(up);
  B.Op("swiglu", {gate, up}, {prod}, kept, static_cast<double>(gate.elems), 2.0);
  // The runtime's block (as HF's hidden_states) holds each output in one
  // variable, reassigned only once the next statement has run: the
  // attention's dropped output until the product, the product until the
  // second dropout's output, and y2 until the block returns.
  B.HoldInLastOp({o});
  B.MlpActivation(false);
  T w = B.Dropout("resid_dropout2", B.Projection("down_proj", prod, f, h, false, kLoraDown, Split::kRow));
  B.HoldInLastOp({prod});
  T out = B.Add("residual2", mid, w);
  B.HoldInLastOp({y2, ctx});  // ctx: the executor's, through the epilogue
  B.DropoutMask(false);
  return out;
}

}  // namespace remat::analytic
