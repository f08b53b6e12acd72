// BestPlanIndex: the candidate a scan in order with BetterPlan keeps when
// every candidate is accounted, found while accounting only some: over
// random candidates with exact and near ties in step time (within
// SameStepTime's billionth and just outside it), ties in device total,
// floors at and below the totals, plans that do not fit under their floor
// (an allocator's out of memory), and some accounted from the start.
#include "remat/plan/best_plan.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace remat {
namespace {

// A candidate as accounting finds it, and what is known before.
struct Truth {
  double step_ms = 0;
  int64_t total_bytes = 0;
  bool fits = false;
};

Plan Known(const Truth& t, bool accounted) {
  Plan p;
  p.predicted.step_ms = t.step_ms;
  if (accounted) {
    p.memory.total_bytes = t.total_bytes;
    p.fits = t.fits;
  }
  return p;
}

// The scan BestPlanIndex stands for, over every candidate accounted.
size_t FullScan(const std::vector<Truth>& truths) {
  std::vector<Plan> plans;
  for (const Truth& t : truths) plans.push_back(Known(t, true));
  size_t best = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (BetterPlan(plans[i], plans[best])) best = i;
  }
  return best;
}

struct Outcome {
  size_t index = 0;
  int accounted = 0;  // candidates `account` was called on
};

// BestPlanIndex over `truths`, each known by a floor `floors[i]` (at most
// its total) and whether it may fit under `budget`; `pre[i]`: accounted
// from the start.
Outcome Lazy(const std::vector<Truth>& truths, const std::vector<int64_t>& floors,
             const std::vector<bool>& pre, int64_t budget) {
  std::vector<PendingPlan> candidates;
  for (size_t i = 0; i < truths.size(); ++i) {
    if (pre[i]) {
      candidates.push_back(AccountedPlan(Known(truths[i], true)));
      continue;
    }
    PendingPlan p;
    p.plan = Known(truths[i], false);
    p.floor_bytes = floors[i];
    p.may_fit = budget <= 0 || floors[i] <= budget;
    candidates.push_back(p);
  }
  Outcome out;
  std::vector<int> calls(truths.size(), 0);
  Result<size_t> best = BestPlanIndex(&candidates, [&](Plan* p) -> Status {
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (&candidates[i].plan != p) continue;
      EXPECT_FALSE(pre[i]) << i;
      ++calls[i];
      p->memory.total_bytes = truths[i].total_bytes;
      p->fits = truths[i].fits;
      return Status::Ok();
    }
    ADD_FAILURE() << "accounted a plan that is no candidate";
    return Status::Internal("no candidate");
  });
  EXPECT_TRUE(best.ok()) << best.status().message();
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_LE(calls[i], 1) << "candidate " << i << " accounted twice";
    out.accounted += calls[i];
  }
  out.index = best.ok() ? *best : truths.size();
  return out;
}

TEST(BestPlan, TheFullScansChoiceOverRandomCandidates) {
  std::mt19937_64 rng(20261207);
  // Step times with exact ties, pairs within SameStepTime's tolerance
  // (1e-9 of 100 ms: 1e-7 ms) and a chain of them, and ones just outside.
  const std::vector<double> times = {100.0,        100.0 + 5e-8, 100.0 + 9e-8, 100.0 + 1.6e-7,
                                     100.0 + 3e-7, 90.0,         90.0 + 2e-7,  120.0,
                                     0.5,          0.5 + 5e-10,  0.5 + 2e-9};
  const std::vector<int64_t> totals = {1000, 1000, 1100, 1200, 1300, 1500, 2000};
  int accounted = 0, candidates = 0, fitted = 0, none_fit = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int64_t budget = (rng() % 6 == 0) ? 0 : 900 + static_cast<int64_t>(rng() % 800);
    std::vector<Truth> truths(n);
    std::vector<int64_t> floors(n);
    std::vector<bool> pre(n);
    for (int i = 0; i < n; ++i) {
      Truth& t = truths[i];
      t.step_ms = times[rng() % times.size()];
      t.total_bytes = totals[rng() % totals.size()];
      // Over the budget never fits; under it, one in eight runs out of
      // memory in the replay all the same.
      t.fits = (budget <= 0 || t.total_bytes <= budget) && rng() % 8 != 0;
      floors[i] =
          rng() % 3 == 0 ? t.total_bytes : t.total_bytes - static_cast<int64_t>(rng() % 400);
      pre[i] = rng() % 5 == 0;
    }
    const size_t want = FullScan(truths);
    const Outcome got = Lazy(truths, floors, pre, budget);
    ASSERT_EQ(got.index, want) << "trial " << trial;
    accounted += got.accounted;
    candidates += n;
    (truths[want].fits ? fitted : none_fit) += 1;
  }
  // Both cases met, and most candidates left unaccounted.
  EXPECT_GT(fitted, 2500);
  EXPECT_GT(none_fit, 500);
  EXPECT_LT(accounted, candidates / 2);
}

// Where two fitting plans take the same step time, the one with less
// memory is kept, whichever comes first; the slower ones and those whose
// floor is over the budget are never accounted.
TEST(BestPlan, TheSameTimeGoesToTheLessMemory) {
  const std::vector<Truth> truths = {
      {10.0, 5000, false},                      // fastest, over the budget
      {30.0, 1000, true},                       // slowest
      {20.0, 1800, true},  {20.0, 1500, true},  // the same time as the one before, less memory
      {25.0, 1200, true},
  };
  const std::vector<int64_t> floors = {4000, 900, 1700, 1400, 1100};
  const Outcome got = Lazy(truths, floors, std::vector<bool>(truths.size(), false), 2000);
  EXPECT_EQ(got.index, 3u);
  EXPECT_EQ(got.index, FullScan(truths));
  EXPECT_EQ(got.accounted, 2);
}

// Where nothing fits, the least total is kept (then the faster), and a
// candidate whose floor is over the least total found is not accounted.
TEST(BestPlan, NothingFitsTheLeastTotalIsKept) {
  const std::vector<Truth> truths = {
      {10.0, 5000, false},
      {30.0, 2500, false},
      {20.0, 2600, false},
      {40.0, 2500, false},  // the same total as the second, slower
  };
  const std::vector<int64_t> floors = {4000, 2400, 2550, 2500};
  const Outcome got = Lazy(truths, floors, std::vector<bool>(truths.size(), false), 2000);
  EXPECT_EQ(got.index, 1u);
  EXPECT_EQ(got.index, FullScan(truths));
  EXPECT_EQ(got.accounted, 2);  // the floors 2400 and 2500; not 2550 nor 4000
}

}  // namespace
}  // namespace remat
