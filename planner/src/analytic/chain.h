// Deriving the layer chain from an OpGraph. Internal to the planner.
#ifndef REMAT_SRC_ANALYTIC_CHAIN_H_
#define REMAT_SRC_ANALYTIC_CHAIN_H_

#include <set>
#include <string>
#include <vector>

#include "analytic/op_graph.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat::analytic {

// Roofline: an op takes max(flops / flops_per_ms, bytes / bytes_per_ms);
// an op's forward adds its random draws (OpInfo::random_elements) at
// random_per_ms, a pass of their own before the roofline's (at::dropout on
// the CPU: bernoulli_ into the mask, then div_ and mul), where the device
// has that rate.
struct OpTimeModel {
  double flops_per_ms = 1;
  double bytes_per_ms = 1;
  double random_per_ms = 0;  // elements drawn a millisecond; 0: not limiting
  double Millis(double flops, double bytes) const {
    return std::max(flops / flops_per_ms, bytes / bytes_per_ms);
  }
  // The forward of `op`, also what recomputing it costs.
  double ForwardMillis(const OpInfo& op) const {
    const double draw = random_per_ms > 0 ? op.random_elements / random_per_ms : 0;
    return Millis(op.forward_flops, op.forward_bytes) + draw;
  }
};

// Replays `ops` (indices into graph.ops(), in order) and returns the highest
// sum of live bytes among tensors they produce, with each op's forward
// workspace. Tensors in `kept` stay live; others are freed once every
// consumer and every op holding them (OpInfo::held) has run (and none is
// outside `ops`).
// `at_peak` (may be null) receives the sizes of the tensors live at that
// peak that are not kept, in the order they were made, and the peak op's
// forward workspace: the transients behind the peak.
int64_t ReplayForward(const OpGraph& g, const std::vector<int>& ops, const std::set<int>& kept,
                      TensorSizes* at_peak = nullptr);

// The first tensors of `tensors`, the last one cut, that add up to `total`,
// with one more of the rest when they add up to less: a figure as the
// allocations behind it (LayerTensors). Empty for a total <= 0.
TensorSizes FitTensors(const TensorSizes& tensors, int64_t total);

// Groups the graph's ops by layer tag, orders the groups (a Boost topological
// sort of the contracted graph) and checks they form a chain: each boundary is
// crossed by exactly one tensor, and no tensor skips a layer except into the
// last layer (the loss reading separate passes' outputs: the producer's
// skip_bytes) and the batch (graph inputs, read again by a later pass's
// embedding). Then, per layer:
//   activation_bytes  every tensor an op of the layer saves, plus its output,
//                     minus its input (the previous layer counts that);
//   skip_bytes        tensors it hands to the last layer past the chain;
//   workspaces        from replaying the layer's ops with tensor liveness
//                     (with grad, without grad, and backward; skips and
//                     their gradients not included). The backward of a
//                     layer in `creating` creates the parameter gradients
//                     its ops compute (they stay, counted apart as the
//                     layer's gradient_bytes; accumulate_workspace_bytes is
//                     the backward adding into them, at least 0); other
//                     layers' add each into the existing .grad through a
//                     transient. The backward workspace is negative where
//                     the backward peaks after autograd has freed more of
//                     what the layer saved than the gradients it has yet to
//                     make (LayerProfile::backward_workspace_bytes), and
//                     never below -(activation_bytes - output_bytes);
//   times             roofline sums of forward and backward op costs;
//   selective options "attention_core" when the layer has core ops: drops the
//                     core's saved internals, recomputes them in backward;
//                     "mlp_activation" when it has MLP activation ops: drops
//                     the activation's output (kept by the next projection),
//                     recomputed from its kept input in that projection's
//                     backward; "attention_core+mlp_activation": both;
//                     "norm_output" when it has tagged norms: drops each
//                     norm's outputs (the projections' input, its
//                     statistics), recomputed from its kept input in those
//                     projections' backward; "attention_core+mlp_activation+
//                     norm_output": all three (the norms' two only after the
//                     first three, as the runtime numbers them);
//                     "dropout_mask" when it has tagged dropouts: drops
//                     each one's mask, drawn again from the generator state
//                     in that dropout's backward; then all four (the core's
//                     dropout is the core's there). Their
//                     recompute workspace is what the recomputes, replayed
//                     where the backward reaches them, add to its peak,
//                     counted against the full backward's workspace (what
//                     an option drops is workspace once made again, so
//                     where the full backward peaks after it is freed the
//                     option's recompute workspace is those bytes);
//   tensors           the figures above as the tensors behind them
//                     (LayerTensors): the saved set's tensors exactly, each
//                     workspace as the transients live at its peak
//                     (FitTensors).
// `kinds` maps a layer tag to its kind (embedding/block/...).
// kIdentical derives a layer once for all layers whose ops, tensors and
// place in the chain are alike (a model's transformer blocks) and copies its
// figures to the others; kNone derives every layer (the same figures).
enum class LayerReuse { kIdentical, kNone };
Result<std::vector<LayerProfile>> DeriveChain(
    const OpGraph& graph, const OpTimeModel& time,
    const std::vector<std::pair<std::string, std::string>>& kinds,
    const std::set<std::string>& creating = {}, LayerReuse reuse = LayerReuse::kIdentical);

}  // namespace remat::analytic

#endif  // REMAT_SRC_ANALYTIC_CHAIN_H_
