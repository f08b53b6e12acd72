// Running a plan on the runtime and comparing it with its prediction: the
// library side of `planner train`.
#ifndef REMAT_TRAINING_H_
#define REMAT_TRAINING_H_

#include <optional>
#include <string>

#include "remat/simulate/accumulation.h"
#include "remat/planning/job.h"
#include "remat/planning/pareto.h"
#include "remat/plan/plan.h"
#include "remat/plan/plan_file.h"
#include "remat/schedule/runtime_api.h"
#include "remat/simulate/simulator.h"
#include "remat/io/status.h"

namespace remat {

struct TrainRequest {
  std::string plan_path;  // where the plan was read from, for messages
  LoadedPlan plan;
  TrainOptions options;
  int sweep_points = 0;  // >= 2: also the Pareto sweep of the plan's profile
};

// A plan's prediction (the simulator on the plan's profile and schedule)
// beside what the runtime measured running it.
struct TrainComparison {
  std::string plan_path;
  LoadedPlan plan;  // profile + schedule the prediction comes from
  PlanSet plans;    // the plan as the reports read it (PlanSetOf)
  // plans.chosen.predicted; with grad_accumulation K > 1 its times are per
  // update (K micro-steps and the optimizer step, as `update`), the unit a
  // training step measures.
  SimulationResult predicted;
  UpdatePrediction update;  // the plan's update of plan.grad_accumulation micro-batches
  TrainResult measured;     // the runtime's run of plan.schedule
  int64_t memory_limit_bytes = 0;
  std::optional<ParetoCurve> sweep;  // when requested
};

// Checks that `request.plan` was made for `job` (a model, not a profile:
// the runtime builds the model) before anything runs, then simulates it and
// has `runtime` train with it. A run past the memory limit is kOutOfMemory.
Result<TrainComparison> TrainPlan(const Job& job, const TrainRequest& request, Runtime& runtime);

// The same checks alone (no runtime needed): what TrainPlan refuses.
Status CheckTrainable(const Job& job, const TrainRequest& request);

// The job `request.plan` runs as: `input` (a model) with the plan's job. A
// plan file is self-contained, so its recorded job fields (its profile's
// micro_batch and seq_len, when it says; its grad_accumulation and every
// field of its "job" object, when it has one) become overrides of `typed`
// (what the caller asked for); a typed field that contradicts the plan is
// refused, naming the plan file, the flag and both values. A profile
// input is taken as it is (CheckTrainable refuses it), and a plan made for
// another model is CheckTrainable's to refuse.
Result<Job> PlansJob(PlannerInput input, const TrainRequest& request, JobOverrides typed);

}  // namespace remat

#endif  // REMAT_TRAINING_H_
