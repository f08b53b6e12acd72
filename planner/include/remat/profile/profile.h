// Profile: the per-layer cost chain every planner strategy works on.
//
// A profile is a chain of layers in execution order. Layer i reads tensor x[i]
// (input_bytes) and produces x[i+1] (output_bytes). It comes either from a
// model.json through the analytic cost model (source "analytic") or from a
// file written by the runtime's profiler or by hand. The JSON format is
// documented in README.md ("Profile format").
#ifndef REMAT_PROFILE_H_
#define REMAT_PROFILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remat/profile/provenance.h"
#include "remat/io/status.h"

namespace remat {

// Layer kinds (LayerProfile::kind), as profiles spell them. Heuristic
// strategies act on kBlockKind layers.
inline constexpr char kEmbeddingKind[] = "embedding";
inline constexpr char kBlockKind[] = "block";
inline constexpr char kNormKind[] = "norm";
inline constexpr char kHeadKind[] = "head";
inline constexpr char kLossKind[] = "loss";

// The selective options both the analytic model and the runtime implement:
// recompute the attention core (QK^T, softmax, dropout, .V) in backward; the
// MLP activation (keep GELU's input, or SwiGLU's gate and up, recompute its
// output); both; the norms' outputs (keep each pre-norm's input, recompute
// its output in the backward of the projections that read it); all three;
// the dropout masks (keep only each dropout's generator state, regenerate
// its mask in backward: the residual dropouts, and eager attention's); all
// four. A block lists them in this order, the ones it has (the runtime's
// PartsOf numbers them so).
inline constexpr char kAttentionCoreOption[] = "attention_core";
inline constexpr char kMlpActivationOption[] = "mlp_activation";
inline constexpr char kAttentionCoreMlpOption[] = "attention_core+mlp_activation";
inline constexpr char kNormOutputOption[] = "norm_output";
inline constexpr char kAllSelectiveOption[] = "attention_core+mlp_activation+norm_output";
inline constexpr char kDropoutMaskOption[] = "dropout_mask";
inline constexpr char kAllWithDropoutOption[] =
    "attention_core+mlp_activation+norm_output+dropout_mask";
// A mixture-of-experts block's options instead of the MLP's: the experts
// (the dispatch, every expert's FFN and the combine recomputed in backward
// from the kept router decisions and the norm's output), and the attention
// core with them. Such a block lists attention_core, experts,
// attention_core+experts.
inline constexpr char kExpertsOption[] = "experts";
inline constexpr char kAttentionCoreExpertsOption[] = "attention_core+experts";

// The tensors behind one of a layer's figures, as PyTorch allocates them:
// each entry one allocation, in the order they are made. Only the caching
// allocator's replay reads them (AllocationEvents, simulator.h), and only
// where a list's sum equals its figure; empty, or a sum that differs, means
// one request for the whole figure. Analytic profiles fill them from the op
// graph; measured profiles and profile JSON have per-layer sizes only.
using TensorSizes = std::vector<int64_t>;

// An alternative way to run a layer's forward with grad that keeps less:
// e.g. "attention_core" keeps Q, K, V but not the s x s softmax/dropout
// tensors, and recomputes them during the layer's backward.
struct SelectiveOption {
  std::string name;
  int64_t activation_bytes = 0;           // kept from forward to backward (output included)
  double extra_recompute_ms = 0;          // added to the layer's backward
  int64_t recompute_workspace_bytes = 0;  // live during backward while recomputing
  // Transient bytes at the peak of the layer's forward under this option, on
  // top of what it keeps. The option's dropped tensors are transients of its
  // forward (e.g. the s x s scores of an attention core run without grad),
  // so this can exceed the layer's forward_workspace_bytes. -1: the same as
  // the layer's.
  int64_t forward_workspace_bytes = -1;
  // The tensors of activation_bytes less the layer's output, in forward
  // order, and of the forward's workspace (TensorSizes).
  TensorSizes saved_tensors;
  TensorSizes forward_workspace_tensors;
};

// A layer's figures as tensors (TensorSizes), for the allocator replay.
struct LayerTensors {
  TensorSizes saved;                 // activation_bytes - output_bytes, forward order
  TensorSizes forward_workspace;     // forward_workspace_bytes: live at the forward's peak
  TensorSizes nograd_workspace;      // nograd_workspace_bytes()
  TensorSizes backward_workspace;    // max(backward_workspace_bytes, 0)
  TensorSizes accumulate_workspace;  // max(accumulating_workspace_bytes(), 0)
  TensorSizes gradients;             // gradient_bytes, one per parameter, backward order
};

struct LayerProfile {
  std::string name;
  // "embedding", "block", "norm", "head", "loss" or "" (unknown). Heuristic
  // strategies (uniform, segment, selective, manual) act on "block" layers
  // when the chain has any, as HF/Megatron checkpoint decoder layers only.
  std::string kind;
  // The kernel PyTorch 2.11 picks for the layer's scaled_dot_product_attention
  // on the profile's device, for blocks of analytic profiles of attention:
  // sdpa jobs: "math", "flash", "efficient" or "cudnn"
  // (docs/analytic-model.md). Empty: no SDPA call, or unknown.
  std::string attention_backend;
  double forward_ms = 0;
  double backward_ms = 0;
  int64_t input_bytes = 0;   // |x[i]|
  int64_t output_bytes = 0;  // |x[i+1]|
  // Everything the layer keeps from its forward (with grad) until its
  // backward, its output included. Always >= output_bytes.
  int64_t activation_bytes = 0;
  // Transient bytes on top of what is kept, at the forward's peak.
  int64_t forward_workspace_bytes = 0;
  // The same for a forward without grad (checkpointed / recompute-only
  // forward). Defaults to forward_workspace_bytes when absent.
  int64_t forward_nograd_workspace_bytes = -1;
  // The backward's peak over what is live before it (a[i] included) plus the
  // input gradient and the parameter gradients it creates (gradient_bytes):
  // its transient bytes. Negative when autograd has released part of what
  // the layer saved before that peak: a backward that creates its layer's
  // gradients makes most of them after its first nodes let their saved
  // tensors go (measured profiles of blocks, e.g. -326 KiB for a block of
  // hidden 128, ffn 512, 2 x 64 tokens). At least -(activation_bytes -
  // output_bytes): what the layer saved besides its output.
  int64_t backward_workspace_bytes = 0;
  // The same for the backward that follows a recompute of the layer, where
  // it differs from backward_workspace_bytes (profile JSON
  // "recompute_backward_workspace_bytes"; absent: as backward_workspace_bytes).
  // A compiled profile's (docs/compile.md): torch.compile recomputes a
  // checkpointed block inside its backward graph, whose buffers inductor
  // plans apart from the backward of the block it kept.
  std::optional<int64_t> recompute_backward_workspace_bytes;
  // Bytes of the parameter gradients this layer's backward creates, under
  // the convention that gradients are created in backward and freed by the
  // optimizer step (PyTorch 2.x's zero_grad() sets .grad to None): they are
  // allocated at the layer's first backward and live until the optimizer
  // step. A parameter shared with another layer (tied embeddings) counts
  // once, at the layer whose backward runs first. 0 when the gradients are
  // persistent buffers (StaticMemory::gradient_bytes).
  int64_t gradient_bytes = 0;
  // Backward workspace when the layer's gradients exist already
  // (micro-batches 2..K of an update add into them): autograd makes each
  // new gradient as a transient and adds it in place. -1 (absent): as
  // backward_workspace_bytes. Measured by the runtime's profiler.
  int64_t accumulate_workspace_bytes = -1;
  // False when nothing needs x[i] after this layer's forward with grad:
  // this layer's backward does not (e.g. cross_entropy's log_softmax keeps
  // its output, not its input), and no layer's backward reads its output
  // (schedule.h). The input is then released right after the forward (see
  // Simulate); never for layer 0, whose input is the batch.
  bool keeps_input = true;
  std::vector<SelectiveOption> selective;
  // The relative spread of the layer's measured times over the profiler's
  // repetitions (interquartile range over median, the larger of forward's
  // and backward's; runtime/src/profiler.cc). Layers of equal sizes whose
  // times agree within their spreads are one class for the optimal solver
  // (solver/time_classes.h). 0 (absent, analytic profiles): no pooling.
  double time_spread = 0;

