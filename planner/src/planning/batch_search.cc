// SearchBatch: the micro-batch, the accumulation and the plan chosen together
// for a global batch.
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "planning/in_order.h"
#include "planning/job_plans.h"
#include "remat/planning/planning.h"

namespace remat {

Result<BatchSearch> SearchBatch(const Job& job, int64_t global_batch, const PlanOptions& options) {
  return planning_internal::SearchBatchKeeping(job, global_batch, options, nullptr);
}

namespace planning_internal {
namespace {

// One micro-batch of the search: its job and plans, where made.
struct Split {
  std::optional<Result<Job>> job;
  std::optional<Result<JobPlans>> plans;
};

// The plan a micro-batch's row shows: auto's (the worst rank's), or the
// one strategy asked for.
Plan ChosenOf(const JobPlans& planned) {
  return !planned.ranks.empty() ? WorstRankPlans(planned.ranks).chosen : planned.plans.chosen;
}

// Whether that plan fits (every rank's does).
bool Fits(const JobPlans& planned) {
  if (planned.ranks.empty()) return planned.plans.chosen.fits;
  return std::all_of(planned.ranks.begin(), planned.ranks.end(),
                     [](const RankPlan& r) { return r.plans.chosen.fits; });
}

}  // namespace

Result<BatchSearch> SearchBatchKeeping(const Job& job, int64_t global_batch,
                                       const PlanOptions& options,
                                       std::optional<WeighedJob>* kept) {
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
  // The micro-batches that may be weighed (the interleaved schedule runs
  // the micro-batches in groups of p), ascending.
  const Parallelism& p = job.parallel();
  std::vector<size_t> at_divisor;
  for (size_t i = 0; i < divisors.size(); ++i) {
    const int64_t k = per_rank / divisors[i];
    if (p.schedule == PipelineSchedule::kInterleaved && k % p.pipeline != 0) continue;
    at_divisor.push_back(i);
  }
  // Each micro-batch's job and plans: each rank as PlanRanks plans it
  // (FSDP2 units); one GPU, MakePlan's plans: the job's plans as
  // PlanJobStrategies gives them. Made on the machine's cores ahead of the
  // weighing (RunInOrder; PlanJobStrategies plans a task's strategies in
  // line), up to the first micro-batch that does not fit as far as one
  // knows: a plan made that does not fit, or a peak floor above the budget
  // (JobPeakFloor: no plan fits), whose plans are made only where the
  // weighing reaches it. What was not made ahead is made in the weighing,
  // in order, and PlanJobStrategies gives the same plans in line as on
  // several cores: what ran ahead changes the time taken, not the search
  // (batch_search_test: each row is its micro-batch planned alone).
  const size_t n = at_divisor.size();
  std::vector<Split> splits(n);
  std::atomic<size_t> stop{n};  // past it, no micro-batch is weighed
  auto lower_stop = [&stop](size_t i) {
    size_t now = stop.load();
    while (i < now && !stop.compare_exchange_weak(now, i)) {
    }
  };
  std::vector<std::function<int()>> tasks;
  for (size_t t = 0; t < n; ++t) {
    tasks.push_back([&, t] {
      Split& s = splits[t];
      if (t > stop.load()) return 0;
      const int64_t b = divisors[at_divisor[t]];
      s.job = WithMicroBatch(job, b, per_rank / b, layout.get());
      if (!s.job->ok()) {
        lower_stop(t);
        return 0;
      }
      if (options.budget_bytes > 0 && JobPeakFloor(**s.job, options) > options.budget_bytes) {
        lower_stop(t);
        return 0;
      }
      if (t > stop.load()) return 0;
      s.plans = PlanJobStrategies(**s.job, options);
      if (!s.plans->ok() || !Fits(**s.plans)) lower_stop(t);
      return 0;
    });
  }
  RunInOrder(tasks, MachineThreads());
  std::optional<size_t> kept_at;
  for (size_t t = 0; t < n; ++t) {
    Split& s = splits[t];
    const int64_t b = divisors[at_divisor[t]];
    const int64_t k = per_rank / b;
    if (!s.job) s.job = WithMicroBatch(job, b, k, layout.get());
    if (!s.job->ok()) return s.job->status();
    if (!s.plans) s.plans = PlanJobStrategies(**s.job, options);
    if (!s.plans->ok()) return s.plans->status();
    BatchCandidate c;
    c.micro_batch = b;
    c.grad_accumulation = k;
    c.plan = ChosenOf(**s.plans);
    c.update = PredictUpdate((*s.job)->profile, c.plan.predicted, k);
    if (!kept_at) kept_at = t;
    const bool fits = c.plan.fits;
    search.weighed.push_back(std::move(c));
    const BatchCandidate& last = search.weighed.back();
    if (fits && (search.chosen < 0 ||
                 last.update.update_ms < search.weighed[search.chosen].update.update_ms)) {
      search.chosen = static_cast<int>(search.weighed.size()) - 1;
      kept_at = t;
    }
    if (!fits) {
      search.skipped = static_cast<int>(divisors.size() - at_divisor[t] - 1);
      break;
    }
  }
  if (kept != nullptr && kept_at) {
    Split& s = splits[*kept_at];
    *kept = WeighedJob{std::move(**s.job), std::move(**s.plans)};
  }
  return search;
}

}  // namespace planning_internal
}  // namespace remat
