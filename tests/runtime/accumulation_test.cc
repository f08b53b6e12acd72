// Gradient accumulation in the runtime: K micro-batches of b give the
// gradients of one batch of K*b (LayerNorm model, fp32, dropout 0), the
// optimizer steps once per update, and the measured peak of an update is the
// simulated micro-step's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "gpt_model.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "remat/runtime/torch_runtime.h"
#include "remat/simulator.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

constexpr int64_t kMicroBatches = 3;

ModelConfig NoDropout(int64_t micro_batch) {
  ModelConfig c = testing::TinyGpt();
  c.dropout = 0;
  c.micro_batch = micro_batch;
  return c;
}

std::vector<at::Tensor> Grads(const GptModel& model) {
  std::vector<at::Tensor> g;
  for (const at::Tensor& p : model.parameters()) g.push_back(p.grad().clone());
  return g;
}

// Largest |a - b| relative to the largest |b| of each tensor.
double RelativeError(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(b[i].abs().max().item<double>(), 1e-30);
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

// The K micro-batches, and the same sequences as one batch (dim 1: sequences).
struct Batches {
  std::vector<at::Tensor> micro;
  at::Tensor whole;
};

Batches MakeBatches(const GptModel& model) {
  Batches b;
  for (int64_t k = 0; k < kMicroBatches; ++k) b.micro.push_back(model.MakeBatch(5, k));
  b.whole = at::cat(b.micro, 1);
  return b;
}

// Runs the micro-batches with the executor; `scale_loss` false is a test
// double of a loop that forgets to divide the loss by K.
std::vector<at::Tensor> Accumulated(bool scale_loss) {
  const ModelConfig c = NoDropout(2);
  GptModel model(c, at::Device(at::kCPU), 11);
  model.AllocateGradients();
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kSegment);
  ScheduleExecutor executor(model, nullptr, CpuMeter(), 11);
  Batches batches = MakeBatches(model);
  for (int64_t k = 0; k < kMicroBatches; ++k) {
    Result<StepResult> r = scale_loss ? executor.RunStep(s, batches.micro[k], k, k, kMicroBatches)
                                      : executor.RunStep(s, batches.micro[k], k);
    EXPECT_TRUE(r.ok()) << r.status().message();
  }
  return Grads(model);
}

std::vector<at::Tensor> OneBigBatch() {
  const ModelConfig small = NoDropout(2);
  GptModel micro_model(small, at::Device(at::kCPU), 11);
  const Batches batches = MakeBatches(micro_model);
  const ModelConfig c = NoDropout(2 * kMicroBatches);
  GptModel model(c, at::Device(at::kCPU), 11);  // same seed: the same weights
  model.AllocateGradients();
  ScheduleExecutor executor(model, nullptr, CpuMeter(), 11);
  Result<StepResult> r = executor.RunStep(
      testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kNone), batches.whole, 0);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return Grads(model);
}

TEST(Accumulation, MicroBatchesGiveTheGradientsOfOneBatch) {
  const std::vector<at::Tensor> whole = OneBigBatch();
  EXPECT_LE(RelativeError(Accumulated(true), whole), 1e-5);
}

TEST(Accumulation, ALoopThatForgetsOneOverKIsCaught) {
  const std::vector<at::Tensor> whole = OneBigBatch();
  // K times too large: the error is K - 1 = 2.
  EXPECT_GT(RelativeError(Accumulated(false), whole), 1.0);
}

TEST(Accumulation, TheOptimizerStepsOncePerUpdateAndFreesTheGradients) {
  const ModelConfig c = NoDropout(2);
  GptModel model(c, at::Device(at::kCPU), 11);
  ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters());
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kNone);
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), 11);
  const at::Tensor before = model.parameters()[0].clone();
  ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, 0), 0, 0, 2).ok());
  EXPECT_TRUE(at::equal(model.parameters()[0], before));  // no update yet
  // Micro-batch 1 created the gradients; micro-batch 2 adds into them.
  EXPECT_GT(model.parameters()[0].grad().abs().sum().item<double>(), 0);
  ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(5, 1), 1, 1, 2).ok());
  EXPECT_FALSE(at::equal(model.parameters()[0], before));
  for (const at::Tensor& p : model.parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_EQ(executor.RunStep(s, model.MakeBatch(5, 2), 2, 2, 2).status().code(),
            StatusCode::kInvalidInput);
}

TEST(Accumulation, MeasuredPeakOfAnUpdateIsTheSimulatedMicroStep) {
  std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
  ModelConfig c = testing::TinyGpt();
  MeasureOptions m;
  m.repeats = 1;
  Result<Profile> profile = runtime->Measure(c, m);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  // Micro-batches 2..4 start with the gradients micro-batch 1 created.
  profile->grad_accumulation = 4;
  for (Strategy strategy : {Strategy::kNone, Strategy::kSegment}) {
    const Schedule schedule = testing::PlannerSchedule(*profile, strategy);
    Result<SimulationResult> predicted = Simulate(*profile, schedule);
    ASSERT_TRUE(predicted.ok());
    c.grad_accumulation = 4;
    TrainOptions t;
    t.steps = 2;
    Result<TrainResult> r = runtime->Train(c, schedule, t);
    ASSERT_TRUE(r.ok()) << r.status().message();
    // Within 3%: micro-batches 2..K add each weight gradient into the one
    // micro-batch 1 created (a transient the size of the weight), where the
    // measured backward workspace is micro-batch 1's, which creates them.
    EXPECT_NEAR(static_cast<double>(r->peak_bytes), static_cast<double>(predicted->peak_bytes),
                0.03 * static_cast<double>(predicted->peak_bytes))
        << ToString(strategy);
    EXPECT_EQ(r->steps.size(), 2u);
  }
}

}  // namespace
}  // namespace remat::runtime
