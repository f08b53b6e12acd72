// Tensor and sequence parallelism in the analytic model, against Korthikanti
// et al. 2022 ("Reducing Activation Recomputation in Large Transformer
// Models"), table 2, at t = 8 on their GPT-3 175B layer (h 12288, a 96,
// s 2048, b 1, 16-bit, dropout on, eager attention: the paper's op set).
//
// Per layer the paper counts sbh(10 + 24/t + 5as/(ht)) bytes under tensor
// parallelism and sbh(34/t + 5as/(ht)) with sequence parallelism (selective
// recompute: sbh(10 + 24/t) and sbh(34/t)). remat's graph keeps the same
// tensors, one rank's share each:
//   replicated under TP (10): ln1's and ln2's inputs (2 + 2), qkv's and
//     fc1's inputs (the norms' outputs, 2 + 2), the two residual dropout
//     masks (1 + 1);
//   split over t (24): q, k, v (the fused qkv output, 6), the output
//     projection's input (2), GELU's input (8), fc2's input (8);
//   split over t (5as/h): softmax output (2), its dropout mask (1), the
//     dropped probabilities .V reads (2).
// One term the paper leaves out: each LayerNorm keeps an fp32 mean and rstd
// per token (PyTorch's native_layer_norm saves them for backward), 16 bytes
// a token for the block's two norms: replicated under TP (whole tokens on
// every rank), split over t under sequence parallelism (its tokens only).
// The qkv input kept under sequence parallelism is the rank's shard, as
// Megatron keeps it and all-gathers again in backward.
#include <gtest/gtest.h>

#include "remat/analytic/analytic.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

constexpr int64_t s = 2048, b = 1, h = 12288, a = 96, t = 8;
constexpr int64_t sbh = s * b * h;
constexpr int64_t kLayerNormStats = 16 * s * b;  // two norms, fp32 mean + rstd a token

Result<Profile> Rank(int64_t tensor, bool sequence,
                     AttentionImpl attention = AttentionImpl::kEager,
                     Precision precision = Precision::kBf16) {
  AnalyticOptions o;
  o.parallel.gpus = tensor;
  o.parallel.tensor = tensor;
  o.parallel.sequence = sequence;
  return AnalyticProfile(testing::GptLayerShape(h, a, precision, attention), o);
}

TEST(TensorParallel, KorthikantiTable2TensorParallel) {
  for (Precision p : {Precision::kFp16, Precision::kBf16}) {
    Result<Profile> prof = Rank(t, false, AttentionImpl::kEager, p);
    ASSERT_TRUE(prof.ok()) << prof.status().message();
    const LayerProfile& block = testing::FirstBlock(*prof);
    // sbh(10 + 24/t + 5as/(ht)) + the norms' statistics (whole tokens).
    EXPECT_EQ(block.activation_bytes, 10 * sbh + 24 * sbh / t + 5 * a * s * s * b / t +
                                          kLayerNormStats);
    // Selective recompute (the attention core): sbh(10 + 24/t) + statistics.
    const SelectiveOption* core = testing::Option(block, kAttentionCoreOption);
    ASSERT_NE(core, nullptr);
    EXPECT_EQ(core->activation_bytes, 10 * sbh + 24 * sbh / t + kLayerNormStats);
  }
}

TEST(TensorParallel, KorthikantiTable2SequenceParallel) {
  Result<Profile> prof = Rank(t, true);
  ASSERT_TRUE(prof.ok()) << prof.status().message();
  const LayerProfile& block = testing::FirstBlock(*prof);
  // sbh(34/t + 5as/(ht)) + the norms' statistics of the rank's tokens.
  EXPECT_EQ(block.activation_bytes, 34 * sbh / t + 5 * a * s * s * b / t + kLayerNormStats / t);
  const SelectiveOption* core = testing::Option(block, kAttentionCoreOption);
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(core->activation_bytes, 34 * sbh / t + kLayerNormStats / t);
  // The block's boundaries are the rank's tokens: the residual stream split.
  EXPECT_EQ(block.input_bytes, 2 * sbh / t);
  EXPECT_EQ(block.output_bytes, 2 * sbh / t);
}

TEST(TensorParallel, OneRankIsTheSingleGpuProfile) {
  Result<Profile> one = Rank(1, false);
  Result<Profile> plain = AnalyticProfile(
      testing::GptLayerShape(h, a, Precision::kBf16, AttentionImpl::kEager), {});
  ASSERT_TRUE(one.ok() && plain.ok());
  EXPECT_EQ(ProfileToJson(*one), ProfileToJson(*plain));
  // Sequence parallelism over one rank splits nothing.
  Result<Profile> sp = Rank(1, true);
  ASSERT_TRUE(sp.ok());
  EXPECT_EQ(ProfileToJson(*sp), ProfileToJson(*plain));
}

TEST(TensorParallel, FlashAttentionSplitsItsLogsumexpByHeads) {
  Result<Profile> prof = Rank(t, false, AttentionImpl::kFlash);
  ASSERT_TRUE(prof.ok()) << prof.status().message();
  // No s x s term; the kernel's fp32 logsumexp is one per head and row: a/t heads.
  EXPECT_EQ(testing::FirstBlock(*prof).activation_bytes,
            10 * sbh + 24 * sbh / t + kLayerNormStats + 4 * (a / t) * s * b);
}

