// The multi-level DP as `--strategy optimal` runs it (reference fill on two
// threads, chunk bounds, capped by the single-level DP's value) against the
// full DP (reference fill, no cap, one bound per split) on
// random chains with no two layers alike: the same optimum, and a schedule
// that simulates within the budget at that recompute time.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "remat/simulate/simulator.h"
#include "solver/multilevel_dp.h"
#include "testing/chains.h"
#include "testing/dp_cases.h"
#include "testing/gpt_chain.h"

namespace remat::solver {
namespace {

using testing::BudgetAt;
using testing::FastDp;
using testing::FullDp;

// Returns the number of cases where both found a schedule.
int ExpectFastEqualsFull(const Profile& p, const std::string& name) {
  int solved = 0;
  for (int percent : {5, 40, 75}) {
    const int64_t budget = BudgetAt(p, percent);
    for (int64_t slots : {250, 1000}) {
      // Rounding up: every schedule the DP accepts fits in the budget's bytes.
      const ChainTerms terms(p, MemoryUnits(budget, slots, Rounding::kUp));
      const std::string what =
          name + " budget " + std::to_string(percent) + "% slots " + std::to_string(slots);
      MultiLevelDp full(terms, FullDp()), fast(terms, FastDp(terms));
      const std::optional<DpSolution> a = full.Solve(nullptr), b = fast.Solve(nullptr);
      EXPECT_EQ(a.has_value(), b.has_value()) << what;
      if (!a || !b) continue;
      ++solved;
      EXPECT_NEAR(b->recompute_ms, a->recompute_ms, 1e-5 * (1 + a->recompute_ms)) << what;
      const Result<SimulationResult> sa = Simulate(p, AddFrees(a->ops, p.num_layers()));
      const Result<SimulationResult> sb = Simulate(p, AddFrees(b->ops, p.num_layers()));
      EXPECT_TRUE(sa.ok() && sb.ok()) << what;
      if (!sa.ok() || !sb.ok()) continue;
      EXPECT_LE(sb->activation_peak_bytes, budget) << what;
      EXPECT_NEAR(sb->recompute_ms, sa->recompute_ms, 1e-4 * (1 + sa->recompute_ms)) << what;
    }
  }
  return solved;
}

TEST(MultiLevelFastDp, EqualsTheFullDpOnRandomChains) {
  int solved = 0;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    for (int layers : {6, 13, 24, 40}) {
      solved += ExpectFastEqualsFull(
          testing::RandomChain(layers, seed),
          "random " + std::to_string(layers) + " seed " + std::to_string(seed));
    }
  }
  EXPECT_GE(solved, 80);
}

TEST(MultiLevelFastDp, EqualsTheFullDpOnMeasuredTransformerChains) {
  // Transformer-shaped chains as a profiler measures them: 10% timing noise
  // on every layer, so no interval rows are shared.
  int solved = 0;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    solved += ExpectFastEqualsFull(
        testing::JitterTimes(testing::TransformerChain(8 + 12 * seed, seed), 0.1, seed),
        "transformer seed " + std::to_string(seed));
    solved +=
        ExpectFastEqualsFull(testing::JitterTimes(testing::GptChain(4 + 8 * seed, 4), 0.1, seed),
                             "gpt seed " + std::to_string(seed));
  }
  EXPECT_GE(solved, 30);
}

// The chunk bounds alone leave the tables as they were, cell by cell.
TEST(MultiLevelFastDp, ChunkBoundsKeepEveryCell) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const Profile p = testing::RandomChain(30, seed);
    const ChainTerms terms(p, MemoryUnits(BudgetAt(p, 30), 2000));
    MultiLevelDp full(terms, FullDp()), fast(terms);
    ASSERT_EQ(full.Solve(nullptr).has_value(), fast.Solve(nullptr).has_value());
    int bad = 0;
    for (int s = 0; s < p.num_layers(); ++s) {
      for (int t = s + 1; t <= p.num_layers(); ++t) {
        for (int64_t m = 0; m <= terms.slots(); ++m) {
          const float x = full.Cost(s, t, m), y = fast.Cost(s, t, m);
          if (x != y && !(std::abs(x - y) <= 1e-5f * (1 + std::abs(x))) && ++bad <= 3) {
            ADD_FAILURE() << "seed " << seed << " (" << s << ", " << t << ") m " << m << ": " << x
                          << " vs " << y;
          }
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

}  // namespace
}  // namespace remat::solver
