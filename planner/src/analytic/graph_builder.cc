#include "analytic/graph_builder.h"

#include <algorithm>

#include "analytic/lora.h"
#include "analytic/sdpa_backend.h"
#include "remat/model/precision.h"
#include "remat/profile/profile.h"

namespace remat::analytic {

Dtypes DtypesFor(Precision p) {
  const PrecisionConvention& c = ConventionOf(p);
  if (c.autocast) return {4, c.activation_bytes, 4, 4, c.weight_bytes, true};
  const int a = c.activation_bytes;
  return {a, a, a, a, c.weight_bytes, false};
}

Builder::Builder(const ModelConfig& c, const KernelDevice& device, TransformerGraph* out,
                 const TensorSplit& split)
    : c_(c), device_(device), dt_(DtypesFor(c.precision)), out_(out), split_(split) {
  sequences_ = Mul({c.micro_batch, c.texts_per_example});
  tokens_ = Mul({c.seq_len, sequences_});
  // CPU autocast's policy, unlike CUDA's, has no fp32 entry for softmax: it
  // runs in its input's dtype, the 16-bit scores (torch 2.11, measured), so
  // its probabilities and dropout mask are 16-bit and need no cast back.
  if (dt_.autocast && device.cpu) dt_.softmax = dt_.matmul;
  lora_bytes_ = LoraWeightBytes(c);
}

bool Builder::Grad(const T& t) const {
  if (t.id < 0) return false;
  const TensorInfo& info = out_->graph.tensors()[t.id];
  // A tensor the model gives no gradient bytes (the masked product of mean
  // pooling, whose gradient is a view) still carries the flow when the op
  // that made it records a node.
  return info.requires_grad || (info.producer >= 0 && records_[info.producer]);
}

// Sums the bytes of every tensor and workspace in the graph. The chain
// derivation adds up subsets of them (activations, workspace peaks), so a
// total within kMaxBytes means none of its int64 sums can overflow.
void Builder::Count(int64_t bytes) {
  total_bytes_ += CheckedInt(bytes);
  if (!total_bytes_.ok()) overflow_ = true;
}

void Builder::BeginPass(int pass) {
  sequences_ = PassSequences(c_, pass);
  tokens_ = Mul({c_.seq_len, sequences_});
  count_parameters_ = pass == 0;
}

void Builder::Layer(const std::string& tag, const std::string& kind) {
  layer_ = tag;
  kind_ = kind;
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

std::string Builder::Qualified(const std::string& name) const {
  std::string out;
  out.reserve(layer_.size() + 1 + name.size());
  out += layer_;
  out += '.';
  out += name;
  return out;
}

T Builder::Tensor(const std::string& name, int64_t elems, int elem_bytes, bool requires_grad) {
  const int64_t bytes = Mul({elems, elem_bytes});
  Count(bytes);
  return T{out_->graph.AddTensor(Qualified(name), bytes, requires_grad), elems, elem_bytes};
}

void Builder::Op(const std::string& name, Ts in, Ts outs, Ts saved, double flops,
                 double bwd_flops_factor, int64_t params, int64_t bwd_workspace, bool core,
                 bool trainable, int64_t shared_params) {
  OpInfo op;
  op.name = Qualified(name);
  op.layer = layer_;
  const bool params_train = trainable && params > 0 && WeightsTrain();
  bool backward = params_train;
  double bytes = static_cast<double>(params) * dt_.param;
  op.inputs.reserve(in.size());
  op.outputs.reserve(outs.size());
  for (const T& t : in) {
    op.inputs.push_back(t.id);
    bytes += t.bytes();
    backward = backward || Grad(t);
  }
  backward = backward && trainable;
  for (const T& t : outs) {
    op.outputs.push_back(t.id);
    bytes += t.bytes();
    if (!backward) out_->graph.ClearRequiresGrad(t.id);
  }
  if (backward) {
    op.saved.reserve(saved.size());
    for (const T& t : saved) op.saved.push_back(t.id);
  }
  op.forward_flops = flops;
  op.forward_bytes = bytes;
  // A dropout draws its mask: one random element per element of its input.
  op.random_elements = in_dropout_ && !in.empty() ? static_cast<double>(in.front().elems) : 0;
  op.backward_flops = backward ? flops * bwd_flops_factor : 0;
  op.backward_bytes = backward ? 2 * bytes : 0;
  op.backward_workspace = backward ? bwd_workspace : 0;
  // Every trained weight's gradient (biases and norms included), in the
  // weights' dtype (an adapter's: lora_dtype).
  if (backward && trainable && WeightsTrain()) {
    op.gradient_elems = (params_train ? params : 0) + shared_params;
    op.gradient_bytes = Mul({op.gradient_elems, in_adapter_ ? lora_bytes_ : dt_.param});
  }
  op.parameters = params;
  op.trainable = trainable && WeightsTrain();  // a LoRA job's frozen base: no gradient
  op.attention_core = core;
  op.mlp_activation = mlp_activation_;
  op.norm_output = norm_output_;
  op.experts = experts_;
  op.dropout_mask = in_dropout_ && dropout_mask_ && !in_adapter_;
  Count(bwd_workspace);
  Count(op.gradient_bytes);
  if (count_parameters_ && params_train) {
    std::vector<TrainedTensor> tensors;
    CheckedInt sum(0);
    for (std::vector<int64_t>& shape : param_tensors_) {
      CheckedInt n(1);
      for (int64_t d : shape) n = n * CheckedInt(d);
      sum = sum + n;
      if (!n.ok()) break;
      tensors.push_back({n.value(), in_adapter_, shape.size() > 1 ? std::move(shape)
                                                                   : std::vector<int64_t>{}});
    }
    if (!sum.ok() || sum.value() != params) tensors = {{params, in_adapter_, {}}};
    for (TrainedTensor& t : tensors) out_->trained_tensors.push_back(std::move(t));
  }
  param_tensors_.clear();
  if (count_parameters_) {
    parameters_ += CheckedInt(params);
    if (params_train) trainable_ += CheckedInt(params);
    if (in_adapter_) adapter_params_ += CheckedInt(params);
  }
  if (!parameters_.ok() || !trainable_.ok() || !adapter_params_.ok()) overflow_ = true;
  out_->parameters = parameters_.ok() ? parameters_.value() : 0;
  out_->trainable_parameters = trainable_.ok() ? trainable_.value() : 0;
  out_->adapter_parameters = adapter_params_.ok() ? adapter_params_.value() : 0;
  out_->graph.AddOp(std::move(op));
  records_.push_back(backward);
}

void Builder::HoldInLastOp(const std::vector<T>& held, int64_t forward_workspace) {
  std::vector<int> ids;
  ids.reserve(held.size());
  for (const T& t : held) ids.push_back(t.id);
  Count(forward_workspace);
  out_->graph.AddForwardLiveness(static_cast<int>(out_->graph.ops().size()) - 1, ids,
                                 forward_workspace);
}

T Builder::MatmulInput(const T& x, bool core) {
  if (!dt_.autocast || x.elem_bytes == dt_.matmul) return x;
  auto it = casts_.find(x.id);
  if (it != casts_.end()) return it->second;
  T y = Tensor("cast", x.elems, dt_.matmul);
  // The cast of a norm's output is recomputed with the norm.
  const int p = out_->graph.tensors()[x.id].producer;
  const bool was = norm_output_;
  norm_output_ = p >= 0 && out_->graph.ops()[p].norm_output;
  Op("cast", {x}, {y}, {}, static_cast<double>(x.elems), 1, 0, 0, core);
  norm_output_ = was;
  casts_[x.id] = y;
  return y;
}

T Builder::Linear(const std::string& name, const T& x, int64_t in, int64_t outf, bool bias,
                  bool tied, bool trainable, Split split) {
  // One tensor-parallel rank's share of the weight: in / t rows, or outf / t
  // columns (a vocabulary that t does not divide is padded, as Megatron's).
  const int64_t t = split == Split::kNone ? 1 : split_.ranks;
  const int64_t in_rank = split == Split::kRow ? in / t : in;
  const int64_t out_rank = split == Split::kColumn ? (outf + t - 1) / t : outf;
  const T xin = MatmulInput(x);
  // Sequence-parallel: the matmul reads the gathered tokens; the shard is
  // what it keeps.
  const T xmm = split == Split::kColumn ? GatherSequence(xin) : xin;
  const bool train_w = trainable && WeightsTrain();
  const bool x_grad = Grad(xmm);
  // QLoRA: bitsandbytes quantizes every linear of the blocks (not the
  // embeddings, the head or the adapters).
  const bool quantized =
      c_.quantization == Quantization::kNf4 && kind_ == kBlockKind && !in_adapter_ && !tied;
  const int64_t weight = tied ? 0 : Mul({in, outf});
  const int64_t params = weight + (bias ? outf : 0);
  const int64_t rows = xmm.elems / in_rank;
  // Adapters without autocast compute in their own dtype (PEFT casts x).
  const int out_bytes = in_adapter_ && !dt_.autocast ? lora_bytes_ : dt_.matmul;
  T y = Tensor(name, Mul({rows, out_rank}), out_bytes, trainable);
  // x is kept for the weight's gradient only; W (or its cast) for x's.
  std::vector<T> saved;
  if (train_w) saved.push_back(xin);
  std::vector<T> outs = {y};
  double flops = 2.0 * rows * in_rank * out_rank;
  // The weight's gradient is the op's gradient_bytes (Op), a tied one's too.
  // A gathered input is gathered again in backward for the weight's.
  int64_t bwd_workspace = xmm.id != xin.id && train_w ? Mul({xmm.elems, xmm.elem_bytes}) : 0;
  if (quantized) {
    // Dequantized per call in the compute dtype: a transient of the forward
    // (and of a recompute), again in backward for the input gradient.
    T w = Tensor(name + ".dequantized", Mul({in, outf}), dt_.matmul, false);
    outs.push_back(w);
    flops += static_cast<double>(weight);
    if (x_grad) bwd_workspace = Mul({in, outf, dt_.matmul});
    if (count_parameters_) {  // passes after the first reuse the first's weights
      quantized_params_ += CheckedInt(weight);
      quantized_bytes_ += CheckedInt(Nf4Bytes(weight, c_.double_quant));
    }
    if (!quantized_params_.ok() || !quantized_bytes_.ok()) overflow_ = true;
    out_->quantized_parameters = quantized_params_.ok() ? quantized_params_.value() : 0;
    out_->quantized_bytes = quantized_bytes_.ok() ? quantized_bytes_.value() : 0;
  } else if (dt_.autocast) {
    // The 16-bit copy of the weight is kept for backward too (x's gradient
    // needs it; autocast caches a trained weight's cast for the forward).
    T w = Tensor(name + ".weight_cast", Mul({in_rank, out_rank}), dt_.matmul, false);
    outs.push_back(w);
    if (x_grad || train_w) saved.push_back(w);
  }
  const double bwd_factor = (train_w ? 1.0 : 0.0) + (x_grad ? 1.0 : 0.0);
  if (weight > 0) {
    ParameterTensors(bias ? std::vector<std::vector<int64_t>>{{outf, in}, {outf}}
                          : std::vector<std::vector<int64_t>>{{outf, in}});
  }
  Op(name, {xmm}, outs, saved, flops, bwd_factor, params, bwd_workspace, false, trainable,
     tied && train_w ? Mul({in, outf}) : 0);
  return split == Split::kRow ? ScatterSequence(name, y) : y;
}

T Builder::GatherSequence(const T& x) {
  if (!split_.sequence || split_.ranks == 1) return x;
  auto it = gathers_.find(x.id);
  if (it != gathers_.end()) return it->second;
  const std::string name = "all_gather" + std::to_string(gathers_.size() + 1);
  T y = Tensor(name, Mul({x.elems, split_.ranks}), x.elem_bytes);
  Op(name, {x}, {y}, {}, 0, 1.0);
  gathers_[x.id] = y;
  return y;
}

T Builder::ScatterSequence(const std::string& name, const T& y) {
  if (!split_.sequence || split_.ranks == 1) return y;
  T shard = Tensor(name + ".reduce_scatter", y.elems / split_.ranks, y.elem_bytes);
  Op(name + ".reduce_scatter", {y}, {shard}, {}, 0, 1.0);
  return shard;
}

T Builder::Projection(const std::string& name, const T& x, int64_t in, int64_t outf, bool bias,
                      uint32_t target, Split split) {
  T y = Linear(name, x, in, outf, bias, false, true, split);
  if (c_.lora_rank == 0 || (c_.lora_targets & target) == 0) return y;
  in_adapter_ = true;
  T xa = Dropout(name + ".lora_dropout", x, false, c_.lora_dropout);
  if (!dt_.autocast && xa.elem_bytes != lora_bytes_) {
    xa = Pointwise(name + ".lora_cast", xa, 1.0, false, lora_bytes_);
  }
  const T a = Linear(name + ".lora_A", xa, in, c_.lora_rank, false);
  const T b = Linear(name + ".lora_B", a, c_.lora_rank, outf, false);
  const T scaled = Pointwise(name + ".lora_scale", b, 1.0, false);
  in_adapter_ = false;
  T sum = Add(name + ".lora_add", y, scaled);
  if (sum.elem_bytes != y.elem_bytes) {  // PEFT: result.to(the base output's dtype)
    sum = Pointwise(name + ".lora_result_cast", sum, 1.0, false, y.elem_bytes);
  }
  return sum;
}

T Builder::FoldedWeight(const std::string& name, int64_t count, int64_t in, int64_t outf,
                        int64_t rank) {
  in_adapter_ = true;
  const int64_t elems = Mul({count, in, outf});
  T w = Tensor(name + ".lora_weight", elems, dt_.param);
  std::vector<T> outs = {w};
  if (count == 1 || dt_.param < 4) outs.push_back(Tensor(name + ".lora_delta", elems, dt_.param));
  ParameterTensors({{Mul({count, rank}), in}, {outf, Mul({count, rank})}});  // lora_A, lora_B
  Op(name + ".lora_fold", {}, outs, {}, 2.0 * static_cast<double>(elems) * rank, 2.0,
     Mul({count, rank, in + outf}));
  in_adapter_ = false;
  return w;
}

T Builder::LayerNorm(const std::string& name, const T& x, int64_t width) {
  T y = Tensor(name, x.elems, dt_.stream);
  // native_layer_norm keeps its input and, per row, the mean and rstd: fp32
  // on CUDA, in the input's dtype on CPU.
  const int64_t rows = x.elems / width;
  const int stat_bytes = device_.cpu ? x.elem_bytes : 4;
  T mean = Tensor(name + ".mean", rows, stat_bytes, false);
  T rstd = Tensor(name + ".rstd", rows, stat_bytes, false);
  ParameterTensors({{width}, {width}});  // weight, bias
  Op(name, {x}, {y, mean, rstd}, {x, mean, rstd}, 5.0 * x.elems, 2.0, 2 * width);
  return y;
}

T Builder::RmsNorm(const std::string& name, const T& x, int64_t width) {
  const int64_t rows = x.elems / width;
  std::vector<T> outs;
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
  // x * rstd keeps both; weight * normalized keeps normalized only for a
  // weight that trains.
  std::vector<T> saved = {x32, rstd};
  if (WeightsTrain()) saved.push_back(normalized);
  Op(name, {x}, outs, saved, 5.0 * x.elems, 2.0, width);
  return y;
}

T Builder::Dropout(const std::string& name, const T& x, bool core, double p) {
  if ((p < 0 ? c_.dropout : p) <= 0) return x;
  T y = Tensor(name, x.elems, x.elem_bytes);
  // CUDA's fused dropout keeps a bool mask; at::dropout on CPU multiplies by
  // a mask of the input's dtype and keeps that.
  T mask = Tensor(name + ".mask", x.elems, device_.cpu ? x.elem_bytes : 1, false);
  in_dropout_ = true;
  Op(name, {x}, {y, mask}, {mask}, 2.0 * x.elems, 1.0, 0, 0, core);
  in_dropout_ = false;
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

SdpaBackend Builder::SdpaBackendFor(const T& q, const T& k, const T& v,
                                    const AttentionShape& shape) const {
  SdpaCall call;
  call.elem_bytes = dt_.autocast ? dt_.matmul : q.elem_bytes;
  call.bfloat16 = c_.precision == Precision::kAmpBf16 || c_.precision == Precision::kBf16 ||
                  c_.precision == Precision::kMixedBf16;
  call.heads = shape.heads;
  call.head_dim = shape.head_dim;
  call.seq_len = c_.seq_len;
  call.dropout = c_.dropout;
  // transformers' use_gqa_in_sdpa: enable_gqa without a mask and with
  // head_dim <= 256; otherwise repeat_kv hands SDPA `heads` keys and values.
  call.has_mask = shape.masked;
  call.enable_gqa = !shape.masked && shape.kv_heads != shape.heads && shape.head_dim <= 256;
  call.kv_heads = call.enable_gqa ? shape.kv_heads : shape.heads;
  call.requires_grad = Grad(q) || Grad(k) || Grad(v);
  return SelectSdpaBackend(device_.sdpa, call);
}

T Builder::FusedAttention(const T& q, const T& k, const T& v, int64_t ctx_elems, double qk_flops,
                          const AttentionShape& shape, SdpaBackend backend) {
  const int64_t s = c_.seq_len, b = sequences_, a = shape.heads;
  const T qc = MatmulInput(q, true), kc = MatmulInput(k, true), vc = MatmulInput(v, true);
  T ctx = Tensor("context", ctx_elems, dt_.matmul);
  // The softmax statistics backward needs: one fp32 logsumexp per row of
  // scores (PyTorch's flash, efficient and cudnn SDPA kernels, CPU and
  // CUDA). The efficient kernel pads each head's rows to a multiple of 32
  // (mem_eff kernel_forward.h kAlignLSE).
  const int64_t lse_rows = backend == SdpaBackend::kEfficient ? (s + 31) / 32 * 32 : s;
  T lse = Tensor("logsumexp", Mul({a, lse_rows, b}), 4, false);
  std::vector<T> in = {qc};
  if (kc.id != qc.id) in.push_back(kc);
  if (vc.id != qc.id && vc.id != kc.id) in.push_back(vc);
  std::vector<T> saved = in;
  saved.push_back(ctx);
  saved.push_back(lse);
  std::vector<T> outs = {ctx, lse};
  if (shape.masked && c_.attention == AttentionImpl::kSdpa) {
    // transformers' boolean mask (b, 1, s, s), which SDPA turns into one of
    // the inputs' dtype per call (convert_boolean_attn_mask); the kernel
    // keeps that for backward.
    T mask = Tensor("attn_mask", Mul({b, s, s}), qc.elem_bytes, false);
    outs.push_back(mask);
    saved.push_back(mask);
  }
  // FlashAttention-2's backward on CUDA (flash_api.cpp mha_bwd) allocates an
  // fp32 dq accumulator (b, s rounded to 128, a, d rounded to 32; 256 past
  // 192) and softmax_d (b, a, s rounded to 128), and with grouped keys and
  // values the gradients of k and v for every query head before summing
  // them per group.
  int64_t bwd_workspace = 0;
  if (c_.attention == AttentionImpl::kSdpa && backend == SdpaBackend::kFlash && device_.sdpa.cuda) {
    const int64_t s128 = (s + 127) / 128 * 128;
    const int64_t d = shape.head_dim, d_rounded = d <= 192 ? (d + 31) / 32 * 32 : 256;
    bwd_workspace = Mul({b, s128, a, d_rounded, 4}) + Mul({b, a, s128, 4});
    if (shape.kv_heads != a) bwd_workspace += Mul({2, ctx_elems, qc.elem_bytes});
  }
  Op("flash_attention", in, outs, saved, 2 * qk_flops, 2.5, 0, bwd_workspace, true);
  return ctx;
}

T Builder::Attention(const T& q, const T& k, const T& v, const AttentionShape& shape) {
  const T out = AttentionOps(q, k, v, shape);
  // The runtime hands q, k and v to the core as one temporary (as
  // transformers passes them to its attention function) that lives until the
  // core returns: held through its last op (no-grad forwards show it).
  std::vector<T> inputs = {q};
  if (k.id != q.id) inputs.push_back(k);
  if (v.id != q.id && v.id != k.id) inputs.push_back(v);
  HoldInLastOp(inputs);
  return out;
}

T Builder::AttentionOps(const T& q, const T& k, const T& v, const AttentionShape& shape) {
  const int64_t s = c_.seq_len, b = sequences_, a = shape.heads, d = shape.head_dim;
  const double qk_flops = 2.0 * b * s * s * a * d;
  const int64_t ctx_elems = Mul({s, b, a, d});
  const bool sdpa = c_.attention == AttentionImpl::kSdpa;
  // SDPA's kernel: PyTorch's choice for this call on this device (its math
  // path, sdpa_math.cc, or a fused kernel); flash: remat's blockwise kernel.
  SdpaBackend backend = SdpaBackend::kFlash;
  if (sdpa) {
    backend = SdpaBackendFor(q, k, v, shape);
    out_->attention_backends[layer_] = SdpaBackendName(backend);
    if (backend == SdpaBackend::kMath) return SdpaMath(q, k, v, shape);
  }
  if (sdpa && shape.kv_heads > 1 && shape.kv_heads != a && (shape.masked || d > 256)) {
    // transformers' use_gqa_in_sdpa is false (a mask, or d over 256):
    // repeat_kv copies k and v to every query head, and the kernel keeps the
    // copies (with one key/value head its reshape is a view: no copy).
    T kr = Tensor("k_repeated", ctx_elems, k.elem_bytes);
    Op("repeat_k", {k}, {kr}, {}, 0, 1.0, 0, 0, true);
    T vr = Tensor("v_repeated", ctx_elems, v.elem_bytes);
    Op("repeat_v", {v}, {vr}, {}, 0, 1.0, 0, 0, true);
    AttentionShape repeated = shape;
    repeated.kv_heads = a;
    return FusedAttention(q, kr, vr, ctx_elems, qk_flops, repeated, backend);
  }
  if (c_.attention == AttentionImpl::kFlash || sdpa) {
    return FusedAttention(q, k, v, ctx_elems, qk_flops, shape, backend);
  }
  // Eager: q, k and v may be one fused projection (gpt's qkv).
  T qc = q, kc = k, vc = v;
  if (shape.kv_heads != a) {
    // repeat_kv: each key/value head copied to its group; the matmuls keep
    // the copies. Made before the core (transformers' repeat_kv is no
    // attention op, so torch's selective checkpoint keeps its copies): an
    // attention_core recompute starts from them.
    T kr = Tensor("k_repeated", ctx_elems, kc.elem_bytes);
    Op("repeat_k", {kc}, {kr}, {}, 0, 1.0);
    T vr = Tensor("v_repeated", ctx_elems, vc.elem_bytes);
    Op("repeat_v", {vc}, {vr}, {}, 0, 1.0);
    kc = kr;
    vc = vr;
  }
  qc = MatmulInput(qc, true);
  kc = MatmulInput(kc, true);
  vc = MatmulInput(vc, true);
  const int64_t scores = Mul({a, s, s, b});
  T sc = Tensor("scores", scores, dt_.matmul);
  std::vector<T> qk = {qc};
  if (kc.id != qc.id) qk.push_back(kc);
  // q k^T keeps k for q's gradient and q for k's (LoRA on q alone: k only).
  std::vector<T> qk_saved;
  if (Grad(kc)) qk_saved.push_back(qc);
  if (Grad(qc) && kc.id != qc.id) qk_saved.push_back(kc);
  if (kc.id == qc.id && Grad(qc)) qk_saved = {qc};
  Op("scores", qk, {sc}, qk_saved, qk_flops, 2.0, 0, 0, true);
  if (shape.softcap > 0) {
    // scores / cap, tanh (keeps its output), * cap: each a new tensor.
    T div = Tensor("softcap_div", scores, sc.elem_bytes);
    Op("softcap_div", {sc}, {div}, {}, static_cast<double>(scores), 1.0, 0, 0, true);
    T th = Tensor("softcap_tanh", scores, sc.elem_bytes);
    Op("softcap_tanh", {div}, {th}, {th}, 4.0 * scores, 1.0, 0, 0, true);
    sc = Tensor("softcap_mul", scores, sc.elem_bytes);
    Op("softcap_mul", {th}, {sc}, {}, static_cast<double>(scores), 1.0, 0, 0, true);
  }
  T masked = Tensor("masked_scores", scores, dt_.matmul);
  Op("scale_mask", {sc}, {masked}, {}, 2.0 * scores, 1.0, 0, 0, true);
  // HF's eager llama upcasts the softmax.
  T probs = Tensor("probs", scores, shape.softmax_fp32 ? 4 : dt_.softmax);
  Op("softmax", {masked}, {probs}, {probs}, 5.0 * scores, 1.0, 0, 0, true);
  if (shape.softmax_fp32 && q.elem_bytes != 4) {
    // .to(query.dtype): a copy, kept by what follows.
    T cast = Tensor("probs_cast", scores, q.elem_bytes);
    Op("probs_cast", {probs}, {cast}, {}, static_cast<double>(scores), 1.0, 0, 0, true);
    probs = cast;
  }
  T dropped = Dropout("attn_dropout", probs, true);
  const T pv = MatmulInput(dropped, true);
  std::vector<T> in = {pv, vc};
  std::vector<T> pv_saved;
  if (Grad(vc)) pv_saved.push_back(pv);
  if (Grad(pv)) pv_saved.push_back(vc);
  T ctx = Tensor("context", ctx_elems, dt_.matmul);
  Op("attn_v", in, {ctx}, pv_saved, qk_flops, 2.0, 0, 0, true);
  return MergeHeads(ctx);
}

T Builder::MergeHeads(const T& ctx) {
  T merged = Tensor("merged_heads", ctx.elems, ctx.elem_bytes);
  Op("merge_heads", {ctx}, {merged}, {}, static_cast<double>(ctx.elems), 1.0, 0, 0, true);
  return merged;
}

}  // namespace remat::analytic
