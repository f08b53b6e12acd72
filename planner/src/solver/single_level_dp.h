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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "remat/schedule/decisions.h"
#include "remat/profile/profile.h"
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
  // After Solve: the choice behind suffix s's cost in m slots, made again
  // at the fewest slots of that cost (back_track.h).
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

// The single-level optimum with activation offload: the layer lists above,
// where a segment s..s'-1 (s >= 1, s' < L) whose predecessor s-1 runs without
// grad may also have its checkpoint x[s] offloaded (LayerDecision::kOffload:
// copied out after forward s, prefetched before backward s', the compute op
// before its recompute; kOffloadPrefetchLead). Three cost tables per suffix s,
// dense over the slots m in [0, M]:
//   K(s, m)  the suffix when layer s-1 ran with grad (or s == 0): no offload at s;
//   N(s, m)  the suffix when layer s-1 ran without grad: a keep of s (holding
//            x[s], below), a plain segment, or an offloaded one;
//   A(s, m)  its segments only (plain or offloaded), for the suffix after an
//            offloaded segment, whose first backward holds the prefetched x[s].
// An offloaded segment (s, s') costs forward_ms(s..s'-1) + its copies' time
// + Off(s', m, s), the suffix from s' in the same m slots (x[s] is on the
// host) whose first decision's backward (backward s') also fits x[s]:
//   Off(s', m, s) = min( keep mode k of s' if m >= BackwardNeedExact(s', k, held) + x(s),
//                        A(s', m)         if m >= segment_backward_need(s') + x(s) ).
// A layer that does not keep its input (LayerProfile::keeps_input) holds it
// anyway when its producer ran without grad (N, a segment's first layer) or
// it is layer 0: the simulator releases x[s] only after a forward with grad
// (a segment's checkpoint after a layer kept with grad: at its recompute).
// Backward s does not hold x[s+1] when layer s+1 does not keep its input.
// Memory, against the simulator (simulator.h):
//   in line (the `cpu` link): exact. The copy out runs right after forward s
//     and releases x[s]; the segment's later no-grad forwards do not hold it;
//     the prefetch allocates x[s] before backward s'.
//   overlapped: an offload's device bytes stay until its copy ends. The DP
//     counts x[s] through its own segment's forwards (the plain sweep peak) and
//     not after: a copy still queued when the next segment's forwards run (a
//     slow link, a queue backed up) is not modelled. The plan is simulated,
//     and the strategy keeps the DP without offload when that is better.
// Time: in line, both copies (2 CopyMs(x[s])), exact. Overlapped: the
//   prefetch's copy time not hidden behind backward s' (with its selective
//   option's extra time): max(0, CopyMs - that); the copy out is taken as
//   hidden (it ended before its prefetch). An estimate: the simulator's
//   stall (transfer_ms) is what the plan reports.
// Host memory: every offloaded checkpoint is on the host at the start of
//   backward; `host_penalty_ms_per_byte` adds that many ms per offloaded byte
//   to the cost (a Lagrangian weight the strategy searches for --host-budget).
// Time O(L^2 * M * modes), memory O(L * M) (three double tables and, with
// a link, the offload terms rows share; without a link two: A is folded
// into N as it is filled). The choices are not stored: Reconstruct finds
// each again, the first candidate in SolveRow's order of its cell's cost
// (O(L * modes) a step).
struct SingleLevelOffloadOptions {
  HostLink link;
  double host_penalty_ms_per_byte = 0;
  // Fill every cell, and the A table without a link too: the reference the
  // tests compare the default fill against. The default leaves out the
  // cells no choice can improve (rows are non-increasing in m, and kInf
  // below their first finite cell), copies K's keeps into N where they are
  // the same, fills the least offload term of rows offloading checkpoints
  // of one size once for all of them and, without a link, folds A into N as
  // it is filled; the tables and choices are the same.
  bool full_fill = false;
  // Checked between rows: once set, Solve stops and returns nullopt
  // (cancelled() is then true). Null: never.
  const std::atomic<bool>* cancel = nullptr;
};

class SingleLevelOffloadDp {
 public:
  // `terms` must outlive this object.
  SingleLevelOffloadDp(const ChainTerms& terms, const SingleLevelOffloadOptions& options);

  // After Solve: the fewest slots any schedule of the family fits in (> slots(): none).
  int64_t floor() const { return floor_; }
  // Fills the tables; the least-cost schedule within terms.slots(), or nullopt
  // (none fits, or options.cancel was set: then cancelled() is true).
  std::optional<SingleLevelSolution> Solve(DpStats* stats);
  // Whether the last Solve stopped because options.cancel was set.
  bool cancelled() const { return cancelled_; }
  // After Solve: the least-cost schedule within `slots`, floor() <= slots <= terms.slots().
  SingleLevelSolution Reconstruct(int64_t slots) const;

