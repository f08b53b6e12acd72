#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <vector>

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

TEST(CpuMeter, TimelineRecordsBytesAfterEveryEvent) {
  MemoryMeter& meter = CpuMeter();
  const int64_t before = meter.current_bytes();
  ASSERT_TRUE(StartCpuTimeline(16).ok());
  {
    at::Tensor a = at::empty({1000}, at::kFloat);
    at::Tensor b = at::empty({10}, at::kDouble);
  }  // b is freed first, then a
  const MeterTimeline t = StopCpuTimeline();
  EXPECT_EQ(t.events, 4);
  EXPECT_EQ(t.stride, 1);
  EXPECT_EQ(t.bytes, (std::vector<int64_t>{before + 4000, before + 4080, before + 4000, before}));
  { at::Tensor after = at::empty({10}, at::kFloat); }
  EXPECT_TRUE(StopCpuTimeline().bytes.empty()) << "nothing is recorded once stopped";
}

TEST(CpuMeter, LongTimelinesMergeByWindowMaxima) {
  const int64_t before = CpuMeter().current_bytes();
  ASSERT_TRUE(StartCpuTimeline(3).ok());
  for (int64_t n : {1, 5, 2, 7, 3}) at::empty({n}, at::kFloat);  // 10 events
  const MeterTimeline t = StopCpuTimeline();
  EXPECT_EQ(t.events, 10);
  // 10 events in at most 3 samples: stride 4 (windows 0-3, 4-7, 8-9).
  EXPECT_EQ(t.stride, 4);
  EXPECT_EQ(t.bytes, (std::vector<int64_t>{before + 20, before + 28, before + 12}));
}

TEST(CpuMeter, TimelineNeedsAtLeastOneSample) {
  EXPECT_FALSE(StartCpuTimeline(0).ok());
  EXPECT_TRUE(StopCpuTimeline().bytes.empty());
}

TEST(CpuMeter, ATrainingStepReturnsToItsBaseline) {
  const ModelConfig c = testing::TinyGpt();
  const Schedule schedule = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kUniform);
  MemoryMeter& meter = CpuMeter();
  GptModel model(c, at::Device(at::kCPU), 1);  // gradients created in backward, freed by the step
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
