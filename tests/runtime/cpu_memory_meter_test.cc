#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "gpt_model.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

TEST(CpuMeter, KnownAllocationAddsExactlyItsBytes) {
  MemoryMeter& meter = CpuMeter();
  const int64_t before = meter.current_bytes();
  {
    at::Tensor t = at::empty({1000}, at::kFloat);
    EXPECT_EQ(meter.current_bytes() - before, 4000);
    at::Tensor u = at::empty({3, 7}, at::kDouble);
    EXPECT_EQ(meter.current_bytes() - before, 4000 + 168);
  }
  EXPECT_EQ(meter.current_bytes(), before);
}

TEST(CpuMeter, PeakIsTheHighestSinceReset) {
  MemoryMeter& meter = CpuMeter();
  const int64_t before = meter.current_bytes();
  meter.ResetPeak();
  { at::Tensor t = at::empty({250000}, at::kFloat); }
  EXPECT_EQ(meter.current_bytes(), before);
  EXPECT_EQ(meter.peak_bytes(), before + 1000000);
  meter.ResetPeak();
  EXPECT_EQ(meter.peak_bytes(), before);
}

TEST(CpuMeter, LimitRefusesLikeAnOutOfMemoryError) {
  MemoryMeter& meter = CpuMeter();
  const int64_t before = meter.current_bytes();
  ASSERT_TRUE(meter.SetLimit(before + 10000).ok());
  at::Tensor fits = at::empty({2000}, at::kFloat);  // 8,000 bytes
  EXPECT_THROW(at::empty({1000}, at::kFloat), c10::OutOfMemoryError);
  const std::optional<OomEvent> oom = meter.TakeOom();
  ASSERT_TRUE(oom.has_value());
  EXPECT_EQ(oom->requested_bytes, 4000);
  EXPECT_EQ(oom->in_use_bytes, before + 8000);
  EXPECT_EQ(oom->limit_bytes, before + 10000);
  EXPECT_FALSE(meter.TakeOom().has_value());
  ASSERT_TRUE(meter.SetLimit(0).ok());
  EXPECT_NO_THROW(at::empty({1000}, at::kFloat));
}

TEST(CpuMeter, ATrainingStepReturnsToItsBaseline) {
  const ModelConfig c = testing::TinyGpt();
  const Schedule schedule = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kUniform);
  MemoryMeter& meter = CpuMeter();
  GptModel model(c, at::Device(at::kCPU), 1);
  model.AllocateGradients();
  ModelOptimizer optimizer(c.optimizer, model.parameters());
  ScheduleExecutor executor(model, &optimizer, meter, 1);
  const int64_t state = meter.current_bytes();
  for (int step = 0; step < 2; ++step) {
    Result<StepResult> r = executor.RunStep(schedule, model.MakeBatch(1, step), step);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_GT(r->peak_bytes, state);
    EXPECT_EQ(meter.current_bytes(), state) << "step " << step;
  }
}

}  // namespace
}  // namespace remat::runtime
