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
//
// Shifted gradients (GradientKey::kShifted): those gradients G(t) are a
// constant addend to every peak interval (s, t) checks, so in bytes its row
// is the row of an equal interval with less gradients after it, shifted:
// Cost(m) = Cost_c(m - (G(t) - G(t_c))). The class key then leaves G(t)
// out, and each class is solved at its member with the least gradients after
// it (the canonical interval, the one ending last); the others read its row
// shifted by shift_bytes(s, t) >= 0, rounded to slots (multilevel_dp.h).
#ifndef REMAT_SRC_SOLVER_INTERVAL_CLASSES_H_
#define REMAT_SRC_SOLVER_INTERVAL_CLASSES_H_

#include <cstdint>
#include <vector>

#include "remat/profile/profile.h"

namespace remat::solver {

// What the class key holds of the parameter gradients after an interval.
enum class GradientKey {
  kExact,    // their bytes: equal intervals share only with equal gradients after
  kShifted,  // nothing: rows are read shifted by the difference (see above)
};

class IntervalClasses {
 public:
  // O(L^2) time and memory. Only identical layers share classes; a
  // measured profile's timing noise is pooled before, in the profile the
  // solver sees (time_classes.h).
  explicit IntervalClasses(const Profile& profile, GradientKey key = GradientKey::kExact);

  // Dense class id of interval (s, t), 0 <= s < t <= L.
  int of(int s, int t) const { return class_[static_cast<size_t>(s) * (num_layers_ + 1) + t]; }
  // The classes of (s, t) for s in [0, t), contiguous (for scans over splits).
  const int* column(int t) const {
    return &class_by_t_[static_cast<size_t>(t) * (num_layers_ + 1)];
  }
  // The classes of (s, t) for t in (s, L], indexed by t.
  const int* row(int s) const { return &class_[static_cast<size_t>(s) * (num_layers_ + 1)]; }
  int count() const { return count_; }
  // The canonical interval of class c: among its members, the one ending
  // last (the least gradients after it). Every member has its length, its
  // layers and its end flags.
  int canonical_s(int c) const { return canonical_s_[c]; }
  int canonical_t(int c) const { return canonical_t_[c]; }
  // Bytes of parameter gradients after (s, t) beyond those after its class's
  // canonical interval (>= 0; 0 with GradientKey::kExact).
  int64_t shift_bytes(int s, int t) const {
    return gradients_after_[t] - gradients_after_[canonical_t_[of(s, t)]];
  }
  int64_t memory_bytes() const {
    return static_cast<int64_t>((class_.size() + class_by_t_.size() + canonical_s_.size() +
                                 canonical_t_.size()) *
                                    sizeof(int) +
                                gradients_after_.size() * sizeof(int64_t));
  }

 private:
  int num_layers_;
  int count_ = 0;
  std::vector<int> canonical_s_, canonical_t_;  // [class]
  std::vector<int64_t> gradients_after_;        // [t]
  std::vector<int> class_;       // [s][t]
  std::vector<int> class_by_t_;  // [t][s]
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_INTERVAL_CLASSES_H_
