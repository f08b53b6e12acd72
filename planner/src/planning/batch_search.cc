// SearchBatch: the micro-batch, the accumulation and the plan chosen together
// for a global batch.
#include <algorithm>
#include <memory>
#include <utility>

#include "planning/job_plans.h"
#include "remat/planning/planning.h"

namespace remat {

Result<BatchSearch> SearchBatch(const Job& job, int64_t global_batch, const PlanOptions& options) {
  return planning_internal::SearchBatchKeeping(job, global_batch, options, nullptr);
}

namespace planning_internal {

Result<BatchSearch> SearchBatchKeeping(const Job& job, int64_t global_batch,
                                       const PlanOptions& options,
                                       std::vector<WeighedJob>* weighed) {
  if (global_batch < 1) {
    return Status::Invalid("the global batch must be at least 1 example, got " +
                           std::to_string(global_batch));
  }
  if (!job.has_config()) {
    return Status::Invalid(job.path +
                           " is a profile: its micro-batch is measured, so a global batch "
                           "cannot choose another; plan its model.json or config.json");
  }
  // Each data rank takes global_batch / data ranks examples per step.
  const int64_t data_ranks = job.parallel().data_ranks();
  if (global_batch % data_ranks != 0) {
    return Status::Invalid("the global batch of " + std::to_string(global_batch) +
                           " examples is not a multiple of the " + std::to_string(data_ranks) +
                           " data ranks (gpus / (tp x pp)): each rank takes an equal share");
  }
  const int64_t per_rank = global_batch / data_ranks;
  BatchSearch search;
  search.global_batch = global_batch;
  std::vector<int64_t> divisors;
  for (int64_t b = 1; b <= per_rank / b; ++b) {
    if (per_rank % b != 0) continue;
    divisors.push_back(b);
    if (b != per_rank / b) divisors.push_back(per_rank / b);
  }
  std::sort(divisors.begin(), divisors.end());
  // The ranks of every micro-batch from one rank layout: the model's graph
  // as RankMemories reads it does not change with the micro-batch
  // (rank_memory.h). Where it cannot be made, each micro-batch makes its
  // own (and fails as it does).
  std::shared_ptr<const RankLayout> layout;
  if (job.parallel().distributed()) {
    Result<std::shared_ptr<const RankLayout>> made = BuildRankLayout(job.model);
    if (made.ok()) layout = std::move(*made);
  }
  for (size_t i = 0; i < divisors.size(); ++i) {
    const int64_t b = divisors[i];
    const int64_t k = per_rank / b;
    // The interleaved schedule runs the micro-batches in groups of p.
    const Parallelism& p = job.parallel();
    if (p.schedule == PipelineSchedule::kInterleaved && k % p.pipeline != 0) continue;
    REMAT_ASSIGN_OR_RETURN(Job at, WithMicroBatch(job, b, k, layout.get()));
    // Each rank as PlanRanks plans it (FSDP2 units); one GPU, MakePlan's
    // plans: the job's plans as PlanJobStrategies gives them.
    REMAT_ASSIGN_OR_RETURN(JobPlans planned, PlanJobStrategies(at, options));
    const Plan chosen =
        !planned.ranks.empty() ? WorstRankPlans(planned.ranks).chosen : planned.plans.chosen;
    BatchCandidate c;
    c.micro_batch = b;
    c.grad_accumulation = k;
    c.update = PredictUpdate(at.profile, chosen.predicted, k);
    c.plan = chosen;
    if (weighed != nullptr) weighed->push_back({std::move(at), std::move(planned)});
    const bool fits = c.plan.fits;
    search.weighed.push_back(std::move(c));
    const BatchCandidate& last = search.weighed.back();
    if (fits && (search.chosen < 0 ||
                 last.update.update_ms < search.weighed[search.chosen].update.update_ms)) {
      search.chosen = static_cast<int>(search.weighed.size()) - 1;
    }
    if (!fits) {
      search.skipped = static_cast<int>(divisors.size() - i - 1);
      break;
    }
  }
  return search;
}

}  // namespace planning_internal
}  // namespace remat
