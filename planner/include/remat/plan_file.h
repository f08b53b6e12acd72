// plan.json read back (PlanToJson, remat/report.h, writes it) by `planner
// train`, and checked against the model it is about to run on.
#ifndef REMAT_PLAN_FILE_H_
#define REMAT_PLAN_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "remat/plan.h"
#include "remat/profile.h"
#include "remat/schedule.h"
#include "remat/status.h"

namespace remat {

// A plan file read back: the profile it was made for and its schedule.
struct LoadedPlan {
  std::string model;
  std::string strategy;
  std::string parameter;  // the strategy's setting ("every 2"), as planned
  int64_t budget_bytes = 0;
  int64_t grad_accumulation = 1;  // micro-batches per optimizer step (absent: 1)
  Profile profile;
  Schedule schedule;
  int64_t predicted_peak_bytes = 0;
  double predicted_step_ms = 0;
};
Result<LoadedPlan> ParsePlanJson(std::string_view json_text, const std::string& source);

// Checks that a plan read back is for the model about to run it: `profile` is
// that model's profile now (analytic or measured). The model names must
// agree (when both are named); the chains must agree in length, layer names
// and kinds, in micro-batch and sequence length (when both profiles say),
// and in the tensors passed between layers (output bytes: exact shapes,
// which change with the micro-batch, sequence length and precision; the
// batch x[0] is the executor's). Activation bytes and times may differ (a
// plan made from an analytic profile runs on measured sizes). The error names `source` (the
// plan file), both models and the first difference.
Status CheckPlanMatchesProfile(const LoadedPlan& plan, const Profile& profile,
                               const std::string& source);

// The plan file as a PlanSet for the reports: its schedule simulated on its
// profile (chosen, with the file's strategy and setting) beside `baseline`,
// that profile's no-checkpointing plan, which the caller solves (the
// strategies sit above this layer).
Result<PlanSet> PlanSetOf(const LoadedPlan& plan, Plan baseline);

}  // namespace remat

#endif  // REMAT_PLAN_FILE_H_
