// plan.json read back: the plan a file holds, as `planner train` runs it.
#include "remat/plan_file.h"

#include <nlohmann/json.hpp>

#include "json_fields.h"

namespace remat {

using internal::DescribeJsonValue;
using internal::JsonObjectReader;
using internal::ParseJson;

Result<LoadedPlan> ParsePlanJson(std::string_view json_text, const std::string& source) {
  REMAT_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json_text, source));
  if (!doc.is_object()) {
    return Status::Invalid(source + ": expected a plan object (planner --json output), got " +
                           DescribeJsonValue(doc));
  }
  JsonObjectReader r(doc, source);
  LoadedPlan plan;
  REMAT_RETURN_IF_ERROR(r.String("strategy", &plan.strategy, true));
  REMAT_RETURN_IF_ERROR(r.String("parameter", &plan.parameter, false));
  REMAT_RETURN_IF_ERROR(r.Int("budget_bytes", &plan.budget_bytes, false, 0));
  REMAT_RETURN_IF_ERROR(r.Int("grad_accumulation", &plan.grad_accumulation, false, 1, 1 << 24));
  if (!doc.contains("profile") || !doc["profile"].is_object()) {
    return r.Error("profile",
                   "missing: a plan file carries the profile it was made for "
                   "(write plans with planner --json)");
  }
  REMAT_ASSIGN_OR_RETURN(plan.profile, ParseProfile(doc["profile"].dump(), source + ": profile"));
  plan.model = plan.profile.model;
  if (!doc.contains("schedule")) return r.Error("schedule", "missing (required)");
  REMAT_ASSIGN_OR_RETURN(
      plan.schedule, ParseScheduleJson(doc["schedule"].dump(), plan.profile.num_layers(), source));
  REMAT_RETURN_IF_ERROR(ValidateSchedule(plan.schedule, plan.profile).WithPrefix(source));
  if (doc.contains("predicted") && doc["predicted"].is_object()) {
    JsonObjectReader pr(doc["predicted"], source + ": predicted");
    REMAT_RETURN_IF_ERROR(pr.Int("peak_bytes", &plan.predicted_peak_bytes, false, 0));
    REMAT_RETURN_IF_ERROR(pr.Double("step_ms", &plan.predicted_step_ms, false, 0, 1e15));
  }
  return plan;
}

Result<PlanSet> PlanSetOf(const LoadedPlan& plan, Plan baseline) {
  PlanSet set;
  REMAT_ASSIGN_OR_RETURN(const Strategy strategy, ParseStrategy(plan.strategy));
  REMAT_ASSIGN_OR_RETURN(set.chosen, MakePlanFromSchedule(plan.profile, strategy, plan.parameter,
                                                          plan.schedule, plan.budget_bytes));
  set.baseline = std::move(baseline);
  set.candidates.push_back(set.chosen);
  return set;
}

}  // namespace remat
