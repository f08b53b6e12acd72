// RunPlanner: plan the job, and weigh what the request asks beside it.
#include "remat/planning.h"

namespace remat {

Status PlanningResult::fit_status() const {
  return advice ? Status::NoFit(advice->message) : Status::Ok();
}

Result<PlanningResult> RunPlanner(const Job& job, const PlanningRequest& request) {
  PlanningResult result;
  const Job* planned = &job;
  if (request.global_batch > 0) {
    REMAT_ASSIGN_OR_RETURN(result.batch, SearchBatch(job, request.global_batch, request.options));
    // None fits: micro-batch 1, the lowest peak there is, to report.
    const BatchCandidate& pick = result.batch->chosen >= 0
                                     ? result.batch->weighed[result.batch->chosen]
                                     : result.batch->weighed.front();
    REMAT_ASSIGN_OR_RETURN(result.batch_job,
                           WithMicroBatch(job, pick.micro_batch, pick.grad_accumulation));
    planned = &*result.batch_job;
  }
  if (planned->ranks.empty()) {
    REMAT_ASSIGN_OR_RETURN(result.plans, MakePlan(planned->profile, request.options));
  } else {
    REMAT_ASSIGN_OR_RETURN(result.ranks, PlanRanks(*planned, request.options));
    result.worst_rank = WorstRank(result.ranks);
    result.plans = WorstRankPlans(result.ranks);
  }
  if (!result.plans.chosen.fits) {
    // With a global batch, smaller micro-batches were weighed already.
    const bool search = request.suggest_fit && !result.batch;
    result.advice = AdviseFit(*planned, result.plans, request.options, search);
    if (result.batch) {
      result.advice->message =
          "no micro-batch of the global batch of " + std::to_string(request.global_batch) +
          " fits, not even 1 with grad_accumulation " +
          std::to_string(request.global_batch / job.parallel().data_ranks()) + ": " +
          result.advice->message;
    }
  }
  if (planned->grad_accumulation() > kManyMicroBatches) {
    result.warnings.push_back(
        "grad_accumulation " + std::to_string(planned->grad_accumulation()) + " is above " +
        std::to_string(kManyMicroBatches) +
        ": an update takes long, the learning-rate schedule steps coarsely, and 16-bit "
        "gradient sums lose precision");
  }
  if (request.sweep_points >= 2) {
    ParetoOptions sweep;
    sweep.points = request.sweep_points;
    sweep.slots = request.options.slots;
    sweep.progress = request.progress;
    REMAT_ASSIGN_OR_RETURN(result.sweep, ParetoSweep(planned->profile, sweep));
  }
  return result;
}

}  // namespace remat
