// Strategies: each turns a profile and a budget into its best plan.
//
// Each strategy is a StrategySolver. With a budget, a solver returns its
// cheapest plan that fits (or, when none of its plans fits, the one with the
// lowest peak, with fits == false). MakePlan runs the requested strategy, or
// for kAuto every registered solver that needs no user input, and picks the
// cheapest fitting plan.
#ifndef REMAT_STRATEGIES_H_
#define REMAT_STRATEGIES_H_

#include <cstddef>
#include <functional>
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

// Runs every task of a list once and returns when all have run; the tasks
// may run at the same time (they are safe to).
using RunTasks = std::function<void(const std::vector<std::function<void()>>& tasks)>;

// The strategies searched together where strategies are searched at the same
// time, for the work they share (each strategy's plan is the same on any
// search: the searches are deterministic, a memo only saves repeating them):
// none with the heuristics (their searches start from the plan without
// checkpointing), optimal with optimal-single (optimal solves
// optimal-single's layer list for its cap, and takes a contained strategy's
// plan where its own does not fit), offload alone: 0 to kSearchGroups - 1.
int SearchGroup(Strategy s);
constexpr int kSearchGroups = 3;

// The indices of `strategies` by group (SearchGroup), each group's in
// order and the groups in the order of their first strategy; one group of
// all where `at_once` is false (one search).
std::vector<std::vector<size_t>> SearchGroups(const std::vector<Strategy>& strategies,
                                              bool at_once);

// MakePlan's plans, each group of strategies (SearchGroup) searched as a
// task of `run` on a search of its own, the searches sharing one memo of the
// profile's simulations. An empty `run`: every strategy on one search, in
// line (MakePlan(profile, options)).
Result<PlanSet> MakePlan(const Profile& profile, const PlanOptions& options, const RunTasks& run);

}  // namespace remat

#endif  // REMAT_STRATEGIES_H_
