#include "schedule_executor.h"

#include <gtest/gtest.h>

#include "cpu_step.h"
#include "gpt_model.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "profiler.h"
#include "remat/simulate/simulator.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

class Executor : public ::testing::Test {
 protected:
  Executor() : model_(testing::TinyGpt(), at::Device(at::kCPU), 3) { model_.AllocateGradients(); }
  GptModel model_;
};

TEST_F(Executor, RefusesASelectiveOpOutsideABlock) {
  Schedule s;
  s.num_layers = model_.num_layers();
  s.ops = {Op::Forward(0, SaveMode::kSelective, 0)};
  const Status st = ScheduleExecutor::Check(s, model_);
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("layer 'embedding'"), std::string::npos) << st.message();
}

TEST_F(Executor, RefusesAScheduleForAnotherChain) {
  Schedule s;
  s.num_layers = 5;
  EXPECT_NE(ScheduleExecutor::Check(s, model_).message().find("5-layer chain, the model has 8"),
            std::string::npos);
}

TEST_F(Executor, NamesTheOpThatNeedsATensorThatIsNotLive) {
  Schedule s;
  s.num_layers = model_.num_layers();
  s.ops = {Op::Forward(0, SaveMode::kAll), Op::Backward(1)};
  ScheduleExecutor executor(model_, nullptr, CpuMeter(), 3);
  const int64_t before = CpuMeter().current_bytes();
  Result<StepResult> r = executor.RunStep(s, model_.MakeBatch(3, 0), 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  EXPECT_EQ(r.status().message(),
            "step 1, schedule op 1 (backward 1, layer 'block0'): needs a1, which is not live");
  EXPECT_EQ(CpuMeter().current_bytes(), before);  // the failed step released its tensors
}

TEST_F(Executor, SamplesEveryOp) {
  const Schedule s =
      testing::PlannerSchedule(testing::AnalyticOf(model_.config()), Strategy::kSegment);
  ScheduleExecutor executor(model_, nullptr, CpuMeter(), 3);
  Result<StepResult> r = executor.RunStep(s, model_.MakeBatch(3, 0), 0);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->ops.size(), s.ops.size());
  for (size_t i = 0; i < r->ops.size(); ++i) {
    const OpSample& o = r->ops[i];
    EXPECT_EQ(o.op_index, static_cast<int>(i));
    EXPECT_GE(o.peak, std::max(o.live_before, o.live_after)) << i;
    if (i > 0) {
      EXPECT_EQ(o.live_before, r->ops[i - 1].live_after) << i;
    }
  }
  EXPECT_GT(r->recompute_ms, 0);
}

// PyTorch 2.x's convention (the default for fp32): no gradient exists before
// the backward; each layer's backward creates its own, and the optimizer
// step sets them to None.
TEST(ExecutorGradients, CreatedInBackwardAndFreedByTheStep) {
  GptModel model(testing::TinyGpt(), at::Device(at::kCPU), 3);
  ASSERT_FALSE(model.persistent_gradients());
  ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters());
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(model.config()), Strategy::kNone);
  for (const at::Tensor& p : model.parameters()) EXPECT_FALSE(p.grad().defined());
  // Without an optimizer the gradients stay after the step.
  ScheduleExecutor keep(model, nullptr, CpuMeter(), 3);
  ASSERT_TRUE(keep.RunStep(s, model.MakeBatch(3, 0), 0).ok());
  for (const at::Tensor& p : model.parameters()) EXPECT_TRUE(p.grad().defined());
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), 3);
  ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(3, 1), 1).ok());
  for (const at::Tensor& p : model.parameters()) EXPECT_FALSE(p.grad().defined());
}

// Persistent buffers (Megatron/DeepSpeed): allocated once, zero after a step.
TEST(ExecutorGradients, PersistentBuffersAreZeroedNotFreed) {
  ModelConfig c = testing::TinyGpt();
  c.gradients = Gradients::kPersistent;
  GptModel model(c, at::Device(at::kCPU), 3);
  ASSERT_TRUE(model.persistent_gradients());
  model.AllocateGradients();
  ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters());
  ScheduleExecutor executor(model, &optimizer, CpuMeter(), 3);
  const Schedule s = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kNone);
  ASSERT_TRUE(executor.RunStep(s, model.MakeBatch(3, 0), 0).ok());
  for (const at::Tensor& p : model.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().abs().sum().item<double>(), 0);
  }
}

