// The simulator's memory and time model of a chain, as the terms the optimal
// solvers' dynamic programs add and compare (in memory slots).
//
// The solvers work on intervals (s, t) of layers s..t-1 (0 <= s < t <= L):
// on entry x[s] and the gradient g[t] are live (g[0] and g[L] do not exist:
// zero bytes); on exit the backwards of s..t-1 have run and g[s] is live.
// An interval is solved by one of (see simulator.h for the per-op peaks):
//   keep, mode k:  forward s with grad (save all, or selective option k-1),
//                  solve (s+1, t) while x[s] and a[s] are held, backward s;
//   split at s':   forward s..s'-1 without grad, keeping only x[s];
//                  solve (s', t) while x[s] is held; then solve (s, s').
// Every quantity below is the slot count (memory_units.h) of the exact bytes live
// at one moment of these schedules, so a schedule whose checks pass fits.
#ifndef REMAT_SRC_SOLVER_CHAIN_TERMS_H_
#define REMAT_SRC_SOLVER_CHAIN_TERMS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "remat/profile/profile.h"
#include "remat/schedule/schedule.h"
#include "solver/memory_units.h"

namespace remat::solver {

// One way to run a layer's forward with grad.
struct KeepMode {
  SaveMode save = SaveMode::kAll;
  int option = -1;         // selective option index (save == kSelective)
  int64_t kept_bytes = 0;  // |a[s]| under this mode (output excluded)
  int64_t recompute_workspace_bytes = 0;
  double extra_ms = 0;                  // added to the layer's backward
  int64_t forward_workspace_bytes = 0;  // transient at this mode's forward peak
};

// A stretch of split points with the same sweep peak: for splits s' from
// `first_split` up to the next step's first_split, the no-grad forwards
// s..s'-1 peak at `bytes` on top of x[s] and g[t].
struct SweepStep {
  int first_split = 0;
  int64_t bytes = 0;
};

// The sweep steps of every interval start of a profile (ChainTerms::sweep):
// bytes alone, the same whatever the memory units, so ChainTerms made for
// many budgets of one profile may share them.
struct ChainSweeps {
  // `profile` must be valid (ValidateProfile).
  explicit ChainSweeps(const Profile& profile);
  // Whether a layer gathers on recompute (the backward sweeps differ).
  bool gathers = false;
  // [backward][s]: the steps from s, and the step of each split s' > s.
  std::vector<std::vector<SweepStep>> steps[2];
  std::vector<std::vector<int>> step_of[2];
};

// The bytes a kept layer holds (input plus what it saves) that recur most
// often in the chain (a transformer's block), for MemoryUnits' align_bytes;
// 0 if no two layers hold the same.
int64_t RecurringKeepBytes(const Profile& profile);

class ChainTerms {
 public:
  // `profile` must be valid (ValidateProfile) and outlive this object.
  // `sweeps`: ChainSweeps(profile) made before (null: made here).
  ChainTerms(const Profile& profile, const MemoryUnits& units,
             std::shared_ptr<const ChainSweeps> sweeps = nullptr);

  const Profile& profile() const { return profile_; }
  int num_layers() const { return num_layers_; }
  int64_t slots() const { return units_.slots(); }
  const MemoryUnits& units() const { return units_; }

  // Slots held by x[s] while the rest of an interval starting at s runs.
  int64_t x(int s) const { return x_slots_[s]; }
  // |x[i]| in bytes, i in [0, L].
  int64_t x_bytes(int i) const { return x_bytes_[i]; }
  // Peak of backward s when s starts a segment (recomputed with grad, mode 0,
  // in an interval (s, L)): its checkpoint x[s] is live whether or not the
  // layer keeps its input.
  int64_t segment_backward_need(int s) const { return BackwardNeedExact(s, 0, true); }
  // Bytes of forward j without grad at its peak: x[j] + x[j+1] + workspace.
  int64_t NoGradForwardBytes(int j) const {
    return x_bytes_[j] + x_bytes_[j + 1] + profile_.layers[j].nograd_workspace_bytes();
  }

