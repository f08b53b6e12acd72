// The backward workspace of a BERT block (post-LayerNorm) in the analytic
// model, against what LibTorch holds at each op's peak (cpu-sbert-s on CPU,
// fp32, eager, dropout 0.1; remat's runtime profile measured the same bytes):
//
// - the backward's peak is fc2's, once ln2 and the second dropout have run:
//   live above the layer's state then are dy1 (n h: residual2's gradient,
//   kept for ln1), d(fc2 out) (n h) and du (n f), less what ln2 and the
//   dropout saved and have released (the sum, n h; mean and rstd, 2 n; the
//   mask, n h): 4 (n f - 2 n) bytes;
// - gradients created in backward (the first backward of a step): each op's
//   parameter gradients become .grad at that op, so at fc2's peak only ln2's
//   (2 h) and fc2's (f h + h) exist; the workspace is counted above every
//   gradient of the layer (G, the simulator adds them at the layer's start)
//   and the input gradient handed on (n h);
// - gradients that exist (a later text pass, micro-batches 2..K): fc2's
//   fresh gradients (f h + h) are transients of its backward;
// - the attention core recomputed (selective) runs once the MLP's
//   gradients are gone: it adds nothing to that peak.
#include <gtest/gtest.h>

#include <tuple>

#include <string>

#include "remat/analytic/analytic.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "testing/minilm_job.h"

namespace remat {
namespace {

// bench/fidelity/models/cpu-sbert-s.json: 4 blocks of width 128, 4 heads, ffn 512,
// 64 tokens, 4 triplets (anchors: 4 texts; merged candidates: 8 texts).
ModelConfig SbertS(const std::string& attention) {
  Result<ModelConfig> c = ParseModelConfig(R"({"name": "cpu-sbert-s", "architecture": "bert",
    "layers": 4, "hidden": 128, "heads": 4, "vocab": 2048, "seq_len": 64, "max_position": 130,
    "type_vocab": 1, "head": "pooling", "pooling": "mean", "loss": "mnrl",
    "texts_per_example": 3, "pooler": true, "micro_batch": 4, "precision": "fp32",
    "optimizer": "adamw", "attention": ")" + attention +
                                               R"(", "dropout": 0.1})",
                                           "cpu-sbert-s.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

constexpr int64_t h = 128, f = 512, s = 64;
// A block's parameters: q, k, v, o (h^2 + h each), two LayerNorms (2 h
// each), fc1 (h f + f), fc2 (f h + h); fp32 gradients.
constexpr int64_t kBlockGradients = 4 * (4 * (h * h + h) + 2 * 2 * h + (h * f + f) + (f * h + h));

int64_t PeakAtFc2(int64_t n) { return 4 * (n * f - 2 * n); }

TEST(EncoderWorkspace, BlockThatCreatesItsGradients) {
  for (const char* attention : {"eager", "sdpa"}) {
    const Profile p = testing::AnalyticOnCpu(SbertS(attention));
    // The merged candidates' pass (8 texts) runs backward first: it creates
    // the gradients.
    const int64_t n = 8 * s;
    const LayerProfile& block = testing::NamedLayer(p, "p2.block3");
    EXPECT_EQ(block.gradient_bytes, kBlockGradients);
    const int64_t created_at_peak = 4 * (2 * h + f * h + h);
    EXPECT_EQ(block.backward_workspace_bytes,
              PeakAtFc2(n) + created_at_peak - 4 * n * h - kBlockGradients);
    EXPECT_EQ(block.backward_workspace_bytes, 252928);  // measured (runtime profile)
    // Adding into existing gradients: fc2's two fresh ones are transients.
    EXPECT_EQ(block.accumulate_workspace_bytes, PeakAtFc2(n) + 4 * (f * h + h) - 4 * n * h);
    EXPECT_EQ(block.accumulate_workspace_bytes, 1044992);  // measured
  }
}

TEST(EncoderWorkspace, LaterPassAddsIntoTheGradients) {
  const Profile p = testing::AnalyticOnCpu(SbertS("eager"));
  // The anchors' pass (4 texts) runs backward after the candidates' pass.
  const int64_t n = 4 * s;
  const LayerProfile& block = testing::NamedLayer(p, "p1.block0");
  EXPECT_EQ(block.gradient_bytes, 0);
  EXPECT_EQ(block.backward_workspace_bytes, PeakAtFc2(n) + 4 * (f * h + h) - 4 * n * h);
  EXPECT_EQ(block.backward_workspace_bytes, 653824);  // measured
}

TEST(EncoderWorkspace, AttentionCoreRecomputesAtTheBackwardsStart) {
  const Profile p = testing::AnalyticOnCpu(SbertS("eager"));
  // The core is made again before any op's backward runs, as PyTorch's
  // selective checkpoint replays a block at its first unpack: on top of the
  // whole backward's peak, 3 P (P: one b x heads x s x s fp32 score
  // tensor: the probabilities, the dropout's mask and its output, which
  // the context's matmul saves; the context itself is not kept). Measured
  // (runtime profile): 786,432 and 1,572,864 bytes.
  for (const auto& [name, texts, measured] :
       {std::tuple{"p1.block0", 4, 786432}, std::tuple{"p2.block3", 8, 1572864}}) {
    const LayerProfile& block = testing::NamedLayer(p, name);
    ASSERT_FALSE(block.selective.empty()) << name;
    EXPECT_EQ(block.selective[0].name, kAttentionCoreOption);
    const int64_t scores = 4 * texts * 4 * s * s;
    EXPECT_EQ(block.selective[0].recompute_workspace_bytes, 3 * scores) << name;
    EXPECT_EQ(block.selective[0].recompute_workspace_bytes, measured) << name;
  }
}

}  // namespace
}  // namespace remat
