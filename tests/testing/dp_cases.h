// The multi-level DP as the tests compare it: budgets along a chain's peak
// range, the full DP (the reference) and the DP as `--strategy optimal`
// runs it.
#ifndef REMAT_TESTS_TESTING_DP_CASES_H_
#define REMAT_TESTS_TESTING_DP_CASES_H_

#include <cstdint>
#include <optional>

#include "solver/interval_bounds.h"
#include "solver/multilevel_dp.h"
#include "solver/single_level_dp.h"

namespace remat::testing {

// Activation budget `percent` of the way from the lowest reachable peak to
// the peak keeping everything.
inline int64_t BudgetAt(const Profile& p, int percent) {
  using namespace remat::solver;
  const ChainTerms exact(p, MemoryUnits::Bytes(int64_t{1} << 50));
  const int L = p.num_layers();
  const int64_t lowest = IntervalBounds(exact, IntervalClasses(p), false).floor(0, L);
  const int64_t keep_all = KeepAllNeeds(exact)[static_cast<size_t>(L)];
  return lowest + (keep_all - lowest) * percent / 100;
}

// Reference fill, no cap, one bound per split.
inline solver::DpOptions FullDp() {
  solver::DpOptions o;
  o.fill = solver::DpFill::kReference;
  o.chunk_bounds = o.row_caps = false;
  return o;
}

// The default fill (tiles of rows on two threads), chunk bounds, capped by
// the single-level DP's value.
inline solver::DpOptions FastDp(const solver::ChainTerms& terms) {
  solver::DpOptions o;
  const std::optional<solver::SingleLevelSolution> single =
      solver::SingleLevelDp(terms).Solve(nullptr);
  if (single) o.cost_cap_ms = single->recompute_ms;
  o.threads = 2;
  o.min_parallel_cells = 0;
  return o;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_DP_CASES_H_
