// Builds the OpGraph of one training step of a transformer from a
// ModelConfig. Internal to the planner.
#ifndef REMAT_SRC_ANALYTIC_TRANSFORMER_GRAPH_H_
#define REMAT_SRC_ANALYTIC_TRANSFORMER_GRAPH_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analytic/op_graph.h"
#include "analytic/sdpa_backend.h"
#include "remat/model/model_config.h"
#include "remat/io/status.h"

namespace remat::analytic {

// A trained parameter tensor (one that gets a gradient and optimizer state).
struct TrainedTensor {
  int64_t elements = 0;
  bool adapter = false;  // a LoRA adapter's (its state in lora_dtype)
  // Its sizes as PyTorch holds it (a linear's weight (out, in), a stacked
  // experts' weight (experts, ., .)); empty: a vector of `elements`. What
  // Adafactor factors and Muon orthogonalizes (optimizer_state.h).
  std::vector<int64_t> shape;
};

struct TransformerGraph {
  OpGraph graph;
  // The trained parameter tensors in the order the model makes them (the
  // layers' ops in order; a linear's weight, then its bias; a LayerNorm's
  // weight, then its bias), each counted once (a tied weight by its
  // owner, passes after the first none): the tensors an optimizer steps
  // over one by one (optimizer_step.h).
  std::vector<TrainedTensor> trained_tensors;
  std::vector<std::pair<std::string, std::string>> kinds;  // layer tag -> kind
  int64_t parameters = 0;                                  // every weight the model holds
  int64_t trainable_parameters = 0;                        // those the loss reaches (get gradients)
  // LoRA / QLoRA (lora.h): the adapters' weights (trained, in lora_dtype),
  // and the base weights stored in nf4 with their bytes (packed 4-bit
  // values, absmax constants and code tables).
  int64_t adapter_parameters = 0;
  int64_t quantized_parameters = 0;
  int64_t quantized_bytes = 0;
  // Tensors a decoder's blocks all receive beside their input (the
  // runtime's buffers): an eager-attention decoder's (sequences, 1, seq,
  // seq) causal mask in the weights' dtype (the fused kernels mask
  // themselves), and a rotary decoder's position ids (seq int64) and cos
  // and sin tables, (seq, head_dim) each in the weights' dtype. Model
  // state, as a measured profile counts them.
  int64_t buffer_bytes = 0;
  // Layer tag -> the kernel PyTorch picks for the layer's
  // scaled_dot_product_attention (attention: sdpa; sdpa_backend.h: "math",
  // "flash", "efficient", "cudnn").
  std::map<std::string, std::string> attention_backends;
};

// Where the step runs, for the kernels whose saved tensors differ by device.
struct KernelDevice {
  // CPU: dropout (at::dropout, nn.Dropout) keeps a mask in the input's dtype,
  // where CUDA's fused dropout keeps one byte an element; SDPA with dropout
  // runs its math path.
  bool cpu = false;
  // The device SDPA's kernel selection sees (sdpa_backend.h); like `cpu`,
  // a GPU (an A100) by default.
  SdpaDevice sdpa = SdpaDeviceFor("a100");
};

// Megatron-style tensor parallelism over `ranks` GPUs (Shoeybi et al. 2019;
// Korthikanti et al. 2022): the graph is one rank's. Column-parallel
// projections (qkv, q/k/v, fc1, gate/up, the vocab-parallel LM head) make
// 1/ranks of their outputs, so the attention heads, key/value heads, the MLP's
// hidden size and the logits split; row-parallel ones (the attention output,
// fc2, down) read the split and all-reduce their output. The norms, the
// residual stream and its dropouts stay whole on every rank unless
// `sequence`: then they hold 1/ranks of the tokens, a column-parallel
// projection all-gathers its input (keeping the rank's shard for backward,
// where it gathers again) and a row-parallel one reduce-scatters its output.
// Parameter counts stay the model's (the weights' split is the caller's).
struct TensorSplit {
  int64_t ranks = 1;
  bool sequence = false;
};

// Layers: "embedding", "block0".."block{L-1}", "final_norm" (gpt, llama),
// "head" and "loss". Defaults of `config` need not be resolved. Fails if a
// byte count would overflow 64 bits, or for a split the model does not
// allow (TensorSplitError).
Result<TransformerGraph> BuildTransformerGraph(const ModelConfig& config,
                                               const KernelDevice& device = {},
                                               const TensorSplit& split = {});

// Why `config` (defaults resolved) cannot be split so, or "" if it can: the
// degree must divide the heads, key/value heads and MLP hidden size, and
// the sequence under sequence parallelism; the split is modeled for gpt and
// llama decoders (not their variants) with an lm head, without LoRA.
std::string TensorSplitError(const ModelConfig& config, const TensorSplit& split);

}  // namespace remat::analytic

namespace remat {
struct AnalyticChain;
// The op graph an analytic chain (BuildAnalyticChain) was derived from: the
// graph of one tensor-parallel rank under the chain's split.
const analytic::TransformerGraph& GraphOfChain(const AnalyticChain& chain);
}  // namespace remat

#endif  // REMAT_SRC_ANALYTIC_TRANSFORMER_GRAPH_H_
