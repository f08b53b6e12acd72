// A floor under the plans of one offload layer list: every schedule that
// offloads a prefix of its movable checkpoints takes at least the floor's
// step time and device total, so the offload search (offload.cc) skips a
// layer list whose floor cannot beat the plan it keeps at a budget.
//
// The floor is the plan of the list with all its movable checkpoints
// offloaded over a free link (no latency, unbounded bandwidth). Why it is
// one, from the simulator's model (simulate/replay.h):
// - Time: every such schedule runs the same compute ops in the same order,
//   so their forward, backward, recompute and optimizer sums are the same
//   floating-point sums; a copy only adds transfer_ms >= 0, and a free
//   link adds none (a copy ends when it is issued).
// - Memory: over a free link an offloaded checkpoint's device bytes go at
//   the next op, the earliest any link lets them go, and a prefetch brings
//   them back where any link does; so at every point between ops the free
//   link holds a subset of the tensors a slower link holds, and every op
//   adds the same bytes on top (its writes, workspace, releases). Each op's
//   allocated and reserved peak is then no higher, and so is the total.
//   Offloading one more checkpoint over a free link takes its bytes away
//   from its offload to its prefetch and adds two ops whose peak is what
//   is live at that point; what is live between two ops is at most the
//   peak of the op before, as long as no op's peak lies below what it
//   leaves live: true of frees, copies and backwards, and of forwards and
//   the optimizer step when their workspaces are not negative (FloorHolds).
//
// A cheaper floor of device memory alone comes without a simulation
// (SegmentFloorBytes): at the peak of the recompute of a segment's last
// layer (with grad) every layer of the segment has saved its a[i], which no
// copy moves and only the layers' backwards release; with no tensor of
// negative size and no negative forward workspace (FloorHolds) everything
// else live there only adds.
#ifndef REMAT_SRC_STRATEGIES_OFFLOAD_FLOOR_H_
#define REMAT_SRC_STRATEGIES_OFFLOAD_FLOOR_H_

#include <cstdint>
#include <vector>

#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/schedule/decisions.h"
#include "remat/schedule/schedule.h"

namespace remat::strategies {

struct OffloadFloor {
  double step_ms = 0;
  int64_t total_bytes = 0;  // Plan::memory.total_bytes without a budget
};

// Whether the floors' arguments hold for `p`: no forward (with grad or
// without) and no optimizer step with a negative workspace, no tensor of
// negative size, no pipeline stage's micro-batches counted negative.
bool FloorHolds(const Profile& p);

// The cheaper floor of device memory (Plan::memory.total_bytes) of the
// schedules BuildSingleLevelSchedule makes of `decisions`, with any of
// their checkpoints offloaded: the model state and, at its largest over the
// segments run without grad, what the segment's layers save in their
// recompute (activation_bytes - output_bytes each).
int64_t SegmentFloorBytes(const Profile& p, const std::vector<LayerDecision>& decisions);

// `p` with its host link free: no latency, unbounded bandwidth.
Profile WithFreeLink(Profile p);

// The floor of the schedules that offload a prefix of `all_offloaded`'s
// offloaded checkpoints: `all_offloaded` simulated over `free_link`
// (WithFreeLink of the profile).
Result<OffloadFloor> FloorOf(const Profile& free_link, Schedule all_offloaded);

// Whether no plan at or above `floor` (step time and device total) is
// BetterPlan than `kept` at `budget_bytes` (> 0), whether it fits or not:
// `kept` carries what BetterPlan reads (fits at the budget, step time,
// device total).
bool CannotBeat(const OffloadFloor& floor, const Plan& kept, int64_t budget_bytes);

}  // namespace remat::strategies

#endif  // REMAT_SRC_STRATEGIES_OFFLOAD_FLOOR_H_
