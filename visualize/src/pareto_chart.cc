#include "pareto_chart.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "axes.h"
#include "palette.h"
#include "remat/units.h"
#include "svg.h"

namespace remat::viz {
namespace {

constexpr double kWidth = 1100;
constexpr double kHeight = 380;

std::vector<Strategy> SweptStrategies(const ParetoCurve& curve) {
  std::vector<Strategy> out;
  for (const ParetoPoint& p : curve.points) {
    if (std::find(out.begin(), out.end(), p.strategy) == out.end()) out.push_back(p.strategy);
  }
  return out;
}

std::string PointTooltip(const ParetoPoint& p) {
  std::string s = ToString(p.strategy);
  if (!p.parameter.empty()) s += " (" + p.parameter + ")";
  return s + "\npeak " + FormatBytes(p.peak_bytes) + ", step " + FormatMillis(p.step_ms) +
         ", recompute " + FormatMillis(p.recompute_ms) + "\nbest under a budget of " +
         FormatBytes(p.budget_bytes);
}

}  // namespace

std::string ParetoChart(const ParetoCurve& curve, const Plan& chosen) {
  const std::vector<Strategy> strategies = SweptStrategies(curve);
  std::vector<std::vector<ParetoPoint>> fronts;
  double lo_b = static_cast<double>(chosen.predicted.peak_bytes), hi_b = lo_b;
  double lo_t = std::min(chosen.predicted.step_ms, curve.baseline_step_ms);
  double hi_t = std::max(chosen.predicted.step_ms, curve.baseline_step_ms);
  if (chosen.budget_bytes > 0) {
    lo_b = std::min(lo_b, static_cast<double>(chosen.budget_bytes));
    hi_b = std::max(hi_b, static_cast<double>(chosen.budget_bytes));
  }
  for (Strategy s : strategies) {
    fronts.push_back(Frontier(curve, s));
    for (const ParetoPoint& p : fronts.back()) {
      lo_b = std::min(lo_b, static_cast<double>(p.peak_bytes));
      hi_b = std::max(hi_b, static_cast<double>(p.peak_bytes));
      lo_t = std::min(lo_t, p.step_ms);
      hi_t = std::max(hi_t, p.step_ms);
    }
  }
  const ByteUnit unit = PickByteUnit(hi_b);
  const double pad_b = std::max((hi_b - lo_b) * 0.06, hi_b * 0.01);
  const double pad_t = std::max((hi_t - lo_t) * 0.08, hi_t * 0.01);
  const Ticks xt = NiceTicks((lo_b - pad_b) / unit.bytes, (hi_b + pad_b) / unit.bytes, 8);
  const Ticks yt = NiceTicks(std::max(0.0, lo_t - pad_t), hi_t + pad_t, 5);
  const PlotArea area{72, 50, kWidth - 72 - 28, 276};
  const LinearScale x = XScale(area, xt.lo, xt.hi);
  const LinearScale y = YScale(area, yt.lo, yt.hi);
  auto X = [&](double bytes) { return x(bytes / unit.bytes); };

  SvgWriter svg(kWidth, kHeight, "pareto", "step time against peak memory per strategy");
  std::vector<LegendItem> legend;
  for (Strategy s : strategies) legend.push_back({ToString(s), StrategyColor(s), LegendMark::kDot});
  legend.push_back({"chosen plan", kInkColor, LegendMark::kRing});
  if (chosen.budget_bytes > 0) legend.push_back({"budget", kBudgetColor, LegendMark::kDashedLine});
  legend.push_back({"no recompute", kMutedColor, LegendMark::kDashedLine});
  DrawLegend(svg, area.left, 20, legend);
  DrawYAxis(svg, area, yt, y, "step time (ms)");
  DrawXAxis(svg, area, xt, x, std::string("peak memory (") + unit.name + ")", 0);

  const double base_y = y(curve.baseline_step_ms);
  svg.Empty("line", {{"class", "baseline"},
                     {"x1", area.left},
                     {"x2", area.right()},
                     {"y1", base_y},
                     {"y2", base_y},
                     {"stroke", kMutedColor},
                     {"stroke-dasharray", "3 3"}});
  svg.Text(area.right() - 4, base_y - 5, "no recompute " + FormatMillis(curve.baseline_step_ms),
           {{"text-anchor", "end"}, {"font-size", 11}, {"fill", kMutedColor}});
  if (chosen.budget_bytes > 0) {
    const double bx = X(static_cast<double>(chosen.budget_bytes));
    svg.Empty("line", {{"class", "budget"},
                       {"x1", bx},
                       {"x2", bx},
                       {"y1", area.top},
                       {"y2", area.bottom()},
                       {"stroke", kBudgetColor},
                       {"stroke-width", 2},
                       {"stroke-dasharray", "7 4"}});
    svg.Text(bx + 5, area.top + 12, "budget " + FormatBytes(chosen.budget_bytes),
             {{"fill", kBudgetColor}, {"font-weight", 600}});
  }

  // Lines first, then the points: where several strategies reach the same
  // point, one dot with a ring per further strategy around it.
  std::map<std::pair<long, long>, std::vector<const ParetoPoint*>> at;
  for (size_t k = 0; k < strategies.size(); ++k) {
    PathData line;
    for (const ParetoPoint& p : fronts[k]) {
      const double px = X(static_cast<double>(p.peak_bytes)), py = y(p.step_ms);
      if (line.empty())
        line.MoveTo(px, py);
      else
        line.LineTo(px, py);
      at[{std::lround(px), std::lround(py)}].push_back(&p);
    }
    svg.Empty("path", {{"class", std::string("frontier frontier-") + ToString(strategies[k])},
                       {"d", line.str()},
                       {"fill", "none"},
                       {"stroke", StrategyColor(strategies[k])},
                       {"stroke-width", 2},
                       {"stroke-opacity", 0.75}});
  }
  svg.Open("g", {{"class", "points"}});
  for (const auto& [pos, points] : at) {
    const double px = X(static_cast<double>(points[0]->peak_bytes)), py = y(points[0]->step_ms);
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

  const double cx = X(static_cast<double>(chosen.predicted.peak_bytes));
  const double cy = y(chosen.predicted.step_ms);
  Callout label{
      std::string("chosen: ") + ToString(chosen.strategy),
      FormatBytes(chosen.predicted.peak_bytes) + ", " + FormatMillis(chosen.predicted.step_ms)};
  if (!chosen.parameter.empty()) label.title += " (" + chosen.parameter + ")";
  svg.Empty("circle", {{"class", "chosen"},
                       {"cx", cx},
                       {"cy", cy},
                       {"r", 10},
                       {"fill", "none"},
                       {"stroke", kInkColor},
                       {"stroke-width", 2.5}});
  const double w = label.width();
  DrawCallout(svg, cx + 16 + w < area.right() ? cx + 14 : cx - 14 - w,
              cy - 18 < area.top ? cy + 14 : cy - 46, label, kInkColor, "chosen");
  return svg.Finish();
}

}  // namespace remat::viz
