// The step's phases: runs of consecutive timed ops of one kind (forward,
// recompute, backward, optimizer step), frees skipped.
#ifndef REMAT_VISUALIZE_PHASES_H_
#define REMAT_VISUALIZE_PHASES_H_

#include <vector>

#include "remat/plan/plan.h"

namespace remat::viz {

struct PhaseRun {
  OpKind kind = OpKind::kForward;
  double start_ms = 0;
  double end_ms = 0;
};

// True if the op takes time (frees do not).
inline bool Timed(const TimelinePoint& pt) { return pt.end_ms > pt.start_ms; }

// In time order; adjacent runs differ in kind.
std::vector<PhaseRun> PhaseRuns(const Plan& plan);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_PHASES_H_
