#include "remat/planning/training.h"

#include <sstream>

#include "remat/strategies/strategies.h"

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

std::string Shown(int64_t v) { return std::to_string(v); }
std::string Shown(bool v) { return v ? "true" : "false"; }
std::string Shown(uint32_t lora_targets) { return LoraTargetsToString(lora_targets); }
std::string Shown(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}
template <typename E>
std::string Shown(E v) {
  return ToString(v);
}

// Sets the typed `*field` to the plan's `planned` (when the plan says); a
// typed value that differs is refused, naming `flag` and both values.
template <typename T>
Status TakePlanned(const char* flag, const std::optional<T>& planned, std::optional<T>* field,
                   const std::string& source) {
  if (!planned) return Status::Ok();
  if (*field && **field != *planned) {
    return Status::Invalid(source + " was made for --" + flag + " " + Shown(*planned) + ", and --" +
                           flag + " " + Shown(**field) +
                           " was asked for; leave it out to train the plan's job, or make a "
                           "plan for this one (planner --json -o plan.json)");
  }
  *field = planned;
  return Status::Ok();
}

// "8 GPUs (fsdp2, tensor 1, pipeline 1)".
std::string DescribeRanks(const Parallelism& p) {
  return std::to_string(p.gpus) + " GPUs (" + ToString(p.data) + ", tensor " +
         std::to_string(p.tensor) + ", pipeline " + std::to_string(p.pipeline) + ")";
}

std::optional<int64_t> Known(int64_t v) { return v > 0 ? std::optional<int64_t>(v) : std::nullopt; }

// The plan's recorded job fields taken into `typed`.
Status TakePlannedJob(const LoadedPlan& plan, const std::string& source, JobOverrides* typed) {
  REMAT_RETURN_IF_ERROR(
      TakePlanned("micro-batch", Known(plan.profile.micro_batch), &typed->micro_batch, source));
  REMAT_RETURN_IF_ERROR(
      TakePlanned("seq-len", Known(plan.profile.seq_len), &typed->seq_len, source));
  if (!plan.job) return Status::Ok();
  const PlannedJob& j = *plan.job;
  REMAT_RETURN_IF_ERROR(TakePlanned("grad-accumulation", Known(plan.grad_accumulation),
                                    &typed->grad_accumulation, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("precision", j.precision, &typed->precision, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("attention", j.attention, &typed->attention, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("head", j.head, &typed->head, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("pooling", j.pooling, &typed->pooling, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("loss", j.loss, &typed->loss, source));
  REMAT_RETURN_IF_ERROR(
      TakePlanned("texts-per-example", j.texts_per_example, &typed->texts_per_example, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("num-labels", j.num_labels, &typed->num_labels, source));
  REMAT_RETURN_IF_ERROR(
      TakePlanned("merge-columns", j.merge_columns, &typed->merge_columns, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("chunked-loss", j.loss_chunks, &typed->loss_chunks, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("optimizer", j.optimizer, &typed->optimizer, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("grad-dtype", j.grad_dtype, &typed->grad_dtype, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("gradients", j.gradients, &typed->gradients, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("dropout", j.dropout, &typed->dropout, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("lora-rank", j.lora_rank, &typed->lora_rank, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("lora-targets", j.lora_targets, &typed->lora_targets, source));
  REMAT_RETURN_IF_ERROR(TakePlanned("lora-dropout", j.lora_dropout, &typed->lora_dropout, source));
  return TakePlanned("quantization", j.quantization, &typed->quantization, source);
}

}  // namespace

Result<Job> PlansJob(PlannerInput input, const TrainRequest& request, JobOverrides typed) {
  // One process runs here: a plan for several ranks runs on their engine.
  const bool planned_ranks = request.plan.job && request.plan.job->parallel &&
                             request.plan.job->parallel->distributed();
  if (planned_ranks || (typed.parallel && typed.parallel->distributed())) {
    const std::string what =
        planned_ranks ? request.plan_path + " was made for " +
                            DescribeRanks(*request.plan.job->parallel)
                      : std::string("the parallel flags ask for several ranks");
    return Status::Invalid(what +
                           "; planner train runs one process: run the plan on its engine "
                           "(python -m remat train --engine ddp|fsdp2|deepspeed|tp --nproc N)");
  }
  if (input.kind != PlannerInput::Kind::kProfile) {
    REMAT_RETURN_IF_ERROR(TakePlannedJob(request.plan, request.plan_path, &typed));
  }
  return MakeJob(std::move(input), typed);
}

Result<TrainComparison> TrainPlan(const Job& job, const TrainRequest& request, Runtime& runtime) {
  REMAT_RETURN_IF_ERROR(CheckTrainable(job, request));
  TrainComparison c;
  c.plan_path = request.plan_path;
  c.plan = request.plan;
  c.memory_limit_bytes = request.options.memory_limit_bytes;
  // The run without checkpointing, against the plan's budget: the reports
  // say whether it fits as the plan's own report does.
  PlanOptions none;
  none.strategy = Strategy::kNone;
  none.budget_bytes = c.plan.budget_bytes;
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
