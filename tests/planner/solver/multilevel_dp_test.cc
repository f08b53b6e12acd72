// The multi-level DP on its own: its value is the simulated recompute time,
// intervals of identical layers are solved once without changing it, and a
// solve another thread cancels stops.
#include "solver/multilevel_dp.h"

#include <gtest/gtest.h>

#include "remat/simulate/simulator.h"
#include "testing/cancel.h"
#include "testing/chains.h"

namespace remat::solver {
namespace {

// The DP's recompute time and the simulated one of its schedule.
struct Solved {
  double dp_ms = -1;
  double simulated_ms = -1;
  int64_t rows = 0;
};

Solved Solve(const Profile& p, int64_t activation_budget, int64_t slots) {
  const ChainTerms terms(p, MemoryUnits(activation_budget, slots));
  MultiLevelDp dp(terms);
  DpStats stats;
  std::optional<DpSolution> sol = dp.Solve(&stats);
  Solved out;
  out.rows = stats.rows;
  if (!sol) return out;
  Result<SimulationResult> sim = Simulate(p, AddFrees(sol->ops, p.num_layers()));
  EXPECT_TRUE(sim.ok());
  EXPECT_LE(sim->activation_peak_bytes, activation_budget);
  out.dp_ms = sol->recompute_ms;
  out.simulated_ms = sim->recompute_ms;
  return out;
}

TEST(MultiLevelDp, ValueIsTheSimulatedRecomputeTime) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const Profile p = testing::TransformerChain(6 + seed, seed);
    for (int64_t budget : {15000, 30000, 60000}) {
      const Solved s = Solve(p, budget, 4096);
      if (s.dp_ms < 0) continue;
      EXPECT_NEAR(s.dp_ms, s.simulated_ms, 1e-4 * (1 + s.simulated_ms)) << seed << " " << budget;
    }
  }
}

TEST(MultiLevelDp, IdenticalLayersShareRowsWithoutChangingTheOptimum) {
  // Blocks identical: one class per (length, ends) instead of one row per interval.
  Profile same = testing::TransformerChain(40, 3);
  for (LayerProfile& l : same.layers) {
    if (l.kind == "block") l = same.layers[1], l.name = "block";
  }
  // backward_ms does not enter the DP but tells the blocks apart.
  Profile distinct = same;
  for (int i = 0; i < distinct.num_layers(); ++i) distinct.layers[i].backward_ms += 1e-9 * i;
  for (int64_t budget : {12000, 20000, 40000}) {
    const Solved a = Solve(same, budget, 2000), b = Solve(distinct, budget, 2000);
    EXPECT_LT(a.rows, b.rows / 4);
    EXPECT_FLOAT_EQ(a.dp_ms, b.dp_ms) << budget;
    EXPECT_NEAR(a.simulated_ms, b.simulated_ms, 1e-6) << budget;
  }
}

TEST(MultiLevelDp, CancelledSolveStopsAndAnUncancelledOneIsUnchanged) {
  const Profile p = testing::TransformerChain(40, 5);
  const ChainTerms terms(p, MemoryUnits(30000, 2000));
  testing::ExpectCancelStopsTheSolve<MultiLevelDp>(terms, DpOptions{});
  // On threads, each a tile of rows behind the one above: a cancelled tile
  // still lets the tiles below it go on (to their own stop).
  for (DpFill fill : {DpFill::kReference, DpFill::kTiled}) {
    DpOptions threaded;
    threaded.fill = fill;
    threaded.threads = 3;
    threaded.min_parallel_cells = 0;
    testing::ExpectCancelStopsTheSolve<MultiLevelDp>(terms, threaded);
  }
}

}  // namespace
}  // namespace remat::solver
