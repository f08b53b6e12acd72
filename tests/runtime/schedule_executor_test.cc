#include "schedule_executor.h"

#include <gtest/gtest.h>

#include "gpt_model.h"
#include "memory_meter.h"
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

}  // namespace
}  // namespace remat::runtime
