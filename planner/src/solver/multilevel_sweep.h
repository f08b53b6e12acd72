// Multi-level plans for many activation budgets from one table per
// rounding: the Pareto sweep solves the same chain at many budgets.
//
// A MultiLevelDp solved for the largest budget B in M slots of u = B / M
// bytes holds the least recompute time for every slot count m <= M. A
// budget b <= B gets SlotsWithin(b) = floor(b / u) of those slots
// (memory_units.h): kDown checks in them pass every schedule that fits in b
// bytes, kUp checks pass only such schedules. So one relaxed and one
// conservative table answer the whole sweep, each budget with exactly the
// values a DP solved for b alone in floor(b / u) slots of u bytes holds (the
// DP's value at m reads only slot counts <= m). The price is the grid: b
// gets b / u slots, fewer than M when b < B; give the sweep M * B / b_min
// slots to keep every budget at M or more.
#ifndef REMAT_SRC_SOLVER_MULTILEVEL_SWEEP_H_
#define REMAT_SRC_SOLVER_MULTILEVEL_SWEEP_H_

#include <cstdint>
#include <memory>

#include "remat/profile/profile.h"
#include "solver/chain_terms.h"
#include "solver/memory_units.h"
#include "solver/multilevel_dp.h"

namespace remat::solver {

class MultiLevelSweep {
 public:
  // Solves both tables for `max_activation_budget` bytes in `slots` slots
  // (align_bytes as in MemoryUnits). `profile` must be valid and outlive
  // this object. options.cost_cap_ms, if set, must be at least the cost
  // wanted at the smallest budget of the sweep.
  MultiLevelSweep(const Profile& profile, int64_t max_activation_budget, int64_t slots,
                  int64_t align_bytes, const DpOptions& options);

  // Whether the table of `rounding` has a schedule within its slots (and
  // the cap); Reconstruct needs one.
  bool solved(Rounding rounding) const { return table(rounding).solved; }
  // The slots `activation_budget` (<= the sweep's) gets in that table.
  int64_t SlotsFor(int64_t activation_budget, Rounding rounding) const {
    return table(rounding).terms->units().SlotsWithin(activation_budget);
  }
  // The table: dp(r).Reconstruct(m) for dp(r).floor() <= m <= SlotsFor(b, r)
  // is the least-recompute schedule of budget b in m slots.
  const MultiLevelDp& dp(Rounding rounding) const { return *table(rounding).dp; }

 private:
  struct Table {
    std::unique_ptr<ChainTerms> terms;
    std::unique_ptr<MultiLevelDp> dp;
    bool solved = false;
  };
  const Table& table(Rounding r) const { return r == Rounding::kDown ? down_ : up_; }

  Table down_, up_;
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_MULTILEVEL_SWEEP_H_
