#include "phases.h"

namespace remat::viz {

std::vector<PhaseRun> PhaseRuns(const Plan& plan) {
  std::vector<PhaseRun> runs;
  for (size_t i = 0; i < plan.schedule.ops.size(); ++i) {
    const TimelinePoint& pt = plan.predicted.timeline[i];
    if (!Timed(pt)) continue;
    const OpKind kind = plan.schedule.ops[i].kind;
    if (!runs.empty() && runs.back().kind == kind) {
      runs.back().end_ms = pt.end_ms;
    } else {
      runs.push_back({kind, pt.start_ms, pt.end_ms});
    }
  }
  return runs;
}

}  // namespace remat::viz