  int num_modes(int s) const { return mode_begin_[s + 1] - mode_begin_[s]; }
  const KeepMode& mode(int s, int k) const { return modes_[mode_begin_[s] + k]; }
  // Slots held by x[s] and a[s] (mode k) while (s+1, t) runs.
  int64_t keep(int s, int k) const { return keep_slots_[mode_begin_[s] + k]; }
  // Peak of backward s after a keep of mode k: x[s] counted when layer s
  // keeps it; the output x[s+1] only for the loss (chain_graph.h).
  int64_t backward_need(int s, int k) const { return backward_slots_[mode_begin_[s] + k]; }
  // keep() when x[s] stays live until backward s although layer s does not
  // keep its input: the simulator releases it after a forward of s with grad
  // only when its producer's last forward ran with grad (a[s-1] live) and
  // s > 0. Equal to keep() for a layer that keeps its input.
  int64_t keep_holding_input(int s, int k) const { return keep_held_slots_[mode_begin_[s] + k]; }
  // backward_need() with x[s] counted also when `held` (a checkpoint the
  // layer does not keep, live until its backward).
  int64_t BackwardNeedExact(int s, int k, bool held) const {
    return (held ? backward_held_slots_ : backward_slots_)[mode_begin_[s] + k];
  }
  // Peak of forward s with grad (mode k) in interval (s, t): with the
  // parameter gradients of layers t..L-1 (created in their backwards, live
  // until the optimizer step), as during every op of the interval.
  int64_t ForwardNeed(int s, int t, int k) const {
    // Inside backward (t < L) the forward is a recompute, which gathers a
    // sharded block's weights again (LayerProfile::recompute_gather_bytes)
    // unless its backward runs next (s = t - 1: gathered for that backward).
    const int64_t gather = t < num_layers_ && s + 1 < t ? recompute_gather_bytes_[s] : 0;
    return units_.Slots(forward_bytes_[mode_begin_[s] + k] + after_bytes_[t] + gather);
  }
  // Bytes of the parameter gradients created in the backwards of layers
  // t..L-1 (LayerProfile::gradient_bytes), t in [0, L]: live while any
  // interval (s, t) runs.
  int64_t gradients_after(int t) const { return grads_from_[t]; }

  // The sweep steps for intervals (s, t) starting at s, by increasing
  // first_split. Inside backward (t < L) the sweep's forwards are
  // recomputes, each followed by another: they hold their layers'
  // recompute_gather_bytes too.
  const std::vector<SweepStep>& sweep(int s, int t) const {
    return sweeps_->steps[t < num_layers_ && sweeps_->gathers][s];
  }
  // Index in sweep(s, t) of the step that split s' (s < s' < L) falls in.
  int sweep_step(int s, int t, int split) const {
    return sweeps_->step_of[t < num_layers_ && sweeps_->gathers][s][split - s - 1];
  }
  // Peak of a sweep from s in interval (s, t) whose step has `sweep_bytes`.
  int64_t SweepNeed(int s, int t, int64_t sweep_bytes) const {
    return units_.Slots(x_bytes_[s] + g_bytes_[t] + grads_from_[t] + sweep_bytes);
  }

  // Forward time of layers s..e-1 (ms).
  double ForwardMs(int s, int e) const { return forward_prefix_[e] - forward_prefix_[s]; }
  double forward_ms(int s) const { return profile_.layers[s].forward_ms; }

 private:
  const Profile& profile_;
  MemoryUnits units_;
  int num_layers_;
  std::vector<int64_t> x_bytes_, g_bytes_;  // |x[i]|, |g[i]| for i in [0, L]
  std::vector<int64_t> grads_from_;         // gradients_after(i), i in [0, L]
  std::vector<int64_t> x_slots_;
  std::vector<int> mode_begin_;
  std::vector<KeepMode> modes_;
  std::vector<int64_t> keep_slots_, backward_slots_;
  std::vector<int64_t> keep_held_slots_, backward_held_slots_;
  std::shared_ptr<const ChainSweeps> sweeps_;
  std::vector<double> forward_prefix_;
  // ForwardNeed's bytes: by mode, x[s] + x[s+1] + its kept and forward
  // workspace bytes; by t, g[t] and the gradients after t; by layer, its
  // recompute gather.
  std::vector<int64_t> forward_bytes_, after_bytes_, recompute_gather_bytes_;
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_CHAIN_TERMS_H_
