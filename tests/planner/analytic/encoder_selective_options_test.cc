// The selective options of a post-LN encoder block (bert, roberta,
// distilbert): the MLP activation (GELU, as gpt's), ln1's output and the
// dropout masks, each with the bytes it keeps written out as a formula of
// the block's shape; and the solvers choose them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remat/analytic/analytic.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/strategies/strategies.h"
#include "testing/gpt_chain.h"
#include "testing/masks_pay.h"

namespace remat {
namespace {

using testing::Option;

constexpr int64_t s = 512, b = 2, h = 768, a = 12, f = 3072;
constexpr int64_t n = s * b;  // tokens

// bert-base's block shape, `layers` of them, dropout 0.1.
ModelConfig BertBase(Precision precision, int layers = 1) {
  ModelConfig c;
  c.name = "bert-base-block";
  c.architecture = Architecture::kBert;
  c.layers = layers;
  c.hidden = h;
  c.heads = a;
  c.ffn_hidden = f;
  c.vocab = 30522;
  c.seq_len = s;
  c.max_position = 512;
  c.type_vocab = 2;
  c.micro_batch = b;
  c.precision = precision;
  c.attention = AttentionImpl::kEager;
  c.dropout = 0.1;
  return c;
}

Profile Analytic(const ModelConfig& c, const std::string& device) {
  AnalyticOptions o;
  Result<DeviceSpec> d = LookupDevice(device);
  EXPECT_TRUE(d.ok()) << d.status().message();
  if (d.ok()) o.device = *d;
  Result<Profile> p = AnalyticProfile(c, o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

// fp32 on the CPU (every value, dropout mask and LayerNorm statistic 4
// bytes). Kept by the block: q, k, v (3 nh), the scores' softmax, its
// dropout mask and output (3 a s^2 b), the context (nh), the first
// dropout's mask (nh), ln1's input (nh) and statistics (2 n), fc1's input
// (ln1's output, nh), GELU's input and output (2 nf), the second dropout's
// mask (nh), ln2's input (nh) and statistics (2 n) and the block's output
// (nh): 4 (10 nh + 2 nf + 3 as^2b + 4 n) bytes.
//   mlp_activation drops GELU's output (fc2's input): 4 nf;
//   norm_output drops ln1's output (fc1's input) and statistics: 4 (nh + 2 n),
//   keeping ln1's input, which ln1 keeps anyway. ln2's output is the block's
//   output, the chain's boundary: no norm of it to recompute.
TEST(EncoderSelectiveOptions, BertFp32KeptBytesFollowTheFormula) {
  const Profile p = Analytic(BertBase(Precision::kFp32), "cpu");
  const LayerProfile& block = testing::FirstBlock(p);
  const int64_t nh = n * h, nf = n * f, as2b = a * s * s * b;
  EXPECT_EQ(block.activation_bytes, 4 * (10 * nh + 2 * nf + 3 * as2b + 4 * n));
  // The decoders' seven, in the runtime's order (PartsOf; the dropout
  // masks' two: EncoderDropoutMask below).
  const std::vector<std::string> order = {
      kAttentionCoreOption, kMlpActivationOption, kAttentionCoreMlpOption, kNormOutputOption,
      kAllSelectiveOption,  kDropoutMaskOption,   kAllWithDropoutOption};
  ASSERT_EQ(block.selective.size(), order.size());
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(block.selective[k].name, order[k]);
  const SelectiveOption &core = block.selective[0], &mlp = block.selective[1],
                        &both = block.selective[2], &norm = block.selective[3],
                        &all = block.selective[4];
  const int64_t gelu_out = 4 * nf, ln1_out = 4 * (nh + 2 * n);
  EXPECT_EQ(mlp.activation_bytes, block.activation_bytes - gelu_out);
  EXPECT_EQ(both.activation_bytes, core.activation_bytes - gelu_out);
  EXPECT_EQ(norm.activation_bytes, block.activation_bytes - ln1_out);
  EXPECT_EQ(all.activation_bytes, both.activation_bytes - ln1_out);
  // GELU's output made again in fc2's backward, which holds fc2's output
  // gradient (nh) and its weight and bias gradients until GELU's backward is
  // done: at most their bytes above the full backward's peak; ln1's in
  // fc1's backward, at most its output and statistics.
  EXPECT_LE(mlp.recompute_workspace_bytes, gelu_out + 4 * (nh + f * h + h));
  EXPECT_LE(norm.recompute_workspace_bytes, ln1_out);
  EXPECT_GT(mlp.extra_recompute_ms, 0);
  EXPECT_GT(norm.extra_recompute_ms, 0);
  EXPECT_LT(norm.extra_recompute_ms, mlp.extra_recompute_ms);  // nh against nf elements
  EXPECT_NEAR(all.extra_recompute_ms, both.extra_recompute_ms + norm.extra_recompute_ms,
              1e-9 * all.extra_recompute_ms);
  // What is dropped is a transient of the forward: ln1's output lives on to
  // the second residual, GELU's to fc2.
  EXPECT_GE(mlp.forward_workspace_bytes, block.forward_workspace_bytes);
  EXPECT_LE(mlp.forward_workspace_bytes, block.forward_workspace_bytes + gelu_out);
  EXPECT_GE(norm.forward_workspace_bytes, block.forward_workspace_bytes);
  EXPECT_LE(norm.forward_workspace_bytes, block.forward_workspace_bytes + ln1_out);
}

// The dropout masks (fp32, CPU: at::dropout's mask is of the input's
// dtype, 4 bytes an element): dropout_mask drops the two residual masks
// (after the attention's output projection and after fc2, 4 nh each) and
// eager attention's on the probabilities (4 as^2b), keeping nothing in
// their place: 4 (8 nh + 2 nf + 2 as^2b + 4 n). With the other three
// (whose core already drops its mask) the residual two on top: all three
// less 8 nh. Each mask is drawn again in its own dropout's backward: at
// most the attention's at a time.
TEST(EncoderDropoutMask, BertFp32KeptBytesFollowTheFormula) {
  const Profile p = Analytic(BertBase(Precision::kFp32), "cpu");
  const LayerProfile& block = testing::FirstBlock(p);
  const int64_t nh = n * h, nf = n * f, as2b = a * s * s * b;
  const SelectiveOption* all = Option(block, kAllSelectiveOption);
  const SelectiveOption* drop = Option(block, kDropoutMaskOption);
  const SelectiveOption* all4 = Option(block, kAllWithDropoutOption);
  ASSERT_TRUE(all && drop && all4);
  EXPECT_EQ(drop->activation_bytes, 4 * (8 * nh + 2 * nf + 2 * as2b + 4 * n));
  EXPECT_EQ(drop->activation_bytes, block.activation_bytes - 2 * 4 * nh - 4 * as2b);
  EXPECT_EQ(all4->activation_bytes, all->activation_bytes - 2 * 4 * nh);
  EXPECT_GT(drop->recompute_workspace_bytes, 0);
  EXPECT_LE(drop->recompute_workspace_bytes, 4 * as2b);
  EXPECT_GT(drop->extra_recompute_ms, 0);
  EXPECT_GT(all4->extra_recompute_ms, all->extra_recompute_ms);
  EXPECT_LT(all4->extra_recompute_ms, all->extra_recompute_ms + drop->extra_recompute_ms);
  // The masks become transients of the forward: one at a time.
  EXPECT_GE(drop->forward_workspace_bytes, block.forward_workspace_bytes);
  EXPECT_LE(drop->forward_workspace_bytes, block.forward_workspace_bytes + 4 * as2b);
}

// SDPA's math path (dropout on the CPU) keeps its mask inside the ATen op:
// only the residual masks go. Dropout off, or LoRA: no masks' options.
TEST(EncoderDropoutMask, SdpaDropsTheResidualMasksOnlyAndNeedsDropout) {
  ModelConfig c = BertBase(Precision::kFp32);
  c.attention = AttentionImpl::kSdpa;
  const LayerProfile math = testing::FirstBlock(Analytic(c, "cpu"));
  const SelectiveOption* drop = Option(math, kDropoutMaskOption);
  ASSERT_TRUE(drop);
  EXPECT_EQ(drop->activation_bytes, math.activation_bytes - 2 * 4 * n * h);
  c.dropout = 0;
  EXPECT_EQ(testing::FirstBlock(Analytic(c, "cpu")).selective.size(), 5u);
}

// The optimal solver picks the masks' options: a 4-layer bert-base (fp32,
// CPU) at budgets 1/4 .. 16/4 of a block's masks below the no-checkpoint
// peak puts a block under one of them at some budget (from 7/4 on: above,
// the MLP activation and ln1 are cheaper a byte on this CPU), faster than
// the best plan from the same profile without them, and never slower.
TEST(EncoderDropoutMask, OptimalChoosesItWhereItPays) {
  EXPECT_GT(testing::BudgetsWhereTheMasksPay(Analytic(BertBase(Precision::kFp32, 4), "cpu"), 16, 4),
            0);
}

// torch.autocast(bf16) on a GPU: fc1 keeps the 16-bit cast of ln1's output
// (ln1's fp32 output itself only the residual reads, which keeps nothing),
// fc2 GELU's 16-bit output; LayerNorm's statistics are fp32. norm_output
// drops the cast (the norm's, made again with it) and the statistics:
// 2 nh + 8 n; mlp_activation GELU's output: 2 nf.
TEST(EncoderSelectiveOptions, BertAutocastDropsTheCastOfLn1sOutput) {
  const Profile p = Analytic(BertBase(Precision::kAmpBf16), "a100");
  const LayerProfile& block = testing::FirstBlock(p);
  const SelectiveOption* mlp = Option(block, kMlpActivationOption);
  const SelectiveOption* norm = Option(block, kNormOutputOption);
  const SelectiveOption* core = Option(block, kAttentionCoreOption);
  const SelectiveOption* all = Option(block, kAllSelectiveOption);
  ASSERT_TRUE(mlp && norm && core && all);
  EXPECT_EQ(mlp->activation_bytes, block.activation_bytes - 2 * n * f);
  EXPECT_EQ(norm->activation_bytes, block.activation_bytes - (2 * n * h + 8 * n));
  EXPECT_EQ(all->activation_bytes,
            core->activation_bytes - 2 * n * f - (2 * n * h + 8 * n));
}

// LoRA's adapters read GELU's and ln1's outputs; the runtime recomputes
// them only before plain projections: a LoRA encoder offers the core alone.
TEST(EncoderSelectiveOptions, LoraEncoderOffersTheAttentionCoreOnly) {
  ModelConfig c = BertBase(Precision::kFp32);
  c.lora_rank = 8;
  c.lora_targets = kLoraAllLinear;
  const Profile p = Analytic(c, "cpu");
  const LayerProfile& block = testing::FirstBlock(p);
  ASSERT_EQ(block.selective.size(), 1u);
  EXPECT_EQ(block.selective[0].name, kAttentionCoreOption);
}

// The optimal solver picks the new options: on a 12-layer bert-base (fp32,
// CPU) at 70% of the no-checkpoint peak some block is under one with the
// MLP activation or the norm.
TEST(EncoderSelectiveOptions, OptimalChoosesTheMlpAndNormOptions) {
  const Profile p = Analytic(BertBase(Precision::kFp32, 12), "cpu");
  PlanOptions none;
  none.strategy = Strategy::kNone;
  Result<PlanSet> full = MakePlan(p, none);
  ASSERT_TRUE(full.ok()) << full.status().message();
  PlanOptions optimal;
  optimal.strategy = Strategy::kOptimal;
  optimal.budget_bytes = full->chosen.predicted.peak_bytes * 7 / 10;
  Result<PlanSet> opt = MakePlan(p, optimal);
  ASSERT_TRUE(opt.ok()) << opt.status().message();
  ASSERT_TRUE(opt->chosen.fits);
  int beyond_core = 0;
  for (size_t i = 0; i < opt->chosen.selective_option.size(); ++i) {
    const int o = opt->chosen.selective_option[i];
    if (o >= 0 && p.layers[i].selective[o].name != kAttentionCoreOption) ++beyond_core;
  }
  EXPECT_GT(beyond_core, 0) << opt->chosen.parameter;
}

}  // namespace
}  // namespace remat
