// Intervals that the solvers' dynamic programs cannot tell apart.
//
// The cost row of interval (s, t) (multilevel_dp.h) depends only on the
// layers s..t-1 (their sizes, workspaces, forward times and selective
// options), on whether s == 0 (no gradient g[0] flows into the batch), on
// whether t == L (no gradient g[L]) and on the parameter gradients the
// backwards of layers t..L-1 created (live until the optimizer step, so
// during every backward of the interval). Transformer chains repeat one
// block, so with persistent gradient buffers (no gradient_bytes) most
// intervals share a class with others: a chain of identical blocks has O(L)
// classes instead of O(L^2) intervals, and each class is solved once. With
// gradients created in backward, intervals of equal layers differ in the
// gradients after them, and only those ending at the same t can share.
#ifndef REMAT_SRC_SOLVER_INTERVAL_CLASSES_H_
#define REMAT_SRC_SOLVER_INTERVAL_CLASSES_H_

#include <vector>

#include "remat/profile.h"

namespace remat::solver {

class IntervalClasses {
 public:
  // O(L^2) time and memory. Only identical layers share classes; a
  // measured profile's timing noise is pooled before, in the profile the
  // solver sees (time_classes.h).
  explicit IntervalClasses(const Profile& profile);

  // Dense class id of interval (s, t), 0 <= s < t <= L.
  int of(int s, int t) const { return class_[static_cast<size_t>(s) * (num_layers_ + 1) + t]; }
  // The classes of (s, t) for s in [0, t), contiguous (for scans over splits).
  const int* column(int t) const {
    return &class_by_t_[static_cast<size_t>(t) * (num_layers_ + 1)];
  }
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
