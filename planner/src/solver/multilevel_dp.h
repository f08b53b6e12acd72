// The multi-level optimal checkpointing dynamic program (rotor/revolve style,
// Beaumont et al. 2019, extended with per-layer keep modes and the
// simulator's exact peaks; see chain_terms.h for the schedule family).
//
// Cost(s, t, m) = the least recompute time (ms) of interval (s, t) in m slots:
//   keep, mode k:  extra_k + Cost(s+1, t, m - keep(s, k))
//   split at s':   forward_ms(s..s'-1) + Cost(s', t, m - x(s)) + Cost(s, s', m)
// subject to each choice's peaks fitting in m. Intervals are solved by
// decreasing s, then increasing t; each interval's row spans only
// [floor, min(keep_all, slots)] (interval_bounds.h) and is filled with
// vectorized min-plus updates (cost_row.h). Splits are pruned with the lower
// bound "a split at s' costs at least forward_ms(s..s'-1) + the two rows'
// saturated costs": as s' grows that bound grows, and since rows are
// non-increasing in m, only a prefix of m can still improve.
// Time O(L^3 * M) in the worst case, far less with pruning; memory O(L^2 * M)
// floats in the worst case.
#ifndef REMAT_SRC_SOLVER_MULTILEVEL_DP_H_
#define REMAT_SRC_SOLVER_MULTILEVEL_DP_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "remat/schedule.h"
#include "solver/chain_terms.h"
#include "solver/cost_row.h"
#include "solver/interval_bounds.h"
#include "solver/interval_classes.h"

namespace remat::solver {

// What a solve cost, for benchmarks and reports.
struct DpStats {
  int64_t slots = 0;             // M
  double slot_bytes = 0;         // bytes per slot
  int64_t table_cells = 0;       // floats in the cost tables
  int64_t rows = 0;              // distinct interval classes solved
  int64_t memory_bytes = 0;      // cost tables + bounds, the solver's peak heap use
  int64_t split_cells = 0;            // (row, split, slot) triples where the split fits
  int64_t split_cells_evaluated = 0;  // of those, the ones the bound did not prune
};

struct DpSolution {
  std::vector<Op> ops;       // compute ops and the optimizer step, no frees
  double recompute_ms = 0;   // the DP's value (float precision)
};

class MultiLevelDp {
 public:
  // Computes the interval classes and bounds. `terms` must outlive this
  // object.
  explicit MultiLevelDp(const ChainTerms& terms);

  // Bytes Solve will allocate for its cost tables.
  int64_t table_bytes() const { return table_cells_ * static_cast<int64_t>(sizeof(float)); }

  // Fills the cost tables and returns the least-recompute schedule of the
  // whole chain in terms.slots() slots, or nullopt when no schedule fits.
  // `stats` may be null.
  std::optional<DpSolution> Solve(DpStats* stats);
  // The fewest slots any schedule of the chain needs.
  int64_t floor() const;
  // After a successful Solve: the least-recompute schedule in `slots`
  // slots, floor() <= slots <= terms.slots(), from the same tables.
  DpSolution Reconstruct(int64_t slots) const;

 private:
  CostRow Row(int s, int t) const { return RowOf(classes_.of(s, t)); }
  CostRow RowOf(int c) const {
    const RowRange& r = rows_[c];
    return CostRow{r.lo, r.hi, table_.data() + r.offset};
  }
  void SolveInterval(int s, int t, float* out, DpStats* stats) const;
  IntervalChoice Choose(int s, int t, int64_t m) const;

  const ChainTerms& terms_;
  int num_layers_;
  IntervalClasses classes_;
  IntervalBounds bounds_;
  struct RowRange {
    int lo = 1, hi = 0;  // slot range; lo > hi: does not fit
    int64_t offset = -1;  // first cell in table_
  };
  std::vector<RowRange> rows_;  // [class]
  int64_t table_cells_ = 0;
  std::vector<float> table_;
  mutable std::vector<int64_t> sweep_need_scratch_;  // [sweep step] for one interval
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_MULTILEVEL_DP_H_
