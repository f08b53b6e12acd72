// A training chain on LibTorch: the interface the schedule executor, the
// profiler and the runtime use, whatever the architecture (gpt_model.h,
// llama_model.h, encoder_model.h implement it).
//
// The chain's layers are named and ordered as the planner's analytic chain:
// "embedding", "block0".."block<N-1>", "final_norm" (decoders only), "head",
// "loss". With several text passes (TextPasses: the mnrl loss, as
// sentence-transformers encodes the anchors in one pass and the other
// columns merged in a second, or each column in its own; PassSequences)
// the layers before the loss repeat per pass, "p1.embedding" ..
// "p<T>.head"; the heads of passes before the last skip their sentence
// embeddings to the loss (skips_to_loss) and hand the next pass a 0-element
// boundary, and a pass's embedding reads its texts' ids from the batch. Layers are plain functions
// of their input so that the executor decides what autograd keeps: each layer's input is a detached
// leaf.
//
// A block also runs in three parts for the selective option (Megatron's
// "attention core" recompute): Prologue (norms, q/k/v projections, rotary)
// -> AttentionCore (repeat_kv, scores, mask, softmax, dropout, context) ->
// Epilogue (output projection, residuals, norms, MLP). What the prologue
// returns is what a selective layer keeps as the core's input. The epilogue
// can also keep the MLP activation's input instead of its output and
// recompute the output in backward (the "mlp_activation" option,
// mlp_recompute.h) where recomputes_mlp(), and prologue and epilogue keep
// their norms' inputs instead of their outputs (the "norm_output" option,
// norm_recompute.h).
//
// The pieces every architecture shares (weight initialization, dropout
// seeding, eager attention, head splitting, the cross-entropy loss, the
// synthetic batches) live here, written once. With a chunked loss
// (ModelConfig::loss_chunks, chunked_loss.h) the "head" layer computes the
// loss over chunks of its tokens and the "loss" layer passes it on.
#ifndef REMAT_RUNTIME_SRC_CHAIN_MODEL_H_
#define REMAT_RUNTIME_SRC_CHAIN_MODEL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lora.h"
#include "mlp_recompute.h"
#include "norm_recompute.h"
#include "remat/model/model_config.h"
#include "remat/io/status.h"

namespace remat::runtime {

enum class LayerKind { kEmbedding, kBlock, kFinalNorm, kHead, kLoss };

// Dropout seeds of one forward of one layer. The executor derives them from
// (run seed, step, layer), so a recompute draws exactly the masks of the
// first forward without saving generator state.
struct DropoutSeeds {
  uint64_t layer = 0;  // embedding dropout, a block's prologue, a head's dropout
  uint64_t core = 0;   // a block's attention dropout
  uint64_t tail = 0;   // a block's residual dropouts
  // Non-null: a block's dropouts (residual, and eager attention's) keep no
  // mask (dropout_regenerate.h; the "dropout_mask" option); their backward
  // draws it again and adds the time it took here.
  RecomputeTimer* regenerate = nullptr;
};
DropoutSeeds SeedsFor(uint64_t run_seed, int64_t step, int layer);

// Re-seeds the default generator of `device` (the one dropout draws from).
void SeedGenerator(const at::Device& device, uint64_t seed);

// What a block's prologue hands to its attention core (q, k, v).
using Heads = std::vector<at::Tensor>;

// A block's selective options in the planner's order (remat/profile/profile.h:
// attention_core, mlp_activation, attention_core+mlp_activation,
// norm_output, attention_core+mlp_activation+norm_output, dropout_mask,
// attention_core+mlp_activation+norm_output+dropout_mask): what a forward
// with grad leaves its backward to recompute.
struct SelectiveParts {
  bool core = false;     // the attention core
  bool mlp = false;      // the MLP activation
  bool norm = false;     // the norms' outputs
  bool dropout = false;  // the dropout masks (the core's own, unless recomputed)
  bool experts = false;  // a mixture of experts' dispatch, experts and combine
};
// The parts of option `option` (-1: none, a full forward) of a block with
// an MLP (ChainModel::OptionParts).
SelectiveParts PartsOf(int option);

class ChainModel {
 public:
  virtual ~ChainModel() = default;
  ChainModel(const ChainModel&) = delete;
  ChainModel& operator=(const ChainModel&) = delete;

  // The config with every default resolved (WithDefaults).
  const ModelConfig& config() const { return config_; }
  const at::Device& device() const { return device_; }
  at::ScalarType dtype() const { return dtype_; }

