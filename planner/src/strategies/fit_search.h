// The fit search over one strategy's solver (strategies/fit_search.cc).
// Internal to the strategies layer.
#ifndef REMAT_SRC_STRATEGIES_FIT_SEARCH_H_
#define REMAT_SRC_STRATEGIES_FIT_SEARCH_H_

#include "remat/strategies/strategies.h"

namespace remat::strategies {

// `solver`'s plan under `options`: as the solver makes it without device
// memory terms; with terms, solved against the tensor budget and accounted
// against the device budget (AccountPlanMemory). The solvers screen their
// candidates by allocated bytes; only the plan each returns is replayed
// through the allocator model. When the retries find no plan that fits, or
// the solver finds none within the tensor budget (its search is not
// monotone in the budget either: optimal-single's offload DP), the
// strategy's least-memory plan (solved at a tensor budget of 1 byte)
// decides whether one exists: a fit found at one budget is found at every
// larger one. With none, the plan of the last retry is returned (fits
// false).
Result<Plan> SolveOnDevice(const StrategySolver& solver, const Profile& profile,
                           const PlanOptions& options);

// `solver`'s plan under `options` on a profile of any kind: SolveOnDevice's,
// and on a pipeline stage also the following search, the better plan kept.
// A pipeline stage (layers with micro-batches in flight) holds, beside the
// micro-batch a plan runs, the others' share of what the plan keeps through
// its turn (Simulate's in_flight_bytes). The DP-based solvers account one
// micro-batch in their slots and simulate their plans on the stage, lowering
// the slots by a plan's overshoot (which lowers what every level keeps).
// Beside that, they solve the stage's profile without the others, its model
// state raised by a reserve for them, each plan simulated on the stage: the
// reserve starts at nothing and rises by each plan's overshoot until a plan
// fits (a plan that keeps less also holds less in flight), then is bisected
// for a faster plan that still fits. The better of the two plans wins.
Result<Plan> SearchFit(const StrategySolver& solver, const Profile& profile,
                       const PlanOptions& options);

}  // namespace remat::strategies

#endif  // REMAT_SRC_STRATEGIES_FIT_SEARCH_H_
