// Strategies: each turns a profile and a budget into its best plan.
//
// Each strategy is a StrategySolver. With a budget, a solver returns its
// cheapest plan that fits (or, when none of its plans fits, the one with the
// lowest peak, with fits == false). MakePlan runs the requested strategy, or
// for kAuto every registered solver that needs no user input, and picks the
// cheapest fitting plan.
#ifndef REMAT_STRATEGIES_H_
#define REMAT_STRATEGIES_H_

#include <vector>

#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat {

class StrategySolver {
 public:
  virtual ~StrategySolver() = default;
  virtual Strategy strategy() const = 0;
  virtual Result<Plan> Solve(const Profile& profile, const PlanOptions& options) const = 0;
};

// The registered solvers, one per strategy except kAuto.
const std::vector<const StrategySolver*>& AllSolvers();
const StrategySolver* FindSolver(Strategy strategy);

// Whether `auto` and a budget sweep can run `s` on their own: every
// registered strategy but kAuto (it picks among the others) and kManual (it
// needs a layer list).
bool Sweepable(Strategy s);
// The sweepable strategies, in registry order.
std::vector<Strategy> SweepableStrategies();
// Whether `s` can plan `profile`: kOffload needs profile.host_link, and a
// host budget (if any) that holds one block's input.
bool AppliesTo(Strategy s, const Profile& profile);

// Plans `profile` under `options`. A plan that does not fit is still
// returned (chosen.fits == false); errors are for invalid options only.
Result<PlanSet> MakePlan(const Profile& profile, const PlanOptions& options);

}  // namespace remat

#endif  // REMAT_STRATEGIES_H_
