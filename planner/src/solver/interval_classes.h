// Intervals that the solvers' dynamic programs cannot tell apart.
//
// The cost row of interval (s, t) (multilevel_dp.h) depends only on the
// layers s..t-1 (their sizes, workspaces, forward times and selective
// options), on whether s == 0 (no gradient g[0] flows into the batch) and on
// whether t == L (no gradient g[L]). Transformer chains repeat one block, so
// most intervals share a class with others: a chain of identical blocks has
// O(L) classes instead of O(L^2) intervals, and each class is solved once.
#ifndef REMAT_SRC_SOLVER_INTERVAL_CLASSES_H_
#define REMAT_SRC_SOLVER_INTERVAL_CLASSES_H_

#include <vector>

#include "remat/profile.h"

namespace remat::solver {

class IntervalClasses {
 public:
  // O(L^2) time and memory. With time_tolerance > 0, layers whose sizes are
  // identical and whose times (forward, backward, selective extras) are each
  // within that relative distance of a class's first layer join that class
  // (a measured profile's timing noise then no longer tells blocks apart);
  // the DP then solves each class with the times of the interval that
  // solves it, so its schedules are optimal for those times and within a
  // factor (1 + tol) / (1 - tol) of the optimum for the profile's own times.
  explicit IntervalClasses(const Profile& profile, double time_tolerance = 0);

  // Dense class id of interval (s, t), 0 <= s < t <= L.
  int of(int s, int t) const { return class_[static_cast<size_t>(s) * (num_layers_ + 1) + t]; }
  // The classes of (s, t) for s in [0, t), contiguous (for scans over splits).
  const int* column(int t) const { return &class_by_t_[static_cast<size_t>(t) * (num_layers_ + 1)]; }
  // The classes of (s, t) for t in (s, L], indexed by t.
  const int* row(int s) const { return &class_[static_cast<size_t>(s) * (num_layers_ + 1)]; }
  int count() const { return count_; }
  int64_t memory_bytes() const {
    return static_cast<int64_t>((class_.size() + class_by_t_.size()) * sizeof(int));
  }

 private:
  int num_layers_;
  int count_ = 0;
  std::vector<int> class_;       // [s][t]
  std::vector<int> class_by_t_;  // [t][s]
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_INTERVAL_CLASSES_H_
