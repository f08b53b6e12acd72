// The offload search's floor (offload_floor.h).
#include "strategies/offload_floor.h"

#include <limits>
#include <utility>

namespace remat::strategies {

bool FloorHolds(const Profile& p) {
  if (p.optimizer_workspace_bytes < 0) return false;
  for (const LayerProfile& l : p.layers) {
    if (l.forward_workspace_bytes < 0 || l.nograd_workspace_bytes() < 0) return false;
  }
  return true;
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
  // Fitting, `kept` loses only to a fitting plan: one faster by more than
  // SameStepTime, or as fast and smaller. Not fitting, to any fitting plan,
  // or to a smaller one, or to an as small and faster one.
  if (kept.fits) return over || no_less;
  return over && (floor.total_bytes > kept.memory.total_bytes || no_less);
}

}  // namespace remat::strategies
