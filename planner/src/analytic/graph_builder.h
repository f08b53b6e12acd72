// Builder: adds the tensors and ops of a training step to an OpGraph, layer
// by layer, with the dtypes of a precision. Internal to the planner; the
// transformer's parts (decoder_blocks.cc, encoder_blocks.cc, heads.cc) are
// written with it.
//
// Saved tensors follow what PyTorch autograd keeps (Korthikanti et al. 2022,
// section 4): a linear keeps its input, GELU its input, softmax its output,
// dropout its 1-byte mask, LayerNorm its input; residual adds keep nothing.
// Under autocast (amp_*), matmul inputs and weights are cast to 16 bits and
// the casts are what the matmul keeps; LayerNorm, softmax and the loss run in
// fp32, as torch.autocast does.
//
// Frozen weights (LoRA: every base weight; lora.h) are followed as autograd
// does: an op records a node only if an input requires grad or one of its
// weights trains, and each op keeps only what the gradients it must compute
// need (a frozen linear keeps nothing for itself, its input gradient needs W
// alone; x * w with w frozen keeps w, not x). Ops before the first trained
// weight keep nothing and have no backward.
#ifndef REMAT_SRC_ANALYTIC_GRAPH_BUILDER_H_
#define REMAT_SRC_ANALYTIC_GRAPH_BUILDER_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "analytic/transformer_graph.h"
#include "remat/io/checked_math.h"
#include "remat/model/model_config.h"

namespace remat::analytic {

// Bytes per element of each kind of tensor under a precision.
struct Dtypes {
  int stream;   // residual stream, embeddings, norm outputs
  int matmul;   // matmul inputs (after autocast) and outputs
  int softmax;  // attention probabilities
  int loss;     // log-probabilities
  int param;    // weights and their gradients
  bool autocast;
};
Dtypes DtypesFor(Precision p);

// A tensor of the graph: its id, element count and element size.
struct T {
  int id = -1;
  int64_t elems = 0;
  int elem_bytes = 0;
  double bytes() const { return static_cast<double>(elems) * elem_bytes; }
};

// The tensors an op reads, makes or keeps, as the caller lists them (a
// braced list or a vector), not copied: a view for the length of the call.
class Ts {
 public:
  Ts(std::initializer_list<T> list)  // NOLINT(runtime/explicit)
      : begin_(list.begin()), size_(list.size()) {}
  Ts(const std::vector<T>& v) : begin_(v.data()), size_(v.size()) {}  // NOLINT(runtime/explicit)
  const T* begin() const { return begin_; }
  const T* end() const { return begin_ + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& front() const { return *begin_; }

 private:
  const T* begin_;
  size_t size_;
};

// How an attention core is built (see Attention).
struct AttentionShape {
  int64_t heads = 0;     // query heads a
  int64_t kv_heads = 0;  // key/value heads (a: multi-head attention)
  int64_t head_dim = 0;  // d
  // HF llama: softmax(dtype=float32) then .to(query dtype); else the
  // softmax runs in the softmax dtype.
  bool softmax_fp32 = false;
  double softcap = 0;   // eager: cap * tanh(scores / cap) before the mask; 0: off
  bool masked = false;  // an explicit mask (a sliding window shorter than the sequence)
};

// How a linear's weight is split over the tensor-parallel ranks
// (TensorSplit): not at all, by output columns (its output is split), or by
// input rows (its input is split, its output reduced over the ranks).
enum class Split { kNone, kColumn, kRow };

class Builder {
 public:
  // `c` has its defaults resolved (WithDefaults) and outlives the builder.
  Builder(const ModelConfig& c, const KernelDevice& device, TransformerGraph* out,
          const TensorSplit& split = {});

  bool overflow() const { return overflow_; }
  const ModelConfig& config() const { return c_; }
  const Dtypes& dt() const { return dt_; }
  int64_t sequences() const { return sequences_; }  // micro_batch * texts_per_example
  int64_t tokens() const { return tokens_; }        // seq_len * sequences
  const TensorSplit& split() const { return split_; }
  // Query and key/value heads of one tensor-parallel rank.
  int64_t RankHeads(int64_t heads) const { return heads / split_.ranks; }

  // Starts forward pass `pass` (0-based) of TextPasses(config) > 1: from
  // here on sequences() and tokens() count that pass's texts (PassSequences),
  // and the ops of passes after the first reuse the first pass's weights
  // (parameters counted once).
  void BeginPass(int pass);
  // Whether `t` requires grad (an op that records no node clears it).
  bool Grad(const T& t) const;
  // Whether weights created now train: always, but for the frozen base of a
  // LoRA job outside its adapters.
  bool WeightsTrain() const { return c_.lora_rank == 0 || in_adapter_; }

  // Starts a layer (chain group) named `tag` of kind `kind`.
  void Layer(const std::string& tag, const std::string& kind);

