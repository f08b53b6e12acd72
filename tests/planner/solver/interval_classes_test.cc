// Intervals share a cost row only when the DP cannot tell them apart: with
// parameter gradients created in backward, the gradients after an interval
// are part of its backward peaks.
#include "solver/interval_classes.h"

#include <gtest/gtest.h>

#include "remat/simulate/simulator.h"
#include "solver/multilevel_dp.h"
#include "testing/dp_cases.h"
#include "testing/gpt_chain.h"

namespace remat::solver {
namespace {

TEST(IntervalClasses, GradientsAfterAnIntervalTellEqualIntervalsApart) {
  Profile p = testing::GptChain(6, 4);
  ASSERT_GT(p.layers[2].gradient_bytes, 0);
  const int L = p.num_layers();
  // Blocks 1..6: (1, 3) and (2, 4) hold equal blocks but not the same
  // gradients after them.
  EXPECT_NE(IntervalClasses(p).of(1, 3), IntervalClasses(p).of(2, 4));
  // Persistent gradient buffers: they share.
  for (LayerProfile& l : p.layers) {
    p.static_memory.gradient_bytes += l.gradient_bytes;
    l.gradient_bytes = 0;
  }
  EXPECT_EQ(IntervalClasses(p).of(1, 3), IntervalClasses(p).of(2, 4));
  EXPECT_LT(IntervalClasses(p).count(), L * (L + 1) / 2);
}

TEST(IntervalClasses, EveryFillIsTheSimulationOnIdenticalBlocksWithGradients) {
  // An interval's class includes the gradients after it: classes without
  // them solve the 28-block chain at 5% to 55.82 ms in tables whose
  // schedule simulates to 59.97 ms above the budget (and the reference fill
  // to a worse plan than the optimum).
  for (int blocks : {18, 28}) {
    const Profile p = testing::GptChain(blocks, 4);
    for (int percent : {5, 40}) {
      const int64_t budget = testing::BudgetAt(p, percent);
      const ChainTerms terms(p, MemoryUnits(budget, 250, Rounding::kUp));
      MultiLevelDp full(terms, testing::FullDp()), fast(terms, testing::FastDp(terms));
      const std::optional<DpSolution> a = full.Solve(nullptr), b = fast.Solve(nullptr);
      ASSERT_TRUE(a && b);
      EXPECT_NEAR(a->recompute_ms, b->recompute_ms, 1e-5 * (1 + a->recompute_ms));
      for (const DpSolution* s : {&*a, &*b}) {
        Result<SimulationResult> sim = Simulate(p, AddFrees(s->ops, p.num_layers()));
        ASSERT_TRUE(sim.ok());
        EXPECT_LE(sim->activation_peak_bytes, budget) << blocks << " " << percent;
        EXPECT_NEAR(sim->recompute_ms, s->recompute_ms, 1e-4 * (1 + s->recompute_ms))
            << blocks << " " << percent;
      }
    }
  }
}

}  // namespace
}  // namespace remat::solver
