// RunPlanner: plan the job, and weigh what the request asks beside it.
#include "remat/planning/planning.h"

#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include "planning/job_plans.h"
#include "solver/table_pool.h"
#include "remat/io/units.h"

namespace remat {

Status PlanningResult::fit_status() const {
  return advice ? Status::NoFit(advice->message) : Status::Ok();
}

namespace {

// Plans `job` as `request` asks, without the sweep, the chunked loss and
// the fit advice (AddFitAdvice).
Result<PlanningResult> PlanJob(const Job& job, const PlanningRequest& request);

std::string Ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", ms);
  return text;
}

// Whether WeighChunkedLoss may weigh the chunked loss for `job`: a
// language model's head without a chunked loss, and no tensor parallelism.
bool ChunkedLossWeighable(const Job& job) {
  if (!job.has_config()) return false;
  const ModelConfig c = WithDefaults(job.config());
  return c.head == Head::kLm && c.loss_chunks == 0 && job.parallel().tensor <= 1;
}

// PlanningRequest::weigh_chunked_loss: `plain` (the plain job's result)
// replaced by the chunked job's where only it fits, where neither fits and
// the chunked job's lowest peak is the lower, or (one micro-batch size, no
// --global-batch search) where `plain` recomputes and the chunked plan
// recomputes less. Whole steps are not compared: the chunked op's time
// counts its matmuls, not its chunks' memory traffic, so it would win by
// what the model leaves out; the recompute a plan adds is the difference
// the chunked loss makes.
Status WeighChunkedLoss(const Job& job, const PlanningRequest& request, PlanningResult* plain) {
  if (!ChunkedLossWeighable(job)) return Status::Ok();
  const ModelConfig c = WithDefaults(job.config());
  const bool plain_fits = plain->plans.chosen.fits;
  if (plain_fits && plain->plans.chosen.predicted.recompute_ms <= 0) return Status::Ok();
  // A global batch's search weighs the micro-batches without it: a plain
  // plan that fits stays whatever the chunked loss gives.
  if (plain_fits && request.global_batch > 0) return Status::Ok();
  ModelConfig auto_chunks = c;
  auto_chunks.loss_chunks = kLossChunksAuto;
  Job changed = WithoutProfile(job);
  changed.model.loss_chunks = WithDefaults(auto_chunks).loss_chunks;
  if (!ValidateModelConfig(changed.model, job.path).ok()) return Status::Ok();
  // The profile (and a distributed job's ranks) made again.
  Result<Job> chunked_job = WithParallel(changed, job.parallel());
  if (!chunked_job.ok()) return Status::Ok();
  Result<PlanningResult> chunked = PlanJob(*chunked_job, request);
  if (!chunked.ok()) return Status::Ok();
  const bool chunked_fits = chunked->plans.chosen.fits;
  const bool lower_peak = chunked->plans.chosen.predicted.peak_bytes <
                          plain->plans.chosen.predicted.peak_bytes;
  if (!chunked_fits && (plain_fits || !lower_peak)) return Status::Ok();
  const double plain_ms = plain->plans.chosen.predicted.recompute_ms;
  const double chunked_ms = chunked->plans.chosen.predicted.recompute_ms;
  if (plain_fits && chunked_ms >= plain_ms) return Status::Ok();
  ChunkedLossChoice choice;
  choice.chunks = changed.model.loss_chunks;
  choice.saves_bytes =
      plain->plans.baseline.memory.total_bytes - chunked->plans.baseline.memory.total_bytes;
  choice.message = "chunked loss chosen by auto: saves " + FormatBytes(choice.saves_bytes) +
                   " of the peak without checkpointing (--chunked-loss " +
                   std::to_string(choice.chunks) + "); " +
                   (plain_fits     ? "recompute " + Ms(chunked_ms) + " instead of " +
                                         Ms(plain_ms) + " per step"
                    : chunked_fits ? std::string("no plan fits without it")
                                   : "nothing fits either way; the lowest peak is " +
                                         FormatBytes(chunked->plans.chosen.predicted.peak_bytes) +
                                         " with it, " +
                                         FormatBytes(plain->plans.chosen.predicted.peak_bytes) +
                                         " without");
  if (!chunked->batch_job) chunked->batch_job = std::move(*chunked_job);
  chunked->chunked_loss = std::move(choice);
  *plain = std::move(*chunked);
  return Status::Ok();
}


Result<PlanningResult> PlanJob(const Job& job, const PlanningRequest& request) {
  PlanningResult result;
  const Job* planned = &job;
  std::optional<planning_internal::JobPlans> searched;
  if (request.global_batch > 0) {
    std::optional<planning_internal::WeighedJob> weighed;
    REMAT_ASSIGN_OR_RETURN(result.batch, planning_internal::SearchBatchKeeping(
                                             job, request.global_batch, request.options, &weighed));
    // None fits: micro-batch 1, the lowest peak there is, to report. The
    // search planned that job already (the same job and options).
    if (!weighed) {
      return Status::Invalid("global batch " + std::to_string(request.global_batch) +
                             ": no micro-batch leaves a grad_accumulation that is a multiple of "
                             "the " +
                             std::to_string(job.parallel().pipeline) +
                             " pipeline stages, as the interleaved schedule needs");
    }
    result.batch_job = std::move(weighed->job);
    searched = std::move(weighed->plans);
    planned = &*result.batch_job;
  }
  if (!searched) {
    REMAT_ASSIGN_OR_RETURN(searched,
                           planning_internal::PlanJobStrategies(*planned, request.options));
  }
  planning_internal::JobPlans& plans = *searched;
  result.plans = std::move(plans.plans);
  result.ranks = std::move(plans.ranks);
  result.worst_rank = plans.worst_rank;
  if (planned->grad_accumulation() > kManyMicroBatches) {
    result.warnings.push_back(
        "grad_accumulation " + std::to_string(planned->grad_accumulation()) + " is above " +
        std::to_string(kManyMicroBatches) +
        ": an update takes long, the learning-rate schedule steps coarsely, and 16-bit "
        "gradient sums lose precision");
  }
  return result;
}

// When nothing fits: the fit advice for the job planned (`job` as
// `result` replaced it), weighing the chunked loss where auto may and the
// plan does not have it yet.
void AddFitAdvice(const Job& job, const PlanningRequest& request, bool weigh_chunked_loss,
                  PlanningResult* result) {
  if (result->plans.chosen.fits) return;
  // With a global batch, smaller micro-batches were weighed already.
  const bool search = request.suggest_fit && !result->batch;
  result->advice = AdviseFit(result->planned(job), result->plans, request.options, search,
                             weigh_chunked_loss && !result->chunked_loss,
                             result->chunked_loss ? result->chunked_loss->chunks : 0);
  if (result->batch) {
    result->advice->message =
        "no micro-batch of the global batch of " + std::to_string(request.global_batch) +
        " fits, not even 1 with grad_accumulation " +
        std::to_string(request.global_batch / job.parallel().data_ranks()) + ": " +
        result->advice->message;
  }
}

}  // namespace

