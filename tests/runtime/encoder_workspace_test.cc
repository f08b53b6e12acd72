// A BERT block's backward workspace, measured by the CPU meter on the
// runtime's encoder (cpu-sbert-s, fp32, eager, dropout 0.1), against the
// analytic op model's: parameter gradients created op by op (the
// candidates' pass, whose backward runs first), added through transients
// (the anchors' pass, and micro-batches 2..K), and the attention core
// recomputed where the backward reaches it, and each selective option's
// recompute and forward workspaces. The formulas are written out
// in tests/planner/analytic/encoder_workspace_test.cc.
#include <gtest/gtest.h>

#include "cpu_profiles.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"

namespace remat::runtime {
namespace {

TEST(EncoderWorkspace, BlockBackwardIsTheAnalyticModels) {
  Result<ModelConfig> c = ParseModelConfig(R"({"name": "cpu-sbert-s", "architecture": "bert",
    "layers": 2, "hidden": 128, "heads": 4, "vocab": 2048, "seq_len": 64, "max_position": 130,
    "type_vocab": 1, "head": "pooling", "pooling": "mean", "loss": "mnrl",
    "texts_per_example": 3, "pooler": true, "micro_batch": 4, "precision": "fp32",
    "optimizer": "adamw", "attention": "eager", "dropout": 0.1})",
                                           "cpu-sbert-s.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  Profile measured, analytic;
  ASSERT_TRUE(testing::MeasuredAndAnalyticOnCpu(*c, &measured, &analytic));
  int blocks = 0;
  for (int i = 0; i < analytic.num_layers(); ++i) {
    const LayerProfile &m = measured.layers[i], &a = analytic.layers[i];
    if (a.kind != "block") continue;
    ++blocks;
    EXPECT_EQ(m.gradient_bytes, a.gradient_bytes) << a.name;
    EXPECT_EQ(m.backward_workspace_bytes, a.backward_workspace_bytes) << a.name;
    EXPECT_EQ(m.accumulating_workspace_bytes(), a.accumulating_workspace_bytes()) << a.name;
    ASSERT_EQ(m.selective.size(), a.selective.size()) << a.name;
    ASSERT_EQ(a.selective.size(), 7u) << a.name;
    // Each option (the attention core, GELU, ln1, the dropout masks and
    // their combinations):
    // its forward's workspace, and what its recompute adds to the
    // backward's peak. The runtime's GELU function holds fc2's output
    // gradient, GELU's output gradient and fc2's weight and bias gradients
    // until GELU's backward is done; the op model fuses them the same way
    // (backward_workspace.h, RecomputePart::fused).
    for (size_t k = 0; k < a.selective.size(); ++k) {
      EXPECT_EQ(m.selective[k].recompute_workspace_bytes, a.selective[k].recompute_workspace_bytes)
          << a.name << " " << a.selective[k].name;
      EXPECT_EQ(m.selective[k].forward_workspace_bytes, a.selective[k].forward_workspace_bytes)
          << a.name << " " << a.selective[k].name;
    }
  }
  EXPECT_EQ(blocks, 4);  // two passes of two blocks
}

}  // namespace
}  // namespace remat::runtime
