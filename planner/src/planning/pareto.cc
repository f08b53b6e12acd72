#include "remat/planning/pareto.h"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "planning/in_order.h"
#include "remat/plan/plan_memo.h"
#include "remat/strategies/strategies.h"
#include "remat/io/units.h"

namespace remat {
namespace {

// Runs `tasks` on the machine's cores (RunInOrder); their results in order,
// or the first error in that order.
template <typename T>
Result<std::vector<T>> AllOf(const std::vector<std::function<Result<T>()>>& tasks) {
  std::vector<std::function<std::optional<Result<T>>()>> wrapped;
  for (const auto& t : tasks) wrapped.push_back([&t] { return std::optional<Result<T>>(t()); });
  std::vector<T> out;
  for (std::optional<Result<T>>& r :
       planning_internal::RunInOrder(wrapped, planning_internal::MachineThreads())) {
    if (!r->ok()) return r->status();
    out.push_back(std::move(**r));
  }
  return out;
}

}  // namespace

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
  // The points are planned on the machine's cores, sharing it.
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
  std::mutex progress;
  auto planned = [&](Strategy s, const char* at, int64_t budget) {
    const std::lock_guard<std::mutex> lock(progress);
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
    std::vector<std::function<Result<int64_t>()>> lowest;
    for (Strategy s : strategies) {
      lowest.push_back([&, s]() -> Result<int64_t> {
        PlanOptions o = base;
        o.strategy = s;
        o.budget_bytes = 1;
        REMAT_ASSIGN_OR_RETURN(PlanSet set, MakePlan(profile, o));
        planned(s, ", lowest peak", 0);
        return set.chosen.predicted.peak_bytes;
      });
    }
    REMAT_ASSIGN_OR_RETURN(const std::vector<int64_t> peaks, AllOf(lowest));
    for (int64_t peak : peaks) lo = std::min(lo, peak);
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
  auto points = [&](const std::vector<std::pair<Strategy, int64_t>>& at) {
    std::vector<std::function<Result<ParetoPoint>()>> tasks;
    for (const auto& [s, b] : at) tasks.push_back([&point, s = s, b = b] { return point(s, b); });
    return AllOf(tasks);
  };
  // The budgets' points and the defaults (no budget) at once.
  std::vector<std::pair<Strategy, int64_t>> at;
  for (int64_t b : curve.budgets) {
    for (Strategy s : strategies) at.emplace_back(s, b);
  }
  for (Strategy s : strategies) at.emplace_back(s, 0);
  REMAT_ASSIGN_OR_RETURN(std::vector<ParetoPoint> planned_points, points(at));
  const size_t swept = curve.budgets.size() * strategies.size();
  curve.points.assign(planned_points.begin(), planned_points.begin() + swept);
  curve.defaults.assign(planned_points.begin() + swept, planned_points.end());
  // Each strategy at each default's peak, planned once per strategy and
  // budget: defaults share peaks (the strategies that keep everything
  // peak at the sweep's highest budget), and a point planned above is the
  // same plan again (MakePlan of the same profile and options).
  std::map<std::pair<Strategy, int64_t>, const ParetoPoint*> made;
  for (size_t i = 0; i < at.size(); ++i) made.emplace(at[i], &planned_points[i]);
  std::vector<std::pair<Strategy, int64_t>> wanted;
  for (const ParetoPoint& d : curve.defaults) {
    for (Strategy s : strategies) wanted.emplace_back(s, d.peak_bytes);
  }
  at.clear();
  for (const auto& w : wanted) {
    if (made.count(w) == 0 && std::find(at.begin(), at.end(), w) == at.end()) at.push_back(w);
  }
  REMAT_ASSIGN_OR_RETURN(const std::vector<ParetoPoint> fresh, points(at));
  for (size_t i = 0; i < at.size(); ++i) made.emplace(at[i], &fresh[i]);
  // Progress counts one plan per strategy and default's peak: those
  // reused too.
  std::vector<std::pair<Strategy, int64_t>> told = at;
  for (const auto& [s, b] : wanted) {
    const auto it = std::find(told.begin(), told.end(), std::make_pair(s, b));
    if (it != told.end()) {
      told.erase(it);
    } else {
      planned(s, b > 0 ? " at " : ", no budget", b);
    }
  }
  for (size_t i = 0; i < curve.defaults.size(); ++i) {
    ParetoPoint best = curve.defaults[i];
    for (size_t j = 0; j < strategies.size(); ++j) {
      const ParetoPoint& p = *made.at(wanted[i * strategies.size() + j]);
      if (p.fits && p.step_ms < best.step_ms * (1 - 1e-12)) best = p;
    }
    best.budget_bytes = curve.defaults[i].peak_bytes;
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
