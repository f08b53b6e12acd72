// Every strategy's schedule gives the gradients of running without
// checkpointing (fp32, dropout 0.1, within 1e-6 of the largest gradient),
// for every architecture and head, with eager, sdpa and flash attention:
// recomputation redraws the same dropout masks and the block-wise backward
// composes to the whole model's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "chain_model.h"
#include "memory_meter.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

struct StepGradients {
  double loss = 0;
  std::vector<at::Tensor> grads;
};

// One step of `schedule` on a fresh model (same seed each time), no update;
// dropout seeded from `run_seed`.
StepGradients RunOneStep(const ModelConfig& c, const Schedule& schedule, uint64_t run_seed = 7) {
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 7);
  model->AllocateGradients();
  ScheduleExecutor executor(*model, nullptr, CpuMeter(), run_seed);
  Result<StepResult> r = executor.RunStep(schedule, model->MakeBatch(7, 3), 3);
  EXPECT_TRUE(r.ok()) << r.status().message();
  StepGradients out;
  out.loss = r.ok() ? r->loss : 0;
  for (const at::Tensor& p : model->parameters()) out.grads.push_back(p.grad().clone());
  return out;
}

double MaxAbsDiff(const StepGradients& a, const StepGradients& b) {
  double worst = 0;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    worst = std::max(worst, (a.grads[i] - b.grads[i]).abs().max().item<double>());
  }
  return worst;
}

class Gradients : public ::testing::TestWithParam<std::pair<std::string, ModelConfig>> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ModelSupports(config()).ok()) << ModelSupports(config()).message();
    profile_ = testing::AnalyticOf(config());
    reference_ = RunOneStep(config(), testing::PlannerSchedule(profile_, Strategy::kNone));
  }
  const ModelConfig& config() const { return GetParam().second; }
  void ExpectSameAsNone(const Schedule& schedule) {
    ASSERT_TRUE(ValidateSchedule(schedule, profile_).ok());
    const StepGradients g = RunOneStep(config(), schedule);
    ASSERT_EQ(g.grads.size(), reference_.grads.size());
    EXPECT_EQ(g.loss, reference_.loss);
    // 1e-6 of the largest gradient (at least 1e-6): a selective backward
    // sums a block input's gradients in another order (the residual's
    // first, then q, k and v's), which rounds differently where gradients
    // are large (mnrl's scale of 20 on one CLS token).
    double largest = 0;
    for (const at::Tensor& r : reference_.grads) {
      largest = std::max(largest, r.abs().max().item<double>());
    }
    EXPECT_LE(MaxAbsDiff(g, reference_), 1e-6 * std::max(1.0, largest)) << "largest " << largest;
  }

  Profile profile_;
  StepGradients reference_;
};

TEST_P(Gradients, DropoutIsOnAndGradientsAreNotTrivial) {
  EXPECT_GT(config().dropout, 0);
  EXPECT_GT(reference_.loss, 0);
  for (size_t i = 0; i < reference_.grads.size(); ++i) {
    EXPECT_GT(reference_.grads[i].abs().sum().item<double>(), 0) << "parameter " << i;
  }
}

TEST_P(Gradients, AnotherDropoutDrawChangesThem) {
  // The comparison below can fail: a different run seed gives other masks.
  const StepGradients other =
      RunOneStep(config(), testing::PlannerSchedule(profile_, Strategy::kNone), 8);
  EXPECT_GT(MaxAbsDiff(other, reference_), 1e-4);
}

TEST_P(Gradients, Uniform) {
  ExpectSameAsNone(testing::PlannerSchedule(profile_, Strategy::kUniform));
}

TEST_P(Gradients, Segment) {
  ExpectSameAsNone(testing::PlannerSchedule(profile_, Strategy::kSegment));
}

TEST_P(Gradients, Selective) {
  ExpectSameAsNone(testing::PlannerSchedule(profile_, Strategy::kSelective));
}

TEST_P(Gradients, Manual) {
  ExpectSameAsNone(testing::PlannerSchedule(profile_, Strategy::kManual, {0, 2, 3}));
}

