// The heuristic families and the search the optimal strategies run over
// them: the step formula it prunes by is the simulated step, the peak bound
// is below the simulated peak, and the pruned search returns what each
// strategy's exhaustive search does.
#include "strategies/heuristic_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "remat/strategies/strategies.h"
#include "testing/chains.h"
#include "testing/dp_cases.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

using strategies::BestHeuristicPlan;
using strategies::EvaluateDecisions;
using strategies::HeuristicCandidate;
using strategies::HeuristicFamily;
using strategies::SingleLevelPeakLowerBound;
using strategies::SingleLevelStepMs;

using testing::BudgetAt;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Random chains (half with a selective option per layer), transformer
// chains and a GPT chain with measured-like times.
std::vector<Profile> Chains() {
  std::vector<Profile> out;
  for (uint32_t seed = 1; seed <= 12; ++seed) out.push_back(testing::RandomChain(2 + 3 * seed, seed));
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    out.push_back(testing::JitterTimes(testing::TransformerChain(10 + 5 * seed, seed), 0.1, seed));
  }
  out.push_back(testing::JitterTimes(testing::GptChain(12, 2), 0.1, 7));
  return out;
}

// Budgets across the chain's range, from below the lowest peak to above
// keeping everything.
std::vector<int64_t> Budgets(const Profile& p) {
  std::vector<int64_t> out;
  for (int percent : {0, 5, 15, 30, 40, 55, 70, 85, 100}) {
    out.push_back(p.static_bytes() + BudgetAt(p, percent));
  }
  out.push_back(p.static_bytes() + BudgetAt(p, 0) - 1);
  return out;
}

// The unpruned reference for the heuristic search: each heuristic
// strategy's own plan (every parameter simulated), the fastest that fits.
std::optional<Plan> Exhaustive(const Profile& p, int64_t budget) {
  std::optional<Plan> best;
  for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
    PlanOptions o;
    o.strategy = s;
    o.budget_bytes = budget;
    Result<Plan> plan = FindSolver(s)->Solve(p, o);
    if (!plan.ok() || !plan->fits) continue;
    if (!best || plan->predicted.step_ms < best->predicted.step_ms) best = *std::move(plan);
  }
  return best;
}

void ExpectSamePlan(const Plan& a, const Plan& b, const std::string& where) {
  EXPECT_EQ(a.strategy, b.strategy) << where;
  EXPECT_EQ(a.parameter, b.parameter) << where;
  EXPECT_EQ(a.predicted.step_ms, b.predicted.step_ms) << where;
  EXPECT_EQ(a.predicted.peak_bytes, b.predicted.peak_bytes) << where;
  EXPECT_EQ(a.decisions, b.decisions) << where;
}

TEST(HeuristicSearch, StepIsTheSimulatedOneAndPeakBoundIsBelowThePeak) {
  int candidates = 0;
  for (const Profile& p : Chains()) {
    for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
      const HeuristicFamily family(p, s);
      for (int k = family.first_parameter(); k <= family.last_parameter(); ++k) {
        const HeuristicCandidate c = family.Candidate(k);
        Result<Plan> plan = EvaluateDecisions(p, s, c.parameter, c.decisions, c.selective_option, 0);
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        const double simulated = plan->predicted.step_ms;
        EXPECT_NEAR(SingleLevelStepMs(p, c.decisions, c.selective_option), simulated,
                    1e-12 * simulated)
            << p.model << " " << c.parameter;
        EXPECT_LE(SingleLevelPeakLowerBound(p, c.decisions, c.selective_option),
                  plan->predicted.peak_bytes)
            << p.model << " " << c.parameter;
        ++candidates;
      }
    }
  }
  EXPECT_GT(candidates, 300);
}

TEST(HeuristicSearch, UnboundedIsEachStrategysExhaustiveSearch) {
  int fitting = 0;
  for (const Profile& p : Chains()) {
    for (int64_t budget : Budgets(p)) {
      PlanOptions o;
      o.budget_bytes = budget;
      const std::optional<Plan> searched = BestHeuristicPlan(p, o, kInf);
      const std::optional<Plan> exhaustive = Exhaustive(p, budget);
      const std::string where = p.model + " at " + std::to_string(budget);
      ASSERT_EQ(searched.has_value(), exhaustive.has_value()) << where;
      if (!searched) continue;
      ExpectSamePlan(*searched, *exhaustive, where);
      ++fitting;
    }
  }
  EXPECT_GT(fitting, 100);
}

// With a bound (the DP plan's step time in optimal-single), the result is
// the exhaustive one whenever that is faster than the bound, and never
// faster than the bound otherwise: the strategy's choice is the same.
TEST(HeuristicSearch, BoundedChoosesAsTheExhaustiveSearch) {
  int faster = 0, pruned_away = 0;
  for (const Profile& p : Chains()) {
    for (int64_t budget : Budgets(p)) {
      PlanOptions o;
      o.budget_bytes = budget;
      const std::optional<Plan> exhaustive = Exhaustive(p, budget);
      if (!exhaustive) {
        EXPECT_FALSE(BestHeuristicPlan(p, o, kInf).has_value());
        continue;
      }
      const double step = exhaustive->predicted.step_ms;
      for (double bound : {step * 0.5, step * 0.999, step, step * (1 + 1e-12), step * 1.001,
                           step * 1.3}) {
        const std::optional<Plan> searched = BestHeuristicPlan(p, o, bound);
        const std::string where = p.model + " at " + std::to_string(budget) + " below " +
                                  std::to_string(bound);
        if (step < bound) {
          ASSERT_TRUE(searched.has_value()) << where;
          ExpectSamePlan(*searched, *exhaustive, where);
          ++faster;
        } else if (searched) {
          EXPECT_GE(searched->predicted.step_ms, bound * (1 - 1e-9)) << where;
        } else {
          ++pruned_away;
        }
      }
    }
  }
  EXPECT_GT(faster, 100);
  EXPECT_GT(pruned_away, 100);  // below every candidate's step, nothing is simulated
}

}  // namespace
}  // namespace remat