Result<PlanningResult> RunPlanner(const Job& job, const PlanningRequest& request) {
  // The solvers' cost tables are kept between the run's solves (the fit
  // advice's alternatives solve many) and freed when it returns.
  const solver::TablePoolScope keep_tables;
  ParetoOptions sweep;
  sweep.points = request.sweep_points;
  sweep.slots = request.options.slots;
  sweep.progress = request.progress;
  const bool weigh_chunked_loss =
      request.weigh_chunked_loss && request.options.strategy == Strategy::kAuto;
  // The sweep is of the job planned: where that is the job itself (no
  // global batch searched, no chunked loss to weigh), started ahead on
  // its profile, beside the planning.
  std::optional<ParetoSweepAhead> ahead;
  if (request.sweep_points >= 2 && request.global_batch <= 0 &&
      !(weigh_chunked_loss && ChunkedLossWeighable(job))) {
    ahead.emplace(job.profile, sweep);
  }
  REMAT_ASSIGN_OR_RETURN(PlanningResult result, PlanJob(job, request));
  if (weigh_chunked_loss) REMAT_RETURN_IF_ERROR(WeighChunkedLoss(job, request, &result));
  AddFitAdvice(job, request, weigh_chunked_loss, &result);
  const Job* planned = &result.planned(job);
  if (request.sweep_points >= 2) {
    if (ahead && planned == &job) {
      REMAT_ASSIGN_OR_RETURN(result.sweep, ahead->Get());
    } else {
      ahead.reset();
      REMAT_ASSIGN_OR_RETURN(result.sweep, ParetoSweep(planned->profile, sweep));
    }
  }
  return result;
}

}  // namespace remat
