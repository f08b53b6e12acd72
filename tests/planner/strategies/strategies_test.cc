#include "remat/strategies/strategies.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "remat/plan/plan_memo.h"
#include "testing/chains.h"
#include "testing/same_plan.h"

namespace remat {
namespace {

using D = LayerDecision;

Plan Solve(const Profile& p, PlanOptions o) {
  Result<PlanSet> s = MakePlan(p, o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? s->chosen : Plan{};
}

PlanOptions With(Strategy s, int64_t budget = 0) {
  PlanOptions o;
  o.strategy = s;
  o.budget_bytes = budget;
  return o;
}

TEST(Strategies, NoneKeepsEverything) {
  const Profile p = testing::TransformerChain(6);
  const Plan plan = Solve(p, With(Strategy::kNone));
  for (D d : plan.decisions) EXPECT_EQ(d, D::kKeep);
  EXPECT_EQ(plan.predicted.recompute_ops, 0);
  EXPECT_TRUE(plan.fits);
}

TEST(Strategies, UniformCheckpointsEveryKthBlock) {
  const Profile p = testing::TransformerChain(9);  // embedding, 9 blocks, norm, head, loss
  PlanOptions o = With(Strategy::kUniform);
  o.every = 3;
  const Plan plan = Solve(p, o);
  EXPECT_EQ(plan.parameter, "every 3");
  const std::vector<D> want = {D::kKeep,       D::kCheckpoint, D::kRecompute, D::kRecompute,
                               D::kCheckpoint, D::kRecompute,  D::kRecompute, D::kCheckpoint,
                               D::kRecompute,  D::kRecompute,  D::kKeep,      D::kKeep,
                               D::kKeep};
  EXPECT_EQ(plan.decisions, want);
  EXPECT_EQ(plan.predicted.recompute_ops, 9);  // every block recomputed once
  // Without --every and without a budget: k = round(sqrt(9)) = 3.
  EXPECT_EQ(Solve(p, With(Strategy::kUniform)).parameter, "every 3");
}

TEST(Strategies, SegmentSplitsBlocksIntoEqualSegments) {
  const Profile p = testing::TransformerChain(5);
  PlanOptions o = With(Strategy::kSegment);
  o.segments = 2;
  const Plan plan = Solve(p, o);
  // 5 blocks in 2 segments: 3 + 2.
  const std::vector<D> want = {D::kKeep,      D::kCheckpoint, D::kRecompute,
                               D::kRecompute, D::kCheckpoint, D::kRecompute,
                               D::kKeep,      D::kKeep,       D::kKeep};
  EXPECT_EQ(plan.decisions, want);
}

TEST(Strategies, ManualCheckpointsExactlyTheListedBlocks) {
  const Profile p = testing::TransformerChain(9);
  PlanOptions o = With(Strategy::kManual);
  o.checkpoint_layers = {0, 4, 8};
  const Plan plan = Solve(p, o);
  for (int i = 0; i < p.num_layers(); ++i) {
    const bool listed = i == 1 || i == 5 || i == 9;  // blocks 0, 4, 8 are chain layers 1, 5, 9
    EXPECT_EQ(plan.decisions[i], listed ? D::kCheckpoint : D::kKeep) << i;
  }
  EXPECT_EQ(plan.predicted.recompute_ops, 3);
  o.checkpoint_layers = {9};
  Result<PlanSet> bad = MakePlan(p, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("out of range"), std::string::npos);
  o.checkpoint_layers = {1, 1};
  EXPECT_FALSE(MakePlan(p, o).ok());
}

TEST(Strategies, SelectiveRecomputesAttentionCores) {
  const Profile p = testing::TransformerChain(4);
  const Plan all = Solve(p, With(Strategy::kSelective));
  int selective = 0;
  for (D d : all.decisions) selective += d == D::kSelective;
  EXPECT_EQ(selective, 4);
  EXPECT_GT(all.predicted.recompute_ms, 0);
  EXPECT_EQ(all.predicted.recompute_ops, 0);
  // With a budget between "all selective" and "none", it picks just enough blocks.
  const Plan none = Solve(p, With(Strategy::kNone));
  const int64_t budget = (all.predicted.peak_bytes + none.predicted.peak_bytes) / 2;
  const Plan fit = Solve(p, With(Strategy::kSelective, budget));
  EXPECT_TRUE(fit.fits);
  EXPECT_LE(fit.predicted.peak_bytes, budget);
  EXPECT_LT(fit.predicted.recompute_ms, all.predicted.recompute_ms);
}

TEST(Strategies, BudgetPicksTheFastestFittingParameter) {
  const Profile p = testing::TransformerChain(16, 3);
  const Plan none = Solve(p, With(Strategy::kNone));
  const Plan k1 = Solve(p, [&] {
    PlanOptions o = With(Strategy::kUniform);
    o.every = 1;
    return o;
  }());
  const int64_t budget = (k1.predicted.peak_bytes + none.predicted.peak_bytes) / 2;
  for (Strategy s : {Strategy::kUniform, Strategy::kSegment}) {
    const Plan plan = Solve(p, With(s, budget));
    EXPECT_TRUE(plan.fits) << ToString(s);
    EXPECT_LE(plan.predicted.peak_bytes, budget);
  }
}

TEST(Strategies, NothingFitsReturnsTheLowestPeakAndSaysSo) {
  const Profile p = testing::TransformerChain(8);
  const Plan plan = Solve(p, With(Strategy::kAuto, 1000));
  EXPECT_FALSE(plan.fits);
  EXPECT_GT(plan.predicted.peak_bytes, 1000);
}

// Invariants over many generated transformer-shaped chains and budgets.
TEST(StrategyInvariants, OverGeneratedChains) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const int n = 2 + static_cast<int>(seed % 14);
    const Profile p = testing::TransformerChain(n, seed);
    const Plan none = Solve(p, With(Strategy::kNone));
    PlanOptions every1 = With(Strategy::kUniform);
    every1.every = 1;
    const Plan k1 = Solve(p, every1);
    // none has the highest activation peak of all plans; checkpointing every
    // block individually the lowest among per-layer plans (each block kept,
    // checkpointed on its own, or selective). Multi-block segments are a
    // different family: they store fewer inputs and can go lower still.
    std::vector<Plan> per_layer, segments;
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 6; ++trial) {
      PlanOptions o = With(Strategy::kManual);
      for (int b = 0; b < n; ++b) {
        if (rng() % 2) o.checkpoint_layers.push_back(b);
      }
      per_layer.push_back(Solve(p, o));
    }
    per_layer.push_back(Solve(p, With(Strategy::kSelective)));
    for (int k = 1; k <= n; ++k) {
      PlanOptions o = With(Strategy::kUniform);
      o.every = k;
      segments.push_back(Solve(p, o));
      o = With(Strategy::kSegment);
      o.segments = k;
      segments.push_back(Solve(p, o));
    }
    for (const Plan& q : per_layer) {
      EXPECT_GE(q.predicted.activation_peak_bytes, k1.predicted.activation_peak_bytes)
          << "seed " << seed << " " << ToString(q.strategy) << " " << q.parameter;
    }
    per_layer.insert(per_layer.end(), segments.begin(), segments.end());
    for (const Plan& q : per_layer) {
      EXPECT_LE(q.predicted.activation_peak_bytes, none.predicted.activation_peak_bytes)
          << "seed " << seed << " " << ToString(q.strategy) << " " << q.parameter;
    }
    // Budgets from below the lowest peak to above none's.
    const int64_t lo = k1.predicted.peak_bytes, hi = none.predicted.peak_bytes;
    for (int step = 0; step <= 8; ++step) {
      const int64_t budget = lo - (hi - lo) / 8 + step * (hi - lo) / 7;
      Result<PlanSet> set = MakePlan(p, With(Strategy::kAuto, budget));
      ASSERT_TRUE(set.ok());
      for (const Plan& c : set->candidates) {
        // A plan reported as fitting simulates at or under the budget.
        if (c.fits) {
          Result<SimulationResult> again = Simulate(p, c.schedule);
          ASSERT_TRUE(again.ok());
          EXPECT_LE(again->peak_bytes, budget) << ToString(c.strategy);
          EXPECT_EQ(again->peak_bytes, c.predicted.peak_bytes);
        }
        // auto is never costlier than another strategy that fits.
        if (c.fits) {
          EXPECT_TRUE(set->chosen.fits);
          EXPECT_LE(set->chosen.predicted.step_ms, c.predicted.step_ms + 1e-9)
              << "seed " << seed << " auto chose " << ToString(set->chosen.strategy) << " over "
              << ToString(c.strategy);
        }
      }
    }
  }
}

