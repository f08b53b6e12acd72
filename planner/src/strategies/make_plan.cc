// MakePlan: the requested strategy through the fit search, or auto: every
// strategy that applies, the fastest plan that fits chosen.
#include "strategies/fit_search.h"
#include "strategies/solvers.h"

namespace remat {

using strategies::SearchFit;

Result<PlanSet> MakePlan(const Profile& profile, const PlanOptions& options) {
  REMAT_RETURN_IF_ERROR(
      ValidateProfile(profile, profile.model.empty() ? "profile" : profile.model));
  PlanSet set;
  REMAT_ASSIGN_OR_RETURN(set.baseline,
                         strategies::SolveOnDevice(*FindSolver(Strategy::kNone), profile, options));
  if (options.strategy != Strategy::kAuto) {
    const StrategySolver* solver = FindSolver(options.strategy);
    if (solver == nullptr) {
      return Status::Invalid(std::string("strategy '") + ToString(options.strategy) +
                             "' is not available in this build");
    }
    REMAT_ASSIGN_OR_RETURN(set.chosen, SearchFit(*solver, profile, options));
    set.candidates.push_back(set.chosen);
    return set;
  }
  set.auto_selected = true;
  for (Strategy s : SweepableStrategies()) {
    if (!AppliesTo(s, profile)) continue;
    REMAT_ASSIGN_OR_RETURN(Plan plan, SearchFit(*FindSolver(s), profile, options));
    if (set.candidates.empty() || BetterPlan(plan, set.chosen)) set.chosen = plan;
    set.candidates.push_back(std::move(plan));
  }
  return set;
}

}  // namespace remat
