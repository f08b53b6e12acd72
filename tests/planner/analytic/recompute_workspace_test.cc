// What the mlp_activation option's recompute (and gpt's attention core's,
// below) adds to a block's backward peak in the analytic model (fp32 on
// CPU, n tokens, ffn width f), against the runtime's measured profiles
// (tests/runtime/selective_workspace_test.cc, encoder_workspace_test.cc):
//
// - the full backward peaks in fc2's backward: fc2's output gradient, GELU's
//   output (saved by fc2), its gradient du (n f), fc2's weight and bias
//   gradients;
// - under the option, GELU and fc2 are one autograd function (the runtime's
//   ActivationLinear): its backward makes GELU's output again (n f), computes
//   fc2's gradients and du, and runs GELU's backward (its input gradient,
//   n f) while holding fc2's output gradient, du, the weight and bias
//   gradients and GELU's output until it returns.
//
// Above the full peak: GELU's output, which the state no longer holds, and
// GELU's input gradient: 4 * 2 n f bytes. Before the op model fused them it
// freed fc2's output gradient (n h) and its weight and bias gradients
// (transients where the backward adds into existing ones) after fc2's
// backward, 4 (n h [+ f h + h]) bytes below the runtime.
#include <gtest/gtest.h>

#include <string>

#include "remat/analytic/analytic.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "testing/minilm_job.h"

namespace remat {
namespace {

constexpr int64_t f = 512;

ModelConfig Parse(const std::string& json) {
  Result<ModelConfig> c = ParseModelConfig(json, "model.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

// GELU's output made again and GELU's input gradient.
int64_t GeluRecompute(int64_t n) { return 4 * 2 * n * f; }

void ExpectMlpOptions(const LayerProfile& block, int64_t n) {
  ASSERT_GE(block.selective.size(), 5u) << block.name;
  EXPECT_EQ(block.selective[1].name, kMlpActivationOption);
  EXPECT_EQ(block.selective[1].recompute_workspace_bytes, GeluRecompute(n)) << block.name;
}

// bench/fidelity/models/cpu-s.json and cpu-bert-s.json: width 128, ffn 512, 128
// tokens x 4 sequences (n = 512).
TEST(RecomputeWorkspace, GptAndBertBlocks) {
  const std::string shape = R"("layers": 4, "hidden": 128, "heads": 4, "vocab": 2048,
    "seq_len": 128, "micro_batch": 4, "precision": "fp32", "optimizer": "adamw",
    "attention": "eager", "dropout": 0.1)";
  const Profile gpt =
      testing::AnalyticOnCpu(Parse(R"({"name": "cpu-s", "architecture": "gpt", )" + shape + "}"));
  const LayerProfile& block = testing::NamedLayer(gpt, "block0");
  ExpectMlpOptions(block, 512);
  EXPECT_EQ(block.selective[1].recompute_workspace_bytes, 2097152);  // measured
  // The attention core made again when the backward starts, as PyTorch's
  // selective checkpoint replays a block at its first unpack: on top of the
  // whole backward's peak, 3 P (P: the b x heads x s x s fp32 scores,
  // 1,048,576 B: the probabilities, the dropout's mask and its output), as
  // measured.
  EXPECT_EQ(block.selective[0].name, kAttentionCoreOption);
  const int64_t scores = 4 * 4 * 4 * 128 * 128;
  EXPECT_EQ(block.selective[0].recompute_workspace_bytes, 3 * scores);
  EXPECT_EQ(block.selective[0].recompute_workspace_bytes, 3145728);  // measured
  const Profile bert = testing::AnalyticOnCpu(Parse(
      R"({"name": "cpu-bert-s", "architecture": "bert", "max_position": 130, "type_vocab": 2, )" +
      shape + "}"));
  for (const char* name : {"block0", "block3"}) {
    ExpectMlpOptions(testing::NamedLayer(bert, name), 512);
    // Measured (tests/runtime/selective_workspace_test.cc, bert_mlm_eager):
    // gpt's, 3 P.
    EXPECT_EQ(testing::NamedLayer(bert, name).selective[0].recompute_workspace_bytes, 3145728)
        << name;
  }
}

// bench/fidelity/models/cpu-sbert-s.json: the anchors' pass (4 texts of 64 tokens)
// adds into the gradients the candidates' pass (8 texts) created: the same
// formula for both, fc2's weight and bias gradients living through GELU's
// backward as they live through fc2's in the full one.
TEST(RecomputeWorkspace, SbertPassesThatCreateAndAddIntoGradients) {
  const Profile p = testing::AnalyticOnCpu(Parse(R"({"name": "cpu-sbert-s", "architecture":
    "bert", "layers": 4, "hidden": 128, "heads": 4, "vocab": 2048, "seq_len": 64,
    "max_position": 130, "type_vocab": 1, "head": "pooling", "pooling": "mean", "loss": "mnrl",
    "texts_per_example": 3, "pooler": true, "micro_batch": 4, "precision": "fp32",
    "optimizer": "adamw", "attention": "eager", "dropout": 0.1})"));
  ExpectMlpOptions(testing::NamedLayer(p, "p1.block0"), 4 * 64);
  ExpectMlpOptions(testing::NamedLayer(p, "p2.block3"), 8 * 64);
  // Measured by the runtime (tests/runtime/encoder_workspace_test.cc).
  EXPECT_EQ(testing::NamedLayer(p, "p1.block0").selective[1].recompute_workspace_bytes, 1048576);
  EXPECT_EQ(testing::NamedLayer(p, "p2.block3").selective[1].recompute_workspace_bytes, 2097152);
}

}  // namespace
}  // namespace remat
