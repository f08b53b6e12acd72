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
// saturated costs": since rows are non-increasing in m, only a prefix of m
// can still improve; within it, a chunk of m is skipped when the split's
// cost at the chunk's end is no better than the row at its start.
// Time O(L^3 * M) in the worst case, far less with pruning; memory O(L^2 * M)
// floats in the worst case.
#ifndef REMAT_SRC_SOLVER_MULTILEVEL_DP_H_
#define REMAT_SRC_SOLVER_MULTILEVEL_DP_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "remat/schedule/schedule.h"
#include "solver/chain_terms.h"
#include "solver/cost_row.h"
#include "solver/interval_bounds.h"
#include "solver/interval_classes.h"
#include "solver/op_emitter.h"
#include "solver/table_pool.h"

namespace remat::solver {

// What a solve cost, for benchmarks and reports.
struct DpStats {
  int64_t slots = 0;                  // M
  double slot_bytes = 0;              // bytes per slot
  int64_t table_cells = 0;            // floats in the cost tables
  int64_t rows = 0;                   // distinct interval classes solved
  int64_t memory_bytes = 0;           // cost tables + bounds, the solver's peak heap use
  int64_t split_cells = 0;            // (row, split, slot) triples where the split fits
  int64_t split_cells_evaluated = 0;  // of those, the ones evaluated one by one
  int64_t keep_modes = 0;             // the layers' keep modes the keeps weigh
};

// The order in which Solve fills the cost tables. Both evaluate the same
// candidates with the same float operations, so they fill identical tables;
// they differ in memory traffic and in how much the bound prunes.
enum class DpFill {
  // Blocks of rows x columns (see FillTiled), the cross splits of a block
  // first: fewer reads of each row, more calls and a weaker bound.
  kTiled,
  // Tiles of rows, one column at a time, every candidate of an interval in
  // one pass (see FillReference): the default (on the 256-layer measured
  // chain at 1000 slots, a fifth less CPU time than kTiled).
  kReference,
};

struct DpOptions {
  DpFill fill = DpFill::kReference;
  // Recompute times above this (ms) are of no use to the caller (it has a
  // schedule that cheap): cells costing more are left out (+inf), which
  // skips most of the expensive low-memory corner of long intervals. An
  // interval (s, t) with t < L is only ever solved inside a schedule that
  // recomputes its forward (the split at t of an interval starting at or
  // before s), so its cells are left out above the cap less that forward
  // time (with a rounding margin; intervals longer than the cap's worth of
  // forward are not solved at all). Every cell, the root's included, is
  // exact wherever it costs at most that; Solve returns nullopt when the
  // root costs more than the cap in terms.slots().
  double cost_cap_ms = std::numeric_limits<double>::infinity();
  // Threads filling the tables (chains whose intervals do not share rows,
  // tables of at least min_parallel_cells cells; kTiled: threads start once
  // per wave of tiles, kReference: once per fill, one tile of rows each,
  // each a column behind the tile above); the tables are the same for any
  // count.
  int threads = 1;
  int64_t min_parallel_cells = int64_t{1} << 20;
  // Splits are skipped from the m where their least cost (saturated rows)
  // is no better than the row; with chunk_bounds, also chunk by chunk of 128
  // slot counts where their cost at the chunk's end is no better than the
  // row at its start (53% of the split cells skipped on a 256-layer
  // measured chain at 1000 slots and the middle budget, 37% without:
  // solver_bench's MultiLevel/measured_capped and _previous, pruned_%).
  // Both are exact: the tables are the same.
  // false: one bound per split, for the benchmark's comparison.
  bool chunk_bounds = true;
  // Each row capped by what a schedule within cost_cap_ms can use of it
  // (multilevel_dp.cc, RowCap): exact, like chunk_bounds. false: every row
  // capped by cost_cap_ms alike (for the benchmark's comparison).
  bool row_caps = true;
  // A layer's keep mode is left out of the keeps where another holds no
  // more (kept slots, forward and backward peaks) and costs no more (see
  // the .cc, DominatingModes): exact, like chunk_bounds. false: every mode
  // (for the benchmark's comparison).
  bool skip_dominated_modes = true;
  // What the interval classes key on of the gradients after an interval
  // (interval_classes.h). kShifted shares one row among equal intervals at
  // any position, read shifted by the slots of the gradients between them:
  // Slots(shift_bytes), rounded as the units round. Each shift is then one
  // more rounded quantity held (as x[s] and a[s] are), so with rounding down
  // the tables stay a relaxation (no cell above the kExact one: a lower
  // bound on the optimum in bytes) and with rounding up a conservative bound
  // (no cell below it: every schedule accepted fits); equal to kExact where
  // every shift is a whole number of slots (one-byte slots, persistent
  // gradient buffers). Each rounding costs up to a slot per nesting level
  // of a schedule, so at slots larger than a block's gradients the relaxed
  // schedules overshoot and the conservative ones lose plan quality
  // (docs/solver.md, "Rows shared across gradient positions"). `--strategy
  // optimal` uses it only on pooled times (already an approximation), never
  // with --exact-times, and reports the plan against the relaxed bound.
  GradientKey gradients = GradientKey::kExact;
  // The interval classes of terms.profile() keyed by `gradients`, when the
  // caller has built them already (they depend on neither the slots nor the
  // rounding: `--strategy optimal` builds them once for its size check and
  // both fills); null: the DP builds them.
  std::shared_ptr<const IntervalClasses> classes;
  // The interval bounds of the terms under `classes` (the same profile,
  // units and rounding), when the caller has built them already; null: the
  // DP builds them.
  std::shared_ptr<const IntervalBounds> bounds;
  // Where each class's row starts in a fill rounding up (RowStarts of a
  // fill of the same classes rounding down, in the same slots of the same
  // size, under the same cost cap), when the caller has filled that
  // relaxation: every cell of the rounding-up tables costs at least the
  // rounding-down one (each choice needs at least as many slots, rows are
  // non-increasing in m and float addition is monotone), so below where
  // the relaxed row falls within its cap the conservative row costs more
  // than the same cap and would be dropped after its fill (FinishRow).
  // Exact: the cells kept are the same. Null: each row starts at its floor.
  std::shared_ptr<const std::vector<int>> row_starts;
  // By t (L + 1 values): a lower bound on what a schedule of the whole
  // chain costs besides an interval (s, t) and the forward of the split at
  // t that reaches it (SuffixCosts of a fill of the same classes rounding
  // down, in the same slots under the same cost cap, or rounding the same
  // way): RowCap lowers the cap of rows ending at t by it, so that their
  // cells no schedule within the cap can use are dropped, and splits that
  // only reach such cells skipped. Exact: the root's row and every
  // schedule Reconstruct gives are the same. Null: caps less the forward
  // only.
  std::shared_ptr<const std::vector<double>> suffix_costs;
  // Set by another thread when this solve's result is no longer wanted
  // (`--strategy optimal` fills its relaxed and conservative tables at
  // once): the fill stops at its next tile and Solve returns nullopt.
  // Null: never.
  const std::atomic<bool>* cancel = nullptr;
};

struct DpSolution {
  std::vector<Op> ops;      // compute ops and the optimizer step, no frees
  double recompute_ms = 0;  // the DP's value (float precision)
};

class MultiLevelDp {
 public:
  // Computes the interval classes and bounds. `terms` must outlive this
  // object.
  explicit MultiLevelDp(const ChainTerms& terms, const DpOptions& options = {});
  // Gives the cost tables' storage back (table_pool.h) for the next solve.
  ~MultiLevelDp();
  MultiLevelDp(const MultiLevelDp&) = delete;
  MultiLevelDp& operator=(const MultiLevelDp&) = delete;

