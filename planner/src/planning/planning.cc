// RunPlanner: plan the job, and weigh what the request asks beside it.
#include "remat/planning.h"

namespace remat {

Status PlanningResult::fit_status() const {
  return advice ? Status::NoFit(advice->message) : Status::Ok();
}

Result<PlanningResult> RunPlanner(const Job& job, const PlanningRequest& request) {
  PlanningResult result;
  REMAT_ASSIGN_OR_RETURN(result.plans, MakePlan(job.profile, request.options));
  if (!result.plans.chosen.fits) {
    result.advice = AdviseFit(job, result.plans, request.options, request.suggest_fit);
  }
  if (request.sweep_points >= 2) {
    ParetoOptions sweep;
    sweep.points = request.sweep_points;
    sweep.slots = request.options.slots;
    sweep.progress = request.progress;
    REMAT_ASSIGN_OR_RETURN(result.sweep, ParetoSweep(job.profile, sweep));
  }
  return result;
}

}  // namespace remat
