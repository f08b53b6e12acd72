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

// The loss is fp16 (the model's logits are), and the scaler's first scale,
// torch.amp.GradScaler's 65536, is above fp16's largest finite value
// (65504): the first update's gradients are inf. GradScaler's answer: that
// update is skipped (weights, master weights and schedule unchanged,
// gradients zeroed) and the scale halves; at 32768 the next update
// applies. (Megatron starts its fp16 scale at 2^32 and skips its way down
// the same way.)
TEST(MixedFp16, AnOverflowingUpdateIsSkippedAndTheScaleHalves) {
  const ModelConfig c = MixedFp16();
  GptModel model(c, at::Device(at::kCPU), 11);
  ModelOptimizer optimizer(c.optimizer, model.parameters(), SettingsFor(c, 2));
  EXPECT_EQ(optimizer.loss_scale(), 65536.0);
  ASSERT_EQ(optimizer.master_weights().size(), model.parameters().size());
  std::vector<at::Tensor> weights, masters;
  for (const at::Tensor& p : model.parameters()) {
    EXPECT_EQ(p.scalar_type(), at::kHalf);
    weights.push_back(p.detach().clone());
  }
  for (const at::Tensor& w : optimizer.master_weights()) masters.push_back(w.clone());
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kSegment);
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), 11);

  ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, 0), 0, 0, 1).ok());
  EXPECT_TRUE(optimizer.last_skipped());
  EXPECT_EQ(optimizer.updates(), 0);
  EXPECT_EQ(optimizer.loss_scale(), 32768.0);
  for (size_t i = 0; i < weights.size(); ++i) {
    EXPECT_TRUE(at::equal(model.parameters()[i], weights[i])) << i;
    EXPECT_TRUE(at::equal(optimizer.master_weights()[i], masters[i])) << i;
    // Zero: mixed_* keep persistent gradient buffers, set to None by the
    // step and allocated again, zeroed, for the next update.
    const at::Tensor& g = model.parameters()[i].grad();
    EXPECT_TRUE(!g.defined() || g.count_nonzero().item<int64_t>() == 0) << i;
  }

  ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, 1), 1, 0, 1).ok());
  EXPECT_FALSE(optimizer.last_skipped());
  EXPECT_EQ(optimizer.updates(), 1);
  EXPECT_EQ(optimizer.loss_scale(), 32768.0);
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
