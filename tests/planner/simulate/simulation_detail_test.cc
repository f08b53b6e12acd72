// Simulate with SimulationDetail::kTotals (what the heuristic searches use
// for their candidates) gives the totals of a full simulation, without the
// timeline and the per-layer bytes at the peak.
#include <gtest/gtest.h>

#include "remat/plan/plan.h"
#include "remat/simulate/simulator.h"
#include "strategies/heuristic_search.h"
#include "testing/chains.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

using strategies::HeuristicCandidate;
using strategies::HeuristicFamily;

void ExpectSameTotals(const Profile& p, const Schedule& s, const CachingAllocatorModel* allocator,
                      const std::string& where) {
  Result<SimulationResult> full = Simulate(p, s, allocator);
  Result<SimulationResult> totals = Simulate(p, s, allocator, SimulationDetail::kTotals);
  ASSERT_TRUE(full.ok() && totals.ok()) << where;
  EXPECT_FALSE(full->timeline.empty()) << where;
  EXPECT_TRUE(totals->timeline.empty()) << where;
  EXPECT_TRUE(totals->layer_bytes_at_peak.empty()) << where;
  EXPECT_EQ(totals->peak_bytes, full->peak_bytes) << where;
  EXPECT_EQ(totals->peak_op, full->peak_op) << where;
  EXPECT_EQ(totals->at_peak.bytes, full->at_peak.bytes) << where;
  EXPECT_EQ(totals->reserved_peak_bytes, full->reserved_peak_bytes) << where;
  EXPECT_EQ(totals->activation_peak_bytes, full->activation_peak_bytes) << where;
  EXPECT_EQ(totals->step_ms, full->step_ms) << where;
  EXPECT_EQ(totals->recompute_ms, full->recompute_ms) << where;
  EXPECT_EQ(totals->recompute_ops, full->recompute_ops) << where;
}

TEST(SimulationDetail, TotalsAreTheFullSimulations) {
  std::vector<Profile> chains;
  for (uint32_t seed = 1; seed <= 6; ++seed) chains.push_back(testing::RandomChain(4 + 3 * seed, seed));
  chains.push_back(testing::TransformerChain(12, 3));
  Profile accumulating = testing::GptChain(6, 2);  // gradients created in backward
  accumulating.grad_accumulation = 4;
  chains.push_back(accumulating);
  const CachingAllocatorModel allocator;
  int schedules = 0;
  for (const Profile& p : chains) {
    for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
      const HeuristicFamily family(p, s);
      for (int k = family.first_parameter(); k <= family.last_parameter(); ++k) {
        const HeuristicCandidate c = family.Candidate(k);
        Result<Schedule> schedule = BuildSingleLevelSchedule(p, c.decisions, c.selective_option);
        ASSERT_TRUE(schedule.ok());
        ExpectSameTotals(p, *schedule, nullptr, p.model + " " + c.parameter);
        ExpectSameTotals(p, *schedule, &allocator, p.model + " " + c.parameter + " (allocator)");
        ++schedules;
      }
    }
  }
  EXPECT_GT(schedules, 100);
}

}  // namespace
}  // namespace remat