  // Side output to the chain's last layer (the loss): bytes the layer's
  // first forward writes besides x[i+1] that the loss reads, e.g. one pass's
  // sentence embeddings when sentence-transformers encodes anchors,
  // positives and negatives in separate passes. Live from that forward until
  // the loss's backward, which writes its gradient (the same bytes), live
  // until this layer's backward. A recompute makes it again only as a
  // transient.
  int64_t skip_bytes = 0;

  // Micro-batches whose forward of this layer has run and whose backward
  // has not at the peak of a pipeline stage, this one's included (1F1B
  // stage s of p: min(p - s, M); remat/ranks/pipeline.h). Above 1, Simulate holds
  // the other micro-batches' share of the layer, what one micro-batch keeps
  // of it through its forward-to-backward turn under the schedule (its
  // input x[i] and saved a[i]), beside the micro-batch it runs. 1: a single
  // rank.
  int64_t in_flight_microbatches = 1;
  // Bytes a recompute of this layer (in backward) holds beyond its forward's
  // workspace when another recompute follows it (it is not the layer whose
  // backward runs next): the engines that gather weights per block (FSDP2,
  // ZeRO-3) gather a recomputed block's weights again, beside the unit
  // whose backward runs and the one prefetched for backward
  // (remat/ranks/rank_memory.h). 0: a single rank.
  int64_t recompute_gather_bytes = 0;
  // The tensors behind the figures above (TensorSizes; not in profile JSON).
  LayerTensors tensors;

