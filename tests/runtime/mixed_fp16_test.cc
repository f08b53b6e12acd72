// mixed_fp16 in the runtime on CPU (LibTorch 2.11 has the fp16 kernels): fp16
// weights, fp32 master weights and moments, fp32 gradients, and the dynamic
// loss scaler. Beside MixedPrecision.* (mixed_bf16).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "device.h"
#include "gpt_model.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "remat/runtime/torch_runtime.h"
#include "remat/simulate/simulator.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

ModelConfig MixedFp16() {
  ModelConfig c = testing::TinyGpt();
  c.precision = Precision::kMixedFp16;
  return c;
}

// A segment plan from a measured profile: the measured peak is the
// simulated one, and the loss stays finite.
TEST(MixedFp16, MeasuredPeakOfASegmentPlanIsThePredictedPeak) {
  const ModelConfig c = MixedFp16();
  ASSERT_TRUE(DeviceRuns(c, at::Device(at::kCPU)).ok());
  std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
  MeasureOptions m;
  m.repeats = 1;
  Result<Profile> profile = runtime->Measure(c, m);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  const Schedule schedule = testing::PlannerSchedule(*profile, Strategy::kSegment);
  Result<SimulationResult> predicted = Simulate(*profile, schedule);
  ASSERT_TRUE(predicted.ok());
  TrainOptions t;
  t.steps = 3;
  Result<TrainResult> r = runtime->Train(c, schedule, t);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->peak_bytes, predicted->peak_bytes);
  for (const StepRecord& s : r->steps) EXPECT_TRUE(std::isfinite(s.loss));
}

// A first fp16 scale of 2^24 (Megatron starts at 2^32): the loss is fp32
// (the logits are upcast before it), but the logits' gradient, up to
// 2^24 / n = 2^19 here, is inf once cast back to fp16 (above 65504).
// torch.amp.GradScaler's answer: such an update is skipped (weights, master
// weights and schedule unchanged, gradients zeroed) and the scale halves,
// until an update's gradients are finite and it applies.
TEST(MixedFp16, AnOverflowingUpdateIsSkippedAndTheScaleHalves) {
  const ModelConfig c = MixedFp16();
  GptModel model(c, at::Device(at::kCPU), 11);
  OptimizerSettings settings = SettingsFor(c, 64);
  settings.initial_scale = std::ldexp(1.0, 24);
  ModelOptimizer optimizer(c.optimizer, model.parameters(), settings);
  ASSERT_EQ(optimizer.master_weights().size(), model.parameters().size());
  std::vector<at::Tensor> weights, masters;
  for (const at::Tensor& p : model.parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kHalf);
    weights.push_back(p.detach().clone());
  }
  for (const at::Tensor& w : optimizer.master_weights()) masters.push_back(w.clone());
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kSegment);
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), 11);

  int64_t step = 0;
  for (double scale = settings.initial_scale;; ++step) {
    ASSERT_LT(step, 32) << "no update applied down to a scale of " << scale;
    ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, step), step, 0, 1).ok());
    if (!optimizer.last_skipped()) {
      EXPECT_EQ(optimizer.loss_scale(), scale);
      break;
    }
    scale /= 2;
    EXPECT_EQ(optimizer.updates(), 0);
    EXPECT_EQ(optimizer.loss_scale(), scale);
    for (size_t i = 0; i < weights.size(); ++i) {
      EXPECT_TRUE(at::equal(model.parameters()[i], weights[i])) << i;
      EXPECT_TRUE(at::equal(optimizer.master_weights()[i], masters[i])) << i;
      // Zero: mixed_* keep persistent gradient buffers, set to None by the
      // step and allocated again, zeroed, for the next update.
      const at::Tensor& g = model.parameters()[i].grad();
      EXPECT_TRUE(!g.defined() || g.count_nonzero().item<int64_t>() == 0) << i;
    }
  }
  EXPECT_GE(step, 1);  // 2^24 overflows
  EXPECT_EQ(optimizer.updates(), 1);
  int moved = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const at::Tensor& master = optimizer.master_weights()[i];
    EXPECT_TRUE(at::equal(model.parameters()[i], master.to(at::kHalf))) << i;
    moved += at::equal(master, masters[i]) ? 0 : 1;
  }
  EXPECT_EQ(moved, static_cast<int>(weights.size()));  // lr 1e-3 moves every weight
}

}  // namespace
}  // namespace remat::runtime
