// The multi-level optimum: revolve's forward counts, and never costlier than
// any other strategy at the same budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "remat/plan/plan_memo.h"
#include "remat/strategies/strategies.h"
#include "strategies/solvers.h"
#include "testing/brute_force.h"
#include "testing/chains.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

// Griewank & Walther: the fewest forward steps to reverse l steps with s
// snapshots is t(l, s) = r*l - C(s+r, s+1), r the least with C(s+r, s) >= l.
int64_t Binomial(int64_t n, int64_t k) {
  if (k < 0 || k > n) return 0;
  int64_t b = 1;
  for (int64_t i = 1; i <= k; ++i) b = b * (n - k + i) / i;
  return b;
}
int64_t RevolveForwards(int64_t l, int64_t s) {
  int64_t r = 0;
  while (Binomial(s + r, s) < l) ++r;
  return r * l - Binomial(s + r, s + 1);
}

// Revolve's setting in our memory model. Every x[i] is 1 byte and a layer's
// tape a[i] is A = 100 bytes, too big to hold two: a layer's forward with
// grad must come right before its backward (revolve's taped adjoint step),
// and every other forward runs without grad (revolve's advance). At a
// backward, live memory is the checkpoints held, x[i] among them, plus
// a[i] (A) + g[i+1] (1) + g[i] (1); the last layer's backward holds the
// loss x[L] (1) in place of g[L], and the first layer's missing g[0] is
// made up by 1 byte of backward workspace, so that every backward costs
// the same. So a budget of A + 2 + h bytes holds h checkpoints at a
// backward: the reversed step's input (revolve's working state) and
// s = h - 1 snapshots, x[0] included as in revolve. The recompute ops are
// then exactly revolve's forward steps (each layer's one first forward is
// either an advance or, for the last layer, its tape).
Profile RevolveChain(int layers) {
  Profile p = testing::UniformChain(layers, 1, 101, 1.0, 2.0);
  p.layers.front().backward_workspace_bytes = 1;
  return p;
}

TEST(Optimal, ReproducesRevolvesForwardCounts) {
  for (int s = 1; s <= 5; ++s) {
    for (int l : {1, 2, 3, 5, 8, 13, 21, 30, 40}) {
      const Profile p = RevolveChain(l);
      const Plan plan = testing::SolveAt(p, Strategy::kOptimal, 100 + 2 + s + 1);
      ASSERT_TRUE(plan.fits) << "l=" << l << " s=" << s;
      EXPECT_EQ(plan.predicted.recompute_ops, RevolveForwards(l, s)) << "l=" << l << " s=" << s;
      EXPECT_DOUBLE_EQ(plan.predicted.recompute_ms, static_cast<double>(RevolveForwards(l, s)));
    }
  }
}

TEST(Optimal, RevolveChainNeedsASnapshot) {
  // s = 0: only the working state; two layers cannot be reversed.
  EXPECT_FALSE(testing::SolveAt(RevolveChain(2), Strategy::kOptimal, 100 + 2 + 1).fits);
  EXPECT_TRUE(testing::SolveAt(RevolveChain(1), Strategy::kOptimal, 100 + 2 + 1).fits);
}

// Budgets from below the lowest peak to above keep-everything.
std::vector<int64_t> SweepBudgets(const Profile& p, int n) {
  const int64_t lo = testing::SolveAt(p, Strategy::kOptimal, 1).predicted.peak_bytes;
  const int64_t hi = testing::SolveAt(p, Strategy::kNone, 0).predicted.peak_bytes;
  std::vector<int64_t> b = {lo - 1};
  for (int i = 0; i <= n; ++i) b.push_back(lo + (hi - lo) * i / n);
  b.push_back(hi + 1);
  return b;
}