  // Forward workspace under a save mode: option -1 is the full forward.
  int64_t forward_workspace_for(int option) const {
    if (option >= 0 && selective[option].forward_workspace_bytes >= 0) {
      return selective[option].forward_workspace_bytes;
    }
    return forward_workspace_bytes;
  }
  // Backward workspace after the layer ran `recomputed` (its a[i] made by a
  // recompute) or not.
  int64_t backward_workspace_for(bool recomputed) const {
    return recomputed && recompute_backward_workspace_bytes ? *recompute_backward_workspace_bytes
                                                            : backward_workspace_bytes;
  }
  int64_t accumulating_workspace_bytes() const {
    return accumulate_workspace_bytes >= 0 ? accumulate_workspace_bytes : backward_workspace_bytes;
  }
  int64_t nograd_workspace_bytes() const {
    return forward_nograd_workspace_bytes >= 0 ? forward_nograd_workspace_bytes
                                               : forward_workspace_bytes;
  }
};

// Memory that lives for the whole step: parameters, their gradients when
// they are persistent buffers (Megatron/DeepSpeed, AllocateGradients; else
// they are the layers' gradient_bytes) and the optimizer state; and the
// tensors the model makes for the step and hands to every block
// (buffer_bytes: eager attention's (batch, 1, s, s) causal mask, a rotary
// decoder's position ids and cos and sin tables), which grow with the
// micro-batch and are not model state.
struct StaticMemory {
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t buffer_bytes = 0;
  int64_t total() const {
    return parameter_bytes + gradient_bytes + optimizer_bytes + buffer_bytes;
  }
};

// The link between device and host memory that activation offload copies
// over (schedule.h kOffload / kPrefetch). A copy of n bytes takes
// latency_us + n / (gb_per_s * 1e9) s. `overlapped`: copies run on a side
// stream beside compute (CUDA, pinned host memory); else each copy runs in
// line, on the compute clock (the CPU runtime's host pool).
struct HostLink {
  std::string name;     // "pcie4", "pcie5", "nvlink-c2c", "cpu-memcpy", "custom", ...
  double gb_per_s = 0;  // 0: no link, offload is not possible
  double latency_us = 0;
  bool overlapped = false;
  // Host memory offloaded bytes may take (--host-budget); 0: no limit. A
  // plan whose host_peak_bytes exceeds it does not fit. Not in profile JSON.
  int64_t budget_bytes = 0;
  bool present() const { return gb_per_s > 0; }
  // Milliseconds to copy `bytes` one way.
  double CopyMs(int64_t bytes) const {
    return present() ? latency_us * 1e-3 + static_cast<double>(bytes) / (gb_per_s * 1e6) : 0;
  }
};

struct Profile {
  std::string model;        // model name
  std::string source;       // "analytic" or what measured it ("libtorch-cpu", ...)
  std::string device;       // device the times refer to ("h200", "cpu", ...)
  int64_t parameters = 0;   // parameter count (0 if unknown)
  int64_t micro_batch = 0;  // sequences per micro-batch the sizes refer to (0 = unknown)
  int64_t seq_len = 0;      // tokens per sequence (0 = unknown)
  StaticMemory static_memory;
  double optimizer_ms = 0;  // time of the optimizer step
  // What the optimizer step allocates and frees on top of the model state,
  // at its peak (AdamW's square roots of the second moments and their
  // quotients: analytic/optimizer_step.h; measured: the runtime's step),
  // and those allocations (for the allocator replay; not in profile JSON,
  // where a measured profile's are one). Profile JSON
  // "optimizer_workspace_bytes"; 0 where absent.
  int64_t optimizer_workspace_bytes = 0;
  TensorSizes optimizer_workspace_tensors;
  // Time to add one micro-batch's parameter gradients into the gradient
  // buffers kept across the micro-batches of an update (gradient
  // accumulation: read both, write the sum). -1: not given; then
  // GradientAccumulateMs estimates it from optimizer_ms.
  double accumulate_ms = -1;
  // Micro-batches per optimizer step. Above 1, gradients created in
  // backward (LayerProfile::gradient_bytes) persist from micro-batch 2 on,
  // so Simulate predicts the update's peak from both micro-steps.
  int64_t grad_accumulation = 1;
  // Offload link (profile JSON "host_link"; the CLI's --host-link sets it).
  HostLink host_link;
  // State offload (Parallelism::offload): bytes one optimizer step copies
  // between device and host over host_link (every micro-batch's gathers
  // and gradients); optimizer_ms is then the host's step. Not in profile
  // JSON (a rank's profile derives it).
  int64_t offload_copy_bytes = 0;
  // What measured it (measured profiles; none for analytic ones).
  Provenance provenance;
  std::vector<LayerProfile> layers;

