// SearchBatch: the micro-batch, the accumulation and the plan chosen together
// for a global batch.
#include <algorithm>

#include "remat/planning/planning.h"

namespace remat {

Result<BatchSearch> SearchBatch(const Job& job, int64_t global_batch, const PlanOptions& options) {
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
  for (size_t i = 0; i < divisors.size(); ++i) {
    const int64_t b = divisors[i];
    const int64_t k = per_rank / b;
    // The interleaved schedule runs the micro-batches in groups of p.
    const Parallelism& p = job.parallel();
    if (p.schedule == PipelineSchedule::kInterleaved && k % p.pipeline != 0) continue;
    REMAT_ASSIGN_OR_RETURN(const Job at, WithMicroBatch(job, b, k));
    PlanSet plans;
    if (!at.ranks.empty()) {  // each rank as PlanRanks plans it (FSDP2 units)
      REMAT_ASSIGN_OR_RETURN(const std::vector<RankPlan> ranks, PlanRanks(at, options));
      plans = WorstRankPlans(ranks);
    } else {
      REMAT_ASSIGN_OR_RETURN(plans, MakePlan(at.profile, options));
    }
    BatchCandidate c;
    c.micro_batch = b;
    c.grad_accumulation = k;
    c.update = PredictUpdate(at.profile, plans.chosen.predicted, k);
    c.plan = std::move(plans.chosen);
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

}  // namespace remat