  // Checked product; flags overflow and returns 0 on it.
  int64_t Mul(std::initializer_list<int64_t> factors);

  T Tensor(const std::string& name, int64_t elems, int elem_bytes, bool requires_grad = true);

  // How the next Op's `params` divide into parameter tensors, by their
  // shapes in the model's order (a linear's weight (out, in) then its bias
  // (out)); without it (or where the shapes' elements do not add up to
  // `params`) the params are one vector. Op takes it
  // (TransformerGraph::trained_tensors).
  void ParameterTensors(std::vector<std::vector<int64_t>> shapes) {
    param_tensors_ = std::move(shapes);
  }

  // Adds an op; forward/backward costs given as flops and bytes. `params`
  // are weights the op owns; `trainable` false: they get no gradient and the
  // op has no backward work. An op none of whose inputs requires grad and
  // whose weights do not train (WeightsTrain) keeps nothing and has no
  // backward either; its outputs then require no grad. `bwd_workspace`:
  // transients of its backward besides the parameter gradients, which the
  // op computes for its trained `params` and the `shared_params` of a tied
  // weight it uses (OpInfo::gradient_bytes).
  void Op(const std::string& name, Ts in, Ts outs, Ts saved, double flops, double bwd_flops_factor,
          int64_t params = 0, int64_t bwd_workspace = 0, bool core = false, bool trainable = true,
          int64_t shared_params = 0);

  // Marks the ops added while `on` as the MLP activation (OpInfo::
  // mlp_activation), where the runtime can recompute it: not in a LoRA job
  // (its adapters read the activation; the runtime recomputes it only
  // before a plain projection).
  void MlpActivation(bool on) { mlp_activation_ = on && c_.lora_rank == 0; }
  // Marks the ops added while `on` as a norm whose output the "norm_output"
  // option recomputes (OpInfo::norm_output; its autocast cast for the
  // matmuls is marked with it): not in a LoRA job (the runtime recomputes a
  // norm only before plain projections).
  void NormOutput(bool on) { norm_output_ = on && c_.lora_rank == 0; }
  // Marks the dropouts added while `on` (OpInfo::dropout_mask) as ones the
  // "dropout_mask" option runs without keeping their mask: a block's
  // residual dropouts and its eager attention's dropout, not in a
  // LoRA job (as the norms) and not SDPA's math path (its mask is inside
  // the ATen op; the runtime cannot regenerate it).
  void DropoutMask(bool on) { dropout_mask_ = on && c_.lora_rank == 0; }
  // Marks the ops added while `on` as a mixture of experts' dispatch,
  // experts and combine (OpInfo::experts), which the "experts" option
  // recomputes: not in a LoRA job (as the norms).
  void Experts(bool on) { experts_ = on && c_.lora_rank == 0; }

  // Casts `x` to the 16-bit matmul dtype under autocast (once per tensor).
  T MatmulInput(const T& x, bool core = false);

  // x (rows x in) -> rows x outf. `tied`: the weight belongs to another op.
  // `trainable` false: a frozen layer whose output the loss never reaches
  // (keeps nothing, no backward). `in` and `outf` are the whole weight's;
  // `split` says which of them a tensor-parallel rank holds a share of
  // (TensorSplit): x then holds in / t columns (kRow), the output outf / t
  // (kColumn). Parameters counted are the whole weight's.
  T Linear(const std::string& name, const T& x, int64_t in, int64_t outf, bool bias,
           bool tied = false, bool trainable = true, Split split = Split::kNone);

  // The tokens a sequence-parallel rank holds of `x` made whole for a
  // column-parallel linear: an all-gather (once per tensor), its output a
  // transient of the linears that read it. `x` itself when not sequence-
  // parallel.
  T GatherSequence(const T& x);
  // A row-parallel linear's reduced output under sequence parallelism: a
  // reduce-scatter to this rank's tokens. `y` itself otherwise.
  T ScatterSequence(const std::string& name, const T& y);

  // A linear of a block that LoRA can target (`target`: LoraTarget bits, any
  // of which selects it): the frozen base, nf4-quantized under QLoRA, plus,
  // when targeted, PEFT's adapter: dropout(x) (lora_dropout > 0), A (r x in),
  // B (outf x r), * alpha/r, added to the base's output.
  T Projection(const std::string& name, const T& x, int64_t in, int64_t outf, bool bias,
               uint32_t target, Split split = Split::kNone);

  // PEFT's adapter on a weight parameter (target_parameters: a mixture of
  // experts' router and stacked experts), `count` matrices of outf x in,
  // each with rank-`rank` factors (lora_A count*rank x in, lora_B outf x
  // count*rank; trainable adapter parameters): the parametrized weight
  // W + alpha/r * B @ A, a new tensor in the weights' dtype that its matmul
  // keeps for backward. A stack of 32-bit experts folds it in one baddbmm;
  // otherwise (the router, 16-bit weights) the delta is a transient first.
  T FoldedWeight(const std::string& name, int64_t count, int64_t in, int64_t outf, int64_t rank);

