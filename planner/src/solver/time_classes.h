// Layers whose measured times agree within the profiler's spread, pooled
// into one class for the optimal solver.
//
// A measured profile's blocks have equal sizes but times that differ by the
// timing noise of the machine, so no two intervals share a cost row and the
// multi-level DP is the full O(L^3 M) problem. The profiler reports each
// layer's relative time spread (LayerProfile::time_spread); layers that
// cannot be told apart within it are one class: PoolTimesBySpread replaces
// their times by the class's mean, and IntervalClasses then finds the
// repeated blocks of the pooled chain as it finds an analytic profile's.
//
// Class rule: layers in chain order; a layer with a spread joins the first
// class of layers with exactly its sizes (every byte field and selective
// option, SizesOf) whose reference (the class's first layer) agrees with it
// in every time (forward, backward, each selective extra):
// |t - t_ref| <= min(spread, spread_ref) * t_ref. Both layers' measurements
// must cover the difference; members are compared with the reference, not
// with each other, so a class never drifts (no transitive chains). A layer
// with spread 0 joins only a layer of equal times.
//
// Bound: let eps be the largest relative distance of a pooled time from
// its class mean (TimeClasses::deviation; at most 2s / (1 - s) for the
// largest spread s). A schedule's recompute time is a sum of forward and
// selective extra times with non-negative counts, so on the profile's own
// times it is within [1 - eps, 1 + eps] of its pooled time. The pooled
// optimum P therefore costs at most (1 + eps) / (1 - eps) times the
// optimum O on the profile's own times, in the same slots:
// raw(P) <= (1 + eps) pooled(P) <= (1 + eps) pooled(O) <= (1 + eps) / (1 - eps) raw(O).
#ifndef REMAT_SRC_SOLVER_TIME_CLASSES_H_
#define REMAT_SRC_SOLVER_TIME_CLASSES_H_

#include <cstdint>
#include <tuple>
#include <vector>

#include "remat/profile/profile.h"

namespace remat::solver {

// Everything about a layer's sizes that the solvers' terms read: input,
// output, kept, forward, no-grad and backward workspace bytes, the
// gradient bytes its backward creates, whether it keeps its input, and per
// selective option its kept, recompute workspace and forward workspace
// bytes.
using LayerSizes = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int,
                              std::vector<std::tuple<int64_t, int64_t, int64_t>>>;
LayerSizes SizesOf(const LayerProfile& layer);
// Forward, backward, then each selective option's extra time (ms).
std::vector<double> TimesOf(const LayerProfile& layer);

struct TimeClasses {
  // The profile with each pooled layer's times replaced by its class's
  // mean; the solver's DP runs on it, every reported figure is simulated on
  // the original.
  Profile profile;
  int layers = 0;         // layers in the chain
  int classes = 0;        // distinct layers (sizes and times) in `profile`
  int pooled_layers = 0;  // layers in a class of two or more whose times moved
  double deviation = 0;   // eps above: max |t - class mean| / class mean
  bool pooled() const { return pooled_layers > 0; }
  // (1 + eps) / (1 - eps): the pooled optimum's recompute time on the
  // original times over the original optimum's, at most (infinite for eps >= 1).
  double cost_bound() const;
};

// O(L * classes). Without spreads (all 0), profile is the input and
// pooled() is false.
TimeClasses PoolTimesBySpread(const Profile& profile);

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_TIME_CLASSES_H_
