// Layers pooled within their measured time spread (solver/time_classes.h):
// without spreads nothing changes and the solver equals the full DP; with
// spreads the DP is exact for the pooled chain, and its schedule, on the
// profile's own times, is within the documented bound of the full DP's
// optimum on those times.
#include "solver/time_classes.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "remat/planning/pareto.h"
#include "remat/simulate/simulator.h"
#include "remat/strategies/strategies.h"
#include "solver/multilevel_dp.h"
#include "testing/chains.h"
#include "testing/dp_cases.h"
#include "testing/gpt_chain.h"

namespace remat::solver {
namespace {

using testing::BudgetAt;
using testing::FastDp;
using testing::FullDp;

Profile WithSpread(Profile p, double spread) {
  for (LayerProfile& l : p.layers) l.time_spread = spread;
  return p;
}

// A GPT chain as a profiler on a noisy machine measures it: every layer's
// times scaled by its own factor in [0.9, 1.1], and a spread that covers
// any two such factors (0.2 / 0.9 < 0.25). `persistent`: gradient buffers
// held for the whole step (Megatron's), so equal blocks share rows
// anywhere in the chain (interval_classes.h).
Profile NoisyGpt(int blocks, uint32_t seed, bool persistent = true) {
  Profile p = testing::GptChain(blocks, 4);
  if (persistent) {
    for (LayerProfile& l : p.layers) {
      p.static_memory.gradient_bytes += l.gradient_bytes;
      l.gradient_bytes = 0;
    }
  }
  return WithSpread(testing::JitterTimes(p, 0.1, seed), 0.25);
}

std::optional<SimulationResult> Simulated(const Profile& p, const DpSolution& s) {
  Result<SimulationResult> sim = Simulate(p, AddFrees(s.ops, p.num_layers()));
  EXPECT_TRUE(sim.ok()) << sim.status().message();
  return sim.ok() ? std::optional<SimulationResult>(*sim) : std::nullopt;
}

TEST(TimeClasses, WithoutSpreadsTheSolverEqualsTheFullDpOnRandomChains) {
  int solved = 0;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    for (int layers : {6, 13, 24, 40}) {
      const Profile p = testing::JitterTimes(testing::RandomChain(layers, seed), 0.1, seed);
      const TimeClasses pooled = PoolTimesBySpread(p);
      EXPECT_FALSE(pooled.pooled());
      EXPECT_EQ(ProfileToJson(pooled.profile), ProfileToJson(p));
      for (int percent : {5, 40, 75}) {
        const int64_t budget = BudgetAt(p, percent);
        const ChainTerms raw(p, MemoryUnits(budget, 1000, Rounding::kUp));
        const ChainTerms solved_terms(pooled.profile, MemoryUnits(budget, 1000, Rounding::kUp));
        MultiLevelDp full(raw, FullDp()), fast(solved_terms, FastDp(solved_terms));
        const std::optional<DpSolution> a = full.Solve(nullptr), b = fast.Solve(nullptr);
        ASSERT_EQ(a.has_value(), b.has_value()) << layers << " " << seed << " " << percent;
        if (!a) continue;
        ++solved;
        EXPECT_NEAR(b->recompute_ms, a->recompute_ms, 1e-5 * (1 + a->recompute_ms));
      }
    }
  }
  EXPECT_GE(solved, 40);
}

TEST(TimeClasses, PooledDpIsExactForThePooledChainAndWithinTheBoundOnOwnTimes) {
  int solved = 0;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    // Seed 4: gradients created in backward (no rows shared: the
    // gradients after equal intervals differ), still exact and bounded.
    const bool persistent = seed < 4;
    const Profile p = NoisyGpt(8 + 10 * (seed % 3 + 1), seed, persistent);
    const TimeClasses pooled = PoolTimesBySpread(p);
    ASSERT_TRUE(pooled.pooled());
    // Embedding, one block class, norm, head, loss.
    EXPECT_EQ(pooled.classes, 5) << seed;
    EXPECT_LE(pooled.deviation, 0.2 / 0.9 + 1e-12);
    for (int percent : {5, 40, 75}) {
      const int64_t budget = BudgetAt(p, percent);
      for (int64_t slots : {250, 1000}) {
        const std::string what = "seed " + std::to_string(seed) + " budget " +
                                 std::to_string(percent) + "% slots " + std::to_string(slots);
        const ChainTerms raw(p, MemoryUnits(budget, slots, Rounding::kUp));
        const ChainTerms pool(pooled.profile, MemoryUnits(budget, slots, Rounding::kUp));
        MultiLevelDp raw_full(raw, FullDp()), pool_full(pool, FullDp());
        MultiLevelDp pool_fast(pool, FastDp(pool));
        DpStats raw_stats, fast_stats;
        const std::optional<DpSolution> a = raw_full.Solve(&raw_stats);
        const std::optional<DpSolution> c = pool_full.Solve(nullptr);
        const std::optional<DpSolution> b = pool_fast.Solve(&fast_stats);
        // Sizes are untouched: the same schedules fit.
        ASSERT_EQ(a.has_value(), b.has_value()) << what;
        ASSERT_EQ(c.has_value(), b.has_value()) << what;
        if (!a) continue;
        ++solved;
        if (persistent) {
          EXPECT_LT(fast_stats.rows * 2, raw_stats.rows) << what;
        }
        // Exact for the pooled chain.
        EXPECT_NEAR(b->recompute_ms, c->recompute_ms, 1e-5 * (1 + c->recompute_ms)) << what;
        // On the profile's own times: no better than the optimum there,
        // within the bound of it.
        const std::optional<SimulationResult> sa = Simulated(p, *a), sb = Simulated(p, *b);
        ASSERT_TRUE(sa && sb) << what;
        EXPECT_LE(sb->activation_peak_bytes, budget) << what;
        EXPECT_GE(sb->recompute_ms, sa->recompute_ms * (1 - 1e-6) - 1e-6) << what;
        EXPECT_LE(sb->recompute_ms, sa->recompute_ms * pooled.cost_bound() + 1e-6) << what;
      }
    }
  }
  EXPECT_GE(solved, 20);
}

