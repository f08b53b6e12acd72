// The offload search's floor (offload_floor.h).
#include "strategies/offload_floor.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace remat::strategies {

bool FloorHolds(const Profile& p) {
  if (p.optimizer_workspace_bytes < 0 || p.static_bytes() < 0) return false;
  for (const LayerProfile& l : p.layers) {
    if (l.forward_workspace_bytes < 0 || l.nograd_workspace_bytes() < 0) return false;
    if (l.input_bytes < 0 || l.output_bytes < 0 || l.activation_bytes < l.output_bytes ||
        l.gradient_bytes < 0 || l.skip_bytes < 0 || l.in_flight_microbatches < 1) {
      return false;
    }
  }
  return true;
}

int64_t SegmentFloorBytes(const Profile& p, const std::vector<LayerDecision>& decisions) {
  int64_t most = 0;
  int64_t saved = 0;  // by the segment's layers so far
  for (size_t i = 0; i < decisions.size(); ++i) {
    const LayerDecision d = decisions[i];
    if (!RunsWithoutGrad(d)) continue;
    if (d != LayerDecision::kRecompute) saved = 0;  // a checkpoint starts a segment
    saved += p.layers[i].activation_bytes - p.layers[i].output_bytes;
    most = std::max(most, saved);
  }
  return p.static_bytes() + most;
}

Profile WithFreeLink(Profile p) {
  p.host_link.latency_us = 0;
  p.host_link.gb_per_s = std::numeric_limits<double>::infinity();
  return p;
}

Result<OffloadFloor> FloorOf(const Profile& free_link, Schedule all_offloaded) {
  REMAT_ASSIGN_OR_RETURN(const Plan plan,
                         MakePlanFromSchedule(free_link, Strategy::kOffload, "",
                                              std::move(all_offloaded), 0,
                                              SimulationDetail::kTotals));
  return OffloadFloor{plan.predicted.step_ms, plan.memory.total_bytes};
}

bool CannotBeat(const OffloadFloor& floor, const Plan& kept, int64_t budget_bytes) {
  const bool over = floor.total_bytes > budget_bytes;  // no plan above the floor fits
  const bool no_less = floor.total_bytes >= kept.memory.total_bytes &&
                       floor.step_ms >= kept.predicted.step_ms;
  // Slower than `kept` by more than SameStepTime at the floor, and so at
  // any step time above it (t - kept's - 1e-9 max(1, t) grows with t).
  const bool slower = floor.step_ms > kept.predicted.step_ms &&
                      !SameStepTime(floor.step_ms, kept.predicted.step_ms);
  // Fitting, `kept` loses only to a fitting plan: one faster by more than
  // SameStepTime, or as fast and smaller. Not fitting, to any fitting plan,
  // or to a smaller one, or to an as small and faster one.
  if (kept.fits) return over || no_less || slower;
  return over && (floor.total_bytes > kept.memory.total_bytes || no_less);
}

}  // namespace remat::strategies
