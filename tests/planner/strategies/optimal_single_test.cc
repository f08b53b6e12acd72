// optimal-single against the brute force over every single-level plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "remat/plan/plan_memo.h"
#include "remat/strategies/strategies.h"
#include "strategies/solvers.h"
#include "testing/brute_force.h"
#include "testing/chains.h"

namespace remat {
namespace {

// Budgets to test a chain at: every distinct peak some plan reaches (the
// tightest budgets there are), one byte below each, and the extremes.
std::vector<int64_t> BudgetsFor(const std::vector<testing::SimulatedDecisions>& plans, size_t max) {
  std::vector<int64_t> peaks;
  for (const auto& s : plans) peaks.push_back(s.peak_bytes);
  std::sort(peaks.begin(), peaks.end());
  peaks.erase(std::unique(peaks.begin(), peaks.end()), peaks.end());
  std::vector<int64_t> budgets;
  const size_t step = std::max<size_t>(1, peaks.size() / max);
  for (size_t i = 0; i < peaks.size(); i += step) {
    budgets.push_back(peaks[i]);
    budgets.push_back(peaks[i] - 1);
  }
  budgets.push_back(peaks.back());
  budgets.push_back(peaks.back() * 2);
  return budgets;
}

void ExpectMatchesBruteForce(const Profile& p, size_t budgets) {
  const auto plans = testing::AllSingleLevelPlans(p);
  ASSERT_FALSE(plans.empty());
  for (int64_t budget : BudgetsFor(plans, budgets)) {
    const double best = testing::BestStepMs(plans, budget);
    const Plan plan = testing::SolveAt(p, Strategy::kOptimalSingle, budget);
    EXPECT_EQ(plan.fits, best >= 0) << p.model << " budget " << budget;
    if (best >= 0 && plan.fits) {
      EXPECT_LE(plan.predicted.peak_bytes, budget);
      EXPECT_NEAR(plan.predicted.step_ms, best, 1e-4) << p.model << " budget " << budget;
    }
    // Its plan is a layer list: rebuilding it from the decisions gives the same schedule.
    Result<Schedule> rebuilt = BuildSingleLevelSchedule(p, plan.decisions, plan.selective_option);
    ASSERT_TRUE(rebuilt.ok());
    EXPECT_EQ(rebuilt->ops.size(), plan.schedule.ops.size());
  }
}

TEST(OptimalSingle, EqualsBruteForceOnRandomChains) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    ExpectMatchesBruteForce(testing::RandomChain(2 + seed % 6, seed), 12);
  }
}

// Backwards that release saved bytes before their peaks: the solver's
// plans are still the brute force's, and fit by the simulator's peak.
TEST(OptimalSingle, EqualsBruteForceWithNegativeBackwardWorkspaces) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const Profile p =
        testing::WithNegativeBackwardWorkspaces(testing::RandomChain(2 + seed % 6, seed), seed);
    ExpectMatchesBruteForce(p, 12);
  }
}

TEST(OptimalSingle, EqualsBruteForceOnATenLayerChain) {
  Profile p = testing::RandomChain(10, 100);
  for (LayerProfile& l : p.layers) l.selective.clear();  // 11k plans instead of ~100k
  ExpectMatchesBruteForce(p, 10);
}

TEST(OptimalSingle, EqualsBruteForceOnATransformerChain) {
  ExpectMatchesBruteForce(testing::TransformerChain(4, 7), 12);
}

TEST(OptimalSingle, LowestPeakWhenNothingFits) {
  const Profile p = testing::RandomChain(6, 3);
  const auto plans = testing::AllSingleLevelPlans(p);
  int64_t lowest = plans[0].peak_bytes;
  for (const auto& s : plans) lowest = std::min(lowest, s.peak_bytes);
  const Plan plan = testing::SolveAt(p, Strategy::kOptimalSingle, lowest - 1);
  EXPECT_FALSE(plan.fits);
  EXPECT_EQ(plan.predicted.peak_bytes, lowest);
  EXPECT_TRUE(testing::SolveAt(p, Strategy::kOptimalSingle, lowest).fits);
}

// Budgets half and an eighth of the way from the lowest peak of the
// chain's single-level plans to the highest.
std::pair<int64_t, int64_t> MidBudgets(const Profile& p) {
  const auto plans = testing::AllSingleLevelPlans(p);
  int64_t lowest = plans.front().peak_bytes, highest = lowest;
  for (const auto& s : plans) {
    lowest = std::min(lowest, s.peak_bytes);
    highest = std::max(highest, s.peak_bytes);
  }
  return {lowest + (highest - lowest) / 2, lowest + (highest - lowest) / 8};
}

