// The strategy solvers behind plan.h. Internal to the planner library.
#ifndef REMAT_SRC_STRATEGIES_SOLVERS_H_
#define REMAT_SRC_STRATEGIES_SOLVERS_H_

#include <string>
#include <vector>

#include "remat/plan.h"

namespace remat {

// Every solver, in the order auto tries them. Add a new strategy here.
const std::vector<const StrategySolver*>& RegisteredSolvers();

// Builds the single-level schedule for `decisions` and simulates it.
Result<Plan> EvaluateDecisions(const Profile& profile, Strategy strategy, std::string parameter,
                               const std::vector<LayerDecision>& decisions,
                               const std::vector<int>& selective_option, int64_t budget_bytes);

// Keeps the better of `*best` and `candidate` (BetterPlan); `*have` says
// whether *best holds a plan yet.
void KeepBetter(Plan candidate, Plan* best, bool* have);

// Decisions marking `blocks` (chain indices, ascending) as segments that start
// at `starts` (a subset of `blocks`): a block that starts a segment, or whose
// chain predecessor is not in the segment, is a checkpoint; the others recompute.
std::vector<LayerDecision> SegmentDecisions(int num_layers, const std::vector<int>& blocks,
                                            const std::vector<char>& is_start);

int RoundSqrt(int n);

}  // namespace remat

#endif  // REMAT_SRC_STRATEGIES_SOLVERS_H_