  int num_layers() const { return static_cast<int>(kinds_.size()); }
  std::string layer_name(int layer) const;
  LayerKind layer_kind(int layer) const { return kinds_[layer]; }
  // Text passes (TextPasses(config)), the pass of a layer (0-based; the loss
  // counts with the last), the index of a block within its pass, and
  // whether a layer's output is a sentence embedding skipping to the loss
  // (a head of a pass before the last).
  int passes() const { return passes_; }
  int pass_of(int layer) const;
  int block_index(int layer) const;
  bool skips_to_loss(int layer) const;
  // Whether the input of `layer` (not an embedding) carries a gradient:
  // not a first block's input when the embedding is frozen (LoRA), as
  // autograd, and the planner's op model, give it none.
  bool InputRequiresGrad(int layer) const {
    return weights_train() || layer_kind(layer - 1) != LayerKind::kEmbedding;
  }
  // What a head skipping to the loss hands the next pass: 0 elements.
  at::Tensor PassBoundary() const;
  // "embedding, 4 blocks, final_norm, head, loss": the chain, for messages.
  std::string DescribeChain() const;

  // A synthetic batch for `step`: (2, sequences, seq_len) int64, row 0 the
  // token ids, row 1 the targets the loss reads. This is the chain's x[0].
  // By default arithmetic sequences and their next tokens (causal LMs).
  virtual at::Tensor MakeBatch(uint64_t seed, int64_t step) const;

  // The forward of chain layer `layer` on its input `x` (the batch for the
  // embedding), seeding dropout from `seeds`. `batch` is x[0]: the loss layer
  // reads its targets from it. `skips`: the loss's inputs from the earlier
  // passes' heads, in pass order (empty with one pass).
  at::Tensor Forward(int layer, const at::Tensor& x, const at::Tensor& batch,
                     const DropoutSeeds& seeds, const std::vector<at::Tensor>& skips = {}) const;

  // Block `layer` in parts (layer_kind(layer) == kBlock). The core returns
  // the (sequences, seq, heads * head_dim) attention context.
  // `norm` non-null (requires recomputes_mlp()): the block's norms' outputs
  // are recomputed in backward (norm_recompute.h), which adds the time it
  // took to `norm` (the prologue's norm here, the epilogue's there).
  virtual Heads Prologue(int layer, const at::Tensor& x, const DropoutSeeds& seeds,
                         RecomputeTimer* norm = nullptr) const = 0;
  virtual at::Tensor AttentionCore(int layer, const Heads& heads,
                                   const DropoutSeeds& seeds) const = 0;
  // `mlp` non-null (requires recomputes_mlp()): the MLP activation is
  // recomputed in backward, which adds the time it took to `mlp`.
  virtual at::Tensor Epilogue(int layer, const at::Tensor& x, const at::Tensor& context,
                              const DropoutSeeds& seeds, RecomputeTimer* mlp = nullptr,
                              RecomputeTimer* norm = nullptr) const = 0;
  // Whether Epilogue can recompute the MLP activation, and Prologue and
  // Epilogue the norms' outputs: gpt, llama and the encoders (their ln1,
  // post-LN) without LoRA (the planner offers those options where it is
  // true).
  virtual bool recomputes_mlp() const { return false; }
  // Whether the block runs the "dropout_mask" options (5 and 6: its
  // dropouts regenerate their masks in backward), where dropout is on; gpt,
  // llama and the encoders without LoRA, as the analytic model offers them.
  virtual bool regenerates_masks() const { return false; }
  // How many selective options a block has (PartsOf 0..n-1): the dropout
  // masks' two with dropout on.
  // A mixture of experts has three instead: attention_core, experts and
  // attention_core+experts (OptionParts, OptionName).
  int selective_options() const {
    if (config_.experts > 0) return recomputes_mlp() ? 3 : 1;
    return recomputes_mlp() ? (regenerates_masks() && config_.dropout > 0 ? 7 : 5) : 1;
  }
  // The parts and the planner's name (remat/profile/profile.h) of a block's option
  // `option` (< selective_options(); -1: none).
  SelectiveParts OptionParts(int option) const;
  const char* OptionName(int option) const;

  // Trainable tensors (buffers such as the causal mask and frozen weights
  // such as an unused pooler or, with LoRA, every weight but the adapters'
  // A and B are not listed).
  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  // Weights that do not train (dense ones; nf4 weights are not tensors of
  // the model's dtype and are not listed).
  const std::vector<at::Tensor>& frozen_weights() const { return frozen_; }
  // Every weight, trainable or frozen, nf4 ones included (the planner's
  // parameter count).
  int64_t parameter_count() const;
  // Bytes the nf4 weights hold (Nf4StoredBytes summed; 0 without QLoRA).
  int64_t quantized_bytes() const { return quantized_bytes_; }
  // Whether layer `layer`'s backward (or its producer's) needs its input:
  // false for the loss layer under cross_entropy (log_softmax keeps its
  // output; true for mnrl: F.normalize keeps the embeddings), for a mean
  // pooling head (its masked sum keeps the mask) and for a head of frozen
  // weights (LoRA's LM or MLM head: a frozen linear keeps its weight); true
  // for every other layer. A layer answering false computes no parameter
  // gradient, so the executor may run it on its producer's graph. The
  // planner's analytic profile says the same (LayerProfile::keeps_input).
  bool keeps_input(int layer) const;

