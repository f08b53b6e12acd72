// Mixed precision in the runtime (mixed_bf16; the Megatron / DeepSpeed
// convention the planner models): 16-bit weights, fp32 master weights and
// moments in the optimizer, gradients in fp32 (the default, Megatron's
// main_grad) or in 16 bits (grad_dtype, DeepSpeed), and the measured peak
// from a measured profile is the simulated one.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "gpt_model.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "remat/analytic/analytic.h"
#include "remat/runtime/torch_runtime.h"
#include "remat/simulate/simulator.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

ModelConfig Mixed(GradDtype grad_dtype) {
  ModelConfig c = testing::TinyGpt();
  c.precision = Precision::kMixedBf16;
  c.grad_dtype = grad_dtype;
  return c;
}

// Micro-batch 1 of 2: the gradients exist, no update yet.
TEST(MixedPrecision, GradientsAreFp32ByDefaultAnd16BitWithGradDtype) {
  for (GradDtype g : {GradDtype::kDefault, GradDtype::kBf16}) {
    const ModelConfig c = Mixed(g);
    GptModel model(c, at::Device(at::kCPU), 11);
    ModelOptimizer optimizer(c.optimizer, model.parameters(), SettingsFor(c, 1));
    const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kSegment);
    ScheduleExecutor executor(model, &optimizer, CpuMeter(), 11);
    ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, 0), 0, 0, 2).ok());
    const at::ScalarType want = g == GradDtype::kDefault ? at::kFloat : at::kBFloat16;
    for (const at::Tensor& p : model.parameters()) {
      EXPECT_EQ(p.scalar_type(), at::kBFloat16);
      ASSERT_TRUE(p.grad().defined());
      EXPECT_EQ(p.grad().scalar_type(), want) << ToString(g);
    }
  }
}

// After an update the 16-bit weights are their fp32 master weights rounded;
// the masters moved by the update, and the moments are fp32.
TEST(MixedPrecision, TheWeightsAreTheMasterWeightsRoundedAfterAnUpdate) {
  const ModelConfig c = Mixed(GradDtype::kDefault);
  GptModel model(c, at::Device(at::kCPU), 11);
  ModelOptimizer optimizer(c.optimizer, model.parameters(), SettingsFor(c, 1));
  ASSERT_EQ(optimizer.master_weights().size(), model.parameters().size());
  std::vector<at::Tensor> before;
  for (const at::Tensor& m : optimizer.master_weights()) {
    EXPECT_EQ(m.scalar_type(), at::kFloat);
    before.push_back(m.clone());
  }
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kNone);
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), 11);
  ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, 0), 0, 0, 1).ok());
  for (size_t i = 0; i < model.parameters().size(); ++i) {
    const at::Tensor& m = optimizer.master_weights()[i];
    EXPECT_TRUE(at::equal(model.parameters()[i], m.to(at::kBFloat16))) << i;
    EXPECT_FALSE(at::equal(m, before[i])) << i;  // lr 1e-3 moves every weight
  }
}

// From a measured profile, every plan's measured peak is the simulated one;
// the model state is 2 + 4 + 4 + 4 bytes per parameter plus the gradients
// (4 or 2), as the analytic model counts it.
TEST(MixedPrecision, MeasuredPeakIsThePredictedPeakFromAMeasuredProfile) {
  for (GradDtype g : {GradDtype::kDefault, GradDtype::kBf16}) {
    const ModelConfig c = Mixed(g);
    std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
    MeasureOptions m;
    m.repeats = 1;
    Result<Profile> profile = runtime->Measure(c, m);
    ASSERT_TRUE(profile.ok()) << profile.status().message();
    const Profile analytic = testing::AnalyticOf(c);
    // Weights, master weights and moments (the causal mask buffer aside).
    EXPECT_EQ(profile->static_memory.optimizer_bytes, analytic.static_memory.optimizer_bytes);
    EXPECT_EQ(profile->total_gradient_bytes(), analytic.total_gradient_bytes()) << ToString(g);
    for (Strategy strategy : {Strategy::kNone, Strategy::kSegment, Strategy::kSelective}) {
      const Schedule schedule = testing::PlannerSchedule(*profile, strategy);
      Result<SimulationResult> predicted = Simulate(*profile, schedule);
      ASSERT_TRUE(predicted.ok());
      TrainOptions t;
      t.steps = 2;
      Result<TrainResult> r = runtime->Train(c, schedule, t);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->peak_bytes, predicted->peak_bytes) << ToString(g) << " " << ToString(strategy);
      EXPECT_TRUE(std::isfinite(r->steps.back().loss));
    }
  }
}

}  // namespace
}  // namespace remat::runtime