  // Bytes Solve will allocate for its cost tables.
  int64_t table_bytes() const { return table_cells_ * static_cast<int64_t>(sizeof(float)); }
  // An upper bound on table_bytes() for `terms`, in O(L^2) time without
  // building the DP (the interval bounds are O(L^3)): each row spans at most
  // [the largest least backward peak among its layers, min(keep_all,
  // slots)].
  static int64_t TableBytesBound(const ChainTerms& terms,
                                 GradientKey gradients = GradientKey::kExact);
  // The same with the interval classes of terms.profile() given.
  static int64_t TableBytesBound(const ChainTerms& terms, const IntervalClasses& classes);

  // Fills the cost tables and returns the least-recompute schedule of the
  // whole chain in terms.slots() slots, or nullopt when no schedule fits
  // (or options.cancel was set: then cancelled() is true).
  // `stats` may be null.
  std::optional<DpSolution> Solve(DpStats* stats);
  // The fewest slots any schedule of the chain needs; after a Solve with a
  // cost cap, the fewest in which one costs at most the cap.
  int64_t floor() const;
  // After a Solve that filled the tables: by class, the fewest slots at
  // which its row costs at most its cap (terms.slots() + 1 where none),
  // for DpOptions::row_starts of a fill rounding up.
  std::vector<int> RowStarts() const;
  // After a Solve that filled the tables: by b (0..L), the least that the
  // parts of a schedule after layer b cost (see the .cc), for
  // DpOptions::suffix_costs of another fill.
  std::vector<double> SuffixCosts() const;
  // Whether the last Solve stopped because options.cancel was set.
  bool cancelled() const { return cancelled_; }
  // After Solve: the least recompute time of interval (s, t) in m slots
  // (0 <= s < t <= L, 0 <= m <= terms.slots()), +inf when nothing fits.
  float Cost(int s, int t, int64_t m) const {
    const CostRow row = Row(s, t);
    return row.empty() || m < row.lo ? kNoFit : row.At(m);
  }
  // After a successful Solve: the least-recompute schedule in `slots`
  // slots, floor() <= slots <= terms.slots(), from the same tables.
  DpSolution Reconstruct(int64_t slots) const;

