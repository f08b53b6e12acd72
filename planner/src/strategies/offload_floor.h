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
#ifndef REMAT_SRC_STRATEGIES_OFFLOAD_FLOOR_H_
#define REMAT_SRC_STRATEGIES_OFFLOAD_FLOOR_H_

#include <cstdint>

#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/schedule/schedule.h"

namespace remat::strategies {

struct OffloadFloor {
  double step_ms = 0;
  int64_t total_bytes = 0;  // Plan::memory.total_bytes without a budget
};

// Whether the floor's argument holds for `p`: no forward (with grad or
// without) and no optimizer step with a negative workspace.
bool FloorHolds(const Profile& p);

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
