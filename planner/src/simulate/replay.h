// The simulator's replay of one micro-step (simulator.h describes the
// memory and time model): the live tensors, the allocator requests and the
// host link, op by op. Internal to the planner; simulator.cc drives it.
#ifndef REMAT_SRC_SIMULATE_REPLAY_H_
#define REMAT_SRC_SIMULATE_REPLAY_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "remat/device/caching_allocator.h"
#include "remat/profile/profile.h"
#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"
#include "simulate/alloc_requests.h"

namespace remat::simulate_internal {

struct LiveTensor {
  bool live = false;
  int64_t bytes = 0;
  MemoryCategory category = MemoryCategory::kActivations;
  int option = -1;        // for a[i]: the selective option it was saved under
  bool graph = false;     // for x[i+1]: written by a forward with grad (carries its graph)
  bool released = false;  // x[i] released by a forward of a layer that does not keep it,
                          // a[i] by its backward (autograd lets its saved tensors go)
  bool on_host = false;   // offloaded: its bytes are host memory until a prefetch
  bool leaving = false;   // overlapped offload: device bytes held until its copy ends
};

// An overlapped copy's effect that waits for the copy's end: the offload's
// device bytes released, or the prefetch's host bytes.
struct PendingRelease {
  double end_ms = 0;
  int key = 0;
  bool device = true;  // device bytes (an offload) or host bytes (a prefetch)
  int64_t bytes = 0;
};

// Index of tensor `t` of a chain of L layers in Replay::live() (and in the
// ids of Requests).
inline int Key(TensorRef t, int L) { return static_cast<int>(t.kind) * (L + 1) + t.index; }

// The bytes of all categories (MemoryByCategory::total, summed without a
// loop: the replay sums three times per op).
inline int64_t Total(const MemoryByCategory& m) {
  static_assert(static_cast<int>(MemoryCategory::kCount) == 6);
  const auto& b = m.bytes;
  return b[0] + b[1] + b[2] + b[3] + b[4] + b[5];
}

// The layer a tensor's bytes are attributed to: x[i+1], a[i] and g[i] are
// layer i's, x[0] layer 0's.
inline int LayerOf(TensorRef t) {
  if (t.kind == TensorKind::kX) return std::max(0, t.index - 1);
  return t.index;
}

// Replays the schedule op by op (Step), with the live table as it is at
// the last op's peak moment available through live().
class Replay {
 public:
  // `gradients_at_start`: the parameter gradients created in backward exist
  // before the first op (micro-batches 2..K of an update).
  // `events` (may be null) receives the allocator requests (Requests).
  // `in_flight_bytes`: what the other micro-batches of a pipeline stage
  // hold (InFlightBytes), live from the start to the end.
  // `p`, `s`, `g`, `allocator` and `events` must outlive the replay.
  Replay(const Profile& p, const Schedule& s, const ChainGraph& g,
         const CachingAllocatorModel* allocator, bool gradients_at_start,
         std::vector<AllocEvent>* events = nullptr, int64_t in_flight_bytes = 0);
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

  // Executes op `i` (the next one; ops run in order from 0) and fills its
  // point; adds the op's times and transfers to `r`.
  void Step(int i, TimelinePoint* pt, SimulationResult* r);

  // After the last op: what the overlapped copies still hold is released.
  void Finish() { ReleasePending(1e300); }

  const std::vector<LiveTensor>& live() const { return live_; }
  // Whether layer i's parameter gradients exist now.
  bool has_gradients(int layer) const { return grads_[layer]; }
  int64_t reserved_now() const { return tally_.reserved(); }
  // Bytes of layer `layer` that were live at the last op's peak and that
  // live() does not show: side outputs (LayerProfile::skip_bytes) and their
  // gradients, and what the op released after its peak (skips, a backward's
  // a[i]).
  int64_t side_live(int layer) const {
    return skip_[layer].bytes + skip_grad_[layer].bytes + released_[layer];
  }

 private:
  // An op up to its peak moment: the live bytes by category there, its
  // transient request there (workspace), the bytes of a[i] its backward
  // released before it (released), and the op's time (ms).
  struct OpPeak {
    MemoryByCategory live;
    int64_t workspace = 0;
    int64_t released = 0;
    double ms = 0;
  };