  // The DP's time for the copies of checkpoint x[s] when `hide_ms` of compute
  // runs between its prefetch and its use (overlapped link; in line: both copies).
  double CopyCostMs(int s, double hide_ms) const;

 private:
  // CopyCostMs for a checkpoint whose one-way copy takes `copy_ms`.
  double CopyCostMs(double copy_ms, double hide_ms) const;
  struct Pick {
    double cost;
    int choice;  // EncodeKeep / a split (plain) / a split + L + 1 (offloaded)
  };
  double* RowK(int s) { return k_.data() + static_cast<size_t>(s) * (M_ + 1); }
  double* RowN(int s) { return n_.data() + static_cast<size_t>(s) * (M_ + 1); }
  double* RowA(int s) { return a_.data() + static_cast<size_t>(s) * (M_ + 1); }
  double K(int s, int64_t m) const;
  double A(int s, int64_t m) const { return a_[static_cast<size_t>(s) * (M_ + 1) + m]; }
  // Keep layer s under mode k, then the suffix s+1 (K); `held`: x[s] stays
  // live until backward s (ChainTerms::keep_holding_input).
  double KeepCost(int s, int k, int64_t m, bool held) const;
  // Off(sp, m, s) above, with its choice at sp (Reconstruct; SolveRow
  // evaluates the same terms hoisted out of its slot loop).
  Pick OffSuffix(int sp, int64_t m, int s) const;
  // The slots segment (s, sp) needs: its sweep, its recompute (x[s] as row
  // K holds it, and held as rows N and A do) and, with `offload`, an
  // offloaded one's. For sp = s + 1, s + 2, ... in turn: `swept` and
  // `swept_off` (0 before s + 1) carry the sweep's bytes (SolveRow).
  struct SegmentNeeds {
    int64_t sweep, keep_all, keep_all_held, off = 0;
  };
  SegmentNeeds Segment(int s, int sp, bool offload, int64_t* swept, int64_t* swept_off) const;
  // The choice behind table's cost at (s, m): kept with full_fill, else
  // found again as SolveRow made it.
  enum class Table { kK, kN, kA };
  int ChoiceAt(Table table, int s, int64_t m) const;
  void SolveRow(int s);

  const ChainTerms& terms_;
  SingleLevelOffloadOptions options_;
  int L_;
  int64_t M_;
  int64_t floor_ = 0;
  bool cancelled_ = false;
  // [s * (L + 1) + t]: the peak of keeping all of s..t-1 (KeepAllNeeds with
  // BackwardNeedExact); _held_: layer s holding its input (a checkpoint
  // written without grad), as the recompute of a segment after a layer run
  // without grad does.
  std::vector<int64_t> keep_all_, keep_all_held_;
  // [mode_at_[s] + k]: ForwardNeed(s, L, k).
  std::vector<int> mode_at_;
  std::vector<int64_t> forward_need_end_;
  // A table whose cells are left unset until its rows are filled (each
  // row by its SolveRow).
  template <typename T>
  class RowTable {
   public:
    void Resize(size_t cells) {
      if (cells != cells_) cells_ = cells, data_.reset(cells > 0 ? new T[cells] : nullptr);
    }
    T* data() { return data_.get(); }
    const T* data() const { return data_.get(); }
    T& operator[](size_t i) { return data_[i]; }
    const T& operator[](size_t i) const { return data_[i]; }

   private:
    std::unique_ptr<T[]> data_;
    size_t cells_ = 0;
  };
  RowTable<double> k_, n_, a_;
  // [s]: the first slot count where row s of K, N, A is finite (M + 1: none).
  std::vector<int64_t> finite_k_, finite_n_, finite_a_;
  // SolveRow's scratch: the least offload term per slot count, and the terms.
  std::vector<double> off_best_;
  struct OffTerm {
    // [from, to]: the slot counts where it can be finite and take a slot.
    int64_t from, to, shift;
    double add;
    const double* row;  // nullptr: sp is the last layer (a constant term)
  };
  std::vector<OffTerm> off_terms_;
  // [sp * (M + 1) + m]: Off(sp, m, s) for the rows s of x[s] as off_keys_[sp]
  // says, from its `from` on; kept where rows s share it.
  struct OffKey {
    int64_t slots = -1, bytes = -1;  // x[s] (-1: none kept)
    int64_t from = 0;                // the first m where it can be finite
  };
  RowTable<double> off_kept_;
  std::vector<OffKey> off_keys_;
  RowTable<int> k_choice_, n_choice_, a_choice_;
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_SINGLE_LEVEL_DP_H_