 private:
  // Interval (s, t)'s row: its class's row (solved at the canonical
  // interval) shifted by Shift(s, t) slots.
  CostRow Row(int s, int t) const {
    CostRow row = RowOf(classes_.of(s, t));
    const int shift = Shift(s, t);
    row.lo += shift;
    row.hi += shift;
    return row;
  }
  int Shift(int s, int t) const {
    return shift_.empty() ? 0 : shift_[static_cast<size_t>(s) * (num_layers_ + 1) + t];
  }
  CostRow RowOf(int c) const {
    const RowRange& r = rows_[c];
    // No pointer arithmetic into an empty table (before Solve fills it) or
    // with a row's offset -1: both are undefined behaviour (UBSan).
    const float* cost = table_.empty() || r.offset < 0 ? nullptr : table_.data() + r.offset;
    return CostRow{r.lo, r.hi, cost};
  }
  void FillReference(DpStats* stats);
  // After row c is filled: records its last cost and drops its cells above
  // the cap (raising lo).
  void FinishRow(int c);
  void FillTiled(DpStats* stats);
  bool Cancelled() const {
    return options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed);
  }
  // Tile (i, j) of FillTiled; `solves` marks the intervals that solve their
  // class.
  void SolveTile(int i, int j, const std::vector<char>& solves, DpStats* stats);
  // Row (s, t)'s keeps into `out` (filled with +inf first; with `unfilled`,
  // out is not written yet: the first keep to reach it writes it whole).
  void SolveKeeps(int s, int t, float* out, bool unfilled = false) const;
  // Row (s, t)'s splits p in [p_begin, p_end), by increasing p, given the
  // sweep peaks of (s, t) by sweep step. Returns false once a split's
  // forward time alone reaches the row's maximum (no later split can help).
  bool SolveSplits(int s, int t, float* out, int p_begin, int p_end, const int64_t* sweep_need,
                   DpStats* stats) const;
  // Sweep peaks of (s, t) by sweep step into `out`.
  void SweepNeeds(int s, int t, int64_t* out) const;
  // Row (s, t): keeps and splits; `sweep_need` holds L + 1 values.
  void SolveInterval(int s, int t, float* out, int64_t* sweep_need, DpStats* stats) const;
  // After Solve: the choice behind interval (s, t)'s cost in m slots, made
  // again at the fewest slots of that cost (back_track.h).
  IntervalChoice Choose(int s, int t, int64_t m) const;
  // Emits interval (s, t) as the DP solved it: from the row of (fs, ft), an
  // interval of its class, at m slots (its canonical interval's choice at m
  // minus the shift, translated to s).
  void Emit(int s, int t, int fs, int ft, int64_t m, OpEmitter* out) const;

  const ChainTerms& terms_;
  int num_layers_;
  DpOptions options_;
  float cap_;  // options_.cost_cap_ms as a float (rounded up)
  std::shared_ptr<const IntervalClasses> classes_holder_;  // options_.classes or built
  const IntervalClasses& classes_;
  std::shared_ptr<const IntervalBounds> bounds_holder_;  // options_.bounds or built
  const IntervalBounds& bounds_;
  struct RowRange {
    int lo = 1, hi = 0;   // slot range; lo > hi: does not fit
    int64_t offset = -1;  // first cell in table_
    float last = kNoFit;  // the cost at hi, once solved
    float cap = kNoFit;   // cells above this are of no use (RowCap)
  };
  // The most a cell of (s, t)'s class may cost and still be part of a
  // schedule of the whole chain costing at most cap_ (see the .cc).
  float RowCap(int s, int t) const;
  std::vector<RowRange> rows_;  // [class], the canonical interval's range
  // The keep modes SolveKeeps weighs: layer s's are
  // keep_modes_[keep_modes_begin_[s] .. keep_modes_begin_[s + 1]).
  std::vector<int> keep_modes_, keep_modes_begin_;
  std::vector<int> shift_;      // [s][t]: Shift(s, t); empty when all are 0
  int64_t table_cells_ = 0;
  CostTable table_;
  bool cancelled_ = false;
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_MULTILEVEL_DP_H_
