#include "pareto_chart.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "axes.h"
#include "palette.h"
#include "remat/io/units.h"
#include "svg.h"

namespace remat::viz {
namespace {

constexpr double kWidth = 1100;
constexpr double kHeight = 380;

// Each swept strategy's frontier (Frontier()), in the order they were swept.
struct Fronts {
  std::vector<Strategy> strategies;
  std::vector<std::vector<ParetoPoint>> points;  // one frontier per strategy
};

Fronts SweptFrontiers(const ParetoCurve& curve) {
  Fronts f;
  for (const ParetoPoint& p : curve.points) {
    if (std::find(f.strategies.begin(), f.strategies.end(), p.strategy) != f.strategies.end())
      continue;
    f.strategies.push_back(p.strategy);
    f.points.push_back(Frontier(curve, p.strategy));
  }
  return f;
}

// What the chart maps: peak memory (bytes) to x, step time (ms) to y.
struct ParetoFrame {
  PlotArea area{72, 50, kWidth - 72 - 28, 276};
  ByteUnit unit;
  ValueAxis x_axis, y_axis;  // x in `unit`s
  LinearScale x, y;
  double X(double bytes) const { return x(bytes / unit.bytes); }
};

// Axes fitted to the frontier points, the chosen plan and the step time
// without recompute; the budget widens the memory axis unless it is off
// scale (FitAxis).
ParetoFrame FitFrame(const Fronts& fronts, const ParetoCurve& curve, const Plan& chosen) {
  double lo_b = static_cast<double>(chosen.predicted.peak_bytes), hi_b = lo_b;
  double lo_t = std::min(chosen.predicted.step_ms, curve.baseline_step_ms);
  double hi_t = std::max(chosen.predicted.step_ms, curve.baseline_step_ms);
  for (const std::vector<ParetoPoint>& front : fronts.points) {
    for (const ParetoPoint& p : front) {
      lo_b = std::min(lo_b, static_cast<double>(p.peak_bytes));
      hi_b = std::max(hi_b, static_cast<double>(p.peak_bytes));
      lo_t = std::min(lo_t, p.step_ms);
      hi_t = std::max(hi_t, p.step_ms);
    }
  }
  ParetoFrame f;
  AxisFit x_fit, y_fit;
  x_fit.from_zero = y_fit.from_zero = false;
  x_fit.headroom = 0.06;
  x_fit.target_steps = 8;
  y_fit.headroom = 0.08;
  y_fit.target_steps = 5;
  f.x_axis = FitByteAxis(lo_b, hi_b, static_cast<double>(chosen.budget_bytes), x_fit, &f.unit);
  f.y_axis = FitAxis(lo_t, hi_t, 0, y_fit);
  f.x = XScale(f.area, f.x_axis.ticks.lo, f.x_axis.ticks.hi);
  f.y = YScale(f.area, f.y_axis.ticks.lo, f.y_axis.ticks.hi);
  return f;
}

bool BudgetOnScale(const ParetoFrame& f, const Plan& chosen) {
  return chosen.budget_bytes > 0 && !f.x_axis.reference_off_scale;
}

void DrawLegendAndAxes(SvgWriter& svg, const ParetoFrame& f, const Fronts& fronts,
                       const Plan& chosen) {
  std::vector<LegendItem> legend;
  for (Strategy s : fronts.strategies)
    legend.push_back({ToString(s), StrategyColor(s), LegendMark::kDot});
  legend.push_back({"chosen plan", kInkColor, LegendMark::kRing});
  if (BudgetOnScale(f, chosen)) legend.push_back({"budget", kBudgetColor, LegendMark::kDashedLine});
  legend.push_back({"no recompute", kMutedColor, LegendMark::kDashedLine});
  DrawLegend(svg, f.area.left, 20, legend);
  DrawYAxis(svg, f.area, f.y_axis.ticks, f.y, "step time (ms)");
  DrawXAxis(svg, f.area, f.x_axis.ticks, f.x, std::string("peak memory (") + f.unit.name + ")", 0);
}

// The step time without recompute: a dotted line across the plot.
void DrawBaseline(SvgWriter& svg, const ParetoFrame& f, double baseline_ms) {
  const double y = f.y(baseline_ms);
  svg.Empty("line", {{"class", "baseline"},
                     {"x1", f.area.left},
                     {"x2", f.area.right()},
                     {"y1", y},
                     {"y2", y},
                     {"stroke", kMutedColor},
                     {"stroke-dasharray", "3 3"}});
  // Labelled at the left end: no frontier point reaches the lower left (it
  // would beat them all), while the right end is where the plans without
  // recompute, the chosen one's label among them, sit on this line.
  svg.Text(f.area.left + 6, y - 5, "no recompute " + FormatMillis(baseline_ms),
           {{"font-size", 11}, {"fill", kMutedColor}});
}

void DrawBudget(SvgWriter& svg, const ParetoFrame& f, int64_t budget) {
  DrawReference(svg, f.area, Axis::kX, f.x,
                {static_cast<double>(budget) / f.unit.bytes,
                 "budget " + FormatBytes(budget),
                 "budget",
                 {{"data-bytes", std::to_string(budget)}}},
                f.x_axis.reference_off_scale);
}

// One line per strategy through its frontier's points.
void DrawFrontierLines(SvgWriter& svg, const ParetoFrame& f, const Fronts& fronts) {
  for (size_t k = 0; k < fronts.strategies.size(); ++k) {
    PathData line;
    for (const ParetoPoint& p : fronts.points[k]) {
      const double px = f.X(static_cast<double>(p.peak_bytes)), py = f.y(p.step_ms);
      if (line.empty())
        line.MoveTo(px, py);
      else
        line.LineTo(px, py);
    }
    svg.Empty("path",
              {{"class", std::string("frontier frontier-") + ToString(fronts.strategies[k])},
               {"d", line.str()},
               {"fill", "none"},
               {"stroke", StrategyColor(fronts.strategies[k])},
               {"stroke-width", 2},
               {"stroke-opacity", 0.75}});
  }
}

std::string PointTooltip(const ParetoPoint& p) {
  return PlanName(p.strategy, p.parameter) + "\npeak " + FormatBytes(p.peak_bytes) + ", step " +
         FormatMillis(p.step_ms) + ", recompute " + FormatMillis(p.recompute_ms) +
         "\nbest under a budget of " + FormatBytes(p.budget_bytes);
}

// One <g class="point"> per pixel position: a dot in the first strategy's
// colour, and a ring around it per further strategy reaching the same point.
void DrawPoints(SvgWriter& svg, const ParetoFrame& f, const Fronts& fronts) {
  std::map<std::pair<long, long>, std::vector<const ParetoPoint*>> at;
  for (const std::vector<ParetoPoint>& front : fronts.points) {
    for (const ParetoPoint& p : front) {
      at[{std::lround(f.X(static_cast<double>(p.peak_bytes))), std::lround(f.y(p.step_ms))}]
          .push_back(&p);
    }
  }
  svg.Open("g", {{"class", "points"}});
  for (const auto& [pos, points] : at) {
    const double px = f.X(static_cast<double>(points[0]->peak_bytes)), py = f.y(points[0]->step_ms);
    std::string names, tip;
    for (const ParetoPoint* p : points) {
      names += (names.empty() ? "" : " ") + std::string(ToString(p->strategy));
      tip += (tip.empty() ? "" : "\n\n") + PointTooltip(*p);
    }
    svg.Open("g", {{"class", "point"}, {"data-strategies", names}});
    svg.Title(tip);
    for (size_t j = points.size(); j-- > 1;) {
      svg.Empty("circle", {{"cx", px},
                           {"cy", py},
                           {"r", 4.5 + 2.5 * static_cast<double>(j)},
                           {"fill", "#ffffff"},
                           {"stroke", StrategyColor(points[j]->strategy)},
                           {"stroke-width", 2}});
    }
    svg.Empty("circle", {{"cx", px},
                         {"cy", py},
                         {"r", 4.5},
                         {"fill", StrategyColor(points[0]->strategy)},
                         {"stroke", "#ffffff"},
                         {"stroke-width", 1}});
    svg.Close();
  }
  svg.Close();
}

// The chosen plan: a ring, and a callout naming it on the side with room.
void DrawChosen(SvgWriter& svg, const ParetoFrame& f, const Plan& chosen) {
  const double cx = f.X(static_cast<double>(chosen.predicted.peak_bytes));
  const double cy = f.y(chosen.predicted.step_ms);
  const Callout label{
      "chosen: " + PlanName(chosen.strategy, chosen.parameter),
      FormatBytes(chosen.predicted.peak_bytes) + ", " + FormatMillis(chosen.predicted.step_ms)};
  svg.Empty("circle", {{"class", "chosen"},
                       {"cx", cx},
                       {"cy", cy},
                       {"r", 10},
                       {"fill", "none"},
                       {"stroke", kInkColor},
                       {"stroke-width", 2.5}});
  const double w = label.width();
  DrawCallout(svg, cx + 16 + w < f.area.right() ? cx + 14 : cx - 14 - w,
              cy - 18 < f.area.top ? cy + 14 : cy - 46, label, kInkColor, "chosen");
}

}  // namespace

std::string ParetoChart(const ParetoCurve& curve, const Plan& chosen) {
  const Fronts fronts = SweptFrontiers(curve);
  const ParetoFrame f = FitFrame(fronts, curve, chosen);
  SvgWriter svg(kWidth, kHeight, "pareto", "step time against peak memory per strategy");
  svg.Open("g", {{"class", "frame"},
                 {"data-plot-left", f.area.left},
                 {"data-plot-right", f.area.right()},
                 {"data-x-min-bytes", Num(f.x_axis.ticks.lo * f.unit.bytes)},
                 {"data-x-max-bytes", Num(f.x_axis.ticks.hi * f.unit.bytes)}});
  DrawLegendAndAxes(svg, f, fronts, chosen);
  DrawBaseline(svg, f, curve.baseline_step_ms);
  if (chosen.budget_bytes > 0) DrawBudget(svg, f, chosen.budget_bytes);
  // Lines first, then the points over them.
  DrawFrontierLines(svg, f, fronts);
  DrawPoints(svg, f, fronts);
  DrawChosen(svg, f, chosen);
  return svg.Finish();
}

}  // namespace remat::viz