  // The functions declared inline run once or more per op and are used in
  // replay.cc only, where they are defined (inlined into Step, they spare a
  // call per op).
  // Op `i` up to its peak moment, by its kind (Step does the rest).
  inline OpPeak StepToPeak(int i, const Op& op, TimelinePoint* pt, SimulationResult* r);
  // The op kinds, each up to its peak moment.
  // A forward or a recompute (op `i`): writes its outputs, runs with its
  // workspace; after the peak it may release its input (release_x_).
  inline OpPeak StepForward(int i, const Op& op, SimulationResult* r);
  // Whether the next compute op after op `i` is a recompute (op i is not
  // the last of a run of recomputes before a backward).
  inline bool RecomputesFollow(int i) const;
  // A backward: creates the layer's parameter gradients, writes g[i], runs
  // with its workspace (and a selective option's recompute); after the
  // peak autograd has released a[i] (release_a_).
  inline OpPeak StepBackward(const Op& op, SimulationResult* r);
  // A free: its peak is the moment before (pt->reserved set there).
  inline OpPeak StepFree(const Op& op, TimelinePoint* pt);
  // The optimizer step: its temporaries over the gradients it frees after.
  OpPeak StepOptimizer(SimulationResult* r);
  // An offload or a prefetch: in line, the copy on the compute clock;
  // overlapped, queued on the link (IssueCopy).
  OpPeak StepCopy(const Op& op, SimulationResult* r);
  // After op `op`'s peak: the input it does not keep, the a[i] its backward
  // released, the gradients the optimizer step frees.
  inline void ReleaseAfterOp(const Op& op);

  // Side outputs to the loss. A layer's first forward writes its skip; the
  // loss's (last layer's) backward writes every skip's gradient at its peak
  // and frees the skips after it (ReleaseSkips, for a backward); a layer's
  // backward frees its skip's gradient after it.
  inline void WriteSkips(const Op& op);
  inline void ReleaseSkips(const Op& op);

  // Overlapped link, before op `op` starts: a compute op reading a tensor
  // whose prefetch is still copying waits for the copy's end (the stall is
  // transfer_ms); then the copies that ended by the op's start release what
  // they held.
  void WaitForLink(const Op& op, SimulationResult* r);
  // Overlapped link: queues the copy on its direction's queue. An offload
  // keeps the device bytes until its copy ends; a prefetch allocates them
  // now and its readers wait for its end (ready_ms_).
  void IssueCopy(const Op& op, SimulationResult* r);
  // Applies the pending releases of the copies ended by `now_ms`.
  void ReleasePending(double now_ms);
  // Drops the pending release of `key` (device bytes or host bytes).
  void DropPending(int key, bool device);

  // The tensors of a[i] saved under `option` (-1: the full save); null for
  // other tensors, one allocation each.
  const TensorSizes* SavedTensors(TensorRef t, int option) const;
  inline void CreateGradients(int layer);
  // A tensor released after the op's peak: its bytes leave, its entry stays
  // live (its free frees nothing).
  inline void ReleaseAfterPeak(int key);
  inline void FreeGradients(int layer);

  const Profile& p_;
  const Schedule& s_;
  const ChainGraph& graph_;
  std::vector<LiveTensor> live_;
  std::vector<LiveTensor> skip_, skip_grad_;  // by layer
  std::vector<int64_t> released_;             // by layer, in the last op
  std::vector<int> released_layers_;          // the layers with released_ != 0
  std::vector<bool> grads_;                   // layer -> its parameter gradients exist
  // op -> releases its layer's input (InputReleasingOps); empty where no
  // layer does.
  std::vector<bool> releases_input_;
  int release_x_ = -1;                // x index the current op releases after its peak
  int release_a_ = -1;                // a index the current backward releases after its peak
  int64_t release_a_at_peak_ = 0;     // its bytes at that peak
  MemoryByCategory cat_;
  Requests tally_;
  // The running op's workspace as tensors: a list of the profile's (may be
  // null), then one more (a recompute's side output, a selective backward's
  // recompute workspace; 0: none).
  const TensorSizes* workspace_tensors_ = nullptr;
  int64_t workspace_extra_ = 0;
  int64_t host_bytes_ = 0;  // offloaded tensors in host memory
  double time_ms_ = 0;
  // Overlapped link: when each direction's queue frees, when each tensor's
  // copy out ends and its copy back is ready (by Key), and what the copies
  // in flight still hold.
  double d2h_free_ms_ = 0, h2d_free_ms_ = 0;
  std::vector<double> out_end_ms_, ready_ms_;
  std::vector<PendingRelease> pending_;
};

}  // namespace remat::simulate_internal

#endif  // REMAT_SRC_SIMULATE_REPLAY_H_
