// Renderings of a Pareto sweep (remat/planning/pareto.h): the terminal table printed
// by `planner pareto` and its JSON. Both read the same ParetoCurve.
#ifndef REMAT_PARETO_REPORT_H_
#define REMAT_PARETO_REPORT_H_

#include <string>

#include "remat/planning/pareto.h"
#include "remat/profile/profile.h"

namespace remat {

// One row per budget, one column per strategy: the step-time overhead over
// the no-recompute step (+12.3%) and the plan's peak, or "-" where the
// strategy's best plan does not fit; then each strategy's default plan and
// the fastest plan within the same peak.
std::string FormatParetoText(const ParetoCurve& curve, const Profile& profile);

// {"model", "source", "device", "static_bytes", "baseline_step_ms",
//  "none_peak_bytes", "strategies": [...], "budgets": [...],
//  "points": [{"budget_bytes", "strategy", "fits", "peak_bytes", "step_ms",
//              "recompute_ms", "overhead_pct", "parameter"}, ...],
//  "frontier": {"<strategy>": [{"peak_bytes", "step_ms", "overhead_pct"}, ...]},
//  "defaults": [same fields as points, budget_bytes 0, and "best_at_peak":
//               the fastest plan within that peak, same fields]}
// overhead_pct = 100 * (step_ms / baseline_step_ms - 1).
std::string ParetoToJson(const ParetoCurve& curve, const Profile& profile);

}  // namespace remat

#endif  // REMAT_PARETO_REPORT_H_
