// Reports of a planning result: the terminal table and plan.json. One
// PlanSet, several renderings (the visualize/ library adds HTML, trace and
// Markdown renderings of the same structures).
#ifndef REMAT_REPORT_H_
#define REMAT_REPORT_H_

#include <string>
#include <string_view>

#include "remat/model_config.h"
#include "remat/plan.h"
#include "remat/profile.h"
#include "remat/status.h"

namespace remat {

// What the report says about where the plan came from.
struct ReportContext {
  std::string input_path;          // the file the user gave
  std::string input_kind;          // "model.json", "config.json", "profile"
  bool has_config = false;         // `config` is meaningful
  ModelConfig config;
  std::string note;                // extra line (e.g. a suggestion), may be empty
};

// The human-readable report printed by `planner --budget ... model.json`.
std::string FormatPlanText(const PlanSet& plans, const Profile& profile, const ReportContext& ctx);

// plan.json: fits, strategy, budget_bytes, layers, schedule, predicted, model,
// baseline, candidates, and the profile the plan was made for (so that a
// plan file is self-contained for `planner train --plan`).
std::string PlanToJson(const PlanSet& plans, const Profile& profile, const ReportContext& ctx);

// A plan file read back: the profile it was made for and its schedule.
struct LoadedPlan {
  std::string model;
  std::string strategy;
  int64_t budget_bytes = 0;
  Profile profile;
  Schedule schedule;
  int64_t predicted_peak_bytes = 0;
  double predicted_step_ms = 0;
};
Result<LoadedPlan> ParsePlanJson(std::string_view json_text, const std::string& source);

// Checks that a plan read back is for the model about to run it: `profile` is
// that model's profile now (analytic or measured). The model names must
// agree (when both are named); the chains must agree in length, layer names
// and kinds, and in the tensors passed between layers (input and output
// bytes: exact shapes, which change with the micro-batch, sequence length
// and precision). Activation bytes and times may differ (a plan made from an
// analytic profile runs on measured sizes). The error names `source` (the
// plan file), both models and the first difference.
Status CheckPlanMatchesProfile(const LoadedPlan& plan, const Profile& profile,
                               const std::string& source);

}  // namespace remat

#endif  // REMAT_REPORT_H_
