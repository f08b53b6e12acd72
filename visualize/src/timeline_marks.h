// The timeline's annotations: the budget line, the predicted peak and a
// measured run overlaid. Internal to timeline_chart.cc.
#ifndef REMAT_VISUALIZE_TIMELINE_MARKS_H_
#define REMAT_VISUALIZE_TIMELINE_MARKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "axes.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/schedule/runtime_api.h"
#include "scale.h"
#include "svg.h"

namespace remat::viz {

// What the timeline maps: time (ms) to x, bytes to y.
struct TimelineFrame {
  PlotArea area;
  LinearScale x;
  LinearScale y;  // in `unit`s
  ByteUnit unit;
  double Y(double bytes) const { return y(bytes / unit.bytes); }
};

// "op 16: backward 15 (loss)".
std::string OpLabel(const Plan& plan, const Profile& profile, int op);

// A dashed <line class="budget" data-bytes> across the plot, labelled, with
// the region above it tinted; or, `off_scale`, the budget's off-scale mark
// at the top edge (DrawReference).
void DrawBudget(SvgWriter& svg, const TimelineFrame& f, int64_t budget_bytes, bool off_scale);

// <circle class="peak-marker" data-bytes> at the predicted peak (plan's
// peak_op must be >= 0), labelled with its size and op.
void DrawPeak(SvgWriter& svg, const TimelineFrame& f, const Plan& plan, const Profile& profile);

// The measured memory per op (<path class="series-measured">) at the
// predicted ops' times, its peak (<path class="measured-peak">) and the
// error at the peak. `samples[i]` is op i's sample or null.
void DrawMeasured(SvgWriter& svg, const TimelineFrame& f, const Plan& plan,
                  const std::vector<const OpSample*>& samples, const TrainResult& run);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_TIMELINE_MARKS_H_
