// Planning a graph profile (graph_profile.h): one schedule per chain, chosen
// together so that the graph's step (graph_simulator.h) fits the budget at
// the least step time.
//
// The chains share the budget: while a chain runs, the others hold their
// batch inputs, what their forwards kept, their parameter gradients and the
// tensors crossing between chains. The search splits the budget by
// solving each chain with the optimal solver (strategies.h, kOptimal) at
// its share:
//   - the last chain in the graph's order is solved at every budget along
//     its own time/memory front (each budget one byte under the previous
//     plan's peak), its readers' share of the crossing tensors counted in
//     its profile (the source output's gradient made by its first reader
//     and the parts later readers add, the source output held from its
//     batch input);
//   - each earlier chain, for each plan of the chains after it, is solved
//     with those chains appended as one layer: their peak above what they
//     hold at rest is that layer's workspace, their parameter gradients its
//     gradients, the chain's output its input (so the solver weighs running
//     the chain's last blocks without grad while the later chains run).
// Every combination found, the chains planned one by one at their share of
// the budget (PlanGraph's `independent`) and the plan that checkpoints
// nothing are simulated on the graph; the fitting one with the least step
// time is chosen (then the lowest peak; with none fitting, the lowest
// peak). The choice is therefore never worse than the independent plans.
#ifndef REMAT_GRAPH_PLAN_H_
#define REMAT_GRAPH_PLAN_H_

#include <cstdint>
#include <vector>

#include "remat/io/status.h"
#include "remat/plan/plan.h"
#include "remat/profile/graph_profile.h"
#include "remat/simulate/graph_simulator.h"

namespace remat {

struct GraphPlanOptions {
  int64_t budget_bytes = 0;  // the graph's device memory; 0: no budget (nothing checkpointed)
  int slots = 0;             // the optimal solver's memory slots (PlanOptions::slots); 0: default
  // Most plans taken along the last chain's front; past that the budgets
  // are spread evenly down to the chain's least peak.
  int front_points = 48;
};

struct GraphPlan {
  // One plan per chain: its schedule, and its prediction as a chain alone.
  std::vector<Plan> chains;
  GraphSimulationResult predicted;  // the graph's step
  int64_t budget_bytes = 0;
  bool fits = true;  // predicted.peak_bytes <= budget_bytes (or no budget)
};

struct GraphPlanSet {
  GraphPlan chosen;
  // Each chain planned on its own (auto) at the budget less the other
  // chains' model state and batch inputs, the plans joined.
  GraphPlan independent;
  GraphPlan baseline;    // nothing checkpointed
  int combinations = 0;  // graph plans simulated
};

// Plans `graph` (validated: ValidateGraphProfile) under `options`. A plan
// that does not fit is still returned (chosen.fits false); errors are for
// invalid options or profiles only.
Result<GraphPlanSet> PlanGraph(const GraphProfile& graph, const GraphPlanOptions& options);

// Simulates `schedules` (one per chain) on `graph` and fills a GraphPlan,
// each chain's Plan made with `strategy` (MakePlanFromSchedule).
Result<GraphPlan> MakeGraphPlan(const GraphProfile& graph, std::vector<Schedule> schedules,
                                int64_t budget_bytes, Strategy strategy = Strategy::kOptimal);

}  // namespace remat

#endif  // REMAT_GRAPH_PLAN_H_
