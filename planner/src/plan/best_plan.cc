// BetterPlan's choice among candidates accounted on demand
// (remat/plan/best_plan.h).
//
// Why the scan's choice needs only the candidates it accounts: a scan that
// keeps the better plan keeps a fitting plan once it meets one, so where
// any fits, its choice is the scan's over the fitting ones alone. Among
// those, chain the step times that BetterPlan takes as the same (each
// within a billionth of the next): a plan outside the fastest chain is
// slower than every plan in it and not the same time as any of them, so
// it never replaces one of them, and each of them replaces it; the choice
// is the scan's over the fastest chain. Every candidate slower than that
// chain, or with a floor over the budget, is left unaccounted. Where none
// fits, BetterPlan orders by device total, then step time, both exact: the
// choice is the first in order of the least (total, time), and a candidate
// whose floor is over the least total found is not it.
#include "remat/plan/best_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "remat/plan/peak_floor.h"

namespace remat {
namespace {

// The scan itself over `indices` (ascending), every one accounted.
size_t Scan(const std::vector<PendingPlan>& c, const std::vector<size_t>& indices) {
  size_t best = indices.front();
  for (size_t i : indices) {
    if (BetterPlan(c[i].plan, c[best].plan)) best = i;
  }
  return best;
}

}  // namespace

PendingPlan AccountedPlan(Plan plan) {
  PendingPlan p;
  p.accounted = true;
  p.floor_bytes = plan.memory.total_bytes;
  p.may_fit = plan.fits;
  p.plan = std::move(plan);
  return p;
}

PendingPlan UnaccountedPlan(const Profile& profile, Plan tensors, const DeviceMemoryTerms& terms,
                            int64_t budget_bytes) {
  PendingPlan p;
  p.floor_bytes = DeviceTotalFloor(profile, tensors.predicted.peak_bytes, terms);
  const int64_t host = profile.host_link.budget_bytes;
  p.may_fit = (budget_bytes <= 0 || p.floor_bytes <= budget_bytes) &&
              (host <= 0 || tensors.predicted.host_peak_bytes <= host);
  p.plan = std::move(tensors);
  return p;
}

Result<size_t> BestPlanIndex(std::vector<PendingPlan>* candidates, const AccountPlan& account) {
  std::vector<PendingPlan>& c = *candidates;
  if (c.empty()) return Status::Internal("BestPlanIndex: no candidates");
  auto settle = [&](size_t i) -> Status {
    if (c[i].accounted) return Status::Ok();
    REMAT_RETURN_IF_ERROR(account(&c[i].plan));
    c[i] = AccountedPlan(std::move(c[i].plan));
    return Status::Ok();
  };
  auto fits = [&](size_t i) { return c[i].accounted && c[i].plan.fits; };
  auto time = [&](size_t i) { return c[i].plan.predicted.step_ms; };
  std::vector<size_t> all(c.size());
  std::iota(all.begin(), all.end(), size_t{0});
  // Step times that do not order (NaN): the scan over every candidate.
  if (!std::all_of(all.begin(), all.end(), [&](size_t i) { return std::isfinite(time(i)); })) {
    for (size_t i : all) REMAT_RETURN_IF_ERROR(settle(i));
    return Scan(c, all);
  }
  std::vector<size_t> by_time = all;
  std::stable_sort(by_time.begin(), by_time.end(),
                   [&](size_t a, size_t b) { return time(a) < time(b); });
  // The chains of the same time, fastest first: the first with a plan that
  // fits holds the fastest fitting one.
  for (size_t begin = 0; begin < by_time.size();) {
    size_t end = begin + 1;
    while (end < by_time.size() && SameStepTime(time(by_time[end - 1]), time(by_time[end]))) {
      ++end;
    }
    std::vector<size_t> fitting;  // in order of time
    for (size_t k = begin; k < end; ++k) {
      const size_t i = by_time[k];
      if (c[i].may_fit) REMAT_RETURN_IF_ERROR(settle(i));
      if (fits(i)) fitting.push_back(i);
    }
    if (!fitting.empty()) {
      // The fastest chain of the fitting ones' times.
      std::vector<size_t> chain = {fitting.front()};
      for (size_t k = 1; k < fitting.size() && SameStepTime(time(fitting[k - 1]), time(fitting[k]));
           ++k) {
        chain.push_back(fitting[k]);
      }
      std::sort(chain.begin(), chain.end());
      return Scan(c, chain);
    }
    begin = end;
  }
  // Nothing fits (every candidate that may fit is accounted).
  std::vector<size_t> by_floor = all;
  std::stable_sort(by_floor.begin(), by_floor.end(),
                   [&](size_t a, size_t b) { return c[a].floor_bytes < c[b].floor_bytes; });
  int64_t least = std::numeric_limits<int64_t>::max();
  for (size_t i : by_floor) {
    if (c[i].floor_bytes > least) break;
    REMAT_RETURN_IF_ERROR(settle(i));
    least = std::min(least, c[i].plan.memory.total_bytes);
  }
  std::vector<size_t> accounted;
  for (size_t i : all) {
    if (c[i].accounted) accounted.push_back(i);
  }
  return Scan(c, accounted);
}

}  // namespace remat
