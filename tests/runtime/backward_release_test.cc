// A block's backward creates its parameter gradients after autograd has let
// go of much of what the block saved, so its peak stays below what was live
// before it plus the input gradient and the gradients it makes: the measured
// profile's backward workspace is negative there
// (LayerProfile::backward_workspace_bytes), and the simulator lets a[i] go
// when the backward ends. From such a profile, a plan recomputing every
// other block is predicted to the byte through every block's backward.
#include <gtest/gtest.h>

#include "remat/runtime/torch_runtime.h"
#include "remat/simulate/simulator.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

// gpt, 4 blocks of hidden 128, 4 heads, ffn 512, vocabulary 512, 2 x 64
// tokens, fp32, AdamW, eager attention, dropout 0.1.
ModelConfig SmallGpt() {
  ModelConfig c = testing::TinyGpt();
  c.hidden = 128;
  c.ffn_hidden = 512;
  c.vocab = 512;
  c.seq_len = 64;
  c.max_position = 64;
  return c;
}

TEST(BackwardRelease, UniformEveryTwoFromAMeasuredProfileIsExactThroughEveryBlocksBackward) {
  const ModelConfig c = SmallGpt();
  std::unique_ptr<Runtime> runtime = MakeTorchRuntime();
  MeasureOptions m;
  m.warmup = 0;
  m.repeats = 1;
  Result<Profile> profile = runtime->Measure(c, m);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  int blocks = 0;
  for (const LayerProfile& l : profile->layers) {
    if (l.kind != "block") continue;
    ++blocks;
    // What the test is about: each block's backward peaks below live + its
    // gradients (above the clamp at what it saved besides its output).
    EXPECT_LT(l.backward_workspace_bytes, 0) << l.name;
    EXPECT_GT(l.backward_workspace_bytes, -(l.activation_bytes - l.output_bytes)) << l.name;
  }
  ASSERT_EQ(blocks, 4);

  PlanOptions o;
  o.strategy = Strategy::kUniform;
  o.every = 2;
  Result<PlanSet> plans = MakePlan(*profile, o);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  const Schedule& schedule = plans->chosen.schedule;
  Result<SimulationResult> predicted = Simulate(*profile, schedule);
  ASSERT_TRUE(predicted.ok());
  TrainOptions t;
  t.steps = 2;
  Result<TrainResult> run = runtime->Train(c, schedule, t);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->ops.size(), predicted->timeline.size());
  int backwards = 0;
  for (size_t k = 0; k < schedule.ops.size(); ++k) {
    const Op& op = schedule.ops[k];
    if (op.kind != OpKind::kBackward || profile->layers[op.layer].kind != "block") continue;
    ++backwards;
    EXPECT_EQ(run->ops[k].peak, predicted->timeline[k].peak) << "op " << k << " " << DescribeOp(op);
    // After it (the free of a[i] frees nothing more): autograd has let go.
    EXPECT_EQ(run->ops[k].live_after, predicted->timeline[k].live_after)
        << "op " << k << " " << DescribeOp(op);
  }
  EXPECT_EQ(backwards, 4);
  EXPECT_EQ(run->peak_bytes, predicted->peak_bytes);
  // The plan's own figure (what `planner` prints as the predicted peak).
  EXPECT_EQ(plans->chosen.memory.total_bytes, run->peak_bytes);
}

}  // namespace
}  // namespace remat::runtime
