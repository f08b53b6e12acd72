// MakePlan: the requested strategy's plan from the fit search, or auto:
// every strategy that applies, the fastest plan that fits chosen. Both take
// each strategy's plan from one FitSearch, so auto's candidates are the
// strategies' plans run alone.
#include "remat/strategies/fit_search.h"
#include "strategies/solvers.h"

namespace remat {

Result<PlanSet> MakePlan(const Profile& profile, const PlanOptions& options) {
  REMAT_RETURN_IF_ERROR(
      ValidateProfile(profile, profile.model.empty() ? "profile" : profile.model));
  if (options.strategy != Strategy::kAuto && FindSolver(options.strategy) == nullptr) {
    return Status::Invalid(std::string("strategy '") + ToString(options.strategy) +
                           "' is not available in this build");
  }
  FitSearch search(profile, options);
  PlanSet set;
  // The run without checkpointing is none's plan, as --strategy none gives it.
  REMAT_ASSIGN_OR_RETURN(set.baseline, search.Of(Strategy::kNone));
  if (options.strategy != Strategy::kAuto) {
    REMAT_ASSIGN_OR_RETURN(set.chosen, search.Of(options.strategy));
    set.candidates.push_back(set.chosen);
    return set;
  }
  set.auto_selected = true;
  for (Strategy s : SweepableStrategies()) {
    if (!AppliesTo(s, profile)) continue;
    REMAT_ASSIGN_OR_RETURN(Plan plan, search.Of(s));
    if (set.candidates.empty() || BetterPlan(plan, set.chosen)) set.chosen = plan;
    set.candidates.push_back(std::move(plan));
  }
  return set;
}

}  // namespace remat
