// Whether a plan file was made for the model it is about to run on.
#include "remat/report.h"

namespace remat {
namespace {

std::string Named(const std::string& model) {
  return model.empty() ? "an unnamed model" : "'" + model + "'";
}

}  // namespace

Status CheckPlanMatchesProfile(const LoadedPlan& plan, const Profile& profile,
                               const std::string& source) {
  const Profile& planned = plan.profile;
  const std::string models = "the plan was made for " + Named(planned.model) + ", this is " +
                             Named(profile.model);
  const std::string advice = "; make a new plan for this model (planner --json -o plan.json)";
  if (!planned.model.empty() && !profile.model.empty() && planned.model != profile.model) {
    return Status::Invalid(source + ": " + models + advice);
  }
  if (planned.num_layers() != profile.num_layers()) {
    return Status::Invalid(source + ": " + models + ": the plan's chain has " +
                           std::to_string(planned.num_layers()) + " layers, the model's " +
                           std::to_string(profile.num_layers()) + advice);
  }
  for (int i = 0; i < profile.num_layers(); ++i) {
    const LayerProfile& a = planned.layers[i];
    const LayerProfile& b = profile.layers[i];
    const std::string where = source + ": " + models + ": layer " + std::to_string(i);
    if (a.name != b.name || a.kind != b.kind) {
      return Status::Invalid(where + " is '" + a.name + "' in the plan but '" + b.name +
                             "' in the model" + advice);
    }
    const struct {
      const char* field;
      int64_t planned, now;
    } sizes[] = {{"input_bytes", a.input_bytes, b.input_bytes},
                 {"output_bytes", a.output_bytes, b.output_bytes}};
    for (const auto& s : sizes) {
      if (s.planned != s.now) {
        return Status::Invalid(where + " ('" + b.name + "'): " + s.field + " is " +
                               std::to_string(s.planned) + " in the plan but " +
                               std::to_string(s.now) +
                               " now (another micro-batch, sequence length or precision?)" +
                               advice);
      }
    }
  }
  return Status::Ok();
}

}  // namespace remat
