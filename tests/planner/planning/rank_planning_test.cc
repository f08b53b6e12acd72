// A distributed job planned rank by rank: the plan fits when every rank's
// does, and the report describes the worst.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planning/job_plans.h"
#include "remat/planning/planning.h"
#include "remat/strategies/strategies.h"
#include "testing/same_plan.h"
#include "testing/small_gpt_job.h"

namespace remat {
namespace {

Job SmallJob(const Parallelism& p) { return testing::SmallGptJob(p); }

Parallelism Pipeline(int64_t stages) {
  Parallelism p;
  p.gpus = stages;
  p.pipeline = stages;
  return p;
}

TEST(RankPlanning, EveryStageIsPlannedAndTheWorstIsReported) {
  const Job job = SmallJob(Pipeline(2));
  ASSERT_EQ(job.ranks.size(), 2u);
  PlanningRequest request;
  request.options.budget_bytes = 1LL << 40;
  Result<PlanningResult> r = RunPlanner(job, request);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->ranks.size(), 2u);
  const int64_t a = r->ranks[0].plans.chosen.memory.total_bytes;
  const int64_t b = r->ranks[1].plans.chosen.memory.total_bytes;
  EXPECT_EQ(r->plans.chosen.memory.total_bytes, std::max(a, b));
  EXPECT_EQ(&r->profile_of(job), &r->ranks[r->worst_rank].memory.profile);
  // Stage 0 runs the embedding, stage 1 the head and the loss.
  EXPECT_EQ(r->ranks[0].memory.profile.layers.front().name, "embedding");
  EXPECT_EQ(r->ranks[1].memory.profile.layers.back().name, "loss");
}

TEST(RankPlanning, FitsOnlyWhenEveryRankFits) {
  const Job job = SmallJob(Pipeline(2));
  PlanOptions none;
  none.strategy = Strategy::kNone;
  Result<std::vector<RankPlan>> ranks = PlanRanks(job, none);
  ASSERT_TRUE(ranks.ok());
  const int64_t a = (*ranks)[0].plans.chosen.memory.total_bytes;
  const int64_t b = (*ranks)[1].plans.chosen.memory.total_bytes;
  ASSERT_NE(a, b);
  // A budget between the two: the smaller rank fits, the plan does not.
  none.budget_bytes = (a + b) / 2;
  ranks = PlanRanks(job, none);
  ASSERT_TRUE(ranks.ok());
  EXPECT_NE((*ranks)[0].plans.chosen.fits, (*ranks)[1].plans.chosen.fits);
  EXPECT_FALSE(WorstRankPlans(*ranks).chosen.fits);
  EXPECT_EQ(WorstRankPlans(*ranks).chosen.memory.total_bytes, std::max(a, b));
}

TEST(RankPlanning, GlobalBatchIsSharedByTheDataRanks) {
  Parallelism p;
  p.gpus = 4;
  p.data = DataParallel::kDdp;
  const Job job = SmallJob(p);
  PlanOptions options;
  options.budget_bytes = 1LL << 40;
  Result<BatchSearch> s = SearchBatch(job, 32, options);
  ASSERT_TRUE(s.ok()) << s.status().message();
  for (const BatchCandidate& c : s->weighed) EXPECT_EQ(c.micro_batch * c.grad_accumulation, 8);
  EXPECT_FALSE(SearchBatch(job, 30, options).ok());
}

TEST(RankPlanning, ShardingShrinksTheRanksModelState) {
  Parallelism ddp;
  ddp.gpus = 4;
  ddp.data = DataParallel::kDdp;
  Parallelism fsdp = ddp;
  fsdp.data = DataParallel::kFsdp2;
  EXPECT_LT(SmallJob(fsdp).profile.model_state_bytes(), SmallJob(ddp).profile.model_state_bytes());
  // One GPU: no ranks, the profile as it was.
  Result<PlannerInput> in = ParsePlannerInput(testing::kSmallGpt, "small.json");
  ASSERT_TRUE(in.ok());
  Result<Job> single = MakeJob(*in, {});
  ASSERT_TRUE(single.ok());
  EXPECT_TRUE(single->ranks.empty());
}

TEST(RankPlanning, Fsdp2GathersThePlansLargestSegmentAsOneUnit) {
  // With --fsdp-units segment a recompute segment of 2 blocks is one
  // fully_shard unit: the rank is planned again with 2 blocks' weights
  // gathered and reduced together.
  Parallelism p;
  p.gpus = 2;
  p.data = DataParallel::kFsdp2;
  p.fsdp_units = FsdpUnits::kSegment;
  const Job job = SmallJob(p);
  ASSERT_EQ(job.ranks.size(), 1u);
  ASSERT_EQ(job.ranks[0].state.gather_blocks, 1);
  PlanOptions uniform;
  uniform.strategy = Strategy::kUniform;
  uniform.budget_bytes = 1LL << 40;
  uniform.every = 1;
  Result<std::vector<RankPlan>> one = PlanRanks(job, uniform);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ((*one)[0].memory.state.gather_blocks, 1);
  uniform.every = 2;
  Result<std::vector<RankPlan>> two = PlanRanks(job, uniform);
  ASSERT_TRUE(two.ok()) << two.status().message();
  const RankModelState& s1 = (*one)[0].memory.state;
  const RankModelState& s2 = (*two)[0].memory.state;
  EXPECT_EQ(s2.gather_blocks, 2);
  const int64_t block = s1.fsdp_prefetch_bytes;
  ASSERT_GT(block, 0);
  EXPECT_EQ(s2.fsdp_prefetch_bytes, 2 * block);
  EXPECT_EQ(s2.unsharded_bytes, s1.unsharded_bytes + block);
  EXPECT_EQ(s2.reduce_scatter_bytes, 2 * s1.reduce_scatter_bytes);
  EXPECT_EQ(s2.fsdp_gradient_bytes, s1.fsdp_gradient_bytes);  // per block
  // By default each block is its own unit, whatever the segments.
  Parallelism blocks = p;
  blocks.fsdp_units = FsdpUnits::kBlock;
  Result<std::vector<RankPlan>> b = PlanRanks(SmallJob(blocks), uniform);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[0].memory.state.gather_blocks, 1);
  // DDP gathers nothing: the same memory whatever the segments.
  Parallelism ddp = p;
  ddp.data = DataParallel::kDdp;
  Result<std::vector<RankPlan>> d = PlanRanks(SmallJob(ddp), uniform);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[0].memory.state.gather_blocks, 1);
}

