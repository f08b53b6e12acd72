#include "timeline_marks.h"

#include <algorithm>

#include "measured.h"
#include "palette.h"
#include "phases.h"
#include "remat/io/units.h"

namespace remat::viz {
namespace {

// A dashed drop line and a circle (or diamond) at (x, y) carrying `bytes`.
void DrawMarker(SvgWriter& svg, const TimelineFrame& f, double x, double y, const std::string& cls,
                int64_t bytes, const char* color, bool diamond) {
  svg.Empty("line", {{"x1", x},
                     {"x2", x},
                     {"y1", y},
                     {"y2", f.area.bottom()},
                     {"stroke", color},
                     {"stroke-width", 1},
                     {"stroke-dasharray", "2 3"}});
  if (diamond) {
    svg.Empty("path", {{"class", cls},
                       {"data-bytes", std::to_string(bytes)},
                       {"d", PathData()
                                 .MoveTo(x, y - 6)
                                 .LineTo(x + 6, y)
                                 .LineTo(x, y + 6)
                                 .LineTo(x - 6, y)
                                 .Close()
                                 .str()},
                       {"fill", color},
                       {"stroke", "#ffffff"},
                       {"stroke-width", 1.5}});
  } else {
    svg.Empty("circle", {{"class", cls},
                         {"data-bytes", std::to_string(bytes)},
                         {"cx", x},
                         {"cy", y},
                         {"r", 5.5},
                         {"fill", "#ffffff"},
                         {"stroke", color},
                         {"stroke-width", 2.5}});
  }
}

double PeakX(const TimelineFrame& f, const TimelinePoint& pt) {
  return f.x((pt.start_ms + pt.end_ms) / 2);
}

}  // namespace

std::string OpLabel(const Plan& plan, const Profile& profile, int i) {
  const Op& op = plan.schedule.ops[i];
  std::string s = "op " + std::to_string(i) + ": " + DescribeOp(op);
  if (op.layer >= 0) s += " (" + profile.layers[op.layer].name + ")";
  return s;
}

void DrawBudget(SvgWriter& svg, const TimelineFrame& f, int64_t budget, bool off_scale) {
  const double y = f.Y(static_cast<double>(budget));
  svg.Open("g", {{"class", "budget-group"}});
  if (!off_scale && y > f.area.top) {  // tint the region over the budget
    svg.Empty("rect", {{"class", "over-budget"},
                       {"x", f.area.left},
                       {"y", f.area.top},
                       {"width", f.area.width},
                       {"height", y - f.area.top},
                       {"fill", kBudgetColor},
                       {"fill-opacity", 0.05}});
  }
  DrawReference(svg, f.area, Axis::kY, f.y,
                {static_cast<double>(budget) / f.unit.bytes,
                 "budget " + FormatBytes(budget),
                 "budget",
                 {{"data-bytes", std::to_string(budget)}}},
                off_scale);
  svg.Close();
}

// The predicted peak: marker, and its label above it, on the side with room.
void DrawPeak(SvgWriter& svg, const TimelineFrame& f, const Plan& plan, const Profile& profile) {
  const SimulationResult& r = plan.predicted;
  const double x = PeakX(f, r.timeline[r.peak_op]);
  const double y = f.Y(static_cast<double>(r.peak_bytes));
  const Callout label{"peak " + FormatBytes(r.peak_bytes), OpLabel(plan, profile, r.peak_op)};
  svg.Open("g", {{"class", "peak-group"}});
  DrawMarker(svg, f, x, y, "peak-marker", r.peak_bytes, kInkColor, false);
  const bool right = x + 12 + label.width() < f.area.right();
  DrawCallout(svg, right ? x + 10 : x - 10 - label.width(), std::max(f.area.top + 2, y - 44), label,
              kInkColor, "peak-marker");
  svg.Close();
}

void DrawMeasured(SvgWriter& svg, const TimelineFrame& f, const Plan& plan,
                  const std::vector<const OpSample*>& samples, const TrainResult& run) {
  PathData line;
  for (size_t i = 0; i < samples.size(); ++i) {
    const TimelinePoint& pt = plan.predicted.timeline[i];
    if (samples[i] == nullptr || !Timed(pt)) continue;
    const double y = f.Y(static_cast<double>(samples[i]->peak));
    if (line.empty())
      line.MoveTo(f.x(pt.start_ms), y);
    else
      line.LineTo(f.x(pt.start_ms), y);
    line.LineTo(f.x(pt.end_ms), y);
  }
  svg.Empty("path", {{"class", "series-measured"},
                     {"d", line.str()},
                     {"fill", "none"},
                     {"stroke", kMeasuredColor},
                     {"stroke-width", 2},
                     {"stroke-linejoin", "round"}});
  const int k = MeasuredPeakSample(run);
  if (k < 0) return;
  const OpSample& s = run.ops[k];
  const int64_t predicted = plan.predicted.peak_bytes;
  svg.Open("g", {{"class", "measured-peak-group"}});
  DrawMarker(svg, f, PeakX(f, plan.predicted.timeline[s.op_index]),
             f.Y(static_cast<double>(s.peak)), "measured-peak", s.peak, kMeasuredColor, true);
  // The label goes in a top corner, away from the predicted peak's label.
  const Callout label{"measured peak " + FormatBytes(MeasuredPeakBytes(run)),
                      "error at the peak " +
                          RelativeError(static_cast<double>(MeasuredPeakBytes(run)),
                                        static_cast<double>(predicted)) +
                          " vs predicted " + FormatBytes(predicted)};
  const bool peak_on_left =
      plan.predicted.peak_op < 0 ||
      PeakX(f, plan.predicted.timeline[plan.predicted.peak_op]) < f.area.left + f.area.width / 2;
  DrawCallout(svg, peak_on_left ? f.area.right() - label.width() - 8 : f.area.left + 8,
              f.area.top + 8, label, kMeasuredColor, "measured-peak");
  svg.Close();
}

}  // namespace remat::viz