// With a memo open for the profile, optimal-single's plan is kept per
// options (the fit search solves it, and optimal again for its layer list):
// asked again, each options' plan is the one solved for those options with
// no memo open, never one kept for another budget, slot count or strategy.
TEST(OptimalSingle, AKeptPlanIsTheOneOfItsOwnOptions) {
  const Profile p = testing::RandomChain(7, 5);
  const StrategySolver& solver = *strategies::OptimalSingleStrategySolver();
  PlanOptions base;
  base.slots = 1 << 16;
  std::vector<PlanOptions> options(4, base);
  std::tie(base.budget_bytes, options[1].budget_bytes) = MidBudgets(p);
  for (size_t i : {0, 2, 3}) options[i].budget_bytes = base.budget_bytes;
  options[2].slots = 3;
  options[3].strategy = Strategy::kOptimalSingle;
  std::vector<Plan> alone;
  for (const PlanOptions& o : options) alone.push_back(*solver.Solve(p, o));
  // The options give different plans, so a plan kept under the wrong ones shows.
  EXPECT_NE(alone[0].decisions, alone[1].decisions);
  EXPECT_NE(alone[0].decisions, alone[2].decisions);
  PlanMemo memo(p);
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < options.size(); ++i) {
      Result<Plan> kept = solver.Solve(p, options[i]);
      ASSERT_TRUE(kept.ok());
      EXPECT_EQ(kept->decisions, alone[i].decisions) << "options " << i << ", round " << round;
      EXPECT_EQ(kept->predicted.step_ms, alone[i].predicted.step_ms);
      EXPECT_EQ(kept->budget_bytes, alone[i].budget_bytes);
      EXPECT_EQ(kept->schedule.ops.size(), alone[i].schedule.ops.size());
    }
  }
}

// Asked for by name or as optimal asks (its own strategy in the options:
// only whether it is auto is read), and by several threads at once, the
// plan of one budget is solved once while a memo is open: the later and
// the waiting askers simulate nothing, and every answer is the plan solved
// with no memo open.
TEST(OptimalSingle, OneSolvePerBudgetWhateverStrategyOrThreadAsks) {
  const Profile p = testing::RandomChain(7, 5);
  const StrategySolver& solver = *strategies::OptimalSingleStrategySolver();
  const auto [half, eighth] = MidBudgets(p);
  PlanOptions named;
  named.slots = 1 << 16;
  named.strategy = Strategy::kOptimalSingle;
  for (int64_t budget : {half, eighth}) {
    named.budget_bytes = budget;
    PlanOptions by_optimal = named;
    by_optimal.strategy = Strategy::kOptimal;
    const Plan alone = *solver.Solve(p, named);
    auto asked = [](const PlanMemo& m) {
      const PlanMemo::Stats s = m.stats();
      return s.simulations_run + s.simulations_reused;
    };
    {
      PlanMemo memo(p);
      ASSERT_TRUE(solver.Solve(p, named).ok());
      const int64_t once = asked(memo);
      EXPECT_GT(once, 0);
      Result<Plan> again = solver.Solve(p, by_optimal);
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(asked(memo), once) << "budget " << budget;
      EXPECT_EQ(again->decisions, alone.decisions);
      EXPECT_EQ(again->predicted.step_ms, alone.predicted.step_ms);
    }
    // At once: one solve's simulations in all, as above.
    int64_t once = 0;
    {
      PlanMemo memo(p);
      ASSERT_TRUE(solver.Solve(p, named).ok());
      once = asked(memo);
    }
    PlanMemo memo(p);
    std::vector<std::optional<Result<Plan>>> answers(6);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < answers.size(); ++i) {
      threads.emplace_back([&, i] { answers[i] = solver.Solve(p, i % 2 ? named : by_optimal); });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(asked(memo), once) << "budget " << budget;
    for (const auto& a : answers) {
      ASSERT_TRUE(a->ok());
      EXPECT_EQ((*a)->decisions, alone.decisions);
      EXPECT_EQ((*a)->predicted.step_ms, alone.predicted.step_ms);
      EXPECT_EQ((*a)->schedule.ops.size(), alone.schedule.ops.size());
    }
  }
}

}  // namespace
}  // namespace remat