TEST(Strategies, NamesRoundTrip) {
  for (Strategy s :
       {Strategy::kAuto, Strategy::kNone, Strategy::kUniform, Strategy::kSegment,
        Strategy::kSelective, Strategy::kManual, Strategy::kOptimal, Strategy::kOptimalSingle}) {
    EXPECT_EQ(*ParseStrategy(ToString(s)), s);
  }
  Result<Strategy> bad = ParseStrategy("greedy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("uniform"), std::string::npos);
}

// Every task on a thread of its own, all at once.
void OnThreads(const std::vector<std::function<void()>>& tasks) {
  std::vector<std::thread> threads;
  for (const std::function<void()>& t : tasks) threads.emplace_back(t);
  for (std::thread& t : threads) t.join();
}

TEST(MakePlanTasks, StrategiesSearchedAtOnceGiveTheSamePlansAsOneSearch) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    Profile p = testing::TransformerChain(10, seed);
    p.host_link = HostLink{"test", 1e-3, 0, true};  // offload applies
    const int64_t none_peak = Solve(p, With(Strategy::kNone)).predicted.peak_bytes;
    const int64_t least = Solve(p, With(Strategy::kOptimal, 1)).predicted.peak_bytes;
    // No budget, budgets nothing fits, between the least and none's peak,
    // and above it.
    for (int64_t budget : {int64_t{0}, least / 2, least, (least + none_peak) / 2,
                           none_peak - 1, none_peak + 1}) {
      for (Strategy s : {Strategy::kAuto, Strategy::kOptimal, Strategy::kOffload}) {
        const std::string where = "seed " + std::to_string(seed) + " budget " +
                                  std::to_string(budget) + " " + ToString(s);
        Result<PlanSet> one = MakePlan(p, With(s, budget));
        Result<PlanSet> at_once = MakePlan(p, With(s, budget), OnThreads);
        ASSERT_TRUE(one.ok()) << where << ": " << one.status().message();
        ASSERT_TRUE(at_once.ok()) << where << ": " << at_once.status().message();
        SCOPED_TRACE(where);
        testing::ExpectSamePlan(at_once->chosen, one->chosen);
        testing::ExpectSamePlan(at_once->baseline, one->baseline);
        ASSERT_EQ(at_once->candidates.size(), one->candidates.size());
        for (size_t i = 0; i < one->candidates.size(); ++i) {
          SCOPED_TRACE("candidate " + std::to_string(i));
          testing::ExpectSamePlan(at_once->candidates[i], one->candidates[i]);
        }
        EXPECT_EQ(at_once->auto_selected, one->auto_selected) << where;
      }
    }
  }
}