  // LayerNorm (fused: keeps its input and the mean and rstd of each row, fp32
  // on CUDA, the input's dtype on CPU).
  T LayerNorm(const std::string& name, const T& x, int64_t width);
  // HF LlamaRMSNorm, op by op: x.to(fp32) (kept by pow and mul), rsqrt of
  // the variance (kept, 4 bytes a row), and x * rsqrt cast back to the input
  // dtype (kept by the weight multiply). A 32-bit input is its own fp32 copy.
  T RmsNorm(const std::string& name, const T& x, int64_t width);

  // `p` < 0: the model's dropout.
  T Dropout(const std::string& name, const T& x, bool core = false, double p = -1);
  T Add(const std::string& name, const T& a, const T& b);

  // An elementwise op (GELU and SiLU keep their input). `out_bytes` 0: the
  // input's dtype.
  T Pointwise(const std::string& name, const T& x, double flops_per_elem, bool keeps_input = true,
              int out_bytes = 0);

  // The last op added holds `held` (tensors made before it) through its
  // forward, and allocates `forward_workspace` bytes within it (OpInfo::held):
  // a composite's locals, or a block's variable reassigned only once that
  // op has run (the runtime's and HF's `hidden_states`).
  void HoldInLastOp(const std::vector<T>& held, int64_t forward_workspace = 0);

  // softmax(q k^T / sqrt(d) + mask) (dropout) v for q (a*d per token) and
  // k, v (kv_heads*d per token). Eager attention with fewer key/value heads
  // materializes them repeated to a heads (HF repeat_kv), and the matmuls
  // keep the repeated copies; flash attention takes them as they are.
  T Attention(const T& q, const T& k, const T& v, const AttentionShape& shape);

 private:
  // The kernel scaled_dot_product_attention runs for this block's call, as
  // transformers makes it (sdpa_attention_forward: no mask without padding,
  // enable_gqa for grouped keys and values up to head_dim 256).
  SdpaBackend SdpaBackendFor(const T& q, const T& k, const T& v, const AttentionShape& shape) const;
  // An attention that keeps q, k, v, the output and a logsumexp per row
  // (flash: remat's blockwise kernel; SDPA's flash, efficient and cudnn
  // kernels), with the logsumexp rows and backward workspace of `backend`.
  T FusedAttention(const T& q, const T& k, const T& v, int64_t ctx_elems, double qk_flops,
                   const AttentionShape& shape, SdpaBackend backend);
  // Attention's ops (eager, SDPA's math path or a fused kernel), returning
  // the context with its heads merged.
  T AttentionOps(const T& q, const T& k, const T& v, const AttentionShape& shape);
  // (b, a, s, d) -> (b, s, a d): the runtime's MergeHeads (transformers'
  // transpose(1, 2).contiguous()), a copy of a context laid out by heads,
  // made inside the attention core.
  T MergeHeads(const T& ctx);
  // SDPA's math path (_scaled_dot_product_attention_math) op by op, with the
  // locals it holds until it returns (sdpa_math.cc).
  T SdpaMath(const T& q, const T& k, const T& v, const AttentionShape& shape);

 private:
  void Count(int64_t bytes);
  // "<layer>.<name>": the name of a tensor or op of the current layer.
  std::string Qualified(const std::string& name) const;

  const ModelConfig& c_;
  KernelDevice device_;
  Dtypes dt_;
  TransformerGraph* out_;
  std::string layer_;
  int64_t sequences_ = 0;
  int64_t tokens_ = 0;
  bool overflow_ = false;
  bool count_parameters_ = true;  // false in passes after the first
  CheckedInt total_bytes_{0};
  CheckedInt parameters_{0};
  CheckedInt trainable_{0};
  CheckedInt adapter_params_{0};
  CheckedInt quantized_params_{0};
  CheckedInt quantized_bytes_{0};
  std::vector<std::vector<int64_t>> param_tensors_;  // ParameterTensors, for the next Op
  std::map<int, T> casts_;
  std::map<int, T> gathers_;  // GatherSequence, by the shard's tensor id
  TensorSplit split_;
  std::vector<bool> records_;    // by op index: the op has a backward (an autograd node)
  std::string kind_;             // of the current layer
  bool in_adapter_ = false;      // building a LoRA adapter's ops
  bool mlp_activation_ = false;  // MlpActivation
  bool norm_output_ = false;     // NormOutput
  bool dropout_mask_ = false;    // DropoutMask
  bool experts_ = false;         // Experts
  bool in_dropout_ = false;      // adding a dropout's op (Dropout)
  int lora_bytes_ = 0;           // bytes per element of the adapters' weights
};

}  // namespace remat::analytic

#endif  // REMAT_SRC_ANALYTIC_GRAPH_BUILDER_H_
