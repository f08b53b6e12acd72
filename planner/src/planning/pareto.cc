#include "remat/planning/pareto.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <utility>

#include "planning/in_order.h"
#include "planning/task_pool.h"
#include "remat/plan/plan_memo.h"
#include "solver/table_pool.h"
#include "remat/strategies/strategies.h"
#include "remat/io/units.h"

namespace remat {
namespace {

// The order the sweep's plans are taken in, highest first: the defaults
// (cheap; each default's peak adds plans), then the lowest peaks (the
// budgets wait for all of them), then the rest; within each, the
// strategies that take longest first, so that the last plans to finish
// are short ones.
int Rank(int phase, Strategy s) {
  int cost = 0;
  switch (s) {
    case Strategy::kOptimalSingle: cost = 4; break;
    case Strategy::kOptimal: cost = 3; break;
    case Strategy::kOffload: cost = 2; break;
    case Strategy::kNone: cost = 0; break;
    default: cost = 1; break;
  }
  return phase * 10 + cost;
}

}  // namespace

struct ParetoSweepAhead::Control {
  std::mutex mu;
  std::condition_variable changed;
  // The sweep's pool while it runs (a helper holds `mu` while it helps:
  // the sweep clears this under `mu`, then destroys the pool).
  planning_internal::TaskPool* pool = nullptr;
  bool cancelled = false;
  bool ended = false;  // the sweep returned or threw
  std::optional<Result<ParetoCurve>> curve;
  std::exception_ptr thrown;
};

namespace {

// ParetoSweep; with `control`, on one thread (that of the caller) until a
// helper joins in, stopping where cancelled.
Result<ParetoCurve> Sweep(const Profile& profile, const ParetoOptions& options,
                          ParetoSweepAhead::Control* control) {
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
  // The solvers' cost tables are kept between the sweep's solves.
  const solver::TablePoolScope keep_tables;
  ParetoCurve curve;
  curve.strategies = strategies;
  PlanOptions base;
  base.slots = options.slots;
  base.exact_times = options.exact_times;
  int64_t lo = options.min_budget, hi = options.max_budget;
  // Progress: one item per plan asked for (a plan asked for again is
  // counted again).
  const int64_t n = static_cast<int64_t>(strategies.size());
  const int64_t total = 1 + (lo <= 0 ? n : 0) + options.points * n + n + n * n;
  int64_t done = 0;
  std::mutex progress;
  auto told_item = [&](const std::string& item) {
    const std::lock_guard<std::mutex> lock(progress);
    ++done;
    if (options.progress) ReportProgress(options.progress, "pareto sweep", done, total, item);
  };
  // A plan by strategy and budget (-1: the lowest peak; 0: the default).
  auto told = [&](Strategy s, int64_t b) {
    told_item(ToString(s) + (b < 0    ? std::string(", lowest peak")
                             : b == 0 ? std::string(", no budget")
                                      : " at " + FormatBytes(b)));
  };
  ReportProgress(options.progress, "pareto sweep", 0, total);
  {
    PlanOptions o = base;
    o.strategy = Strategy::kNone;
    REMAT_ASSIGN_OR_RETURN(PlanSet none, MakePlan(profile, o));
    told_item(ToString(Strategy::kNone));
    curve.none_peak_bytes = none.chosen.predicted.peak_bytes;
    curve.baseline_step_ms = none.chosen.predicted.step_ms;
  }
  if (hi <= 0) hi = curve.none_peak_bytes;
  // The lowest peak reachable: each strategy's plan under 1 byte.
  const bool find_lo = lo <= 0;
  auto budgets_from = [&](int64_t low) {
    std::vector<int64_t> budgets;
    for (int k = 0; k < options.points; ++k) {
      budgets.push_back(low + static_cast<int64_t>(static_cast<double>(hi - low) * k /
                                                   (options.points - 1)));
    }
    return budgets;
  };
  // The plans, by strategy and budget (-1: the lowest peak, planned under
  // 1 byte; 0: the default), each planned once on the machine's cores as
  // soon as its budget is known: the sweep's budgets once every lowest
  // peak is, each strategy at a default's peak once that default is. The
  // plans are those of MakePlan for the profile and options, whatever the
  // order they are made in (the memo's results are the same plans).
  // optimal asks for optimal-single's plan at its budget (the memo keeps
  // it): where both are swept, it is queued once that plan is made, not to
  // wait for it.
  struct Made {
    std::optional<Result<ParetoPoint>> point;  // once planned
    int asks = 0;             // asks not yet counted in the progress
    bool after_single = false;  // queued once optimal-single's is made
  };
  const bool with_single =
      std::count(strategies.begin(), strategies.end(), Strategy::kOptimalSingle) > 0;
  planning_internal::TaskPool pool(control != nullptr ? 1 : planning_internal::MachineThreads());
  std::mutex mu;  // guards `made`, `lowest_left`
  std::map<std::pair<Strategy, int64_t>, Made> made;
  size_t lowest_left = find_lo ? strategies.size() : 0;
  std::function<void(Strategy, int64_t)> queue;
  // Asks for each strategy's plan at `b`; under `mu`. The plans made
  // already are counted in the progress at once (into `now`).
  auto ask_all = [&](int64_t b, std::vector<std::pair<Strategy, int64_t>>* now) {
    std::vector<Strategy> order = strategies;  // optimal-single first
    std::stable_partition(order.begin(), order.end(),
                          [](Strategy s) { return s == Strategy::kOptimalSingle; });
    for (Strategy s : order) {
      const auto [it, fresh] = made.try_emplace({s, b});
      if (!fresh) {
        if (it->second.point) {
          now->emplace_back(s, b);
        } else {
          ++it->second.asks;
        }
        continue;
      }
      it->second.asks = 1;
      if (s == Strategy::kOptimal && with_single && b != 0) {
        const Made& single = made.at({Strategy::kOptimalSingle, b});
        if (!single.point) {
          it->second.after_single = true;
          continue;
        }
      }
      queue(s, b);
    }
  };
  // Queues the plan of `s` at `b`, and what follows from it.
  queue = [&](Strategy s, int64_t b) {
    const int phase = b == 0 ? 3 : b < 0 ? 2 : 1;
    pool.Add(Rank(phase, s), [&, s, b] {
      PlanOptions o = base;
      o.strategy = s;
      o.budget_bytes = b < 0 ? 1 : b;
      Result<ParetoPoint> point = [&]() -> Result<ParetoPoint> {
        REMAT_ASSIGN_OR_RETURN(PlanSet set, MakePlan(profile, o));
        const Plan& p = set.chosen;
        return ParetoPoint{s,
                           b,
                           p.fits,
                           p.predicted.peak_bytes,
                           p.predicted.step_ms,
                           p.predicted.recompute_ms,
                           p.parameter};
      }();
      std::vector<std::pair<Strategy, int64_t>> now;
      {
        const std::lock_guard<std::mutex> lock(mu);
        Made& m = made.at({s, b});
        for (int i = 0; i < m.asks; ++i) now.emplace_back(s, b);
        m.asks = 0;
        m.point = point;
        if (s == Strategy::kOptimalSingle) {
          const auto it = made.find({Strategy::kOptimal, b});
          if (it != made.end() && it->second.after_single) {
            it->second.after_single = false;
            queue(Strategy::kOptimal, b);
          }
        }
        // A default: every strategy at its peak.
        if (b == 0 && point.ok()) ask_all(point->peak_bytes, &now);
        // The last lowest peak: the sweep's budgets.
        if (b < 0 && --lowest_left == 0) {
          int64_t low = hi;
          bool all = true;
          for (Strategy t : strategies) {
            const Made& l = made.at({t, -1});
            all = all && l.point->ok();
            if (l.point->ok()) low = std::min(low, (*l.point)->peak_bytes);
          }
          if (all && low <= hi) {
            for (int64_t budget : budgets_from(low)) ask_all(budget, &now);
          }
        }
      }
      for (const auto& [t, at] : now) told(t, at);
    });
  };
  {
    const std::lock_guard<std::mutex> lock(mu);
    std::vector<std::pair<Strategy, int64_t>> now;
    for (Strategy s : strategies) made[{s, 0}].asks = 1;
    for (Strategy s : strategies) queue(s, 0);
    if (find_lo) {
      ask_all(-1, &now);
    } else if (!find_lo && lo <= hi) {
      for (int64_t b : budgets_from(lo)) ask_all(b, &now);
    }
    for (const auto& [t, at] : now) told(t, at);
  }
  const Status cancelled = Status::Invalid("the Pareto sweep was cancelled");
  if (control != nullptr) {
    const std::lock_guard<std::mutex> lock(control->mu);
    if (control->cancelled) return cancelled;
    control->pool = &pool;
    control->changed.notify_all();
  }
  pool.Run();
  if (control != nullptr) {
    const std::lock_guard<std::mutex> lock(control->mu);
    control->pool = nullptr;
    if (control->cancelled) return cancelled;
  }
  // Errors in the order the plans depend on each other: the lowest peaks,
  // the budgets' points, the defaults, each strategy at their peaks.
  auto point_at = [&](Strategy s, int64_t b) -> Result<ParetoPoint> {
    return *made.at({s, b}).point;
  };
  if (find_lo) {
    lo = hi;
    for (Strategy s : strategies) {
      REMAT_ASSIGN_OR_RETURN(const ParetoPoint lowest, point_at(s, -1));
      lo = std::min(lo, lowest.peak_bytes);
    }
  }
  if (hi < lo) return Status::Invalid("the sweep's maximum budget is below its minimum");
  curve.budgets = budgets_from(lo);
  for (int64_t b : curve.budgets) {
    for (Strategy s : strategies) {
      REMAT_ASSIGN_OR_RETURN(ParetoPoint p, point_at(s, b));
      curve.points.push_back(std::move(p));
    }
  }
  for (Strategy s : strategies) {
    REMAT_ASSIGN_OR_RETURN(ParetoPoint p, point_at(s, 0));
    curve.defaults.push_back(std::move(p));
  }
  for (const ParetoPoint& d : curve.defaults) {
    ParetoPoint best = d;
    for (Strategy s : strategies) {
      REMAT_ASSIGN_OR_RETURN(ParetoPoint p, point_at(s, d.peak_bytes));
      if (p.fits && p.step_ms < best.step_ms * (1 - 1e-12)) best = std::move(p);
    }
    best.budget_bytes = d.peak_bytes;
    curve.best_at_default_peaks.push_back(std::move(best));
  }
  return curve;
}

}  // namespace

Result<ParetoCurve> ParetoSweep(const Profile& profile, const ParetoOptions& options) {
  return Sweep(profile, options, nullptr);
}

ParetoSweepAhead::ParetoSweepAhead(const Profile& profile, ParetoOptions options)
    : control_(std::make_shared<Control>()) {
  thread_ = std::thread([&profile, options = std::move(options), control = control_] {
    std::optional<Result<ParetoCurve>> curve;
    std::exception_ptr thrown;
    try {
      curve = Sweep(profile, options, control.get());
    } catch (...) {
      thrown = std::current_exception();
    }
    const std::lock_guard<std::mutex> lock(control->mu);
    control->curve = std::move(curve);
    control->thrown = thrown;
    control->ended = true;
    control->changed.notify_all();
  });
}

ParetoSweepAhead::~ParetoSweepAhead() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(control_->mu);
    control_->cancelled = true;
    if (control_->pool != nullptr) control_->pool->Cancel();
  }
  thread_.join();
}

Result<ParetoCurve> ParetoSweepAhead::Get() {
  {
    std::unique_lock<std::mutex> lock(control_->mu);
    control_->changed.wait(lock, [&] { return control_->pool != nullptr || control_->ended; });
    if (control_->pool != nullptr) control_->pool->Help();
  }
  thread_.join();
  if (control_->thrown) std::rethrow_exception(control_->thrown);
  return std::move(*control_->curve);
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
