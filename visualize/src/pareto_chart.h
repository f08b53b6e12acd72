// Step time against peak memory for every strategy (ParetoSweep), with the
// chosen plan and the budget marked.
#ifndef REMAT_VISUALIZE_PARETO_CHART_H_
#define REMAT_VISUALIZE_PARETO_CHART_H_

#include <string>

#include "remat/planning/pareto.h"
#include "remat/plan/plan.h"

namespace remat::viz {

// An <svg id="pareto">: x peak memory (binary unit), y step time (ms). Each
// swept strategy's frontier (Frontier()) is a <path class="frontier
// frontier-<name>">; its points are <g class="point" data-strategies="...">,
// one per position, with a ring per further strategy reaching the same point.
// The chosen plan is a <circle class="chosen">, the budget a vertical <line
// class="budget">, the step time without recompute a <line class="baseline">.
// The axes follow the data (points, chosen plan, baseline): a budget more
// than kOffScaleRatio x the largest peak is not drawn at its position but
// marked at the top edge, <g class="budget-off-scale"> (FitAxis). A <g
// class="frame"> carries data-plot-left, data-plot-right, data-x-min-bytes
// and data-x-max-bytes so tests can check positions.
std::string ParetoChart(const ParetoCurve& curve, const Plan& chosen);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_PARETO_CHART_H_
