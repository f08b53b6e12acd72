#include "timeline_chart.h"

#include <algorithm>
#include <vector>

#include "axes.h"
#include "measured.h"
#include "palette.h"
#include "phases.h"
#include "remat/io/units.h"
#include "svg.h"
#include "timeline_marks.h"

namespace remat::viz {
namespace {

constexpr double kWidth = 1100;
constexpr double kHeight = 420;
constexpr MemoryCategory kStack[] = {MemoryCategory::kModelState, MemoryCategory::kParameterGrads,
                                     MemoryCategory::kActivations, MemoryCategory::kRecomputed,
                                     MemoryCategory::kGradients, MemoryCategory::kWorkspace};

// Light tints behind the plot and a solid strip under it, one run of
// consecutive ops of a kind at a time; runs wide enough are labelled.
void DrawPhases(SvgWriter& svg, const TimelineFrame& f, const Plan& plan) {
  const double strip = f.area.bottom() + 3;
  svg.Open("g", {{"class", "phases"}});
  for (const PhaseRun& r : PhaseRuns(plan)) {
    const double x0 = f.x(r.start_ms), w = std::max(0.5, f.x(r.end_ms) - x0);
    svg.Empty("rect", {{"x", x0},
                       {"y", f.area.top},
                       {"width", w},
                       {"height", f.area.height},
                       {"fill", PhaseColor(r.kind)},
                       {"fill-opacity", 0.06}});
    svg.Open("rect", {{"class", std::string("phase phase-") + PhaseLabel(r.kind)},
                      {"x", x0},
                      {"y", strip},
                      {"width", w},
                      {"height", 13},
                      {"fill", PhaseColor(r.kind)}});
    svg.Title(std::string(PhaseLabel(r.kind)) + ": " + FormatMillis(r.start_ms) + " to " +
              FormatMillis(r.end_ms));
    svg.Close();
    const std::string label = PhaseLabel(r.kind);
    if (w > TextWidth(label, 10) + 8) {
      svg.Text(x0 + w / 2, strip + 10, label,
               {{"text-anchor", "middle"},
                {"font-size", 10},
                {"fill", "#ffffff"},
                {"font-weight", 600}});
    }
  }
  svg.Close();
}

// One closed path per category: the band between the categories below it
// and itself, a step per timed op.
void DrawSeries(SvgWriter& svg, const TimelineFrame& f, const SimulationResult& r) {
  std::vector<const TimelinePoint*> timed;
  for (const TimelinePoint& pt : r.timeline) {
    if (Timed(pt)) timed.push_back(&pt);
  }
  svg.Open("g", {{"class", "stack"}});
  std::vector<double> below(timed.size(), 0.0);
  for (MemoryCategory c : kStack) {
    PathData top, bottom;
    std::vector<double> above = below;
    for (size_t k = 0; k < timed.size(); ++k) above[k] += static_cast<double>(timed[k]->at_peak[c]);
    for (size_t k = 0; k < timed.size(); ++k) {
      const double x0 = f.x(timed[k]->start_ms), x1 = f.x(timed[k]->end_ms);
      if (k == 0)
        top.MoveTo(x0, f.Y(above[k]));
      else
        top.LineTo(x0, f.Y(above[k]));
      top.LineTo(x1, f.Y(above[k]));
    }
    for (size_t k = timed.size(); k-- > 0;) {
      top.LineTo(f.x(timed[k]->end_ms), f.Y(below[k]));
      top.LineTo(f.x(timed[k]->start_ms), f.Y(below[k]));
    }
    if (!timed.empty()) top.Close();
    svg.Open("path", {{"class", std::string("series series-") + ToString(c)},
                      {"d", top.str()},
                      {"fill", CategoryColor(c)},
                      {"fill-opacity", 0.88},
                      {"stroke", CategoryColor(c)},
                      {"stroke-width", 0.6}});
    svg.Title(std::string(CategoryLabel(c)) + ": " + FormatBytes(r.at_peak[c]) + " at the peak");
    svg.Close();
    below = above;
  }
  svg.Close();
}

// Invisible full-height bands, one per timed op, whose tooltips name the op.
void DrawHoverBands(SvgWriter& svg, const TimelineFrame& f, const Plan& plan,
                    const Profile& profile, const std::vector<const OpSample*>& samples) {
  svg.Open("g", {{"class", "ops"}, {"fill", "#000000"}, {"fill-opacity", 0}});
  for (size_t i = 0; i < plan.predicted.timeline.size(); ++i) {
    const TimelinePoint& pt = plan.predicted.timeline[i];
    if (!Timed(pt)) continue;
    const double x0 = f.x(pt.start_ms);
    svg.Open(
        "rect",
        {{"x", x0}, {"y", f.area.top}, {"width", f.x(pt.end_ms) - x0}, {"height", f.area.height}});
    std::string tip = OpLabel(plan, profile, static_cast<int>(i)) + "\n" +
                      FormatMillis(pt.start_ms) + " to " + FormatMillis(pt.end_ms) + "\npeak " +
                      FormatBytes(pt.peak);
    for (MemoryCategory c : kStack) {
      if (pt.at_peak[c] > 0)
        tip += "\n  " + std::string(CategoryLabel(c)) + " " + FormatBytes(pt.at_peak[c]);
    }
    if (samples[i] != nullptr) tip += "\nmeasured peak " + FormatBytes(samples[i]->peak);
    svg.Title(tip);
    svg.Close();
  }
  svg.Close();
}

std::vector<const OpSample*> SamplesByOp(const Plan& plan, const TrainResult* run) {
  std::vector<const OpSample*> by_op(plan.schedule.ops.size(), nullptr);
  if (run == nullptr) return by_op;
  for (const OpSample& s : run->ops) by_op[s.op_index] = &s;
  return by_op;
}

}  // namespace

double TimelineDataMaxBytes(const Plan& plan, const TrainResult* measured) {
  double bytes = static_cast<double>(plan.predicted.peak_bytes);
  if (measured != nullptr)
    bytes = std::max(bytes, static_cast<double>(MeasuredPeakBytes(*measured)));
  return bytes;
}

std::string TimelineChart(const Plan& plan, const Profile& profile, const TrainResult* measured) {
  const SimulationResult& r = plan.predicted;
  const std::vector<const OpSample*> samples = SamplesByOp(plan, measured);
  TimelineFrame f;
  f.area = {72, measured != nullptr ? 64.0 : 62.0, kWidth - 72 - 24, 290};
  AxisFit fit;
  fit.headroom = 0.12;
  const ValueAxis y_axis = FitByteAxis(0, TimelineDataMaxBytes(plan, measured),
                                       static_cast<double>(plan.budget_bytes), fit, &f.unit);
  const Ticks& yt = y_axis.ticks;
  f.y = YScale(f.area, 0, yt.hi);
  const double step_ms = std::max(r.step_ms, 1e-9);
  const Ticks xt = NiceTicks(0, step_ms, 10);
  f.x = XScale(f.area, 0, step_ms);
  const bool budget_on_scale = plan.budget_bytes > 0 && !y_axis.reference_off_scale;

  SvgWriter svg(kWidth, kHeight, "memory-timeline", "memory over the training step");
  svg.Open("g", {{"class", "frame"},
                 {"data-plot-top", f.area.top},
                 {"data-plot-bottom", f.area.bottom()},
                 {"data-y-max-bytes", Num(yt.hi * f.unit.bytes)}});
  std::vector<LegendItem> legend;
  for (MemoryCategory c : kStack) legend.push_back({CategoryLabel(c), CategoryColor(c)});
  DrawLegend(svg, f.area.left, 18, legend);
  std::vector<LegendItem> marks;
  if (budget_on_scale) marks.push_back({"budget", kBudgetColor, LegendMark::kDashedLine});
  marks.push_back({"predicted peak", kInkColor, LegendMark::kRing});
  if (measured != nullptr)
    marks.push_back({"measured (runtime)", kMeasuredColor, LegendMark::kLine});
  const double x = DrawLegend(svg, f.area.left, 40, marks) + 14;
  svg.Text(x, 40, "phases (strip under the chart):", {{"fill", kMutedColor}});
  std::vector<LegendItem> phases;
  for (OpKind k :
       {OpKind::kForward, OpKind::kRecompute, OpKind::kBackward, OpKind::kOptimizerStep}) {
    phases.push_back({PhaseLabel(k), PhaseColor(k)});
  }
  DrawLegend(svg, x + TextWidth("phases (strip under the chart):") + 10, 40, phases);

  DrawYAxis(svg, f.area, yt, f.y, std::string("memory (") + f.unit.name + ")");
  DrawPhases(svg, f, plan);
  DrawSeries(svg, f, r);
  DrawXAxis(svg, f.area, xt, f.x, "time in step (ms)", 18);
  if (plan.budget_bytes > 0) DrawBudget(svg, f, plan.budget_bytes, y_axis.reference_off_scale);
  if (measured != nullptr) DrawMeasured(svg, f, plan, samples, *measured);
  if (r.peak_op >= 0) DrawPeak(svg, f, plan, profile);
  DrawHoverBands(svg, f, plan, profile, samples);
  return svg.Finish();
}

}  // namespace remat::viz
