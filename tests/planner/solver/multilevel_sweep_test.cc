// One table answers every budget of a sweep with the values of a DP solved
// for that budget alone in the same slot size.
#include "solver/multilevel_sweep.h"

#include <gtest/gtest.h>

#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"
#include "testing/chains.h"

namespace remat::solver {
namespace {

TEST(MultiLevelSweep, AnswersSmallerBudgetsLikeTheirOwnDp) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const Profile p = seed % 2 ? testing::TransformerChain(10 + seed, seed)
                               : testing::JitterTimes(testing::TransformerChain(12, 1), 0.1, seed);
    const int L = p.num_layers();
    const int64_t max_budget = 120000, slots = 600;
    const MultiLevelSweep sweep(p, max_budget, slots, 0, {});
    for (Rounding r : {Rounding::kDown, Rounding::kUp}) {
      ASSERT_TRUE(sweep.solved(r)) << seed;
      const double slot_bytes = static_cast<double>(max_budget) / slots;
      for (int64_t budget : {int64_t{20000}, int64_t{35000}, int64_t{60000}, int64_t{90000}}) {
        const int64_t m = sweep.SlotsFor(budget, r);
        EXPECT_EQ(m, static_cast<int64_t>(static_cast<double>(budget) / slot_bytes));
        // The same slot size, the budget's own slots.
        const ChainTerms own_terms(p, MemoryUnits(static_cast<int64_t>(m * slot_bytes), m, r));
        ASSERT_DOUBLE_EQ(own_terms.units().slot_bytes(), slot_bytes);
        MultiLevelDp own(own_terms);
        const std::optional<DpSolution> own_sol = own.Solve(nullptr);
        const MultiLevelDp& table = sweep.dp(r);
        ASSERT_EQ(own_sol.has_value(), m >= table.floor()) << seed << " " << budget;
        for (int64_t k = 0; k <= m; ++k) {
          ASSERT_EQ(own.Cost(0, L, k), table.Cost(0, L, k)) << seed << " " << budget << " " << k;
        }
        if (!own_sol) continue;
        const DpSolution from_table = table.Reconstruct(m);
        EXPECT_EQ(from_table.recompute_ms, own_sol->recompute_ms);
        ASSERT_EQ(from_table.ops.size(), own_sol->ops.size());
        Result<SimulationResult> sim = Simulate(p, AddFrees(from_table.ops, L));
        ASSERT_TRUE(sim.ok());
        // kUp: the schedule fits the budget it was planned for.
        if (r == Rounding::kUp) {
          EXPECT_LE(sim->activation_peak_bytes, budget);
        }
      }
    }
  }
}

}  // namespace
}  // namespace remat::solver