TEST(TimeClasses, ClassRule) {
  // Blocks of one size: 1.00, 1.08, 1.30 ms forward (backward 2x).
  Profile p = testing::UniformChain(4);
  const double forward[] = {1.0, 1.08, 1.3, 1.05};
  for (int i = 0; i < 4; ++i) {
    p.layers[i].forward_ms = forward[i];
    p.layers[i].backward_ms = 2 * forward[i];
    p.layers[i].time_spread = 0.1;
  }
  // Layer 0 is the reference: 1.08 and 1.05 agree with it within 10%, 1.3
  // does not.
  TimeClasses pooled = PoolTimesBySpread(p);
  EXPECT_EQ(pooled.classes, 2);
  EXPECT_EQ(pooled.pooled_layers, 3);
  const double mean = (1.0 + 1.08 + 1.05) / 3;
  EXPECT_DOUBLE_EQ(pooled.profile.layers[1].forward_ms, mean);
  EXPECT_DOUBLE_EQ(pooled.profile.layers[3].backward_ms, 2 * mean);
  EXPECT_DOUBLE_EQ(pooled.profile.layers[2].forward_ms, 1.3);
  EXPECT_NEAR(pooled.deviation, (mean - 1.0) / mean, 1e-12);
  EXPECT_DOUBLE_EQ(pooled.cost_bound(), (1 + pooled.deviation) / (1 - pooled.deviation));
  // Both layers' spreads must cover the difference.
  p.layers[3].time_spread = 0.01;
  pooled = PoolTimesBySpread(p);
  EXPECT_EQ(pooled.classes, 3);
  EXPECT_DOUBLE_EQ(pooled.profile.layers[3].forward_ms, 1.05);
  // Different sizes never pool.
  p.layers[1].activation_bytes += 1;
  pooled = PoolTimesBySpread(p);
  EXPECT_EQ(pooled.classes, 4);
  EXPECT_FALSE(pooled.pooled());
}

Plan Optimal(const Profile& p, int64_t budget, bool exact_times) {
  PlanOptions o;
  o.strategy = Strategy::kOptimal;
  o.budget_bytes = budget;
  o.slots = 1000;
  o.exact_times = exact_times;
  Result<PlanSet> set = MakePlan(p, o);
  EXPECT_TRUE(set.ok()) << set.status().message();
  return set.ok() ? set->chosen : Plan{};
}

TEST(TimeClasses, OptimalStrategyPoolsAndReportsOnOwnTimes) {
  const Profile p = NoisyGpt(24, 7);
  const TimeClasses pooled = PoolTimesBySpread(p);
  const int64_t budget = p.static_bytes() + BudgetAt(p, 40);
  const Plan fast = Optimal(p, budget, false), exact = Optimal(p, budget, true);
  EXPECT_NE(fast.parameter.find("times pooled: 28 layers solved as 5 classes"), std::string::npos)
      << fast.parameter;
  EXPECT_EQ(exact.parameter.find("pooled"), std::string::npos) << exact.parameter;
  ASSERT_TRUE(fast.fits && exact.fits);
  // Every figure is the simulation on the profile's own times.
  Result<SimulationResult> own = Simulate(p, fast.schedule);
  ASSERT_TRUE(own.ok());
  EXPECT_DOUBLE_EQ(fast.predicted.step_ms, own->step_ms);
  EXPECT_DOUBLE_EQ(fast.predicted.recompute_ms, own->recompute_ms);
  EXPECT_LE(exact.predicted.recompute_ms, fast.predicted.recompute_ms * (1 + 1e-9));
  EXPECT_LE(fast.predicted.recompute_ms, exact.predicted.recompute_ms * pooled.cost_bound() + 1e-6);
}

