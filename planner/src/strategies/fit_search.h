// The fit search over the strategies' solvers (strategies/fit_search.cc).
// Internal to the strategies layer.
#ifndef REMAT_SRC_STRATEGIES_FIT_SEARCH_H_
#define REMAT_SRC_STRATEGIES_FIT_SEARCH_H_

#include "remat/strategies/strategies.h"

namespace remat::strategies {

// `solver`'s plan under `options`: as the solver makes it without device
// memory terms; with terms, solved against the tensor budget and accounted
// against the device budget (AccountPlanMemory). The solvers screen their
// candidates by allocated bytes; only the plan each returns is replayed
// through the allocator model. Where the caching allocator's reserved bytes
// push a plan over the device budget, the tensor budget is lowered by the
// excess and the solver runs again (a few times), then bisected for a
// faster plan that still fits. When no retry fits, the last one's plan is
// returned (fits false): FitSearch (remat/strategies/fit_search.h) decides
// from the strategy's least-memory plan.
Result<Plan> SolveOnDevice(const StrategySolver& solver, const Profile& profile,
                           const PlanOptions& options);

}  // namespace remat::strategies

#endif  // REMAT_SRC_STRATEGIES_FIT_SEARCH_H_
