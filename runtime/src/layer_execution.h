// One chain layer, forward and backward, the way the executor runs it and
// the profiler measures it (the same code, so what is measured is what runs).
//
// Block-wise execution: a layer's input is a detached leaf that requires
// grad, so a layer's autograd graph ends at its own input. A forward with
// grad returns a SavedLayer (the schedule's a[i] plus the output with its
// graph); Backward runs torch::autograd::backward on it and returns the
// gradient of the layer's input (the schedule's g[i]). Autograd releases the
// saved tensors as the backward runs.
#ifndef REMAT_RUNTIME_SRC_LAYER_EXECUTION_H_
#define REMAT_RUNTIME_SRC_LAYER_EXECUTION_H_

#include <ATen/ATen.h>
#include <torch/csrc/autograd/edge.h>

#include <memory>
#include <vector>

#include "chain_model.h"
#include "device.h"

namespace remat::runtime {

// Where the epilogue's gradient of the attention core's output arrives
// (layer_execution.cc): an autograd node with no inputs of its own, so the
// core's output is held only by the ops after it that save it.
class GradientTap;

// The attention core made again at the start of the layer's backward
// (layer_execution.cc).
struct CoreRemade;

// What a forward with grad keeps until the layer's backward.
struct SavedLayer {
  int layer = -1;     // -1: nothing saved
  at::Tensor input;   // the leaf the forward read (the batch for the embedding)
  at::Tensor output;  // the layer's output, carrying its autograd graph
  // A layer that does not keep its input runs on its producer's output, with
  // the producer's graph (ForwardWithGradOnProducer): `input` is then
  // undefined and `input_edge` is where that output enters the producer's
  // graph, and the producer's `output` is released, its `output_edge` kept.
  // An output the schedule frees before the layer's backward, and a head
  // skipping to the loss once the loss has read its output, are released
  // the same way (ReleaseOutput).
  torch::autograd::Edge input_edge;
  torch::autograd::Edge output_edge;
  // Selective forward, attention core recomputed in backward:
  bool selective = false;
  Heads heads;         // prologue outputs with their graph; the core's input
  std::shared_ptr<GradientTap> context;  // the core output's gradient, in backward
  DropoutSeeds seeds;  // to redraw the core's dropout mask
  CoreRemade* core = nullptr;  // the core's recompute, in `replay`
  // Selective forward: the recomputes of the core, the MLP activation, the
  // experts and the norms, run together when the backward starts
  // (backward_replay.h); the timers below point to it.
  std::shared_ptr<BackwardReplay> replay;
  // Selective forward, MLP activation recomputed in backward: where that
  // backward adds its recompute time (autograd holds its address).
  std::shared_ptr<RecomputeTimer> mlp_timer;
  // Selective forward, norms' outputs recomputed in backward: the same.
  std::shared_ptr<RecomputeTimer> norm_timer;
  // Selective forward, dropout masks drawn again in backward: the same.
  std::shared_ptr<RecomputeTimer> dropout_timer;
  // The loss with separate text passes: the earlier passes' sentence
  // embeddings as leaves (sharing their storage); their gradients are the
  // skips' gradients.
  std::vector<at::Tensor> skips;

  bool live() const { return layer >= 0; }
};

// Replaces `saved.output` by its graph's entry point, so that the output's
// bytes go once nothing else holds them (the layer's graph does not keep
// its output): a layer's output when the schedule frees x[i+1] before the
// layer's backward (chain_graph.h), a sentence embedding once the loss no
// longer needs it (the planner's skip_bytes).
void ReleaseOutput(SavedLayer& saved);

// A forward without grad: the output only.
at::Tensor ForwardNoGrad(const ChainModel& model, int layer, const at::Tensor& x,
                         const at::Tensor& batch, const DropoutSeeds& seeds,
                         const std::vector<at::Tensor>& skips = {});

// A forward with grad. `option` >= 0 (blocks only, < selective_options()):
// the selective option's parts (PartsOf) are recomputed in backward: the
// attention core runs without grad and only its inputs (q, k, v) and output
// are kept; the MLP activation's input is kept, not its output; the norms'
// inputs are kept, not their outputs; the dropouts keep no mask (Backward
// says when each is made again). `timing`: the clock of the recomputes.
// `skips`: the loss's inputs from earlier passes (ChainModel::Forward).
SavedLayer ForwardWithGrad(const ChainModel& model, int layer, const at::Tensor& x,
                           const at::Tensor& batch, const DropoutSeeds& seeds, int option,
                           const Timing& timing, const std::vector<at::Tensor>& skips = {});

// A forward with grad of a layer that does not keep its input
// (ChainModel::keeps_input false), run on `producer`'s output with its graph
// instead of a detached leaf, so that only what the layer's kernels save
// holds memory: once the caller drops its own references to the input
// (x[i]), it dies, as cross_entropy's logits do in PyTorch. `producer`
// releases its output tensor and keeps its place in the graph.
SavedLayer ForwardWithGradOnProducer(const ChainModel& model, int layer, SavedLayer& producer,
                                     const at::Tensor& batch, const DropoutSeeds& seeds);

// Backpropagates `grad_output` (undefined for the loss layer: d loss = 1)
// through `saved`, accumulating parameter gradients into their .grad.
// Returns the gradient of the layer's input (undefined for the first
// embedding; 0 elements for a later pass's, whose input is a boundary); for
// a layer run on its producer's graph, the gradient at that edge, which the
// producer's backward takes as its grad_output.
// A selective layer's recomputes (the attention core, the MLP activation,
// the experts, the norms' outputs) all run when its backward starts, in
// forward order, as PyTorch's selective checkpoint replays a block at its
// backward's first unpack; the dropout masks are drawn again in their own
// backward. `recompute_ms` (may be null) receives their time, on the clock
// of the forward's `timing`, else 0.
// `skip_grads` (may be null) receives the gradients of saved.skips (the
// loss), which are then released.
at::Tensor Backward(const ChainModel& model, SavedLayer& saved, const at::Tensor& grad_output,
                    double* recompute_ms,
                    std::vector<at::Tensor>* skip_grads = nullptr);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_LAYER_EXECUTION_H_
