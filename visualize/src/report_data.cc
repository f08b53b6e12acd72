// CheckReportData: what every renderer requires of its input.
#include <string>

#include "remat/visualize.h"

namespace remat {

Status CheckReportData(const ReportData& data) {
  if (data.plans == nullptr || data.profile == nullptr || data.context == nullptr) {
    return Status::Internal("a report needs a plan set, its profile and a report context");
  }
  const Plan& plan = data.plans->chosen;
  const Profile& profile = *data.profile;
  const size_t layers = static_cast<size_t>(profile.num_layers());
  if (layers == 0) return Status::Invalid("cannot report on a profile without layers");
  if (plan.decisions.size() != layers || plan.selective_option.size() != layers ||
      plan.predicted.layer_bytes_at_peak.size() != layers ||
      plan.schedule.num_layers != profile.num_layers()) {
    return Status::Internal("the plan was not made for this profile (" +
                            std::to_string(plan.decisions.size()) + " decisions, " +
                            std::to_string(layers) + " layers)");
  }
  if (plan.predicted.timeline.size() != plan.schedule.ops.size()) {
    return Status::Internal("the predicted timeline does not match the schedule");
  }
  if (data.measured != nullptr) {
    const size_t ops = plan.schedule.ops.size();
    for (const OpSample& s : data.measured->ops) {
      if (s.op_index < 0 || static_cast<size_t>(s.op_index) >= ops) {
        return Status::Invalid("the measured run has op " + std::to_string(s.op_index) +
                               " but the plan's schedule has " + std::to_string(ops) +
                               " ops: was the run made with this plan?");
      }
    }
  }
  return Status::Ok();
}

}  // namespace remat
