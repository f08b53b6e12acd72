// The training loop's once-per-update work in the analytic optimizer step:
// clipping by the global norm reads the gradients and multiplies them in
// place (3 passes of the gradient bytes, no gradient-sized transient); the
// learning-rate schedule costs nothing the planner can see.
#include <gtest/gtest.h>

#include "remat/analytic.h"
#include "remat/model_config.h"

namespace remat {
namespace {

ModelConfig Small() {
  ModelConfig c;
  c.name = "small";
  c.layers = 4;
  c.hidden = 128;
  c.heads = 4;
  c.vocab = 2048;
  c.seq_len = 128;
  c.micro_batch = 4;
  c.grad_accumulation = 4;
  return WithDefaults(c);
}

TEST(AnalyticTrainingLoop, ClippingAddsThreeGradientPassesToTheOptimizerStepAndNoMemory) {
  ModelConfig clipped = Small();
  clipped.max_grad_norm = 1.0;
  Result<Profile> off = AnalyticProfile(Small(), {});
  Result<Profile> on = AnalyticProfile(clipped, {});
  ASSERT_TRUE(off.ok() && on.ok());
  // accumulate_ms is 3 passes of the gradient bytes at the same bandwidth.
  EXPECT_NEAR(on->optimizer_ms - off->optimizer_ms, off->accumulate_ms, 1e-12);
  EXPECT_GT(on->optimizer_ms, off->optimizer_ms);
  EXPECT_EQ(on->static_bytes(), off->static_bytes());
  for (size_t i = 0; i < on->layers.size(); ++i) {
    EXPECT_EQ(on->layers[i].forward_workspace_bytes, off->layers[i].forward_workspace_bytes);
  }
}

TEST(AnalyticTrainingLoop, TheScheduleDoesNotMoveThePrediction) {
  ModelConfig scheduled = Small();
  scheduled.lr_schedule = LrSchedule::kCosine;
  scheduled.warmup_steps = 100;
  Result<Profile> constant = AnalyticProfile(Small(), {});
  Result<Profile> cosine = AnalyticProfile(scheduled, {});
  ASSERT_TRUE(constant.ok() && cosine.ok());
  EXPECT_EQ(cosine->optimizer_ms, constant->optimizer_ms);
  EXPECT_EQ(cosine->static_bytes(), constant->static_bytes());
}

}  // namespace
}  // namespace remat
