// The solver registry and MakePlan: one strategy, or auto over all of them.
#include "strategies/solvers.h"

namespace remat {

const std::vector<const StrategySolver*>& AllSolvers() { return RegisteredSolvers(); }

const StrategySolver* FindSolver(Strategy strategy) {
  for (const StrategySolver* s : AllSolvers()) {
    if (s->strategy() == strategy) return s;
  }
  return nullptr;
}

bool Sweepable(Strategy s) {
  return s != Strategy::kAuto && s != Strategy::kManual && FindSolver(s) != nullptr;
}

std::vector<Strategy> SweepableStrategies() {
  std::vector<Strategy> out;
  for (const StrategySolver* solver : AllSolvers()) {
    if (Sweepable(solver->strategy())) out.push_back(solver->strategy());
  }
  return out;
}

Result<PlanSet> MakePlan(const Profile& profile, const PlanOptions& options) {
  REMAT_RETURN_IF_ERROR(
      ValidateProfile(profile, profile.model.empty() ? "profile" : profile.model));
  PlanSet set;
  REMAT_ASSIGN_OR_RETURN(set.baseline, FindSolver(Strategy::kNone)->Solve(profile, options));
  if (options.strategy != Strategy::kAuto) {
    const StrategySolver* solver = FindSolver(options.strategy);
    if (solver == nullptr) {
      return Status::Invalid(std::string("strategy '") + ToString(options.strategy) +
                             "' is not available in this build");
    }
    REMAT_ASSIGN_OR_RETURN(set.chosen, solver->Solve(profile, options));
    set.candidates.push_back(set.chosen);
    return set;
  }
  set.auto_selected = true;
  for (Strategy s : SweepableStrategies()) {
    REMAT_ASSIGN_OR_RETURN(Plan plan, FindSolver(s)->Solve(profile, options));
    if (set.candidates.empty() || BetterPlan(plan, set.chosen)) set.chosen = plan;
    set.candidates.push_back(std::move(plan));
  }
  return set;
}

}  // namespace remat
