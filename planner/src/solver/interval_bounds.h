// Per-interval memory bounds for the optimal solvers' dynamic programs.
//
// floor(s, t): the fewest slots in which interval (s, t) can be solved at
// all (any schedule of chain_terms.h's form, however slow).
// keep_all(s, t): the slots the fastest schedule (every layer kept, mode
// "all") needs; with at least that many the interval costs no recompute.
// A solver's table for (s, t) therefore only spans [floor, min(keep_all,
// slots)]: below it nothing fits, above it nothing gets cheaper.
// Values are capped at slots() + 1 (does not fit).
#ifndef REMAT_SRC_SOLVER_INTERVAL_BOUNDS_H_
#define REMAT_SRC_SOLVER_INTERVAL_BOUNDS_H_

#include <cstdint>
#include <vector>

#include "solver/chain_terms.h"
#include "solver/interval_classes.h"

namespace remat::solver {

// How an interval (s, t) is solved: keep layer s under mode `mode`
// (split == 0), or sweep to `split` (s < split < t) and recurse.
struct IntervalChoice {
  int split = 0;
  int mode = 0;
};

// keep_all(s, t) for every interval, [s][t] in a (L+1) x (L+1) array. O(L^2).
std::vector<int64_t> KeepAllNeeds(const ChainTerms& terms);

class IntervalBounds {
 public:
  // O(C * L) time for C interval classes (O(L^3) at worst), O(L^2) memory.
  // With `track_choices`, also remembers for each interval a floor-reaching
  // choice of least recompute time (a slower, scalar pass), for
  // LowestPeakChoice. `classes` must describe terms' profile; with
  // GradientKey::kShifted a member's floor is its canonical interval's plus
  // its shift in slots (a relaxation with rounding down, a conservative
  // bound with rounding up, see multilevel_dp.h).
  IntervalBounds(const ChainTerms& terms, const IntervalClasses& classes, bool track_choices);

  int64_t floor(int s, int t) const { return floor_[Index(s, t)]; }
  int64_t keep_all(int s, int t) const { return keep_all_[Index(s, t)]; }
  // Requires track_choices.
  IntervalChoice LowestPeakChoice(int s, int t) const;
  // Bytes held by the tables.
  int64_t memory_bytes() const;

 private:
  template <bool kTrack>
  void Compute(const ChainTerms& terms, const IntervalClasses& classes);
  size_t Index(int s, int t) const { return static_cast<size_t>(s) * (num_layers_ + 1) + t; }

  int num_layers_;
  std::vector<int64_t> floor_;       // [s][t]
  std::vector<int64_t> floor_by_t_;  // [t][s], for contiguous scans over s
  std::vector<int64_t> keep_all_;    // [s][t]
  std::vector<int> choice_;          // [s][t]: split - s, or -mode (track_choices)
  std::vector<double> time_ms_;      // [s][t]: recompute time of that choice
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_INTERVAL_BOUNDS_H_