// Auto's table of a distributed job: each strategy's plan as the job
// planned with that strategy alone gives it, and the baseline none's, over
// 2 pipeline stages (ranks that differ) and FSDP2, at budgets where the
// ranks fit, where one rank fits and where none does.
TEST(RankPlanning, AutosTableIsEachStrategyPlannedAlone) {
  Parallelism fsdp;
  fsdp.gpus = 2;
  fsdp.data = DataParallel::kFsdp2;
  int compared = 0;
  for (const Parallelism& p : {Pipeline(2), fsdp}) {
    const Job job = SmallJob(p);
    for (int64_t budget : {int64_t{20'000'000}, int64_t{40'000'000}, int64_t{1} << 40}) {
      SCOPED_TRACE("pipeline " + std::to_string(p.pipeline) + ", budget " +
                   std::to_string(budget));
      PlanOptions options;
      options.budget_bytes = budget;
      Result<planning_internal::JobPlans> all = planning_internal::PlanJobStrategies(job, options);
      ASSERT_TRUE(all.ok()) << all.status().message();
      std::vector<Strategy> strategies;
      for (const Plan& c : all->plans.candidates) strategies.push_back(c.strategy);
      ASSERT_EQ(strategies.size(), all->ranks.front().plans.candidates.size());
      for (size_t i = 0; i < strategies.size(); ++i) {
        PlanOptions one = options;
        one.strategy = strategies[i];
        Result<planning_internal::JobPlans> alone =
            planning_internal::PlanJobStrategies(job, one);
        ASSERT_TRUE(alone.ok()) << alone.status().message();
        testing::ExpectSamePlan(all->plans.candidates[i], alone->plans.chosen);
        ++compared;
      }
      PlanOptions none = options;
      none.strategy = Strategy::kNone;
      Result<planning_internal::JobPlans> base = planning_internal::PlanJobStrategies(job, none);
      ASSERT_TRUE(base.ok()) << base.status().message();
      testing::ExpectSamePlan(all->plans.baseline, base->plans.chosen);
      // Auto's plan: the worst rank's, fitting when every rank's fits.
      testing::ExpectSamePlan(all->plans.chosen, WorstRankPlans(all->ranks).chosen);
    }
  }
  EXPECT_GT(compared, 20);
}

// WorstPlanOf is WorstRankPlans' chosen plan: the first rank that does not
// fit, else the first with the largest total, fitting when all fit.
TEST(RankPlanning, WorstPlanOfIsWorstRankPlansChoice) {
  struct Case {
    bool fits;
    int64_t total;
  };
  const std::vector<std::vector<Case>> cases = {
      {{true, 5}},
      {{true, 5}, {true, 7}, {true, 7}},
      {{true, 9}, {false, 3}, {false, 4}},
      {{false, 2}, {true, 9}, {false, 2}},
      {{true, 4}, {true, 4}}};
  for (const std::vector<Case>& c : cases) {
    std::vector<RankPlan> ranks;
    for (size_t i = 0; i < c.size(); ++i) {
      RankPlan r;
      r.plans.chosen.fits = c[i].fits;
      r.plans.chosen.memory.total_bytes = c[i].total;
      r.plans.chosen.parameter = "rank " + std::to_string(i);
      ranks.push_back(r);
    }
    std::vector<const Plan*> plans;
    for (const RankPlan& r : ranks) plans.push_back(&r.plans.chosen);
    const Plan want = WorstRankPlans(ranks).chosen;
    const Plan got = planning_internal::WorstPlanOf(plans);
    EXPECT_EQ(got.parameter, want.parameter);
    EXPECT_EQ(got.fits, want.fits);
    EXPECT_EQ(got.memory.total_bytes, want.memory.total_bytes);
    EXPECT_EQ(static_cast<int>(planning_internal::WorstPlanIndex(plans)), WorstRank(ranks));
  }
}

}  // namespace
}  // namespace remat