  int64_t static_bytes() const { return static_memory.total(); }
  // Parameter-gradient bytes of a step: the persistent buffers plus those
  // the layers' backwards create.
  int64_t total_gradient_bytes() const {
    int64_t bytes = static_memory.gradient_bytes;
    for (const LayerProfile& l : layers) bytes += l.gradient_bytes;
    return bytes;
  }
  // Weights, every gradient (held or created in backward) and optimizer
  // state: what a step needs beyond activations by its end (not the
  // buffers, which a smaller micro-batch shrinks).
  int64_t model_state_bytes() const {
    return static_bytes() - static_memory.buffer_bytes + total_gradient_bytes() -
           static_memory.gradient_bytes;
  }
  int num_layers() const { return static_cast<int>(layers.size()); }
};

// Checks sizes (non-negative, activation >= output, consistent x[i] between
// neighbours), times (in [0, 1e12] ms) and names, and that all the bytes the
// simulator could hold live at once add up to at most kMaxBytes (4 EiB), so
// no sum over the profile overflows. `source` names the file.
Status ValidateProfile(const Profile& profile, const std::string& source);

// Profile JSON <-> Profile. Parse validates.
Result<Profile> ParseProfile(std::string_view json_text, const std::string& source);
std::string ProfileToJson(const Profile& profile);

// Indices of layers heuristics act on: the "block" layers, or all layers if
// the chain has no block.
std::vector<int> BlockLayers(const Profile& profile);
// BlockLayers by text pass when the chain repeats its blocks per pass
// (layers named "p1.block0" .., the same count in each pass: the mnrl
// loss's separate passes), else one group. Block lists the user gives
// (--checkpoint-layers, --selective-layers) count one pass's blocks and apply
// to every pass, as transformers' gradient checkpointing does.
std::vector<std::vector<int>> BlockLayersPerPass(const Profile& profile);

// accumulate_ms when given; else optimizer_ms scaled by the bytes each pass
// moves: the sum reads and writes the gradients (3 x gradient bytes), the
// optimizer step reads weights, gradients and state and writes weights and
// state (2 x parameter + gradient + 2 x optimizer bytes). Both are
// bandwidth-bound elementwise passes. 0 when the profile has no gradients.
double GradientAccumulateMs(const Profile& profile);

// The optimizer step's time: optimizer_ms, plus the state offload's copies
// over host_link (in line: FSDP2 and DeepSpeed wait on them at the gathers
// and the step); 0 ms for the copies where there is no link.
double OptimizerStepMs(const Profile& profile);

// Sum of forward_ms + backward_ms over layers, plus OptimizerStepMs: the step
// time with nothing recomputed.
double BaselineStepMs(const Profile& profile);

}  // namespace remat

#endif  // REMAT_PROFILE_H_