// The optimal solver's lowest-peak schedule recomputes layers several times,
// at several levels. Skipped in a tree without the solver.
TEST_P(Gradients, OptimalLowestPeak) {
  if (FindSolver(Strategy::kOptimal) == nullptr) {
    GTEST_SKIP() << "this build has no optimal solver";
  }
  PlanOptions o;
  o.strategy = Strategy::kOptimal;
  o.budget_bytes = 1;  // nothing fits: the solver returns its lowest-peak plan
  Result<PlanSet> plans = MakePlan(profile_, o);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  // The fastest schedule at the lowest peak recomputes (multi-level
  // recompute inside a segment is MultiLevelRecomputeInsideASegment's).
  // Before interval classes held the gradients after an interval, the
  // tables chose a slower lowest-peak schedule with more than one
  // recompute per block.
  EXPECT_GT(plans->chosen.predicted.recompute_ops, 0);
  ExpectSameAsNone(plans->chosen.schedule);
}

// Blocks 0-3 are chain layers 1-4. Outer segment: x1 kept, layers 1-4 run
// without grad. In backward the segment is replayed in two levels: layers
// 1-2 recomputed without grad to rebuild x3 (a checkpoint inside the
// segment), layers 3-4 recomputed with grad (4 selectively) and run
// backward, then layers 1-2 recomputed with grad and run backward.
TEST_P(Gradients, MultiLevelRecomputeInsideASegment) {
  using S = SaveMode;
  const int L = profile_.num_layers();
  std::vector<Op> ops = {Op::Forward(0, S::kAll)};
  for (int i = 1; i <= 4; ++i) ops.push_back(Op::Forward(i, S::kNone));
  for (int i = 5; i < L; ++i) ops.push_back(Op::Forward(i, S::kAll));
  for (int i = L - 1; i >= 5; --i) ops.push_back(Op::Backward(i));
  const std::vector<Op> replay = {Op::Recompute(1, S::kNone),
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
  ops.insert(ops.end(), replay.begin(), replay.end());
  const Schedule schedule = AddFrees(ops, L);
  const Status valid = ValidateSchedule(schedule, profile_);
  ASSERT_TRUE(valid.ok()) << valid.message();
  ExpectSameAsNone(schedule);
}

// Every family with each attention implementation: eager, sdpa (with
// dropout on CPU PyTorch's math path, its mask drawn from the re-seeded
// default generator) and flash (blockwise, masks regenerated from the seed
// in backward).
std::vector<std::pair<std::string, ModelConfig>> FamiliesWithEachAttention() {
  std::vector<std::pair<std::string, ModelConfig>> out;
  for (const auto& [name, c] : testing::TinyFamilies()) {
    for (AttentionImpl a : {AttentionImpl::kEager, AttentionImpl::kSdpa, AttentionImpl::kFlash}) {
      ModelConfig each = c;
      each.attention = a;
      out.emplace_back(name + "_" + ToString(a), each);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Families, Gradients, ::testing::ValuesIn(FamiliesWithEachAttention()),
                         [](const auto& info) { return info.param.first; });

// Without dropout, sdpa and flash compute eager attention's function: the
// same loss and gradients up to fp32 rounding (1e-5 of the largest).
class FusedAttention : public ::testing::TestWithParam<std::pair<std::string, ModelConfig>> {};

TEST_P(FusedAttention, EqualsEagerWithoutDropout) {
  ModelConfig c = GetParam().second;
  c.dropout = 0;
  const Schedule none = testing::PlannerSchedule(testing::AnalyticOf(c), Strategy::kNone);
  const StepGradients eager = RunOneStep(c, none);
  double largest = 0;
  for (const at::Tensor& g : eager.grads) largest = std::max(largest, g.abs().max().item<double>());
  ASSERT_GT(largest, 0);
  for (AttentionImpl a : {AttentionImpl::kSdpa, AttentionImpl::kFlash}) {
    c.attention = a;
    const StepGradients fused = RunOneStep(c, none);
    ASSERT_EQ(fused.grads.size(), eager.grads.size());
    EXPECT_NEAR(fused.loss, eager.loss, 1e-5 * std::abs(eager.loss)) << ToString(a);
    EXPECT_LE(MaxAbsDiff(fused, eager), 1e-5 * largest) << ToString(a);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FusedAttention, ::testing::ValuesIn(testing::TinyFamilies()),
                         [](const auto& info) { return info.param.first; });

}  // namespace
}  // namespace remat::runtime
