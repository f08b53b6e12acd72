#include "remat/training.h"

namespace remat {

Status CheckTrainable(const Job& job, const TrainRequest& request) {
  if (!job.has_config()) {
    return Status::Invalid(job.input.path +
                           " is a profile; training builds the model, so it needs the model.json "
                           "or config.json the profile was made from");
  }
  return CheckPlanMatchesProfile(request.plan, job.profile, request.plan_path);
}

Result<Job> WithPlansMicroBatch(const Job& job, const LoadedPlan& plan) {
  const int64_t planned = plan.profile.micro_batch;
  if (!job.has_config() || planned <= 0 || planned == job.config().micro_batch) return job;
  return WithMicroBatch(job, planned);
}

Result<TrainComparison> TrainPlan(const Job& job, const TrainRequest& request, Runtime& runtime) {
  REMAT_RETURN_IF_ERROR(CheckTrainable(job, request));
  TrainComparison c;
  c.plan_path = request.plan_path;
  c.plan = request.plan;
  c.memory_limit_bytes = request.options.memory_limit_bytes;
  Result<PlanSet> plans = PlanSetOf(c.plan);
  if (!plans.ok()) return plans.status().WithPrefix(request.plan_path);
  c.plans = std::move(*plans);
  c.predicted = c.plans.chosen.predicted;
  const int64_t k = c.plan.grad_accumulation;
  c.update = PredictUpdate(c.plan.profile, c.predicted, k);
  if (k > 1) {
    const double micro = static_cast<double>(k);
    c.predicted.step_ms = c.update.update_ms;
    c.predicted.forward_ms *= micro;
    c.predicted.backward_ms *= micro;
    c.predicted.recompute_ms *= micro;
  }
  ModelConfig config = job.config();
  config.grad_accumulation = k;  // the plan's, as planned
  REMAT_ASSIGN_OR_RETURN(c.measured, runtime.Train(config, c.plan.schedule, request.options));
  if (request.sweep_points >= 2) {
    ParetoOptions sweep;
    sweep.points = request.sweep_points;
    sweep.progress = request.options.progress;
    REMAT_ASSIGN_OR_RETURN(c.sweep, ParetoSweep(c.plan.profile, sweep));
  }
  return c;
}

}  // namespace remat