void ExpectNeverCostlier(const Profile& p, bool brute_force, int budgets) {
  const auto plans =
      brute_force ? testing::AllSingleLevelPlans(p) : std::vector<testing::SimulatedDecisions>{};
  double previous = -1;
  for (int64_t budget : SweepBudgets(p, budgets)) {
    const Plan best = testing::SolveAt(p, Strategy::kOptimal, budget);
    if (best.fits) {
      EXPECT_LE(best.predicted.peak_bytes, budget) << p.model;
      if (previous >= 0) {
        EXPECT_LE(best.predicted.step_ms, previous + 1e-4) << p.model << " " << budget;
      }
      previous = best.predicted.step_ms;
    }
    for (Strategy s : {Strategy::kNone, Strategy::kUniform, Strategy::kSegment,
                       Strategy::kSelective, Strategy::kOptimalSingle}) {
      const Plan other = testing::SolveAt(p, s, budget);
      if (!other.fits) continue;
      EXPECT_TRUE(best.fits) << p.model << " " << ToString(s) << " fits in " << budget;
      EXPECT_LE(best.predicted.step_ms, other.predicted.step_ms + 1e-4)
          << p.model << " vs " << ToString(s) << " at " << budget;
    }
    const double single = testing::BestStepMs(plans, budget);
    if (single >= 0) {
      EXPECT_TRUE(best.fits);
      EXPECT_LE(best.predicted.step_ms, single + 1e-4) << p.model << " at " << budget;
    }
  }
}

TEST(Optimal, NeverCostlierThanSingleLevelOrHeuristicsOnRandomChains) {
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    ExpectNeverCostlier(testing::RandomChain(1 + seed % 8, seed), /*brute_force=*/true, 24);
  }
}

// Backwards that release saved bytes before their peaks: the multi-level
// plans still fit by the simulator and beat every single-level plan.
TEST(Optimal, NeverCostlierWithNegativeBackwardWorkspaces) {
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    ExpectNeverCostlier(
        testing::WithNegativeBackwardWorkspaces(testing::RandomChain(1 + seed % 8, seed), seed),
        /*brute_force=*/true, 24);
  }
}

TEST(Optimal, NeverCostlierOnTransformerChains) {
  ExpectNeverCostlier(testing::TransformerChain(3, 3), /*brute_force=*/true, 16);
  ExpectNeverCostlier(testing::TransformerChain(12, 4), /*brute_force=*/false, 12);
}

TEST(Optimal, BeatsSingleLevelWhereMultiLevelHelps) {
  // 10 layers, 2 snapshots: revolve needs 20 forwards; one level needs more.
  const Profile p = RevolveChain(10);
  const int64_t budget = 100 + 2 + 3;
  const Plan multi = testing::SolveAt(p, Strategy::kOptimal, budget);
  const Plan single = testing::SolveAt(p, Strategy::kOptimalSingle, budget);
  ASSERT_TRUE(multi.fits);
  EXPECT_EQ(multi.predicted.recompute_ops, 20);
  EXPECT_TRUE(!single.fits || single.predicted.step_ms > multi.predicted.step_ms);
}

TEST(Optimal, KeepsEverythingWithoutABudget) {
  const Profile p = testing::TransformerChain(6);
  const Plan plan = testing::SolveAt(p, Strategy::kOptimal, 0);
  EXPECT_TRUE(plan.fits);
  EXPECT_EQ(plan.predicted.recompute_ops, 0);
  EXPECT_EQ(plan.predicted.peak_bytes,
            testing::SolveAt(p, Strategy::kNone, 0).predicted.peak_bytes);
}

TEST(Optimal, LowestPeakWhenNothingFits) {
  const Profile p = testing::TransformerChain(6);
  const Plan lowest = testing::SolveAt(p, Strategy::kOptimal, 1);
  EXPECT_FALSE(lowest.fits);
  const Plan at = testing::SolveAt(p, Strategy::kOptimal, lowest.predicted.peak_bytes, 0);
  EXPECT_TRUE(at.fits);  // with default slots too: the exact lowest-peak plan fits
  EXPECT_FALSE(testing::SolveAt(p, Strategy::kOptimal, lowest.predicted.peak_bytes - 1).fits);
}

