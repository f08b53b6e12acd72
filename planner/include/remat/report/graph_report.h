// The report of a graph plan (graph_plan.h): per chain what it checkpoints
// and recomputes, and the graph's predicted peak and step time beside the
// chains planned one by one and the plan that checkpoints nothing.
#ifndef REMAT_GRAPH_REPORT_H_
#define REMAT_GRAPH_REPORT_H_

#include <string>

#include "remat/profile/graph_profile.h"
#include "remat/strategies/graph_plan.h"

namespace remat {

// The terminal report; `input_path` names the file.
std::string FormatGraphPlanText(const GraphPlanSet& set, const GraphProfile& graph,
                                const std::string& input_path);

// JSON: {"model", "budget_bytes", "fits", "peak_bytes", "static_bytes",
// "step_ms", "recompute_ms", "chains": [{"name", "layers", "decisions",
// "schedule", "alone_peak_bytes"}], "independent": {...}, "baseline": {...}}
// (the last two without "chains").
std::string GraphPlanToJson(const GraphPlanSet& set, const GraphProfile& graph);

}  // namespace remat

#endif  // REMAT_GRAPH_REPORT_H_
