#include "remat/simulate/accumulation.h"

#include <gtest/gtest.h>

#include "remat/analytic/analytic.h"
#include "remat/strategies/strategies.h"
#include "testing/chains.h"

namespace remat {
namespace {

Profile WithState(Profile p) {
  p.micro_batch = 2;
  p.seq_len = 100;
  p.static_memory = {1000, 1000, 2000};  // fp32 AdamW-like: weights, gradients, moments
  p.optimizer_ms = 9.0;
  return p;
}

SimulationResult NoCheckpointing(const Profile& p) {
  PlanOptions none;
  none.strategy = Strategy::kNone;
  Result<PlanSet> plans = MakePlan(p, none);
  EXPECT_TRUE(plans.ok()) << plans.status().message();
  return plans->chosen.predicted;
}

TEST(Accumulation, UpdateIsKMicroStepsKMinusOneSumsAndOneOptimizerStep) {
  Profile p = WithState(testing::UniformChain(4));  // 4 x (1 + 2) ms per micro-step
  p.accumulate_ms = 0.5;
  const SimulationResult sim = NoCheckpointing(p);
  const UpdatePrediction one = PredictUpdate(p, sim, 1);
  EXPECT_DOUBLE_EQ(one.micro_step_ms, 12.0);
  EXPECT_DOUBLE_EQ(one.optimizer_step_ms, 9.0);
  EXPECT_DOUBLE_EQ(one.update_ms, sim.step_ms);  // K = 1 is the simulated step
  const UpdatePrediction four = PredictUpdate(p, sim, 4);
  EXPECT_EQ(four.grad_accumulation, 4);
  EXPECT_DOUBLE_EQ(four.update_ms, 4 * 12.0 + 3 * 0.5 + 9.0);
  // 2 examples x 100 tokens x 4 micro-batches per 58.5 ms.
  EXPECT_NEAR(four.tokens_per_s, 800 / 0.0585, 1e-6);
}

TEST(Accumulation, SumTimeWithoutAMeasurementScalesTheOptimizerStepByBytes) {
  Profile p = WithState(testing::UniformChain(2));
  // The optimizer moves 2 x 1000 + 1000 + 2 x 2000 = 7000 bytes in 9 ms;
  // the sum moves 3 x 1000.
  EXPECT_DOUBLE_EQ(GradientAccumulateMs(p), 9.0 * 3000 / 7000);
  p.accumulate_ms = 0.25;
  EXPECT_DOUBLE_EQ(GradientAccumulateMs(p), 0.25);
  p.static_memory = {};
  p.accumulate_ms = -1;
  EXPECT_DOUBLE_EQ(GradientAccumulateMs(p), 0.0);
}

TEST(Accumulation, ProfileJsonCarriesTheSumTime) {
  Profile p = WithState(testing::UniformChain(2));
  p.accumulate_ms = 0.75;
  Result<Profile> back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_DOUBLE_EQ(back->accumulate_ms, 0.75);
  p.accumulate_ms = -1;  // absent stays absent
  back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->accumulate_ms, -1);
  EXPECT_FALSE(ParseProfile(R"({"static_bytes": 0, "accumulate_ms": -2, "layers": [)"
                            R"({"name": "a", "input_bytes": 1, "output_bytes": 1,)"
                            R"( "activation_bytes": 1}]})",
                            "p.json")
                   .ok());
}

ModelConfig SmallGpt(int64_t k) {
  ModelConfig c;
  c.name = "small";
  c.layers = 4;
  c.hidden = 128;
  c.heads = 4;
  c.vocab = 2048;
  c.seq_len = 128;
  c.max_position = 128;
  c.micro_batch = 4;
  c.grad_accumulation = k;
  c.ffn_hidden = 4 * c.hidden;
  return WithDefaults(c);
}

// Persistent gradient buffers live through every micro-batch whatever K is:
// the micro-step's memory does not change with K. Gradients created in
// backward exist from micro-batch 2 on: the update peaks higher with K > 1,
// by at most all of them. The analytic sum reads and writes them once per
// micro-batch at the device's bandwidth.
TEST(Accumulation, AnalyticMicroStepMemoryDependsOnKOnlyThroughTheGradients) {
  ModelConfig persistent1 = SmallGpt(1), persistent8 = SmallGpt(8);
  persistent1.gradients = persistent8.gradients = Gradients::kPersistent;
  Result<Profile> p1 = AnalyticProfile(persistent1, {}), p8 = AnalyticProfile(persistent8, {});
  ASSERT_TRUE(p1.ok() && p8.ok());
  EXPECT_EQ(NoCheckpointing(*p1).peak_bytes, NoCheckpointing(*p8).peak_bytes);
  Result<Profile> one = AnalyticProfile(SmallGpt(1), {});
  Result<Profile> eight = AnalyticProfile(SmallGpt(8), {});
  ASSERT_TRUE(one.ok() && eight.ok());
  EXPECT_EQ(one->static_bytes(), eight->static_bytes());
  EXPECT_GT(NoCheckpointing(*eight).peak_bytes, NoCheckpointing(*one).peak_bytes);
  EXPECT_LE(NoCheckpointing(*eight).peak_bytes,
            NoCheckpointing(*one).peak_bytes + one->total_gradient_bytes());
  Result<DeviceSpec> a100 = LookupDevice("a100");
  ASSERT_TRUE(a100.ok());
  const double bytes_per_ms = a100->bandwidth_gbps * 1e9 * a100->efficiency / 1e3;
  EXPECT_DOUBLE_EQ(one->accumulate_ms, 3.0 * one->total_gradient_bytes() / bytes_per_ms);
  EXPECT_GT(one->accumulate_ms, 0);
}

// Clipping by the global norm (max_grad_norm) reads the gradients and
// multiplies them in place once per update: 3 passes of the gradient bytes
// in the optimizer step, no gradient-sized transient. The learning-rate
// schedule costs nothing the planner can see.
TEST(Accumulation, ClippingAddsThreeGradientPassesToTheOptimizerStepAndNoMemory) {
  ModelConfig clipped = SmallGpt(4);
  clipped.max_grad_norm = 1.0;
  Result<Profile> off = AnalyticProfile(SmallGpt(4), {});
  Result<Profile> on = AnalyticProfile(clipped, {});
  ASSERT_TRUE(off.ok() && on.ok());
  // accumulate_ms is 3 passes of the gradient bytes at the same bandwidth.
  EXPECT_NEAR(on->optimizer_ms - off->optimizer_ms, off->accumulate_ms, 1e-12);
  EXPECT_GT(on->optimizer_ms, off->optimizer_ms);
  EXPECT_EQ(on->static_bytes(), off->static_bytes());
  for (size_t i = 0; i < on->layers.size(); ++i) {
    EXPECT_EQ(on->layers[i].forward_workspace_bytes, off->layers[i].forward_workspace_bytes);
  }
}

TEST(Accumulation, TheScheduleDoesNotMoveThePrediction) {
  ModelConfig scheduled = SmallGpt(4);
  scheduled.lr_schedule = LrSchedule::kCosine;
  scheduled.warmup_steps = 100;
  Result<Profile> constant = AnalyticProfile(SmallGpt(4), {});
  Result<Profile> cosine = AnalyticProfile(scheduled, {});
  ASSERT_TRUE(constant.ok() && cosine.ok());
  EXPECT_EQ(cosine->optimizer_ms, constant->optimizer_ms);
  EXPECT_EQ(cosine->static_bytes(), constant->static_bytes());
}

}  // namespace
}  // namespace remat
