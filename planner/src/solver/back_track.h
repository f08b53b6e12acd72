// Back-tracking a filled cost table (multilevel_dp.h, single_level_dp.h):
// the choice behind an interval's cost at a slot count, found again by
// evaluating the candidates the fill evaluated (keeps, then sweeps to each
// split) with the same float sums, so that the choice is the fill's.
#ifndef REMAT_SRC_SOLVER_BACK_TRACK_H_
#define REMAT_SRC_SOLVER_BACK_TRACK_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "solver/chain_terms.h"
#include "solver/cost_row.h"
#include "solver/interval_bounds.h"

namespace remat::solver {

// The least slot count at which `row` costs what it costs at `m`: of the
// schedules as fast as the best in m slots, one that needs the fewest.
// Requires !row.empty() and m >= row.lo.
inline int64_t LeastSlotsAtSameCost(const CostRow& row, int64_t m) {
  return row.lo + FirstAtMost(row.cost, 0,
                              static_cast<int>(std::min<int64_t>(m, row.hi) - row.lo + 1),
                              row.At(m));
}

// The cheapest way to run interval (s, t) (0 <= s < t <= L) in `m` slots:
//   keep layer s under mode k, when its forward and backward fit in m:
//     extra_ms of the mode, plus (t > s + 1) `after_keep`, the row of
//     interval (s + 1, t), in the m - keep(s, k) slots left (the keep is
//     out when that row is empty or needs more);
//   sweep to a split sp (s < sp < t) whose no-grad sweep fits in m:
//     `split_cost(sp, &cost)` sets the split's cost and returns true, or
//     returns false when the rest of the split does not fit in m.
// Ties go to the first candidate: the keeps by mode, then the splits by
// increasing sp. `after_keep` is read only when t > s + 1. Returns a
// default IntervalChoice when nothing fits.
template <typename SplitCost>
IntervalChoice ChooseInterval(const ChainTerms& terms, int s, int t, int64_t m,
                              const CostRow& after_keep, const SplitCost& split_cost) {
  IntervalChoice best;
  float best_cost = kNoFit;
  bool have = false;
  for (int k = 0; k < terms.num_modes(s); ++k) {
    if (std::max(terms.ForwardNeed(s, t, k), terms.backward_need(s, k)) > m) continue;
    float cost = static_cast<float>(terms.mode(s, k).extra_ms);
    if (t > s + 1) {
      const int64_t left = m - terms.keep(s, k);
      if (after_keep.empty() || left < after_keep.lo) continue;
      cost = cost + after_keep.At(left);
    }
    if (!have || cost < best_cost) best = {0, k}, best_cost = cost, have = true;
  }
  const std::vector<SweepStep>& sweep = terms.sweep(s, t);
  for (size_t r = 0; r < sweep.size() && sweep[r].first_split < t; ++r) {
    if (terms.SweepNeed(s, t, sweep[r].bytes) > m) break;
    const int end = r + 1 < sweep.size() ? std::min(sweep[r + 1].first_split, t) : t;
    for (int sp = sweep[r].first_split; sp < end; ++sp) {
      float cost = 0;
      if (!split_cost(sp, &cost)) continue;
      if (!have || cost < best_cost) best = {sp, 0}, best_cost = cost, have = true;
    }
  }
  return best;
}

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_BACK_TRACK_H_