  // Bytes of the tensors the model keeps beside its weights, made once (the
  // eager attention's causal mask, the rotary tables); the planner counts
  // them as model state.
  virtual int64_t buffer_bytes() const { return 0; }
  // The gradient convention (GradientsOf(config())): persistent buffers
  // allocated once (AllocateGradients), or .grad created by each layer's
  // backward and set to None by the optimizer step.
  bool persistent_gradients() const;
  // Gives every parameter without one a .grad of zeros: the persistent
  // gradient buffers, in which gradients accumulate in place. Const: the
  // gradients are the parameters' state, not the chain's.
  void AllocateGradients() const;
  // Sets every .grad to None (zero_grad(set_to_none=True)).
  void ReleaseGradients() const;
  // The dtype of a parameter's gradient: fp32 for the 16-bit weights of
  // mixed_bf16 / mixed_fp16 with fp32 gradients (their default, Megatron's
  // main_grad), else the parameter's own (PyTorch's rule).
  c10::ScalarType GradientDtype(const at::Tensor& param) const;
  // Replaces each 16-bit gradient that GradientDtype says is fp32 by its
  // fp32 copy (the layer's backward created it; it is freed at once).
  // Gradients that are fp32 already take the next 16-bit ones in place.
  // The token embedding's weight when the head multiplies by it too (an lm
  // or mlm head with tie_embeddings) and it trains; undefined otherwise.
  at::Tensor TiedEmbedding() const;

  void PromoteGradients() const;
  // Zeroes the gradients in place (no allocation).
  void ZeroGrad();

 protected:
  // `final_norm`: the chain has a final_norm layer (decoders).
  ChainModel(const ModelConfig& config, const at::Device& device, uint64_t seed, bool final_norm);

  // The token embedding's weight (vocab x hidden).
  virtual const at::Tensor& TokenEmbedding() const = 0;
  // The lm head's weight (vocab x hidden; the token embedding's when tied),
  // for the chunked loss (decoders).
  virtual const at::Tensor& LmHeadWeight() const { return TokenEmbedding(); }

  // The forward of a layer that is not a block.
  virtual at::Tensor ForwardLayer(int layer, const at::Tensor& x, const at::Tensor& batch,
                                  const DropoutSeeds& seeds) const = 0;
  // The loss on the last pass's head output `x` and the earlier passes'
  // `skips`. Default: ForwardLayer of the loss (one pass).
  virtual at::Tensor ForwardLoss(const at::Tensor& x, const std::vector<at::Tensor>& skips,
                                 const at::Tensor& batch) const;

  // Weights drawn from the model's generator in call order: normal(0, 0.02)
  // drawn on the CPU in fp32 and moved, so every device and dtype starts from
  // the same numbers; constants (norm weights 1, biases 0). A trainable
  // weight is a parameter; one that is not (a pooler the loss never reaches)
  // counts in parameter_count() but gets no gradient.
  at::Tensor Normal(std::vector<int64_t> sizes, bool trainable = true);
  at::Tensor Constant(int64_t n, double value, bool trainable = true);
  // Whether the model's own weights train: not with LoRA (PEFT freezes all
  // but the adapters).
  bool weights_train() const { return config_.lora_rank == 0; }
  // A projection of a block, `in` -> `out` features: its weight drawn as
  // Normal (a bias as Constant 0), frozen with LoRA and packed nf4 under
  // QLoRA; an adapter (A from the adapters' own generator, B zeros, in
  // lora_dtype or the weights' dtype, both trained) when lora_targets has
  // any bit of `target` (the planner's resolution of lora_targets).
  Projection MakeProjection(int64_t in, int64_t out, bool bias, uint32_t target);
  // ProjectionForward with the model's lora_dropout.
  at::Tensor Project(const at::Tensor& x, const Projection& p) const {
    return ProjectionForward(x, p, config_.lora_dropout);
  }
  // (s, s): 0 on and below the diagonal, -inf above, in the model's dtype.
  at::Tensor CausalBias() const;

