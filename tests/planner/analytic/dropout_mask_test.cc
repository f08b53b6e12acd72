// The "dropout_mask" selective option, derived from the op graph: a block's
// dropouts keep no mask (the runtime keeps the generator state and draws
// the mask again in the dropout's backward). Its bytes against formulas of
// the block's shape, and the optimal solver choosing it where it pays.
#include <gtest/gtest.h>

#include <string>

#include "remat/analytic/analytic.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/strategies/strategies.h"
#include "testing/gpt_chain.h"
#include "testing/masks_pay.h"
#include "testing/minilm_job.h"

namespace remat {
namespace {

using testing::Option;

constexpr int64_t s = 2048, h = 4096, a = 32;
constexpr int64_t sbh = s * h, as2b = a * s * s;

// The analytic profile of `c` on --device cpu or the default GPU.
Profile Analytic(const ModelConfig& c, bool cpu) {
  if (cpu) return testing::AnalyticOnCpu(c);
  Result<Profile> p = AnalyticProfile(c, {});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

TEST(DropoutMask, GptBlockListsItAfterTheNormsWithDropoutOnly) {
  ModelConfig c = testing::GptLayerShape(h, a, Precision::kBf16, AttentionImpl::kEager);
  const LayerProfile block = testing::FirstBlock(Analytic(c, false));
  ASSERT_EQ(block.selective.size(), 7u);
  EXPECT_EQ(block.selective[4].name, kAllSelectiveOption);
  EXPECT_EQ(block.selective[5].name, kDropoutMaskOption);
  EXPECT_EQ(block.selective[6].name, kAllWithDropoutOption);
  c.dropout = 0;
  EXPECT_EQ(testing::FirstBlock(Analytic(c, false)).selective.size(), 5u);
}

// 16-bit GPT block on a GPU (fused dropout: 1-byte masks): the two residual
// masks (sbh each) and the attention's (as^2 b) go: 32 sbh + 4 as^2 b (and
// the LayerNorms' fp32 statistics, 16 bytes a token); with the other three
// (whose core holds the attention's mask) 22 - 2 = 20 sbh.
TEST(DropoutMask, GptKeptBytesFollowTheFormula) {
  const LayerProfile block = testing::FirstBlock(
      Analytic(testing::GptLayerShape(h, a, Precision::kBf16, AttentionImpl::kEager), false));
  const SelectiveOption* all = Option(block, kAllSelectiveOption);
  const SelectiveOption* drop = Option(block, kDropoutMaskOption);
  const SelectiveOption* all4 = Option(block, kAllWithDropoutOption);
  ASSERT_TRUE(all && drop && all4);
  EXPECT_EQ(block.activation_bytes, 34 * sbh + 5 * as2b + 16 * s);
  EXPECT_EQ(drop->activation_bytes, 32 * sbh + 4 * as2b + 16 * s);
  EXPECT_EQ(all4->activation_bytes, 20 * sbh);
  EXPECT_EQ(all4->activation_bytes, all->activation_bytes - 2 * sbh);
  // One mask drawn at a time, in its dropout's backward: at most the
  // attention's.
  EXPECT_GT(drop->recompute_workspace_bytes, 0);
  EXPECT_LE(drop->recompute_workspace_bytes, as2b);
  // The draw and multiply of three dropouts, the residual two on top of
  // all three.
  EXPECT_GT(drop->extra_recompute_ms, 0);
  EXPECT_GT(all4->extra_recompute_ms, all->extra_recompute_ms);
  EXPECT_LT(all4->extra_recompute_ms, all->extra_recompute_ms + drop->extra_recompute_ms);
  // The masks become transients of the forward: one at a time.
  EXPECT_GE(drop->forward_workspace_bytes, block.forward_workspace_bytes);
  EXPECT_LE(drop->forward_workspace_bytes, block.forward_workspace_bytes + as2b);
}

// fp32 on the CPU: at::dropout multiplies by a mask of the input's dtype, 4
// bytes an element: 2 * 4 sbh + 4 as^2 b go.
TEST(DropoutMask, CpuMasksAreOfTheInputsDtype) {
  const LayerProfile block = testing::FirstBlock(
      Analytic(testing::GptLayerShape(h, a, Precision::kFp32, AttentionImpl::kEager), true));
  const SelectiveOption* drop = Option(block, kDropoutMaskOption);
  ASSERT_TRUE(drop);
  EXPECT_EQ(drop->activation_bytes, block.activation_bytes - 2 * 4 * sbh - 4 * as2b);
}

// SDPA's math path (dropout on the CPU) makes and keeps its mask inside
// the ATen op, and flash keeps none: only the residual masks go.
TEST(DropoutMask, FusedAndMathAttentionDropTheResidualMasksOnly) {
  const LayerProfile math = testing::FirstBlock(
      Analytic(testing::GptLayerShape(h, a, Precision::kFp32, AttentionImpl::kSdpa), true));
  const SelectiveOption* drop = Option(math, kDropoutMaskOption);
  ASSERT_TRUE(drop);
  EXPECT_EQ(drop->activation_bytes, math.activation_bytes - 2 * 4 * sbh);
  // Each block's backward peaks in its attention's (math) or qkv
  // projection's (flash) backward, after both residual dropouts' backward
  // have freed their masks, with more of what the block saved freed than
  // its gradients still to come: a negative backward workspace. A mask
  // drawn again is freed at the same point, so the option's backward peaks
  // at the full one's bytes: against the full backward's workspace, its
  // recompute workspace is what it does not keep.
  EXPECT_LT(math.backward_workspace_bytes, 0);
  EXPECT_EQ(drop->recompute_workspace_bytes, 2 * 4 * sbh);
  const LayerProfile flash = testing::FirstBlock(
      Analytic(testing::GptLayerShape(h, a, Precision::kBf16, AttentionImpl::kFlash), false));
  drop = Option(flash, kDropoutMaskOption);
  ASSERT_TRUE(drop);
  EXPECT_EQ(drop->activation_bytes, flash.activation_bytes - 2 * sbh);
  EXPECT_LT(flash.backward_workspace_bytes, 0);
  EXPECT_EQ(drop->recompute_workspace_bytes, 2 * sbh);
}

// Llama (SwiGLU, GQA) has the same three dropouts.
TEST(DropoutMask, LlamaKeptBytesFollowTheFormula) {
  ModelConfig c = testing::GptLayerShape(h, a, Precision::kBf16, AttentionImpl::kEager);
  c.architecture = Architecture::kLlama;
  c.kv_heads = 8;
  c.ffn_hidden = 14336;
  c.vocab = 32000;
  const LayerProfile block = testing::FirstBlock(Analytic(c, false));
  const SelectiveOption* drop = Option(block, kDropoutMaskOption);
  ASSERT_TRUE(drop);
  EXPECT_EQ(drop->activation_bytes, block.activation_bytes - 2 * sbh - as2b);
}

// A 16-bit GPT of two blocks: at budgets that need the masks' bytes but
// not more, the optimal plan puts a block under dropout_mask, and is faster
// than the best plan from the same profile without the option.
TEST(DropoutMask, OptimalChoosesItWhereItPays) {
  ModelConfig c = testing::GptLayerShape(h, a, Precision::kBf16, AttentionImpl::kEager);
  c.layers = 2;
  EXPECT_GT(testing::BudgetsWhereTheMasksPay(Analytic(c, false), 8, 8), 0);
}

}  // namespace
}  // namespace remat