// With a memo open for the profile, optimal keeps what it derives from the
// profile alone (its pooled times and interval classes, per exact_times;
// the lowest-peak schedule of its terms and of optimal-single's) for every
// budget: each plan, asked in any order, is the one solved with no memo
// open. Budgets: none for activations, one byte for them (nothing fits),
// the lowest peak, and halfway to keeping everything.
TEST(Optimal, WhatAMemoKeepsForOneProfileLeavesEveryBudgetsPlanAsSolvedAlone) {
  Profile p = testing::JitterTimes(testing::GptChain(6, 4), 0.1, 3);
  for (LayerProfile& l : p.layers) l.time_spread = 0.25;
  const StrategySolver& solver = *strategies::OptimalStrategySolver();
  const int64_t lowest = testing::SolveAt(p, Strategy::kOptimal, 1).predicted.peak_bytes;
  const int64_t none = testing::SolveAt(p, Strategy::kNone, 0).predicted.peak_bytes;
  ASSERT_LT(lowest, none);
  std::vector<PlanOptions> options;
  for (int64_t budget : {int64_t{1}, p.static_bytes() + 1, lowest, lowest + (none - lowest) / 2}) {
    for (bool exact_times : {false, true}) {
      PlanOptions o;
      o.strategy = Strategy::kOptimal;
      o.budget_bytes = budget;
      o.exact_times = exact_times;
      options.push_back(o);
    }
  }
  std::vector<Plan> alone;
  for (const PlanOptions& o : options) {
    Result<Plan> plan = solver.Solve(p, o);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    alone.push_back(*std::move(plan));
  }
  // The chain pools (at the fitting budgets) unless asked for exact times,
  // so pooled classes kept for the wrong exact_times show in the plans.
  const auto pooled = [](const Plan& plan) {
    return plan.parameter.find("times pooled") != std::string::npos;
  };
  EXPECT_TRUE(pooled(alone[6]));
  for (size_t i = 1; i < alone.size(); i += 2) EXPECT_FALSE(pooled(alone[i])) << i;
  EXPECT_FALSE(alone[0].fits);
  EXPECT_FALSE(alone[2].fits);
  EXPECT_TRUE(alone[6].fits);
  PlanMemo memo(p);
  for (int round = 0; round < 2; ++round) {
    for (size_t k = 0; k < options.size(); ++k) {
      // Forward, then backward: each kept value is asked for by the others.
      const size_t i = round == 0 ? k : options.size() - 1 - k;
      Result<Plan> kept = solver.Solve(p, options[i]);
      ASSERT_TRUE(kept.ok()) << kept.status().message();
      EXPECT_EQ(kept->parameter, alone[i].parameter) << "options " << i << ", round " << round;
      EXPECT_EQ(kept->decisions, alone[i].decisions) << "options " << i << ", round " << round;
      EXPECT_EQ(kept->fits, alone[i].fits);
      EXPECT_EQ(kept->predicted.step_ms, alone[i].predicted.step_ms);
      EXPECT_EQ(kept->predicted.peak_bytes, alone[i].predicted.peak_bytes);
      EXPECT_EQ(kept->schedule.ops.size(), alone[i].schedule.ops.size());
    }
  }
}

TEST(Optimal, TooLongChainsAreAnErrorByNameAndSkippedByAuto) {
  const Profile p = testing::UniformChain(2049);
  PlanOptions o;
  o.strategy = Strategy::kOptimal;
  Result<PlanSet> named = MakePlan(p, o);
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("up to 2048 layers"), std::string::npos);
  o.strategy = Strategy::kAuto;
  Result<PlanSet> any = MakePlan(p, o);
  ASSERT_TRUE(any.ok()) << any.status().message();
  EXPECT_TRUE(any->chosen.fits);
}

TEST(Optimal, RejectsBadSlotCounts) {
  const Profile p = testing::TransformerChain(2);
  for (Strategy s : {Strategy::kOptimal, Strategy::kOptimalSingle}) {
    for (int slots : {1, -5}) {
      PlanOptions o;
      o.strategy = s;
      o.budget_bytes = 1 << 20;
      o.slots = slots;
      Result<PlanSet> set = MakePlan(p, o);
      ASSERT_FALSE(set.ok());
      EXPECT_NE(set.status().message().find("at least 2 memory slots"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace remat
