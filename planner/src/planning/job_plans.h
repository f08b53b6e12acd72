// A job's plans, each strategy planned alone (planning/job_plans.cc).
// Internal to the planning layer.
#ifndef REMAT_SRC_PLANNING_JOB_PLANS_H_
#define REMAT_SRC_PLANNING_JOB_PLANS_H_

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "remat/planning/planning.h"

namespace remat::planning_internal {

// What a job's planning answers, and what each strategy answered alone.
struct JobPlans {
  // The job's plans: `chosen` the worst rank's (WorstRank), fitting when
  // every rank's does; `candidates` each strategy's plan as the job planned
  // with that strategy alone gives it (its worst rank's, fitting when every
  // rank's does); `baseline` none's, as --strategy none gives it.
  PlanSet plans;
  // A distributed job: each distinct rank's plans; with auto, each rank's
  // fastest fitting strategy (the strategies planned alone, per rank), its
  // candidates each strategy's plan of that rank. Empty on one GPU.
  std::vector<RankPlan> ranks;
  int worst_rank = -1;
};

// The index of the worst of ranks' chosen plans (`plans`, one per rank, in
// order), as WorstRank chooses: the first that does not fit, else the
// first with the largest device total.
size_t WorstPlanIndex(const std::vector<const Plan*>& plans);

// WorstRankPlans(ranks).chosen of ranks whose chosen plans are `plans`: the
// worst one, fitting when every one fits.
Plan WorstPlanOf(const std::vector<const Plan*>& plans);

// Plans `job` with `options`: one strategy, or (auto) every sweepable one
// that applies, each planned alone on every rank, auto's plan per rank the
// fastest that fits (else the lowest peak). On one GPU, MakePlan's (whose
// candidates are the strategies' plans alone). Errors as MakePlan's, a
// rank's prefixed with the rank.
Result<JobPlans> PlanJobStrategies(const Job& job, const PlanOptions& options);

// The index of auto's plan among strategies 0..n-1 (n = floors.size())
// where one fits: BetterPlan over the plans that fit, in their order, as
// PlanJobStrategies and MakePlan choose; nullopt where none fits.
// `plan_of(i)` gives strategy i's plan, planned when first asked (and asked
// again for it, it must give the same). `floors[i]`: a floor under the step
// time of strategy i's plan where it fits (FittingStepFloor), -infinity
// where none is known. The strategies with a floor are planned last, and
// not at all where the choice among the others is faster than every floor
// by a margin no tie reaches (job_plans.cc says why that is exact).
// `cannot_fit[i]`: strategy i has no plan that fits (FittingBytesFloor
// above the budget); it is never planned.
Result<std::optional<size_t>> FastestFitting(
    const std::vector<double>& floors, const std::vector<bool>& cannot_fit,
    const std::function<Result<const Plan*>(size_t)>& plan_of);

// Each rank's plan as PlanRanks gives it with auto (`options.strategy`
// kAuto) where every rank's fits, the same plan (`plans.chosen`, with the
// rank's memory); where a rank's does not, its `chosen` does not fit but
// is no particular strategy's plan. The strategies that cannot be auto's
// choice are not planned (FastestFitting in job_plans.cc), and the other
// fields of the plan sets are left empty: for callers that read only a
// fitting choice (the fit advice). With `stop_at_no_fit`, the ranks after
// the first (in order) whose plan does not fit are left out: not planned
// (or, planned at the same time on another core, dropped) and not in the
// result, so neither are their errors. The plans of the ranks given, and
// whether every rank's fits (WorstRankPlans), are the same as without it;
// an error of a rank after one that does not fit is not told.
Result<std::vector<RankPlan>> PlanRanksFastestFitting(const Job& job, const PlanOptions& options,
                                                      bool stop_at_no_fit = false);

// A micro-batch SearchBatch weighed: its job and the plans PlanJobStrategies
// gave it.
struct WeighedJob {
  Job job;
  JobPlans plans;
};

// SearchBatch, keeping in `*kept` (when not null) the job and plans of the
// candidate chosen (the first weighed where none fits): the plans a caller
// would get by planning that job again with `options`. Left empty where no
// micro-batch was weighed.
Result<BatchSearch> SearchBatchKeeping(const Job& job, int64_t global_batch,
                                       const PlanOptions& options,
                                       std::optional<WeighedJob>* kept);

}  // namespace remat::planning_internal

#endif  // REMAT_SRC_PLANNING_JOB_PLANS_H_
