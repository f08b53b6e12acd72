// Each strategy's plans for one profile, searched once: the fit search over
// the strategies' solvers (strategies/fit_search.cc).
#ifndef REMAT_STRATEGIES_FIT_SEARCH_H_
#define REMAT_STRATEGIES_FIT_SEARCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "remat/plan/plan_memo.h"
#include "remat/strategies/strategies.h"

namespace remat {

// Each strategy's plan for one profile and one set of options, each
// searched once: auto, the strategies table and a strategy run alone all
// take their plans from here, so a row of the table is the strategy's plan
// run alone.
//
// A strategy's plan is:
//  - the fastest plan its solver finds that fits (SolveOnDevice; on a
//    pipeline stage also the search over a reserve for the micro-batches
//    in flight, below);
//  - where that finds none, its least-memory plan (LeastMemory), and where
//    that one fits, the fastest plan found between its peak and the budget;
//  - for optimal and optimal-single, which contain the heuristics' layer
//    lists (and optimal optimal-single's): where their own search finds no
//    plan that fits, the fastest fitting plan of a strategy they contain,
//    as theirs.
// A strategy that fits nothing returns its least-memory plan, which does
// not depend on the budget; a fit decided by it is found at every larger
// budget; optimal's least-memory plan never holds more than those of the
// strategies it contains, on the device as in tensors.
//
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
//
// `profile` and `options` must outlive the FitSearch. Not thread-safe.
class FitSearch {
 public:
  // `profile` and `options` must outlive the search and not change while it
  // lives (its plans and simulations are kept).
  FitSearch(const Profile& profile, const PlanOptions& options);
  ~FitSearch();
  FitSearch(const FitSearch&) = delete;
  FitSearch& operator=(const FitSearch&) = delete;

  // The plan of `s` (a registered strategy other than kAuto), with
  // options.strategy set to `s` unless it is kAuto (the solvers then know
  // that auto weighs them: optimal declines a chain longer than it solves).
  Result<Plan> Of(Strategy s);

  // The least-memory plan of `s`: its solver at a tensor budget of 1 byte
  // (the least allocated peak it finds), accounted against the budget; for
  // optimal and optimal-single the least device total of that and the
  // plans of the strategies they contain that fit nothing. kNone and
  // kManual have one plan each: theirs.
  Result<Plan> LeastMemory(Strategy s);

 private:
  PlanOptions OptionsFor(Strategy s) const;
  // The strategy's own search (SolveOnDevice, and the stage search).
  Result<Plan> Search(const StrategySolver& solver, const PlanOptions& options) const;
  // The solver's least-memory plan, accounted.
  Result<Plan> SolverLeast(const StrategySolver& solver, const PlanOptions& options) const;
  // From `least` (fits), the fastest plan found between its peak and the
  // budget (tensor budgets bisected).
  Result<Plan> FasterThanLeast(const StrategySolver& solver, const PlanOptions& options,
                               Plan least) const;

  // The stage search's profile at `reserve`: profile_ with one micro-batch
  // in flight and `reserve` bytes added to its parameters, made once and
  // kept with a memo open on it, so the strategies searched here share its
  // simulations and kept plans (optimal asks optimal-single's plan at its
  // budgets, and both searches try the same reserves).
  const Profile& Reserved(int64_t reserve) const;
  struct ReservedStage;

  const Profile& profile_;
  const PlanOptions& options_;
  mutable std::map<int64_t, std::unique_ptr<ReservedStage>> reserved_;
  std::map<Strategy, Plan> plans_;
  std::map<Strategy, Plan> least_;
  // The simulations of profile_'s schedules, shared by every search here
  // (and with the memo open for profile_ around this search, if any).
  PlanMemo memo_;
};

// The strategies whose plans `s`'s family contains: every single-level
// layer list of the heuristics (uniform, segment, selective) is one of
// optimal-single's, and every one of those a multi-level schedule of
// optimal's. Empty for the others.
std::vector<Strategy> ContainedStrategies(Strategy s);

// A floor under the step time of every plan of `s` that fits which
// FitSearch::Of(s) can return for `profile`, whatever the budget and device
// terms: for uniform and segment the least SingleLevelStepMs of their
// families' layer lists (their plans, fitting or not, are those lists);
// for offload the same of uniform's every-k lists, the lists it offloads
// from (an offload runs the same compute ops and adds transfer time, never
// negative). Lowered by a relative 1e-9 below that sum, far above its
// rounding against Simulate's (relative 1e-12 on chains of 10^4 layers).
// -infinity for the other strategies (none known).
double FittingStepFloor(const Profile& profile, Strategy s);

// A floor under the device total (Plan::memory.total_bytes) of every plan
// FitSearch::Of(s) can return for `profile` with `options`: for none and
// selective (without options.selective_layers) DeviceTotalFloor of the
// least SingleLevelPeakLowerBound of their layer lists (none's keeps every
// layer; selective's family, from none selective to all), as every plan of
// theirs is one of those lists; 0 for the other strategies. A strategy
// whose floor is above the budget has no plan that fits.
int64_t FittingBytesFloor(const Profile& profile, Strategy s, const PlanOptions& options);

// `plan` (a plan of a strategy that `s` contains) as `s`'s: its parameter
// says what it recomputes ("lowest peak, " first where it does not fit).
Plan AsStrategyPlan(Plan plan, Strategy s);

}  // namespace remat

#endif  // REMAT_STRATEGIES_FIT_SEARCH_H_
