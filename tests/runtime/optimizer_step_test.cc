// The runtime's optimizer step is torch.optim's (runtime/src/optimizer.h):
// AdamW's update and, on the CPU, its per-parameter temporaries, which the
// profiler measures and the analytic model derives
// (planner/src/analytic/optimizer_step.h); SGD's none. A job whose peak is
// the optimizer step trains at the simulated peak, from its measured
// profile and from the analytic model, to the byte.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "device.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "profiler.h"
#include "remat/runtime/torch_runtime.h"
#include "remat/simulate/simulator.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

Profile Measured(const ModelConfig& c) {
  MeasureOptions o;
  o.warmup = 0;
  o.repeats = 1;
  Result<Profile> p = MeasureProfile(c, o, Timing{}, CpuMeter());
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

Profile AnalyticOnCpu(const ModelConfig& c) {
  AnalyticOptions o;
  o.device = *LookupDevice("cpu");
  Result<Profile> p = AnalyticProfile(c, o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

TEST(OptimizerStep, AdamWIsTorchOptimsUpdate) {
  // One step from zero moments: m = (1 - b1) g, v = (1 - b2) g^2, so the
  // update is p (1 - lr wd) - lr g / (|g| + eps).
  const at::Tensor p = at::randn({1000}, at::kDouble).requires_grad_();
  const at::Tensor g = at::randn({1000}, at::kDouble);
  const at::Tensor before = p.detach().clone();
  p.mutable_grad() = g.clone();
  OptimizerSettings s;
  ModelOptimizer optimizer(Optimizer::kAdamW, {p}, s);
  optimizer.Step();
  const at::Tensor want = before * (1 - s.lr * s.weight_decay) - s.lr * g / (g.abs() + s.eps);
  EXPECT_LE((p.detach() - want).abs().max().item<double>(), 1e-12);
  EXPECT_FALSE(p.grad().defined());
}

TEST(OptimizerStep, TheProfilerMeasuresTheAnalyticTemporaries) {
  for (const auto& [name, c] : testing::TinyFamilies()) {
    SCOPED_TRACE(name);
    const Profile measured = Measured(c);
    EXPECT_GT(measured.optimizer_workspace_bytes, 0);
    EXPECT_EQ(measured.optimizer_workspace_bytes, AnalyticOnCpu(c).optimizer_workspace_bytes);
  }
}

TEST(OptimizerStep, SgdMakesNoneButTheMomentumsScalar) {
  for (Optimizer o : {Optimizer::kSgd, Optimizer::kSgdMomentum}) {
    ModelConfig c = testing::TinyGpt();
    c.optimizer = o;
    const int64_t measured = Measured(c).optimizer_workspace_bytes;
    EXPECT_EQ(measured, o == Optimizer::kSgd ? 0 : 12) << ToString(o);
    EXPECT_EQ(AnalyticOnCpu(c).optimizer_workspace_bytes, measured) << ToString(o);
  }
}

// A large vocabulary over a short batch: the step's two word-embedding-sized
// temporaries outweigh every activation.
ModelConfig StepBound() {
  ModelConfig c = testing::TinyGpt(2);
  c.vocab = 4096;
  c.tie_embeddings = false;  // no tied gradient sum in the embedding's backward
  c.micro_batch = 1;
  c.seq_len = 8;
  c.max_position = 8;
  c.dropout = 0;
  return c;
}

TEST(OptimizerStep, AStepWhosePeakIsTheOptimizerStepTrainsAtTheSimulatedPeak) {
  const ModelConfig c = StepBound();
  std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
  const Profile measured = Measured(c), analytic = AnalyticOnCpu(c);
  for (const Profile* profile : {&measured, &analytic}) {
    SCOPED_TRACE(profile->source);
    const Schedule schedule = testing::PlannerSchedule(*profile, Strategy::kNone);
    Result<SimulationResult> predicted = Simulate(*profile, schedule);
    ASSERT_TRUE(predicted.ok());
    EXPECT_EQ(schedule.ops[predicted->peak_op].kind, OpKind::kOptimizerStep);
    TrainOptions t;
    t.steps = 2;
    Result<TrainResult> r = runtime->Train(c, schedule, t);
    ASSERT_TRUE(r.ok()) << r.status().message();
    // Both to the byte: the step's peak is the model state, the batch and
    // the step's temporaries, which the analytic model derives.
    EXPECT_EQ(r->peak_bytes, predicted->peak_bytes);
  }
}

}  // namespace
}  // namespace remat::runtime