TEST(MakePlanTasks, AnErrorIsTheOneOneSearchGives) {
  const Profile p = testing::TransformerChain(4);  // no host link
  Result<PlanSet> one = MakePlan(p, With(Strategy::kOffload, 1 << 20));
  Result<PlanSet> at_once = MakePlan(p, With(Strategy::kOffload, 1 << 20), OnThreads);
  ASSERT_FALSE(one.ok());
  ASSERT_FALSE(at_once.ok());
  EXPECT_EQ(at_once.status().message(), one.status().message());
}

TEST(MakePlanMemo, AProfileIsCheckedAsWithoutAMemo) {
  // Under a memo open for the profile, a sweep planning it many times: a
  // bad profile fails with ValidateProfile's message every time, a good
  // one plans as without the memo.
  Profile bad = testing::TransformerChain(4);
  bad.grad_accumulation = 0;
  const Result<PlanSet> alone = MakePlan(bad, With(Strategy::kUniform));
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("'grad_accumulation'"), std::string::npos)
      << alone.status().message();
  {
    const PlanMemo memo(bad);
    for (Strategy s : {Strategy::kUniform, Strategy::kAuto, Strategy::kUniform}) {
      const Result<PlanSet> again = MakePlan(bad, With(s));
      ASSERT_FALSE(again.ok()) << ToString(s);
      EXPECT_EQ(again.status().message(), alone.status().message()) << ToString(s);
    }
  }
  const Profile good = testing::TransformerChain(4);
  const Plan plain = Solve(good, With(Strategy::kAuto, 1 << 20));
  const PlanMemo memo(good);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    testing::ExpectSamePlan(Solve(good, With(Strategy::kAuto, 1 << 20)), plain);
  }
}

}  // namespace
}  // namespace remat
