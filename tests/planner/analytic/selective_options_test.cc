// A block's selective options derived from its op graph: the attention core,
// the MLP activation, both, the norms' outputs and all three, each with the
// bytes it keeps written out as a formula of the block's shape.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "remat/analytic/analytic.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/strategies/strategies.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

const LayerProfile& Block(const Profile& p) { return testing::FirstBlock(p); }

using testing::Option;

// One GPT block, hidden 4096, 32 heads (Korthikanti et al. 2022's shape).
ModelConfig GptLayer(Precision precision, AttentionImpl attention) {
  return testing::GptLayerShape(4096, 32, precision, attention);
}

constexpr int64_t s = 2048, h = 4096, a = 32;
// Each LayerNorm keeps an fp32 mean and rstd per token.
constexpr int64_t kLayerNormStats = 16 * s;

// (then the dropout masks' two, dropout_mask_test.cc)
TEST(SelectiveOptions, GptBlockListsTheFiveOptionsInOrder) {
  Result<Profile> p = AnalyticProfile(GptLayer(Precision::kBf16, AttentionImpl::kEager), {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const LayerProfile& block = Block(*p);
  ASSERT_EQ(block.selective.size(), 7u);
  EXPECT_EQ(block.selective[0].name, kAttentionCoreOption);
  EXPECT_EQ(block.selective[1].name, kMlpActivationOption);
  EXPECT_EQ(block.selective[2].name, kAttentionCoreMlpOption);
  EXPECT_EQ(block.selective[3].name, kNormOutputOption);
  EXPECT_EQ(block.selective[4].name, kAllSelectiveOption);
}

// The norms' outputs: each LayerNorm's output (2 sbh, the next projection's
// input) and its statistics are dropped; its input stays (ln1's is the
// block's input, ln2's the residual ln2 keeps anyway): 30 sbh + 5 as^2 b,
// and with the core and the MLP activation 22 sbh.
TEST(SelectiveOptions, GptNormOutputKeptBytesFollowTheFormula) {
  Result<Profile> p = AnalyticProfile(GptLayer(Precision::kBf16, AttentionImpl::kEager), {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const LayerProfile& block = Block(*p);
  const int64_t sbh = s * h, as2b = a * s * s;
  const SelectiveOption* mlp = Option(block, kMlpActivationOption);
  const SelectiveOption* both = Option(block, kAttentionCoreMlpOption);
  const SelectiveOption* norm = Option(block, kNormOutputOption);
  const SelectiveOption* all = Option(block, kAllSelectiveOption);
  ASSERT_TRUE(mlp && both && norm && all);
  EXPECT_EQ(norm->activation_bytes, 30 * sbh + 5 * as2b);
  EXPECT_EQ(all->activation_bytes, 22 * sbh);
  // Both norms made again when the backward starts (the projections after
  // each free them): each one's output and fp32 mean and rstd, on top of
  // the full backward's peak.
  EXPECT_EQ(norm->recompute_workspace_bytes, 2 * (2 * sbh + 8 * s));
  // Two memory-bound norms over sbh elements each: cheaper than GELU over
  // 4 sbh.
  EXPECT_GT(norm->extra_recompute_ms, 0);
  EXPECT_LT(norm->extra_recompute_ms, mlp->extra_recompute_ms);
  EXPECT_NEAR(all->extra_recompute_ms, both->extra_recompute_ms + norm->extra_recompute_ms,
              1e-9 * all->extra_recompute_ms);
  // The norms' outputs become transients of the forward: at most both.
  EXPECT_GE(norm->forward_workspace_bytes, block.forward_workspace_bytes);
  EXPECT_LE(norm->forward_workspace_bytes, block.forward_workspace_bytes + 4 * sbh + 16 * s);
}

// 16-bit GPT block: 34 sbh + 5 as^2 b kept (Korthikanti, table 2). The MLP
// activation keeps GELU's input (2 sbf) but not its output (2 sbf = 8 sbh,
// fc2's input): 26 sbh + 5 as^2 b. With the attention core too: 26 sbh.
TEST(SelectiveOptions, GptKeptBytesFollowTheFormula) {
  Result<Profile> p = AnalyticProfile(GptLayer(Precision::kBf16, AttentionImpl::kEager), {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const LayerProfile& block = Block(*p);
  const int64_t sbh = s * h, as2b = a * s * s, gelu_out = 2 * s * 4 * h;
  EXPECT_EQ(block.activation_bytes, 34 * sbh + 5 * as2b + kLayerNormStats);
  const SelectiveOption* core = Option(block, kAttentionCoreOption);
  const SelectiveOption* mlp = Option(block, kMlpActivationOption);
  const SelectiveOption* both = Option(block, kAttentionCoreMlpOption);
  ASSERT_TRUE(core && mlp && both);
  EXPECT_EQ(core->activation_bytes, 34 * sbh + kLayerNormStats);
  EXPECT_EQ(mlp->activation_bytes, 26 * sbh + 5 * as2b + kLayerNormStats);
  EXPECT_EQ(both->activation_bytes, 26 * sbh + kLayerNormStats);
  // The recompute makes GELU's output again, held while fc2's backward runs.
  EXPECT_EQ(mlp->recompute_workspace_bytes, gelu_out);
  // The parts are recomputed one after the other, the core once GELU's
  // output (recomputed in fc2's backward) is gone again: the same bytes as
  // the core's alone at its recompute, counted from a state that lacks
  // GELU's output, which the full backward releases before the core.
  EXPECT_EQ(both->recompute_workspace_bytes, core->recompute_workspace_bytes + gelu_out);
  EXPECT_GT(mlp->extra_recompute_ms, 0);
  EXPECT_LT(mlp->extra_recompute_ms, core->extra_recompute_ms);
  EXPECT_DOUBLE_EQ(both->extra_recompute_ms, core->extra_recompute_ms + mlp->extra_recompute_ms);
  // GELU's output is a transient of the forward under the option: more
  // workspace, by at most its bytes.
  EXPECT_GT(mlp->forward_workspace_bytes, block.forward_workspace_bytes);
  EXPECT_LE(mlp->forward_workspace_bytes, block.forward_workspace_bytes + gelu_out);
}

// fp32 on the CPU: every value 4 bytes, the dropout masks as well (a
// multiply by a mask in the input's dtype), the LayerNorm statistics too.
TEST(SelectiveOptions, GptFp32DropsFourBytesPerFfnElement) {
  ModelConfig c = GptLayer(Precision::kFp32, AttentionImpl::kEager);
  AnalyticOptions cpu;
  Result<DeviceSpec> device = LookupDevice("cpu");
  ASSERT_TRUE(device.ok());
  cpu.device = *device;
  Result<Profile> p = AnalyticProfile(c, cpu);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const LayerProfile& block = Block(*p);
  const SelectiveOption* core = Option(block, kAttentionCoreOption);
  const SelectiveOption* mlp = Option(block, kMlpActivationOption);
  const SelectiveOption* both = Option(block, kAttentionCoreMlpOption);
  ASSERT_TRUE(core && mlp && both);
  const int64_t gelu_out = 4 * s * 4 * h;
  EXPECT_EQ(mlp->activation_bytes, block.activation_bytes - gelu_out);
  EXPECT_EQ(both->activation_bytes, core->activation_bytes - gelu_out);
  // Each norm's 4-byte output and its 4-byte mean and rstd per token.
  const SelectiveOption* norm = Option(block, kNormOutputOption);
  const SelectiveOption* all = Option(block, kAllSelectiveOption);
  ASSERT_TRUE(norm && all);
  const int64_t norms = 2 * (4 * s * h + 8 * s);
  EXPECT_EQ(norm->activation_bytes, block.activation_bytes - norms);
  EXPECT_EQ(all->activation_bytes, both->activation_bytes - norms);
}

// A llama block (SwiGLU, GQA), bf16: the MLP activation keeps the gate
// projection's output (silu's input) and up's, and drops silu's output and
// the product (down_proj's input): 2 * 2 sbf bytes.
TEST(SelectiveOptions, LlamaKeptBytesFollowTheFormula) {
  ModelConfig c = GptLayer(Precision::kBf16, AttentionImpl::kEager);
  c.architecture = Architecture::kLlama;
  c.kv_heads = 8;
  c.ffn_hidden = 14336;
  c.vocab = 32000;
  c.micro_batch = 2;
  c.dropout = 0.0;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const LayerProfile& block = Block(*p);
  ASSERT_EQ(block.selective.size(), 5u);
  const SelectiveOption* core = Option(block, kAttentionCoreOption);
  const SelectiveOption* mlp = Option(block, kMlpActivationOption);
  const SelectiveOption* both = Option(block, kAttentionCoreMlpOption);
  ASSERT_TRUE(core && mlp && both);
  const int64_t sbf = s * 2 * 14336;
  // The norms' outputs: each RMSNorm drops its fp32 copy of x (4 sbh), fp32
  // rstd (4 sb), normalized x (2 sbh) and output (2 sbh, q/k/v's or
  // gate/up's input); rms2's input (the residual, 2 sbh), which no op kept
  // (the norm keeps its fp32 copy), is kept instead.
  const SelectiveOption* norm = Option(block, kNormOutputOption);
  const SelectiveOption* all = Option(block, kAllSelectiveOption);
  ASSERT_TRUE(norm && all);
  const int64_t sbh = s * 2 * h, sb = s * 2;
  EXPECT_EQ(norm->activation_bytes, block.activation_bytes - 2 * (8 * sbh + 4 * sb) + 2 * sbh);
  EXPECT_EQ(all->activation_bytes, both->activation_bytes - 2 * (8 * sbh + 4 * sb) + 2 * sbh);
  EXPECT_EQ(mlp->activation_bytes, block.activation_bytes - 2 * (2 * sbf));
  EXPECT_EQ(both->activation_bytes, core->activation_bytes - 2 * (2 * sbf));
  // Recomputed together: silu's output and the product.
  EXPECT_EQ(mlp->recompute_workspace_bytes, 2 * (2 * sbf));
  EXPECT_GT(mlp->extra_recompute_ms, 0);
}

// Eager grouped-query attention: transformers' repeat_kv copies k and v
// before the attention's matmuls, and torch's selective checkpoint keeps
// the copies (no attention op makes them), so attention_core drops the
// softmax output alone. The e2e Llama's block (hidden 64, 4 heads, 2
// key/value heads, 2 x 128 tokens, fp32): 1,181,696 B, what
// tests/python/remat_block_kept.py measures (1,186,760 B, 5,064 B of them
// the checkpoint's own).
TEST(SelectiveOptions, EagerGroupedAttentionCoreKeepsTheRepeatedKeysAndValues) {
  ModelConfig c;
  c.name = "gqa";
  c.architecture = Architecture::kLlama;
  c.layers = 4;
  c.hidden = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn_hidden = 128;
  c.vocab = 256;
  c.seq_len = 128;
  c.micro_batch = 2;
  c.precision = Precision::kFp32;
  c.attention = AttentionImpl::kEager;
  c.dropout = 0;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const LayerProfile& block = Block(*p);
  const SelectiveOption* core = Option(block, kAttentionCoreOption);
  ASSERT_TRUE(core);
  const int64_t probs = int64_t{2} * 4 * 128 * 128 * 4;
  EXPECT_EQ(core->activation_bytes, block.activation_bytes - probs);
  EXPECT_EQ(core->activation_bytes, 1'181'696);
}

// Flash attention keeps no quadratic term; the MLP activation is then the
// larger saving of the two.
TEST(SelectiveOptions, FlashGptSavesMoreByTheMlpActivation) {
  Result<Profile> p = AnalyticProfile(GptLayer(Precision::kBf16, AttentionImpl::kFlash), {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const LayerProfile& block = Block(*p);
  const SelectiveOption* core = Option(block, kAttentionCoreOption);
  const SelectiveOption* mlp = Option(block, kMlpActivationOption);
  ASSERT_TRUE(core && mlp);
  EXPECT_EQ(mlp->activation_bytes, block.activation_bytes - 2 * s * 4 * h);
  EXPECT_LT(mlp->activation_bytes, core->activation_bytes);
}

// LoRA's adapters read the activation; the runtime recomputes it only before
// a plain projection, so a LoRA block offers the attention core alone.
TEST(SelectiveOptions, LoraBlocksOfferTheAttentionCoreOnly) {
  ModelConfig c = GptLayer(Precision::kBf16, AttentionImpl::kEager);
  c.lora_rank = 8;
  c.lora_targets = kLoraAllLinear;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  const LayerProfile& block = Block(*p);
  ASSERT_EQ(block.selective.size(), 1u);
  EXPECT_EQ(block.selective[0].name, kAttentionCoreOption);
}

// GPT-3 6.7B's shape (bench/fidelity/models/gpt3-6.7b.json: 32 layers,
// hidden 4096, 32 heads, seq 2048, bf16, dropout 0.1; Megatron's persistent
// gradient buffers and the optimizer step's temporaries set aside, so that
// the activation memory is the peak above the model state): at 75% of
// selective-everywhere's activation memory, the optimal plan is at most 3%
// slower than selective-everywhere (the attention core alone: 5.3%).
TEST(SelectiveOptions, Gpt67BAtThreeQuartersOfSelectiveEverywhere) {
  ModelConfig c = GptLayer(Precision::kBf16, AttentionImpl::kEager);
  c.layers = 32;
  c.gradients = Gradients::kPersistent;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  // foreach AdamW's square roots of the bf16 second moments (2 B a
  // parameter, 13 GB) would be the step's peak.
  p->optimizer_workspace_bytes = 0;
  p->optimizer_workspace_tensors.clear();
  PlanOptions everywhere;
  everywhere.strategy = Strategy::kSelective;
  for (int i = 0; i < 32; ++i) everywhere.selective_layers.push_back(i);
  Result<PlanSet> sel = MakePlan(*p, everywhere);
  ASSERT_TRUE(sel.ok()) << sel.status().message();
  const SimulationResult& s = sel->chosen.predicted;
  PlanOptions optimal;
  optimal.strategy = Strategy::kOptimal;
  optimal.budget_bytes = s.static_bytes + s.activation_peak_bytes * 3 / 4;
  Result<PlanSet> opt = MakePlan(*p, optimal);
  ASSERT_TRUE(opt.ok()) << opt.status().message();
  const Plan& best = opt->chosen;
  EXPECT_TRUE(best.fits);
  int mlp = 0;
  for (int o : best.selective_option) {
    if (o >= 0 && p->layers[1].selective[o].name != kAttentionCoreOption) ++mlp;
  }
  std::cout << "budget " << optimal.budget_bytes << " B: optimal " << best.parameter << " (" << mlp
            << " with the MLP activation), " << best.predicted.step_ms
            << " ms against selective-everywhere's " << s.step_ms << " ms ("
            << 100 * (best.predicted.step_ms / s.step_ms - 1) << "%)\n";
  EXPECT_GT(mlp, 0);
  EXPECT_LE(best.predicted.step_ms, 1.03 * s.step_ms);
}

}  // namespace
}  // namespace remat
