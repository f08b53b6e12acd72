// The plan BetterPlan prefers among candidates whose device memory is
// accounted (AccountPlanMemory, its caching-allocator replay) only where
// that can change which one it is.
#ifndef REMAT_PLAN_BEST_PLAN_H_
#define REMAT_PLAN_BEST_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "remat/device/device_memory.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"

namespace remat {

// A candidate plan, its device memory accounted or not yet.
struct PendingPlan {
  // Accounted: the plan as it is compared. Not yet: a plan whose accounting
  // keeps its schedule and prediction (step time, allocated and host peaks)
  // and sets its fit and device memory.
  Plan plan;
  bool accounted = false;
  // The least device total accounting can give it (accounted: its total).
  int64_t floor_bytes = 0;
  // Whether accounting can find that it fits (accounted: whether it fits).
  bool may_fit = true;
};

// `plan` as planned with its device terms: accounted.
PendingPlan AccountedPlan(Plan plan);

// `tensors`, the plan of `profile` without device terms, to be accounted
// with `terms` against `budget_bytes` (0: none): its floor from its
// allocated peak (DeviceTotalFloor), and it cannot fit where that floor is
// over the budget or its host peak over the host link's budget. Requires
// that accounting keeps the prediction: no terms, or terms that replay the
// allocator (terms.replays_allocator()).
PendingPlan UnaccountedPlan(const Profile& profile, Plan tensors, const DeviceMemoryTerms& terms,
                            int64_t budget_bytes);

// Accounts a plan in place (AccountPlanMemory with the terms and budget the
// candidates' floors were taken with).
using AccountPlan = std::function<Status(Plan*)>;

// The index of the candidate a scan in order keeps (the first one, then
// each one BetterPlan prefers to the one kept), as if every candidate were
// accounted; accounts (`account`, then marks accounted) only those that can
// change the answer: in order of step time, those that may fit, up to the
// first time at which one fits and the times BetterPlan takes as the same;
// where none fits, in order of floor, up to the first floor above the least
// total found. Requires at least one candidate.
Result<size_t> BestPlanIndex(std::vector<PendingPlan>* candidates, const AccountPlan& account);

}  // namespace remat

#endif  // REMAT_PLAN_BEST_PLAN_H_
