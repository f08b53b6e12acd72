// With the default slot count, slot rounding never costs the optimum a win:
// at the peak of every uniform / segment / selective plan, the optimal
// strategies fit and are at least as fast.
#include <gtest/gtest.h>

#include "remat/strategies/strategies.h"
#include "testing/chains.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

Plan Solve(const Profile& p, PlanOptions o) {
  Result<PlanSet> set = MakePlan(p, o);
  EXPECT_TRUE(set.ok()) << set.status().message();
  return set.ok() ? set->chosen : Plan{};
}

// Every parameter setting of the fixed-parameter heuristics, unbudgeted.
std::vector<Plan> HeuristicPlans(const Profile& p) {
  std::vector<Plan> plans;
  const int n = static_cast<int>(BlockLayers(p).size());
  for (int k = 1; k <= n; ++k) {
    PlanOptions o;
    o.strategy = Strategy::kUniform;
    o.every = k;
    plans.push_back(Solve(p, o));
    o.strategy = Strategy::kSegment;
    o.every = 0;
    o.segments = k;
    plans.push_back(Solve(p, o));
  }
  PlanOptions o;
  o.strategy = Strategy::kSelective;
  for (int b = 0; b < n; ++b) {
    if (p.layers[BlockLayers(p)[b]].selective.empty()) break;  // flash attention: none
    o.selective_layers.push_back(b);
    plans.push_back(Solve(p, o));
  }
  return plans;
}

void ExpectOptimalWinsAtEachPeak(const Profile& p) {
  for (const Plan& h : HeuristicPlans(p)) {
    for (Strategy s : {Strategy::kOptimal, Strategy::kOptimalSingle}) {
      PlanOptions o;
      o.strategy = s;
      o.budget_bytes = h.predicted.peak_bytes;
      const Plan best = Solve(p, o);
      EXPECT_TRUE(best.fits) << p.model << ": " << ToString(s) << " at the peak of "
                             << ToString(h.strategy) << " " << h.parameter;
      EXPECT_LE(best.predicted.step_ms, h.predicted.step_ms * (1 + 1e-9))
          << p.model << ": " << ToString(s) << " at the peak of " << ToString(h.strategy) << " "
          << h.parameter;
    }
  }
}

TEST(OptimalDefaultSlots, NeverLosesToHeuristicsAtTheirOwnPeakOnGpt) {
  ExpectOptimalWinsAtEachPeak(testing::GptChain(12, 8, AttentionImpl::kEager));
  ExpectOptimalWinsAtEachPeak(testing::GptChain(24, 4, AttentionImpl::kFlash));
  ExpectOptimalWinsAtEachPeak(testing::GptChain(48, 2, AttentionImpl::kEager));
}

TEST(OptimalDefaultSlots, NeverLosesToHeuristicsAtTheirOwnPeakOnJitteredChains) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    ExpectOptimalWinsAtEachPeak(testing::TransformerChain(6 + 3 * seed, seed));
  }
}

}  // namespace
}  // namespace remat