  // Sequences through the model with one pass: micro_batch * texts (with
  // several, pass p carries PassSequences(config, p): the blocks take the
  // count from their input); the batch holds micro_batch * texts.
  int64_t sequences() const { return sequences_; }
  int64_t batch_sequences() const { return batch_sequences_; }
  // Dropout with the model's rate, as nn.Dropout runs it (at::dropout): on
  // CUDA a fused kernel that keeps a 1-byte mask, on CPU a multiply by a
  // mask in the input's dtype, which it keeps. `regenerate` non-null: keeps
  // no mask (RegeneratedDropout, timed into it).
  at::Tensor Dropout(const at::Tensor& x, RecomputeTimer* regenerate = nullptr) const;
  // (b, s, n * d) -> (b * n, s, d), one contiguous copy (b: t's texts).
  at::Tensor SplitHeads(const at::Tensor& t, int64_t n) const;
  // (b * a, s, d) -> (b, s, a * d) for the model's a heads, one contiguous
  // copy.
  at::Tensor MergeHeads(const at::Tensor& context) const;
  // softmax(q k^T / sqrt(d) + bias) (dropout seeded from `seed`) v over
  // (n, s, d) heads; `bias` undefined: bidirectional. `softmax_fp32`: the
  // softmax runs in fp32 and is cast back to q's dtype (HF llama). Keeps q,
  // k, the probabilities, the dropout mask, the dropped probabilities and v
  // (no mask with `regenerate`: Dropout).
  // `softcap` > 0: the scores soft-capped before the bias, cap * tanh(scores
  // / cap) as transformers' gemma2 eager attention (keeps tanh's output).
  at::Tensor EagerAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& bias, bool softmax_fp32, uint64_t seed,
                            RecomputeTimer* regenerate = nullptr, double softcap = 0) const;
  // The attention core of config().attention when it is not eager (sdpa or
  // flash: attention.h) for q (sequences, a, s, d) and k, v (sequences, kv,
  // s, d), causal or bidirectional, dropout at the model's rate seeded from
  // `seed`: the context merged to (sequences, s, a * d) (a view of the
  // kernel's output where it is laid out so, else one copy).
  // `window` > 0 (flash only): a sliding window (AttentionOptions::window).
  at::Tensor FusedAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            bool causal, uint64_t seed, int64_t window = 0) const;
  // Mean cross-entropy of (n, classes) logits against (n) targets; targets
  // of -100 are ignored. log_softmax keeps its output (under autocast in
  // fp32, as F.cross_entropy; else in the logits' dtype).
  static at::Tensor CrossEntropy(const at::Tensor& logits, const at::Tensor& targets);
  // CrossEntropy of (sequences, s, vocab) logits, cast to fp32 with
  // loss_upcast, against the batch's row 1.
  at::Tensor TokenLoss(const at::Tensor& logits, const at::Tensor& batch) const;
  // Arithmetic token sequences (start and stride random per sequence, the
  // next token predictable from the context): (2, sequences, s), row 0 the
  // tokens, row 1 the next tokens. On the CPU.
  at::Tensor ArithmeticBatch(uint64_t seed, int64_t step) const;
  at::Tensor ToDevice(const at::Tensor& cpu) const;

 private:
  ModelConfig config_;
  at::Device device_;
  at::ScalarType dtype_;
  bool mixed_fp32_grads_ = false;  // GradientDtype: fp32 gradients of 16-bit weights
  int passes_;
  int64_t batch_sequences_;
  int64_t sequences_ = 0;
  int pass_length_ = 0;  // layers per pass
  std::vector<LayerKind> kinds_;
  std::mt19937_64 rng_;
  at::Generator adapter_gen_;
  at::Tensor Keep(at::Tensor t, bool trainable);
  // normal(0, 0.02) from rng_, fp32 on the CPU.
  at::Tensor DrawNormal(const std::vector<int64_t>& sizes);
  std::vector<at::Tensor> parameters_, frozen_;
  int64_t quantized_parameters_ = 0;  // weights held only as nf4
  int64_t quantized_bytes_ = 0;       // their bytes (Nf4StoredBytes)
};

// OK if the runtime implements `config`: every architecture (gpt with the lm
// head; llama with the lm head; bert with mlm, pooling + mnrl or
// classification), eager, sdpa and flash attention, fp32/bf16/fp16; LoRA
// and QLoRA (nf4, double_quant too) on every architecture. Otherwise says what
// is not supported and what is.
Status ModelSupports(const ModelConfig& config);

// The model of `config`'s architecture with random weights from `seed`, on
// `device`. Requires ModelSupports(config).
std::unique_ptr<ChainModel> MakeChainModel(const ModelConfig& config, const at::Device& device,
                                           uint64_t seed);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_CHAIN_MODEL_H_
