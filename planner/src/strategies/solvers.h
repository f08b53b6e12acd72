// The strategy solvers behind plan.h. Internal to the planner library.
#ifndef REMAT_SRC_STRATEGIES_SOLVERS_H_
#define REMAT_SRC_STRATEGIES_SOLVERS_H_

#include <string>
#include <vector>

#include "remat/strategies/strategies.h"

namespace remat::strategies {

// Every solver, in the order auto tries them. Add a new strategy here.
const std::vector<const StrategySolver*>& RegisteredSolvers();

// Builds the single-level schedule for `decisions` and simulates it.
Result<Plan> EvaluateDecisions(const Profile& profile, Strategy strategy, std::string parameter,
                               const std::vector<LayerDecision>& decisions,
                               const std::vector<int>& selective_option, int64_t budget_bytes,
                               SimulationDetail detail = SimulationDetail::kFull);

// Keeps the better of `*best` and `candidate` (BetterPlan); `*have` says
// whether *best holds a plan yet.
void KeepBetter(Plan candidate, Plan* best, bool* have);

// Decisions marking `blocks` (chain indices, ascending) as segments that start
// at `starts` (a subset of `blocks`): a block that starts a segment, or whose
// chain predecessor is not in the segment, is a checkpoint; the others recompute.
std::vector<LayerDecision> SegmentDecisions(int num_layers, const std::vector<int>& blocks,
                                            const std::vector<char>& is_start);

int RoundSqrt(int n);

// What `plan` recomputes: "14 recomputes, up to 3 per layer, 5 selective",
// "nothing recomputed".
std::string DescribeRecompute(const Plan& plan);

// The optimal strategies (optimal.cc).
const StrategySolver* OptimalStrategySolver();        // multi-level
const StrategySolver* OptimalSingleStrategySolver();  // best single-level layer list
const StrategySolver* OffloadStrategySolver();        // offload.cc

// Memory slots the optimal solvers use when PlanOptions::slots is 0: enough
// that slot rounding does not cost the optimum a win over uniform at uniform's
// own peak (tests/planner/strategies/optimal_default_slots_test.cc).
inline constexpr int kDefaultOptimalSlots = 2048;
// The slot count for `options` (its slots, or the default).
int OptimalSlots(const PlanOptions& options);

}  // namespace remat::strategies

#endif  // REMAT_SRC_STRATEGIES_SOLVERS_H_
