#include "remat/training.h"

#include "remat/strategies.h"

namespace remat {

Status CheckTrainable(const Job& job, const TrainRequest& request) {
  if (!job.has_config()) {
    return Status::Invalid(job.path +
                           " is a profile; training builds the model, so it needs the model.json "
                           "or config.json the profile was made from");
  }
  return CheckPlanMatchesProfile(request.plan, job.profile, request.plan_path);
}

namespace {

// `*field` set to the plan's `planned` (when known, > 0); a typed value that
// differs is refused.
Status TakePlanned(const char* name, int64_t planned, std::optional<int64_t>* field,
                   const std::string& source) {
  if (planned <= 0) return Status::Ok();
  if (*field && **field != planned) {
    return Status::Invalid(source + " was made for " + name + " " + std::to_string(planned) +
                           ", and " + name + " " + std::to_string(**field) +
                           " was asked for; leave it out to train the plan's job, or make a "
                           "plan for this one (planner --json -o plan.json)");
  }
  *field = planned;
  return Status::Ok();
}

}  // namespace

Result<Job> PlansJob(PlannerInput input, const TrainRequest& request, JobOverrides typed) {
  if (input.kind != PlannerInput::Kind::kProfile) {
    const Profile& planned = request.plan.profile;
    const std::string& source = request.plan_path;
    REMAT_RETURN_IF_ERROR(
        TakePlanned("micro_batch", planned.micro_batch, &typed.micro_batch, source));
    REMAT_RETURN_IF_ERROR(TakePlanned("seq_len", planned.seq_len, &typed.seq_len, source));
  }
  return MakeJob(std::move(input), typed);
}

Result<TrainComparison> TrainPlan(const Job& job, const TrainRequest& request, Runtime& runtime) {
  REMAT_RETURN_IF_ERROR(CheckTrainable(job, request));
  TrainComparison c;
  c.plan_path = request.plan_path;
  c.plan = request.plan;
  c.memory_limit_bytes = request.options.memory_limit_bytes;
  PlanOptions none;
  none.strategy = Strategy::kNone;
  Result<Plan> baseline = FindSolver(Strategy::kNone)->Solve(c.plan.profile, none);
  if (!baseline.ok()) return baseline.status().WithPrefix(request.plan_path);
  Result<PlanSet> plans = PlanSetOf(c.plan, std::move(*baseline));
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