TEST(TensorParallel, VocabParallelHeadSplitsTheLogits) {
  Result<Profile> whole = Rank(1, false);
  Result<Profile> split = Rank(t, false);
  ASSERT_TRUE(whole.ok() && split.ok());
  const LayerProfile& head1 = whole->layers[whole->num_layers() - 2];
  const LayerProfile& head8 = split->layers[split->num_layers() - 2];
  ASSERT_EQ(head8.kind, kHeadKind);
  // Logits (tokens x vocab, 16-bit): each rank its ceil(V / t) columns.
  EXPECT_EQ(head1.output_bytes, s * b * 50257 * 2);
  EXPECT_EQ(head8.output_bytes, s * b * ((50257 + t - 1) / t) * 2);
  // The parameters stay the model's: the weights' split is the caller's.
  EXPECT_EQ(split->parameters, whole->parameters);
  EXPECT_EQ(split->static_bytes(), whole->static_bytes());
}

TEST(TensorParallel, LlamaSplitsItsKeyValueHeads) {
  ModelConfig c = testing::GptLayerShape(4096, 32, Precision::kBf16, AttentionImpl::kFlash);
  c.architecture = Architecture::kLlama;
  c.kv_heads = 8;
  c.ffn_hidden = 14336;
  c.dropout = 0;
  AnalyticOptions o;
  Result<Profile> whole = AnalyticProfile(c, o);
  o.parallel.tensor = 4;
  Result<Profile> split = AnalyticProfile(c, o);
  ASSERT_TRUE(whole.ok() && split.ok()) << split.status().message();
  // Every tensor a llama block keeps is either split by heads or by the MLP's
  // hidden size, or is a whole-token tensor (the norms' inputs and outputs,
  // the residual stream): the split part shrinks by 4, the rest stays.
  const int64_t tokens = 2048;
  // Replicated: rms1 and rms2 keep their fp32 input (4 B), rstd (4 B a
  // token), the 16-bit normalized rows (2 B); the projections keep the
  // norms' outputs (2 B, shared by q, k, v and by gate, up); the block's
  // output, the residual stream (2 B).
  const int64_t replicated = 2 * (tokens * 4096 * (4 + 2 + 2) + tokens * 4) + tokens * 4096 * 2;
  const int64_t whole_block = testing::FirstBlock(*whole).activation_bytes;
  const int64_t split_block = testing::FirstBlock(*split).activation_bytes;
  EXPECT_EQ(split_block - replicated, (whole_block - replicated) / 4);
}

// With sequence parallelism too, every tensor a llama block keeps is split
// (by heads, by the MLP's hidden size, or by tokens): a rank keeps exactly
// 1/t of the single GPU's block, and its boundaries are 1/t of the tokens.
TEST(TensorParallel, SequenceParallelLlamaBlockKeepsOneTth) {
  ModelConfig c = testing::GptLayerShape(4096, 32, Precision::kBf16, AttentionImpl::kFlash);
  c.architecture = Architecture::kLlama;
  c.kv_heads = 8;
  c.ffn_hidden = 14336;
  AnalyticOptions o;
  Result<Profile> whole = AnalyticProfile(c, o);
  o.parallel.tensor = 4;
  o.parallel.sequence = true;
  Result<Profile> split = AnalyticProfile(c, o);
  ASSERT_TRUE(whole.ok() && split.ok()) << split.status().message();
  const LayerProfile& w = testing::FirstBlock(*whole);
  const LayerProfile& r = testing::FirstBlock(*split);
  EXPECT_EQ(r.activation_bytes * 4, w.activation_bytes);
  EXPECT_EQ(r.input_bytes * 4, w.input_bytes);
}

TEST(TensorParallel, RefusesADegreeThatDoesNotDivideTheHeads) {
  AnalyticOptions o;
  o.parallel.tensor = 5;
  Result<Profile> p =
      AnalyticProfile(testing::GptLayerShape(h, a, Precision::kBf16, AttentionImpl::kEager), o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("tensor parallelism over 5 ranks: it must divide heads (96)"),
            std::string::npos)
      << p.status().message();
  ModelConfig c = testing::GptLayerShape(h, a, Precision::kBf16, AttentionImpl::kEager);
  c.seq_len = 2044;
  c.max_position = 2048;
  o.parallel.tensor = 8;
  o.parallel.sequence = true;
  p = AnalyticProfile(c, o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("seq_len under sequence parallelism (2044)"),
            std::string::npos)
      << p.status().message();
}

TEST(TensorParallel, RefusesModelsItDoesNotModel) {
  ModelConfig c = testing::GptLayerShape(768, 12, Precision::kBf16, AttentionImpl::kEager);
  c.architecture = Architecture::kBert;
  c.head = Head::kMlm;
  AnalyticOptions o;
  o.parallel.tensor = 2;
  Result<Profile> p = AnalyticProfile(c, o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("modeled for gpt and llama decoders"), std::string::npos)
      << p.status().message();
}

}  // namespace
}  // namespace remat