TEST(TimeClasses, OptimalStrategyPoolsWithGradientsCreatedInBackward) {
  // Gradients created in backward: equal intervals share rows only read
  // shifted by the gradients between them (GradientKey::kShifted), which
  // the strategy does on pooled times, and says so with its relaxed bound.
  const Profile p = NoisyGpt(24, 7, /*persistent=*/false);
  const TimeClasses pooled = PoolTimesBySpread(p);
  ASSERT_TRUE(pooled.pooled());
  EXPECT_EQ(IntervalClasses(pooled.profile).count(), IntervalClasses(p).count());
  EXPECT_LT(IntervalClasses(pooled.profile, GradientKey::kShifted).count() * 3,
            IntervalClasses(p, GradientKey::kShifted).count());
  for (int percent : {10, 40, 70}) {
    const int64_t budget = p.static_bytes() + BudgetAt(p, percent);
    const Plan plan = Optimal(p, budget, false), exact = Optimal(p, budget, true);
    EXPECT_NE(plan.parameter.find("pooled"), std::string::npos) << plan.parameter;
    EXPECT_NE(plan.parameter.find("gradient rows shifted: within "), std::string::npos)
        << plan.parameter;
    EXPECT_EQ(exact.parameter.find("shifted"), std::string::npos) << exact.parameter;
    ASSERT_TRUE(plan.fits && exact.fits);
    EXPECT_LE(exact.predicted.recompute_ms, plan.predicted.recompute_ms * (1 + 1e-9));
    EXPECT_LE(plan.predicted.recompute_ms,
              exact.predicted.recompute_ms * pooled.cost_bound() + 1e-6);
  }
}

TEST(TimeClasses, ParetoSweepPoolsUnlessExactTimes) {
  // `planner pareto` solves as `planner --strategy optimal` does: pooled
  // by default, the profile's own times with --exact-times.
  const Profile p = NoisyGpt(24, 7);
  ParetoOptions o;
  o.strategies = {Strategy::kOptimal};
  o.points = 3;
  o.slots = 1000;
  o.min_budget = p.static_bytes() + BudgetAt(p, 20);
  o.max_budget = p.static_bytes() + BudgetAt(p, 70);
  for (bool exact_times : {false, true}) {
    o.exact_times = exact_times;
    Result<ParetoCurve> curve = ParetoSweep(p, o);
    ASSERT_TRUE(curve.ok()) << curve.status().message();
    ASSERT_EQ(curve->points.size(), 3u);
    for (const ParetoPoint& point : curve->points) {
      EXPECT_EQ(point.parameter.find("times pooled") == std::string::npos, exact_times)
          << point.parameter;
      const Plan plan = Optimal(p, point.budget_bytes, exact_times);
      EXPECT_EQ(point.step_ms, plan.predicted.step_ms);
      EXPECT_EQ(point.peak_bytes, plan.predicted.peak_bytes);
    }
  }
}

TEST(TimeClasses, ProfileJsonCarriesSpreads) {
  Profile p = testing::TransformerChain(3);
  Result<Profile> plain = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->layers[1].time_spread, 0);  // absent
  EXPECT_EQ(ProfileToJson(p).find("time_spread"), std::string::npos);
  p.layers[1].time_spread = 0.037;
  Result<Profile> back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_DOUBLE_EQ(back->layers[1].time_spread, 0.037);
  EXPECT_EQ(back->layers[0].time_spread, 0);
}

TEST(TimeClasses, BadSpreadsAreRejectedNamingFileAndField) {
  const std::string good = ProfileToJson(testing::TransformerChain(3));
  for (const std::string value : {"-0.1", "\"wide\"", "null", "1e7"}) {
    std::string text = good;
    const size_t at = text.find("\"forward_ms\"");
    text.insert(at, "\"time_spread\": " + value + ", ");
    Result<Profile> bad = ParseProfile(text, "noisy.json");
    ASSERT_FALSE(bad.ok()) << value;
    const std::string& message = bad.status().message();
    EXPECT_NE(message.find("noisy.json"), std::string::npos) << message;
    EXPECT_NE(message.find("time_spread"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  Profile p = testing::TransformerChain(3);
  p.layers[2].time_spread = -1;
  const Status invalid = ValidateProfile(p, "mem");
  EXPECT_FALSE(invalid.ok());
  EXPECT_NE(invalid.message().find("time_spread"), std::string::npos);
}

}  // namespace
}  // namespace remat::solver
