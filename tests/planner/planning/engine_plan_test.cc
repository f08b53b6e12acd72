// PlanForEngine: exact where an engine's shape plans to the same decisions;
// otherwise no plan of the engine's shapes is better than the one chosen
// (checked against every shape, planned one by one).
#include "remat/planning/engine_plan.h"

#include <gtest/gtest.h>

#include <vector>

#include "remat/planning/planning.h"
#include "remat/strategies/strategies.h"

namespace remat {
namespace {

// 4 GPT blocks, hidden 128: small enough to plan every shape in a test.
Job SmallJob() {
  Result<Job> job = LoadJob(REMAT_SOURCE_DIR "/bench/fidelity/models/cpu-s.json", {});
  EXPECT_TRUE(job.ok()) << job.status().message();
  return *job;
}

Plan PlanWith(const Job& job, PlanOptions o) {
  Result<PlanSet> plans = MakePlan(job.profile, o);
  EXPECT_TRUE(plans.ok()) << plans.status().message();
  return plans->chosen;
}

PlanOptions Uniform(int64_t budget, int every) {
  PlanOptions o;
  o.budget_bytes = budget;
  o.strategy = Strategy::kUniform;
  o.every = every;
  return o;
}

PlanOptions Manual(int64_t budget, std::vector<int> layers) {
  PlanOptions o;
  o.budget_bytes = budget;
  o.strategy = Strategy::kManual;
  o.checkpoint_layers = std::move(layers);
  return o;
}

TEST(EnginePlan, ParsesTheNamesItPrints) {
  for (Engine e : {Engine::kPytorch, Engine::kHf, Engine::kDeepspeed, Engine::kMegatron,
                   Engine::kTorchtitan}) {
    Result<Engine> back = ParseEngine(ToString(e));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, e);
  }
  Result<Engine> bad = ParseEngine("colossal");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("pytorch, hf, deepspeed, megatron, torchtitan"),
            std::string::npos);
}

TEST(EnginePlan, ExactWhereTheEngineHasTheShape) {
  const Job job = SmallJob();
  const PlanOptions none_budget;
  struct Case {
    Engine engine;
    PlanOptions options;
    EngineShape shape;
    int n;
  };
  const std::vector<Case> cases = {
      {Engine::kHf, Uniform(0, 1), EngineShape::kChunks, 1},
      {Engine::kDeepspeed, Uniform(0, 3), EngineShape::kChunks, 3},
      {Engine::kMegatron, Uniform(0, 2), EngineShape::kChunks, 2},
      {Engine::kMegatron, Manual(0, {0, 1}), EngineShape::kFirstBlocks, 2},
      {Engine::kTorchtitan, Manual(0, {1, 3}), EngineShape::kEveryNth, 2},
      {Engine::kTorchtitan, Uniform(0, 1), EngineShape::kChunks, 1},
  };
  for (const Case& c : cases) {
    const Plan asked = PlanWith(job, c.options);
    Result<EnginePlan> e = PlanForEngine(job, none_budget, asked, c.engine);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_TRUE(e->exact) << ToString(c.engine) << " " << asked.parameter;
    EXPECT_EQ(e->shape, c.shape) << ToString(c.engine) << " " << asked.parameter;
    EXPECT_EQ(e->n, c.n) << ToString(c.engine) << " " << asked.parameter;
    EXPECT_EQ(e->plan.decisions, asked.decisions);
  }
}

TEST(EnginePlan, PyTorchRunsAnyPlan) {
  const Job job = SmallJob();
  const Plan asked = PlanWith(job, Manual(0, {0, 2}));
  Result<EnginePlan> e = PlanForEngine(job, PlanOptions{}, asked, Engine::kPytorch);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->exact);
  EXPECT_EQ(e->shape, EngineShape::kAsPlanned);
}

// Under budgets from below the lowest peak to above the no-checkpointing
// one: an inexact export is no worse (BetterPlan) than any plan of the
// engine's shapes, each planned here on its own.
TEST(EnginePlan, ClosestIsTheBestOfTheEnginesShapes) {
  const Job job = SmallJob();
  PlanOptions none;
  none.strategy = Strategy::kNone;
  const int64_t top = PlanWith(job, none).memory.total_bytes;
  const Plan asked_shape = PlanWith(job, Manual(0, {0, 2}));  // 0 and 2: no engine but pytorch
  for (int step = 0; step <= 8; ++step) {
    const int64_t budget = top * (6 + step) / 12;
    PlanOptions options;
    options.budget_bytes = budget;
    const Plan asked = PlanWith(job, Manual(budget, {0, 2}));
    ASSERT_EQ(asked.decisions, asked_shape.decisions);
    struct Shapes {
      Engine engine;
      std::vector<PlanOptions> all;
    };
    PlanOptions none_at = none;
    none_at.budget_bytes = budget;
    std::vector<PlanOptions> chunks = {none_at};
    for (int k = 1; k <= 4; ++k) chunks.push_back(Uniform(budget, k));
    const std::vector<Shapes> engines = {
        {Engine::kHf, {none_at, Uniform(budget, 1)}},
        {Engine::kDeepspeed, chunks},
        {Engine::kTorchtitan,
         {none_at, Uniform(budget, 1), Manual(budget, {1, 3}), Manual(budget, {2}),
          Manual(budget, {3})}},
    };
    for (const Shapes& s : engines) {
      Result<EnginePlan> e = PlanForEngine(job, options, asked, s.engine);
      ASSERT_TRUE(e.ok()) << e.status().message();
      EXPECT_FALSE(e->exact) << ToString(s.engine);
      EXPECT_NE(e->plan.decisions, asked.decisions) << ToString(s.engine);
      for (const PlanOptions& o : s.all) {
        const Plan other = PlanWith(job, o);
        EXPECT_FALSE(BetterPlan(other, e->plan))
            << ToString(s.engine) << " at " << budget << ": " << other.parameter << " beats "
            << e->plan.parameter;
      }
    }
  }
}

}  // namespace
}  // namespace remat
