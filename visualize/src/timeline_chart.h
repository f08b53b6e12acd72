// The memory timeline of a plan: live bytes over the step's time, stacked by
// category, with the phases, the budget, the peak and an optional measured
// run overlaid.
#ifndef REMAT_VISUALIZE_TIMELINE_CHART_H_
#define REMAT_VISUALIZE_TIMELINE_CHART_H_

#include <string>

#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/schedule/runtime_api.h"

namespace remat::viz {

// An <svg id="memory-timeline">. x: time in the step (ms, the simulator's op
// start/end); y: memory in the largest binary unit the peak reaches. Each
// timed op is drawn at its peak composition (TimelinePoint::at_peak), one
// <path class="series series-<category>"> per category. The budget is
// <line class="budget">, or, more than kOffScaleRatio x the data above the
// data, <g class="budget-off-scale"> at the top edge (FitAxis); the peak <circle
// class="peak-marker"> labelled with the op. `measured` (may be null) is drawn as <path
// class="series-measured"> at the predicted ops' times (samples matched by op_index) with its peak
// and the error against the prediction. The root carries data-plot-top,
// data-plot-bottom and data-y-max-bytes so tests can check positions.
// The y axis follows the data (TimelineDataMaxBytes), not the budget.
std::string TimelineChart(const Plan& plan, const Profile& profile, const TrainResult* measured);

// The largest memory the timeline plots, in bytes: the predicted peak, or
// the measured peak when `measured` (may be null) is higher.
double TimelineDataMaxBytes(const Plan& plan, const TrainResult* measured);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_TIMELINE_CHART_H_
