// A layer's backward replayed with tensor liveness: the workspace a way of
// running it (the full backward, one adding into existing gradients, one
// with a selective option's parts recomputed) needs above the layer's
// state. Internal to the planner; chain.cc calls it.
#ifndef REMAT_SRC_ANALYTIC_BACKWARD_WORKSPACE_H_
#define REMAT_SRC_ANALYTIC_BACKWARD_WORKSPACE_H_

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "analytic/op_graph.h"
#include "remat/profile/profile.h"

namespace remat::analytic {

// Ops of a layer recomputed in backward from what the layer keeps.
struct RecomputePart {
  std::vector<int> ops;  // in execution order
  // Whether the part's output, read by the layer's other ops, is kept from
  // the forward (the attention core's context: its gradient reaches the
  // recompute, layer_execution.cc, whose own output lives on only where an
  // op of the part saves it). Otherwise (the MLP activation, a norm) the
  // output is dropped too, made again with the part and freed with its
  // consumer's backward.
  bool holds_output = true;
  // A dropout that keeps no mask (OpInfo::dropout_mask): only what the op
  // saves of its own outputs (the mask) is dropped, and nothing is kept to
  // make it again (the generator state the runtime saves is not a tensor).
  // Unlike the other parts, it is made again in the op's own backward.
  bool regenerates = false;
  // The part and the op whose backward recomputes it (its host: the first
  // op, in backward order, that saves what the part drops) are one autograd
  // function: the runtime's ActivationLinear (mlp_recompute.cc), the MLP
  // activation and the projection after it. The host's output gradient, the
  // part's output gradient (the host's input gradient) and the host's
  // parameter-gradient transients live until the part's backward is done,
  // and the layer's other ops between them (llama's up_proj, which makes
  // the activation's other input) run their backward after the function.
  bool fused = false;
};

// How a layer's backward runs (BackwardWorkspace).
struct BackwardRun {
  // The backward creates the parameter gradients (the first backward of a
  // step when gradients are created in backward): each op's gradients
  // become .grad and stay. Otherwise each is a transient of its op, added
  // into the existing .grad.
  bool creates_gradients = false;
  // A selective option's parts and the saved tensors each drops, recomputed
  // when the layer's backward starts (none: the full backward).
  std::vector<RecomputePart> parts;
  std::vector<std::set<int>> dropped;
};

// Backward of `ops` in reverse: each op allocates its inputs' gradients and
// frees its outputs' once it has run, and autograd releases what an op saved
// once it has run (a tensor several ops save: after the last of them; not
// the layer's input, output and side inputs, which the executor holds).
// Parameter gradients are transients of their op, or, when the backward
// creates them, stay from their op on. The recomputed parts are made again
// before the first op's backward, in forward order, as PyTorch's selective
// checkpoint replays a layer at its backward's first unpack: each part's
// dropped tensors live from there until autograd releases them (a part
// that holds its output, the attention core: its output too, until the
// part's backward is done; the norms' and the MLP activation's: until the
// backward of the function that recomputes them, the projections after
// the norm, the activation and the projection after it). A regenerated
// dropout mask is drawn again in its own op's backward.
//
// One replay: construct, then call Run once. The object refers to `g`,
// `ops`, `side_inputs` and `run`, which must outlive it.
class BackwardWorkspace {
 public:
  BackwardWorkspace(const OpGraph& g, const std::vector<int>& ops, int input, int output,
                    const std::set<int>& side_inputs, const BackwardRun& run);
  BackwardWorkspace(const BackwardWorkspace&) = delete;
  BackwardWorkspace& operator=(const BackwardWorkspace&) = delete;

  // Returns the peak above the layer's state when its backward starts, the
  // input gradient the layer hands on, the gradients of the skips it reads
  // (`side_inputs`; the simulator counts those) and the parameter gradients
  // it creates (the simulator counts them from the layer's start):
  // negative where autograd has freed more saved tensors by the peak than
  // the gradients still to be made there.
  // `at_peak` (may be null) receives the tensors made in the backward that
  // are live at its peak, but the input's and side inputs' gradients: the
  // activation gradients in the order of their tensors, then the peak op's
  // transients (its workspace, its parameter-gradient transient) or the
  // recompute's forward peak.
  int64_t Run(TensorSizes* at_peak = nullptr);

 private:
  // The backward's order: the ops in reverse, but for a fused part the ops
  // between its host and its first op, which run after the function
  // (order_, fused_host_).
  void OrderBackward();
  // Records the live gradients and `transients` when `now` is a new peak.
  void NotePeak(int64_t now, const TensorSizes& transients);
  // Whether an op of `part` saves tensor t.
  bool SavedBy(const RecomputePart& part, int t) const;
  // Makes part i again: its dropped tensors become live, and a part that
  // holds its output, the output too.
  void Recompute(size_t i);
  // The outputs of `part` read outside it: their gradients held until the
  // part's backward is done, and the outputs an op of the part saves.
  void HoldOutputs(const RecomputePart& part);
  // The parts made again before any op's backward runs, in forward order
  // (PyTorch's selective checkpoint replays the layer at its backward's
  // first unpack); a regenerated mask waits for its op's backward.
  void RecomputeAtStart();
  // The parts not yet made that op `o`'s backward reaches: its own, or one
  // whose dropped tensors it saved.
  void RecomputeReachedBy(int o);
  // Op `o`'s backward: its inputs' gradients, its transients, its outputs'
  // gradients and saved tensors released.
  void BackwardOf(int o);

  const OpGraph& g_;
  const std::vector<int>& ops_;
  const int input_;
  const int output_;
  const std::set<int>& side_inputs_;
  const BackwardRun& run_;
  TensorSizes* at_peak_ = nullptr;
  std::map<int, int> savers_;  // saved tensor -> ops yet to run backward that save it
  std::map<int, int64_t> released_after_;  // op -> recomputed bytes freed after its backward
  std::vector<bool> recomputed_;           // by part
  std::vector<int> order_;                 // the ops in backward order
  std::map<int, int> fused_host_;          // host op -> the first op of its fused part
  std::set<int> grads_;                    // live activation gradients
  // Gradient a recompute holds (a fused part's function, a held output's
  // backward) -> the part's first op, after whose backward it is freed.
  std::map<int, int> held_grads_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
  int64_t created_ = 0;  // parameter gradients created so far
};

}  // namespace remat::analytic

#endif  // REMAT_SRC_ANALYTIC_BACKWARD_WORKSPACE_H_
