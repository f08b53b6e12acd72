// Every strategy's schedule gives the gradients of running without
// checkpointing (fp32, dropout 0.1): recomputation redraws the same dropout
// masks and the block-wise backward composes to the whole model's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "gpt_model.h"
#include "memory_meter.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

struct StepGradients {
  double loss = 0;
  std::vector<at::Tensor> grads;
};

// One step of `schedule` on a fresh model (same seed each time), no update.
StepGradients RunOneStep(const ModelConfig& c, const Schedule& schedule) {
  GptModel model(c, at::Device(at::kCPU), 7);
  model.AllocateGradients();
  ScheduleExecutor executor(model, nullptr, CpuMeter(), 7);
  Result<StepResult> r = executor.RunStep(schedule, model.MakeBatch(7, 3), 3);
  EXPECT_TRUE(r.ok()) << r.status().message();
  StepGradients out;
  out.loss = r.ok() ? r->loss : 0;
  for (const at::Tensor& p : model.parameters()) out.grads.push_back(p.grad().clone());
  return out;
}

double MaxAbsDiff(const StepGradients& a, const StepGradients& b) {
  double worst = 0;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    worst = std::max(worst, (a.grads[i] - b.grads[i]).abs().max().item<double>());
  }
  return worst;
}

class Gradients : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TinyGpt();
    profile_ = testing::AnalyticOf(config_);
    reference_ = RunOneStep(config_, testing::PlannerSchedule(profile_, Strategy::kNone));
  }
  void ExpectSameAsNone(const Schedule& schedule) {
    ASSERT_TRUE(ValidateSchedule(schedule, profile_).ok());
    const StepGradients g = RunOneStep(config_, schedule);
    ASSERT_EQ(g.grads.size(), reference_.grads.size());
    EXPECT_EQ(g.loss, reference_.loss);
    EXPECT_LE(MaxAbsDiff(g, reference_), 1e-6);
  }

  ModelConfig config_;
  Profile profile_;
  StepGradients reference_;
};

TEST_F(Gradients, DropoutIsOnAndGradientsAreNotTrivial) {
  EXPECT_GT(config_.dropout, 0);
  EXPECT_GT(reference_.loss, 0);
  double total = 0;
  for (const at::Tensor& g : reference_.grads) total += g.abs().sum().item<double>();
  EXPECT_GT(total, 0);
}

TEST_F(Gradients, AnotherDropoutDrawChangesThem) {
  // The comparison below can fail: a different step seed gives other masks.
  GptModel model(config_, at::Device(at::kCPU), 7);
  model.AllocateGradients();
  ScheduleExecutor executor(model, nullptr, CpuMeter(), 8);
  ASSERT_TRUE(
      executor
          .RunStep(testing::PlannerSchedule(profile_, Strategy::kNone), model.MakeBatch(7, 3), 3)
          .ok());
  StepGradients other;
  for (const at::Tensor& p : model.parameters()) other.grads.push_back(p.grad().clone());
  EXPECT_GT(MaxAbsDiff(other, reference_), 1e-4);
}

TEST_F(Gradients, Uniform) {
  ExpectSameAsNone(testing::PlannerSchedule(profile_, Strategy::kUniform));
}

TEST_F(Gradients, Segment) {
  ExpectSameAsNone(testing::PlannerSchedule(profile_, Strategy::kSegment));
}

TEST_F(Gradients, Selective) {
  ExpectSameAsNone(testing::PlannerSchedule(profile_, Strategy::kSelective));
}

TEST_F(Gradients, Manual) {
  ExpectSameAsNone(testing::PlannerSchedule(profile_, Strategy::kManual, {0, 2, 3}));
}

// The optimal solver's lowest-peak schedule recomputes layers several times,
// at several levels. Skipped in a tree without the solver.
TEST_F(Gradients, OptimalLowestPeak) {
  if (FindSolver(Strategy::kOptimal) == nullptr) {
    GTEST_SKIP() << "this build has no optimal solver";
  }
  PlanOptions o;
  o.strategy = Strategy::kOptimal;
  o.budget_bytes = 1;  // nothing fits: the solver returns its lowest-peak plan
  Result<PlanSet> plans = MakePlan(profile_, o);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  EXPECT_GT(plans->chosen.predicted.recompute_ops, profile_.num_layers() - 4);
  ExpectSameAsNone(plans->chosen.schedule);
}

// Blocks 0-3 are chain layers 1-4. Outer segment: x1 kept, layers 1-4 run
// without grad. In backward the segment is replayed in two levels: layers
// 1-2 recomputed without grad to rebuild x3 (a checkpoint inside the
// segment), layers 3-4 recomputed with grad (4 selectively) and run
// backward, then layers 1-2 recomputed with grad and run backward.
TEST_F(Gradients, MultiLevelRecomputeInsideASegment) {
  using S = SaveMode;
  const std::vector<Op> ops = {Op::Forward(0, S::kAll),
                               Op::Forward(1, S::kNone),
                               Op::Forward(2, S::kNone),
                               Op::Forward(3, S::kNone),
                               Op::Forward(4, S::kNone),
                               Op::Forward(5, S::kAll),
                               Op::Forward(6, S::kAll),
                               Op::Forward(7, S::kAll),
                               Op::Backward(7),
                               Op::Backward(6),
                               Op::Backward(5),
                               Op::Recompute(1, S::kNone),
                               Op::Recompute(2, S::kNone),
                               Op::Recompute(3, S::kAll),
                               Op::Recompute(4, S::kSelective, 0),
                               Op::Backward(4),
                               Op::Backward(3),
                               Op::Recompute(1, S::kAll),
                               Op::Recompute(2, S::kAll),
                               Op::Backward(2),
                               Op::Backward(1),
                               Op::Backward(0),
                               Op::OptimizerStep()};
  const Schedule schedule = AddFrees(ops, profile_.num_layers());
  const Status valid = ValidateSchedule(schedule, profile_);
  ASSERT_TRUE(valid.ok()) << valid.message();
  ExpectSameAsNone(schedule);
}

}  // namespace
}  // namespace remat::runtime
