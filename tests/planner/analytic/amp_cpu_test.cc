// Autocast (amp_bf16) on CPU: the bytes the analytic model keeps, written out
// as formulas, each the figure PyTorch 2.11 keeps under
// torch.autocast("cpu", dtype=torch.bfloat16) on bench/fidelity/models/cpu-amp-s.json's
// shape (saved_tensors_hooks and remat's CPU meter; docs/analytic-model.md,
// "Autocast on CPU").
#include <gtest/gtest.h>

#include "remat/analytic/analytic.h"
#include "testing/minilm_job.h"

namespace remat {
namespace {

// bench/fidelity/models/cpu-amp-s.json: gpt, amp_bf16, eager attention, dropout 0.1.
constexpr int64_t kLayers = 4, kHidden = 128, kHeads = 4, kVocab = 2048, kSeq = 128, kBatch = 4;
constexpr int64_t kFfn = 4 * kHidden;  // f

ModelConfig CpuAmpS() {
  ModelConfig c;
  c.architecture = Architecture::kGpt;
  c.layers = kLayers;
  c.hidden = kHidden;
  c.heads = kHeads;
  c.ffn_hidden = kFfn;
  c.vocab = kVocab;
  c.seq_len = kSeq;
  c.max_position = kSeq;
  c.micro_batch = kBatch;
  c.precision = Precision::kAmpBf16;
  c.attention = AttentionImpl::kEager;
  c.dropout = 0.1;
  return WithDefaults(c);
}

Profile OnCpu(const ModelConfig& c) {
  AnalyticOptions o;
  o.device = *LookupDevice("cpu");
  Result<Profile> p = AnalyticProfile(c, o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

constexpr int64_t kTokens = kBatch * kSeq;                  // n
constexpr int64_t kScores = kBatch * kHeads * kSeq * kSeq;  // b a s^2

// A block: what each op saves, fp32 where autocast leaves the stream alone,
// bf16 after a cast. F.linear under autocast saves the bf16 cast of its input
// and the bf16 copy of its weight (the copy autocast caches for a leaf that
// requires grad; mm keeps it, as a transposed view, until backward):
// 2 * (3h^2 + h^2 + hf + fh) = 393,216 bytes here.
TEST(AmpCpu, BlockKeepsTheCastsEachMatmulSaves) {
  const int64_t n = kTokens, h = kHidden, f = kFfn;
  const int64_t weight_copies = 2 * (3 * h * h + h * h + h * f + f * h);
  EXPECT_EQ(weight_copies, 393'216);
  const int64_t expected =
      (4 * n * h + 2 * 4 * n)    // LayerNorm 1: its fp32 input, mean and rstd (input dtype on CPU)
      + 2 * n * h                // qkv: the bf16 cast of its input
      + 2 * 3 * n * h            // q, k, v: one contiguous bf16 copy (baddbmm, bmm keep it)
      + 3 * 2 * kScores          // bf16 softmax output, its bf16 dropout mask, the dropped probs
      + 2 * n * h                // the merged context (bf16), kept by the projection
      + 2 * n * h                // the projection's dropout mask (bf16)
      + (4 * n * h + 2 * 4 * n)  // LayerNorm 2: the fp32 residual sum, mean and rstd
      + 2 * n * h                // fc1: the bf16 cast of its input
      + 2 * n * f                // GELU's bf16 input
      + 2 * n * f                // fc2: GELU's bf16 output
      + 2 * n * h                // the MLP's dropout mask (bf16)
      + weight_copies;
  // PyTorch, the same block (runtime/src/gpt_model.cc's ops) under CPU
  // autocast: 4,595,712 bytes live after its forward, its output included
  // (the same size as the fp32 input the analytic layer counts).
  EXPECT_EQ(expected, 4'595'712);
  EXPECT_EQ(testing::NamedLayer(OnCpu(CpuAmpS()), "block0").activation_bytes, expected);
}

// The tied LM head: its bf16 logits, the bf16 cast of its input and the bf16
// copy of the token embedding (cached like any trained leaf weight).
TEST(AmpCpu, HeadKeepsTheBf16CopyOfTheTiedEmbedding) {
  const int64_t n = kTokens, h = kHidden, V = kVocab;
  EXPECT_EQ(testing::NamedLayer(OnCpu(CpuAmpS()), "head").activation_bytes,
            2 * n * V + 2 * n * h + 2 * V * h);
}

// F.cross_entropy on bf16 logits: CPU autocast's fp32 policy lists
// cross_entropy_loss, so the logits are cast to fp32 (a transient) and
// log_softmax keeps fp32 log-probabilities, which nll_loss saves too (the
// same tensor): 4nV + the fp32 loss. Not log_softmax + nll_loss called apart
// (their bf16 output and an fp32 copy: 6nV). Its backward holds the fp32
// gradients of the log-probabilities and of the fp32 logits, 8nV above its
// start at its peak (PyTorch: 8,388,608 bytes), of which the bf16 input
// gradient (2nV) is the layer's output.
TEST(AmpCpu, LossKeepsFp32LogProbabilitiesOnly) {
  const int64_t n = kTokens, V = kVocab;
  const Profile p = OnCpu(CpuAmpS());
  const LayerProfile& loss = testing::NamedLayer(p, "loss");
  EXPECT_EQ(loss.activation_bytes, 4 * n * V + 4);
  EXPECT_EQ(loss.forward_workspace_bytes + loss.activation_bytes, 4 * n * V + 4 * n * V);
  EXPECT_EQ(loss.backward_workspace_bytes + 2 * n * V, 8 * n * V);
}

}  // namespace
}  // namespace remat
