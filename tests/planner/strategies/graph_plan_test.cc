#include "remat/strategies/graph_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>

#include "remat/schedule/decisions.h"
#include "testing/brute_force.h"
#include "testing/graphs.h"

namespace remat {
namespace {

struct Joint {
  int64_t peak_bytes = 0;
  double step_ms = 0;
};

// Every pair of single-level plans (each chain's every checkpoint, recompute
// and selective choice), simulated on the graph.
std::vector<Joint> AllJointPlans(const GraphProfile& g) {
  std::vector<std::vector<Schedule>> per_chain(g.num_chains());
  for (int c = 0; c < g.num_chains(); ++c) {
    const Profile& p = g.chains[c].profile;
    for (const auto& d : testing::AllSingleLevelPlans(p)) {
      Result<Schedule> s = BuildSingleLevelSchedule(p, d.decisions, d.selective_option);
      EXPECT_TRUE(s.ok());
      if (s.ok()) per_chain[c].push_back(*s);
    }
  }
  std::vector<Joint> out;
  for (const Schedule& a : per_chain[0]) {
    for (const Schedule& b : per_chain[1]) {
      Result<GraphSimulationResult> r = SimulateGraph(g, {a, b}, SimulationDetail::kTotals);
      EXPECT_TRUE(r.ok()) << r.status().message();
      if (r.ok()) out.push_back({r->peak_bytes, r->step_ms});
    }
  }
  return out;
}

// Over budgets from the least joint peak to the peak of keeping all: the
// plan fits where any pair of single-level plans does, and is no slower
// than the fastest such pair, nor than the chains planned one by one.
// Returns at how many budgets it beats the chains planned one by one (fits
// where they do not, or is faster).
int ExpectNoWorseThanBruteForce(const GraphProfile& g) {
  int better = 0;
  const std::vector<Joint> joint = AllJointPlans(g);
  EXPECT_FALSE(joint.empty());
  if (joint.empty()) return 0;
  int64_t least = joint[0].peak_bytes, most = joint[0].peak_bytes;
  for (const Joint& j : joint) {
    least = std::min(least, j.peak_bytes);
    most = std::max(most, j.peak_bytes);
  }
  for (int i = 0; i <= 8; ++i) {
    const int64_t budget = least + (most - least) * i / 8;
    double best = -1;
    for (const Joint& j : joint) {
      if (j.peak_bytes <= budget && (best < 0 || j.step_ms < best)) best = j.step_ms;
    }
    EXPECT_GE(best, 0);
    GraphPlanOptions o;
    o.budget_bytes = budget;
    o.slots = 1 << 22;  // one-byte slots: the solver exact
    o.front_points = 1 << 12;
    Result<GraphPlanSet> set = PlanGraph(g, o);
    EXPECT_TRUE(set.ok()) << set.status().message();
    if (!set.ok()) return better;
    const GraphPlan& chosen = set->chosen;
    EXPECT_TRUE(chosen.fits) << "budget " << budget;
    EXPECT_LE(chosen.predicted.peak_bytes, budget);
    // Sums of op times: a few ulps.
    EXPECT_LE(chosen.predicted.step_ms, best * (1 + 1e-12)) << "budget " << budget;
    if (set->independent.fits) {
      EXPECT_LE(chosen.predicted.step_ms, set->independent.predicted.step_ms);
    }
    better += !set->independent.fits ||
              chosen.predicted.step_ms < set->independent.predicted.step_ms * (1 - 1e-12);
    // The prediction is the graph simulation of the chosen schedules.
    std::vector<Schedule> schedules;
    for (const Plan& p : chosen.chains) schedules.push_back(p.schedule);
    Result<GraphSimulationResult> again = SimulateGraph(g, schedules);
    EXPECT_TRUE(again.ok());
    if (again.ok()) {
      EXPECT_EQ(again->peak_bytes, chosen.predicted.peak_bytes);
    }
  }
  return better;
}

// ExpectNoWorseThanBruteForce on the graph make(seed) of each seed; planning
// the chains together pays somewhere (recorded: at how many budgets).
template <typename Make>
void ExpectNoWorseOverSeeds(Make make, std::initializer_list<uint32_t> seeds) {
  int better = 0;
  for (uint32_t seed : seeds) {
    SCOPED_TRACE(seed);
    better += ExpectNoWorseThanBruteForce(make(seed));
  }
  EXPECT_GT(better, 0);
  ::testing::Test::RecordProperty("budgets_better_than_one_by_one", better);
}

TEST(GraphPlan, EncoderDecoderNoWorseThanBruteForce) {
  ExpectNoWorseOverSeeds([](uint32_t s) { return testing::EncoderDecoderGraph(3, 4, s); },
                         {1u, 4u, 7u, 10u, 21u});
}

TEST(GraphPlan, VisionLanguageNoWorseThanBruteForce) {
  ExpectNoWorseOverSeeds([](uint32_t s) { return testing::SpliceGraph(3, 3, s); },
                         {2u, 5u, 8u, 11u, 22u});
}

// The vision tower's output read by the text chain's loss (CLIP, SigLIP).
TEST(GraphPlan, TwoTowersNoWorseThanBruteForce) {
  ExpectNoWorseOverSeeds([](uint32_t s) { return testing::TwoTowersGraph(3, 3, s); },
                         {3u, 6u, 9u, 12u, 23u});
}

TEST(GraphPlan, NoBudgetKeepsEverything) {
  const GraphProfile g = testing::EncoderDecoderGraph(3, 4, 1);
  Result<GraphPlanSet> set = PlanGraph(g, GraphPlanOptions{});
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->chosen.fits);
  EXPECT_EQ(set->chosen.predicted.peak_bytes, set->baseline.predicted.peak_bytes);
  EXPECT_EQ(set->chosen.predicted.recompute_ms, 0);
}

TEST(GraphPlan, BelowEveryPlanReturnsTheLeastPeakNotFitting) {
  const GraphProfile g = testing::EncoderDecoderGraph(3, 4, 1);
  GraphPlanOptions o;
  o.budget_bytes = 1;
  Result<GraphPlanSet> set = PlanGraph(g, o);
  ASSERT_TRUE(set.ok());
  EXPECT_FALSE(set->chosen.fits);
  EXPECT_LT(set->chosen.predicted.peak_bytes, set->baseline.predicted.peak_bytes);
}

}  // namespace
}  // namespace remat
