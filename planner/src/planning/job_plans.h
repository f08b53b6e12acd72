// A job's plans, each strategy planned alone (planning/job_plans.cc).
// Internal to the planning layer.
#ifndef REMAT_SRC_PLANNING_JOB_PLANS_H_
#define REMAT_SRC_PLANNING_JOB_PLANS_H_

#include <map>
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

// Plans `job` with `options`: one strategy, or (auto) every sweepable one
// that applies, each planned alone on every rank, auto's plan per rank the
// fastest that fits (else the lowest peak). On one GPU, MakePlan's (whose
// candidates are the strategies' plans alone). Errors as MakePlan's, a
// rank's prefixed with the rank.
Result<JobPlans> PlanJobStrategies(const Job& job, const PlanOptions& options);

// A micro-batch SearchBatch weighed: its job and the plans PlanJobStrategies
// gave it.
struct WeighedJob {
  Job job;
  JobPlans plans;
};

// SearchBatch, keeping in `*weighed` (when not null) each weighed
// candidate's job and plans, in the order of BatchSearch::weighed: the
// plans a caller would get by planning that job again with `options`.
Result<BatchSearch> SearchBatchKeeping(const Job& job, int64_t global_batch,
                                       const PlanOptions& options,
                                       std::vector<WeighedJob>* weighed);

}  // namespace remat::planning_internal

#endif  // REMAT_SRC_PLANNING_JOB_PLANS_H_
