#include "remat/planning/pareto.h"

#include <algorithm>

#include "remat/plan/plan_memo.h"
#include "remat/strategies/strategies.h"
#include "remat/io/units.h"

namespace remat {

Result<ParetoCurve> ParetoSweep(const Profile& profile, const ParetoOptions& options) {
  if (options.points < 2) return Status::Invalid("a Pareto sweep needs at least 2 budgets");
  std::vector<Strategy> strategies = options.strategies;
  if (strategies.empty()) {
    for (Strategy s : SweepableStrategies()) {
      if (AppliesTo(s, profile)) strategies.push_back(s);
    }
  }
  for (Strategy s : strategies) {
    if (!Sweepable(s)) {
      return Status::Invalid(std::string("strategy '") + ToString(s) +
                             "' cannot be swept (auto picks among the others; manual needs a "
                             "layer list)");
    }
  }
  // Every point's search joins it: the plans of one strategy at nearby
  // budgets, and the strategies optimal contains, share their schedules.
  PlanMemo memo(profile);
  ParetoCurve curve;
  curve.strategies = strategies;
  PlanOptions base;
  base.slots = options.slots;
  base.exact_times = options.exact_times;
  int64_t lo = options.min_budget, hi = options.max_budget;
  // Progress: one item per plan made.
  const int64_t n = static_cast<int64_t>(strategies.size());
  const int64_t total = 1 + (lo <= 0 ? n : 0) + options.points * n + n + n * n;
  int64_t done = 0;
  auto planned = [&](Strategy s, const char* at, int64_t budget) {
    ++done;
    if (!options.progress) return;
    ReportProgress(options.progress, "pareto sweep", done, total,
                   std::string(ToString(s)) + at + (budget > 0 ? FormatBytes(budget) : ""));
  };
  ReportProgress(options.progress, "pareto sweep", 0, total);
  {
    PlanOptions o = base;
    o.strategy = Strategy::kNone;
    REMAT_ASSIGN_OR_RETURN(PlanSet none, MakePlan(profile, o));
    planned(Strategy::kNone, "", 0);
    curve.none_peak_bytes = none.chosen.predicted.peak_bytes;
    curve.baseline_step_ms = none.chosen.predicted.step_ms;
  }
  if (hi <= 0) hi = curve.none_peak_bytes;
  if (lo <= 0) {
    // The lowest peak reachable: ask each strategy for a plan under 1 byte.
    lo = hi;
    for (Strategy s : strategies) {
      PlanOptions o = base;
      o.strategy = s;
      o.budget_bytes = 1;
      REMAT_ASSIGN_OR_RETURN(PlanSet set, MakePlan(profile, o));
      planned(s, ", lowest peak", 0);
      lo = std::min(lo, set.chosen.predicted.peak_bytes);
    }
  }
  if (hi < lo) return Status::Invalid("the sweep's maximum budget is below its minimum");
  for (int k = 0; k < options.points; ++k) {
    const int64_t b =
        lo + static_cast<int64_t>(static_cast<double>(hi - lo) * k / (options.points - 1));
    curve.budgets.push_back(b);
  }
  auto point = [&](Strategy s, int64_t b) -> Result<ParetoPoint> {
    PlanOptions o = base;
    o.strategy = s;
    o.budget_bytes = b;
    REMAT_ASSIGN_OR_RETURN(PlanSet set, MakePlan(profile, o));
    planned(s, b > 0 ? " at " : ", no budget", b);
    const Plan& p = set.chosen;
    return ParetoPoint{s,
                       b,
                       p.fits,
                       p.predicted.peak_bytes,
                       p.predicted.step_ms,
                       p.predicted.recompute_ms,
                       p.parameter};
  };
  for (int64_t b : curve.budgets) {
    for (Strategy s : strategies) {
      REMAT_ASSIGN_OR_RETURN(ParetoPoint p, point(s, b));
      curve.points.push_back(std::move(p));
    }
  }
  for (Strategy s : strategies) {
    REMAT_ASSIGN_OR_RETURN(ParetoPoint p, point(s, 0));
    curve.defaults.push_back(std::move(p));
  }
  for (const ParetoPoint& d : curve.defaults) {
    ParetoPoint best = d;
    for (Strategy s : strategies) {
      REMAT_ASSIGN_OR_RETURN(ParetoPoint p, point(s, d.peak_bytes));
      if (p.fits && p.step_ms < best.step_ms * (1 - 1e-12)) best = std::move(p);
    }
    best.budget_bytes = d.peak_bytes;
    curve.best_at_default_peaks.push_back(std::move(best));
  }
  return curve;
}

std::vector<ParetoPoint> Frontier(const ParetoCurve& curve, Strategy strategy) {
  std::vector<ParetoPoint> out;
  for (const ParetoPoint& p : curve.points) {
    if (p.strategy != strategy || !p.fits) continue;
    if (!out.empty() && p.step_ms >= out.back().step_ms - 1e-12) continue;
    out.push_back(p);
  }
  return out;
}

}  // namespace remat
