// optimal-single on chains with layers that do not keep their input (a loss
// reading the logits), without a host link, against the exhaustive
// enumeration of every single-level plan, each simulated. The
// simulator releases such an input after a forward with grad only, so what
// a layer list holds depends on whether the producer ran with grad.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "remat/strategies/strategies.h"
#include "testing/brute_force.h"
#include "testing/chains.h"

namespace remat {
namespace {

// Every distinct peak some plan reaches and one byte below each.
std::vector<int64_t> EveryPeakAndBelow(const std::vector<testing::SimulatedDecisions>& plans) {
  std::vector<int64_t> budgets;
  for (const auto& s : plans) {
    budgets.push_back(s.peak_bytes);
    budgets.push_back(s.peak_bytes - 1);
  }
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  return budgets;
}

// The budgets of `p` where optimal-single differs from the exhaustive
// optimum (fits or not, step time); each one is reported as a failure.
int Mismatches(const Profile& p, int* budgets) {
  const auto plans = testing::AllSingleLevelPlans(p);
  EXPECT_FALSE(plans.empty());
  int wrong = 0;
  for (int64_t budget : EveryPeakAndBelow(plans)) {
    ++*budgets;
    const double best = testing::BestStepMs(plans, budget);
    const Plan plan = testing::SolveAt(p, Strategy::kOptimalSingle, budget);
    const std::string where = p.model + " budget " + std::to_string(budget);
    EXPECT_EQ(plan.fits, best >= 0) << where;
    if (plan.fits) EXPECT_LE(plan.predicted.peak_bytes, budget) << where;
    if (plan.fits && best >= 0) EXPECT_NEAR(plan.predicted.step_ms, best, 1e-6) << where;
    if (plan.fits != (best >= 0) || (plan.fits && std::abs(plan.predicted.step_ms - best) > 1e-6)) {
      ++wrong;
    }
  }
  return wrong;
}

// Random chains of 2..7 layers, a third of the layers after the first not
// keeping their input (the pattern of the offload DP's test, and others).
TEST(OptimalSingleKeepsInput, EqualsExhaustiveOnRandomChains) {
  int budgets = 0, wrong = 0;
  for (uint32_t seed = 1; seed <= 24; ++seed) {
    Profile p = testing::RandomChain(2 + seed % 6, seed);
    for (int i = 1; i < p.num_layers(); ++i) p.layers[i].keeps_input = (i + seed) % 3 != 0;
    wrong += Mismatches(p, &budgets);
  }
  std::printf("random chains: %d of %d budgets differ from the exhaustive optimum\n", wrong,
              budgets);
  EXPECT_EQ(wrong, 0);
}

// The transformer chain's loss does not keep the logits (the analytic GPT
// chains' head before the loss).
TEST(OptimalSingleKeepsInput, EqualsExhaustiveOnATransformerChain) {
  int budgets = 0, wrong = 0;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    Profile p = testing::TransformerChain(3, seed);
    p.layers.back().keeps_input = false;
    wrong += Mismatches(p, &budgets);
  }
  std::printf("transformer chains: %d of %d budgets differ from the exhaustive optimum\n", wrong,
              budgets);
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace remat
