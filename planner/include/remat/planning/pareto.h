// Step time against peak memory: every strategy planned over a range of
// budgets. The curve users need to pick a budget (`planner pareto`, the HTML
// report's Pareto chart).
#ifndef REMAT_PARETO_H_
#define REMAT_PARETO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/io/progress.h"
#include "remat/io/status.h"

namespace remat {

struct ParetoOptions {
  // Strategies to sweep; empty = every registered solver except manual.
  std::vector<Strategy> strategies;
  int points = 12;             // budgets in the sweep (>= 2)
  int64_t min_budget = 0;      // 0: the lowest peak any strategy reaches
  int64_t max_budget = 0;      // 0: the peak without checkpointing
  int slots = 0;               // passed to the optimal solvers
  bool exact_times = false;    // optimal: no pooling of times (PlanOptions::exact_times)
  // Told of each plan made ("pareto sweep", one item per strategy and
  // budget, item "optimal at 22.35 GiB"); may be empty.
  ProgressCallback progress;
};

// One strategy at one budget: its best plan's figures.
struct ParetoPoint {
  Strategy strategy = Strategy::kNone;
  int64_t budget_bytes = 0;
  bool fits = false;
  int64_t peak_bytes = 0;
  double step_ms = 0;
  double recompute_ms = 0;
  std::string parameter;
};

struct ParetoCurve {
  std::vector<int64_t> budgets;    // ascending, evenly spaced
  std::vector<Strategy> strategies;  // swept, in the order of `points` within a budget
  std::vector<ParetoPoint> points; // budgets x strategies, budget-major
  // Each swept strategy's plan without a budget (budget_bytes 0): what users
  // get by default (uniform and segment at round(sqrt N), selective on every
  // block, the optimal strategies keep everything).
  std::vector<ParetoPoint> defaults;
  // For each default, the fastest plan of any swept strategy within that
  // default's peak: what the same memory buys.
  std::vector<ParetoPoint> best_at_default_peaks;
  double baseline_step_ms = 0;     // step time without recompute
  int64_t none_peak_bytes = 0;
};

// Plans every strategy at every budget (figures from the simulator).
Result<ParetoCurve> ParetoSweep(const Profile& profile, const ParetoOptions& options);

// ParetoSweep(profile, options) started ahead, on one thread of its own
// (with the threads its solvers start), beside the caller's other work;
// the caller joins in when it asks for the curve. Not copyable.
class ParetoSweepAhead {
 public:
  // `profile` must outlive this object and not change while it lives.
  ParetoSweepAhead(const Profile& profile, ParetoOptions options);
  // Cancels the sweep where Get was not called, and waits for its thread.
  ~ParetoSweepAhead();
  ParetoSweepAhead(const ParetoSweepAhead&) = delete;
  ParetoSweepAhead& operator=(const ParetoSweepAhead&) = delete;

  // The curve ParetoSweep(profile, options) returns (the same), this
  // thread planning points too until it is done. Call once.
  Result<ParetoCurve> Get();

  struct Control;  // how the sweep and its caller meet (pareto.cc)

 private:
  std::shared_ptr<Control> control_;
  std::thread thread_;
};

// Points of `strategy` that fit, in budget order, dropping points that are no
// faster than a point at a smaller budget: the strategy's frontier.
std::vector<ParetoPoint> Frontier(const ParetoCurve& curve, Strategy strategy);

}  // namespace remat

#endif  // REMAT_PARETO_H_