// Op by op, the measured bytes are the simulated ones from a measured
// profile: the gradients appear in each layer's backward and leave at the
// step, the logits leave right after the loss's forward.
TEST(ExecutorGradients, MeasuredTimelineIsTheSimulatedOne) {
  const ModelConfig c = testing::TinyGpt();
  MeasureOptions m;
  m.warmup = 0;
  m.repeats = 1;
  Result<Profile> profile = MeasureProfile(c, m, Timing{}, CpuMeter());
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_FALSE(profile->layers.back().keeps_input);
  EXPECT_EQ(profile->static_memory.gradient_bytes, 0);
  EXPECT_GT(profile->layers[1].gradient_bytes, 0);
  EXPECT_EQ(profile->total_gradient_bytes(), 4 * profile->parameters);
  for (Strategy strategy : {Strategy::kNone, Strategy::kUniform}) {
    const Schedule s = testing::PlannerSchedule(*profile, strategy);
    Result<SimulationResult> sim = Simulate(*profile, s);
    ASSERT_TRUE(sim.ok());
    GptModel model(c, at::Device(at::kCPU), 3);
    ModelOptimizer optimizer(Optimizer::kAdamW, model.parameters());
    ScheduleExecutor executor(model, &optimizer, CpuMeter(), 3);
    Result<StepResult> r = executor.RunStep(s, model.MakeBatch(3, 0), 0);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->ops.size(), sim->timeline.size());
    const int64_t measured_base = r->ops[0].live_before,
                  simulated_base = sim->timeline[0].live_before;
    // The forwards (the logits leave within the loss's) and the end (the
    // gradients freed by the step) are exact.
    for (size_t k = 0; k < s.ops.size(); ++k) {
      const OpSample& o = r->ops[k];
      const TimelinePoint& t = sim->timeline[k];
      if (s.ops[k].kind != OpKind::kForward) continue;
      EXPECT_EQ(o.live_after - measured_base, t.live_after - simulated_base)
          << ToString(strategy) << " op " << k << " " << DescribeOp(s.ops[k]);
      EXPECT_EQ(o.peak - measured_base, t.peak - simulated_base)
          << ToString(strategy) << " op " << k << " " << DescribeOp(s.ops[k]);
    }
    // The step's peak, here in a backward that creates its layer's
    // gradients after autograd let go of part of what the layer saved: the
    // profile's negative workspace (backward_release_test.cc).
    const int64_t measured_peak = r->peak_bytes - measured_base;
    const int64_t simulated_peak = sim->peak_bytes - simulated_base;
    EXPECT_EQ(simulated_peak, measured_peak) << ToString(strategy);
    EXPECT_EQ(r->ops.back().live_after - measured_base,
              sim->timeline.back().live_after - simulated_base)
        << ToString(strategy);
  }
}

// A mean pooling head does not keep its input: run on the last block's
// graph, it lets the block's output go after its forward. After a
// checkpointed last block (forward without grad) there is no graph to run
// on, so the head keeps its input as a leaf until the schedule frees it; the
// simulator releases it only where the executor can. Op by op the measured
// forwards are the simulated ones from a measured profile, either way.
TEST(ExecutorKeepsInput, PoolingHeadReleasesItsInputOnlyAfterABlockWithGrad) {
  const ModelConfig c = testing::TinyBert(Head::kPooling);
  ASSERT_EQ(c.pooling, Pooling::kMean);
  MeasureOptions m;
  m.warmup = 0;
  m.repeats = 1;
  Result<Profile> profile = MeasureProfile(c, m, Timing{}, CpuMeter());
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  std::vector<int> heads;
  for (int i = 0; i < profile->num_layers(); ++i) {
    if (profile->layers[i].kind == kHeadKind) heads.push_back(i);
  }
  ASSERT_FALSE(heads.empty());
  for (int h : heads) EXPECT_FALSE(profile->layers[h].keeps_input) << h;
  for (const std::vector<int>& checkpoints :
       {std::vector<int>{}, std::vector<int>{static_cast<int>(c.layers) - 1}}) {
    const Schedule s = testing::PlannerSchedule(*profile, Strategy::kManual, checkpoints);
    // The head's producer runs without grad exactly when it is checkpointed.
    bool producer_without_grad = false;
    for (const Op& op : s.ops) {
      if (op.kind == OpKind::kForward && op.layer == heads.back() - 1) {
        producer_without_grad = op.save == SaveMode::kNone;
      }
    }
    EXPECT_EQ(producer_without_grad, !checkpoints.empty());
    testing::SimulatedAndRun both;
    ASSERT_TRUE(testing::SimulateAndRunOnCpu(c, *profile, s, &both));
    const SimulationResult* sim = &both.sim;
    const StepResult* r = &both.run;
    const int64_t measured_base = both.measured_base, simulated_base = both.simulated_base;
    for (size_t k = 0; k < s.ops.size(); ++k) {
      if (s.ops[k].kind != OpKind::kForward) continue;
      EXPECT_EQ(r->ops[k].live_after - measured_base, sim->timeline[k].live_after - simulated_base)
          << checkpoints.size() << " op " << k << " " << DescribeOp(s.ops[k]);
      EXPECT_EQ(r->ops[k].peak - measured_base, sim->timeline[k].peak - simulated_base)
          << checkpoints.size() << " op " << k << " " << DescribeOp(s.ops[k]);
    }
    EXPECT_EQ(r->peak_bytes - measured_base, sim->peak_bytes - simulated_base)
        << checkpoints.size();
  }
}

}  // namespace
}  // namespace remat::runtime
