// The exact single-level optimum: which layers to keep, checkpoint
// (starting a segment that is recomputed once, with grad, before its
// backwards) or run under a selective option, as BuildSingleLevelSchedule
// (plan.h) turns per-layer decisions into a schedule.
//
// These schedules are the multi-level family (chain_terms.h) restricted to
// intervals (s, L) whose splits' left parts keep every layer, so
//   Cost(s, m) = min( keep, mode k: extra_k + Cost(s+1, m - keep(s, k)),
//                     segment s..s'-1: forward_ms(s..s'-1) + Cost(s', m - x(s)) )
// with the segment's recompute fitting when m >= keep_all(s, s').
// Time O(L^2 * M) worst case (pruned as in multilevel_dp.h), memory O(L * M).
#ifndef REMAT_SRC_SOLVER_SINGLE_LEVEL_DP_H_
#define REMAT_SRC_SOLVER_SINGLE_LEVEL_DP_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "remat/decisions.h"
#include "solver/chain_terms.h"
#include "solver/cost_row.h"
#include "solver/interval_bounds.h"
#include "solver/multilevel_dp.h"

namespace remat::solver {

struct SingleLevelSolution {
  std::vector<LayerDecision> decisions;  // one per layer
  std::vector<int> selective_option;     // per layer: option index or -1
  double recompute_ms = 0;               // the DP's value (float precision in Solve)
};

class SingleLevelDp {
 public:
  // O(L^2): keep-all needs, and each suffix's lowest-peak choice (least
  // recompute time among those). `terms` must outlive this object.
  explicit SingleLevelDp(const ChainTerms& terms);

  // Slots the lowest-peak single-level schedule needs (> slots(): none fits).
  int64_t floor() const { return floor_[0]; }
  // The lowest-peak schedule, the fastest among those.
  SingleLevelSolution LowestPeak() const;
  // Fills the cost tables and returns the least-recompute schedule within
  // terms.slots(), or nullopt when none fits.
  std::optional<SingleLevelSolution> Solve(DpStats* stats);
  // After a successful Solve: the least-recompute schedule within `slots`,
  // floor() <= slots <= terms.slots(), from the same tables.
  SingleLevelSolution Reconstruct(int64_t slots) const;

 private:
  CostRow Row(int s) const;
  void SolveRow(int s, float* out, DpStats* stats) const;
  IntervalChoice Choose(int s, int64_t m) const;
  template <typename ChooseFn>
  SingleLevelSolution Walk(int64_t slots, const ChooseFn& choose) const;

  const ChainTerms& terms_;
  int num_layers_;
  std::vector<int64_t> keep_all_;  // KeepAllNeeds
  std::vector<int64_t> floor_;     // [s]: lowest slots for suffix s..L-1 (floor_[L] = 0)
  std::vector<IntervalChoice> lowest_peak_choice_;  // [s]
  std::vector<double> lowest_peak_ms_;              // [s]
  std::vector<int> lo_, hi_;                        // [s]: the row spans [lo_[s], hi_[s]]
  std::vector<int64_t> offset_;
  std::vector<float> table_;
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_SINGLE_LEVEL_DP_H_
