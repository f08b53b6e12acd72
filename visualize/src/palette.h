// Colours and display names shared by every chart, so that a category, a
// phase or a strategy looks the same everywhere in a report.
#ifndef REMAT_VISUALIZE_PALETTE_H_
#define REMAT_VISUALIZE_PALETTE_H_

#include <string>

#include "remat/plan/plan.h"
#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"

namespace remat::viz {

// Memory categories, stacked bottom to top in this order.
const char* CategoryColor(MemoryCategory c);
const char* CategoryLabel(MemoryCategory c);  // "activations kept", ...

// Phases of the step: the kind of op running. Neutral shades, except
// recompute, which shares the colour of recomputed memory.
const char* PhaseColor(OpKind kind);
const char* PhaseLabel(OpKind kind);  // "forward", "recompute", "backward", "optimizer"

// A plan as every part of a report names it: its strategy and, when it has
// one, its setting (Plan::parameter): "uniform (every 2)"; "none".
std::string PlanName(Strategy strategy, const std::string& parameter);

const char* DecisionColor(LayerDecision d);
const char* StrategyColor(Strategy s);

inline constexpr const char* kBudgetColor = "#d62728";
inline constexpr const char* kMeasuredColor = "#1b1b1b";
inline constexpr const char* kInkColor = "#1f2933";    // labels, markers
inline constexpr const char* kMutedColor = "#616e7c";  // axis text
inline constexpr const char* kGridColor = "#e4e7eb";

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_PALETTE_H_
