// The fixed-parameter heuristics (uniform every k, n segments, the first m
// selective blocks) as families of candidate layer lists, and the search
// the optimal strategies run over them. Internal to the planner library.
#ifndef REMAT_SRC_STRATEGIES_HEURISTIC_SEARCH_H_
#define REMAT_SRC_STRATEGIES_HEURISTIC_SEARCH_H_

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "strategies/solvers.h"

namespace remat::strategies {

// One candidate of a family: the single-level decisions its parameter means.
struct HeuristicCandidate {
  std::string parameter;                 // "every 3", "4 segments", "5/12 blocks"
  std::vector<LayerDecision> decisions;  // one per layer
  std::vector<int> selective_option;     // per layer, -1 = none (empty: none at all)
};

// A family's candidates by parameter, 1..count() for uniform and segment,
// 0..count() - 1 for selective (first_parameter() says which).
class HeuristicFamily {
 public:
  // Strategy::kUniform, kSegment or kSelective. `selective_order`: the
  // layers selective adds, in order (empty: the chain's blocks with a
  // selective option, most bytes saved per ms of extra recompute first).
  HeuristicFamily(const Profile& profile, Strategy strategy, std::vector<int> selective_order = {});
  Strategy strategy() const { return strategy_; }
  int first_parameter() const { return strategy_ == Strategy::kSelective ? 0 : 1; }
  int last_parameter() const;
  HeuristicCandidate Candidate(int parameter) const;
  // Whether selective's order is its default one (no order given).
  bool default_order() const { return default_order_; }

 private:
  const Profile& profile_;
  Strategy strategy_;
  std::vector<int> blocks_;      // BlockLayers
  std::vector<int> selective_;   // selective: blocks in the order they are added
  bool default_order_;
};

// The step time (ms) a single-level schedule of `decisions` simulates to
// when it offloads nothing: every first forward, backward and the optimizer
// step, one recompute of each layer that runs without grad, and the extra
// of each selective option. Summed in another order than Simulate's, so it
// may differ from Simulate(...).step_ms in the last bits (relative 1e-12 on
// chains of 10^4 layers).
double SingleLevelStepMs(const Profile& profile, const std::vector<LayerDecision>& decisions,
                         const std::vector<int>& selective_option);

// A lower bound on the peak (bytes) of the single-level schedule of
// `decisions`: when its forward pass ends, the model state and every
// activation a forward with grad saved (kept or selective bytes less the
// output) are live.
int64_t SingleLevelPeakLowerBound(const Profile& profile,
                                  const std::vector<LayerDecision>& decisions,
                                  const std::vector<int>& selective_option);

// Which candidates a family search may leave out.
struct FamilySearchLimits {
  // Candidates whose step time (SingleLevelStepMs) is above this (ms).
  double step_ms = std::numeric_limits<double>::infinity();
  // With a budget: candidates whose SingleLevelPeakLowerBound is above it
  // (they do not fit; when no candidate fits, the search's plan is then
  // not the strategy's lowest-peak one).
  bool only_fitting = false;
};

// The family's plan as its strategy's search picks it: every candidate
// simulated (totals only; the winner again in full), the best by
// KeepBetter, less the candidates `limits` leave out. nullopt: no
// candidate was simulated. While a memo is open for `p`, the searches at
// every budget share each candidate's budget-independent figures (its
// plan's totals without a budget, its step time and peak bound), each
// made once: a budget only compares them.
Result<std::optional<Plan>> SearchFamily(const Profile& profile, const HeuristicFamily& family,
                                         int64_t budget_bytes,
                                         const FamilySearchLimits& limits = {});

// The fastest fitting plan of the three families, each family's plan being
// what its own strategy's exhaustive search (every parameter simulated,
// KeepBetter) picks, nullopt when none fits. Candidates whose step time
// (SingleLevelStepMs) exceeds `below_step_ms` by more than rounding, and
// those whose peak lower bound is above the budget, are not simulated: the
// result is the exhaustive one whenever that is faster than
// `below_step_ms` (+inf: no candidate is left out for its time).
std::optional<Plan> BestHeuristicPlan(const Profile& profile, const PlanOptions& options,
                                      double below_step_ms);

}  // namespace remat::strategies

#endif  // REMAT_SRC_STRATEGIES_HEURISTIC_SEARCH_H_
