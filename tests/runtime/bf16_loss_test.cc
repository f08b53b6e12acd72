// The token loss of a pure 16-bit step (bf16, fp16: no autocast), measured
// layer by layer by the CPU meter, against the analytic model's --device
// cpu figures: the logits upcast to fp32 first, as transformers' and
// torchtitan's losses do, so the loss keeps the fp32 log-probabilities
// (4nV bytes, not the 2nV of a 16-bit log_softmax) and its backward makes
// fp32 gradients before the cast back (docs/analytic-model.md, "The token
// loss runs in fp32").
// The logits' bf16 gradient is the float64 reference rounded once to bf16.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "chain_model.h"
#include "cpu_profiles.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "testing/minilm_job.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

// TinyGpt in `p` (with `upcast` as loss_upcast): its loss layer measured
// (`m`) and analytic (`a`).
bool LossLayers(Precision p, bool upcast, LayerProfile* m, LayerProfile* a) {
  ModelConfig c = testing::TinyGpt();
  c.precision = p;
  c.loss_upcast = upcast;
  Profile measured, analytic;
  if (!testing::MeasuredAndAnalyticOnCpu(c, &measured, &analytic)) return false;
  *m = testing::NamedLayer(measured, "loss");
  *a = testing::NamedLayer(analytic, "loss");
  return true;
}

TEST(Bf16Loss, TheLossKeepsFp32LogProbabilitiesAsTheAnalyticModel) {
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    SCOPED_TRACE(ToString(p));
    const ModelConfig c = testing::TinyGpt();
    LayerProfile m, a;
    ASSERT_TRUE(LossLayers(p, true, &m, &a));
    // fp32 log-probabilities, the fp32 loss and nll_loss's total weight
    // (the analytic model counts the loss only).
    const int64_t n = c.micro_batch * c.seq_len, V = c.vocab;
    EXPECT_EQ(m.activation_bytes, 4 * n * V + 8);
    EXPECT_EQ(a.activation_bytes, 4 * n * V + 4);
    // The fp32 copy beside the log-probabilities; the analytic figure
    // differs by the unmodelled fp32 scalar.
    EXPECT_EQ(m.forward_workspace_bytes, 4 * n * V);
    EXPECT_NEAR(a.forward_workspace_bytes, m.forward_workspace_bytes, 4);
    EXPECT_EQ(m.backward_workspace_bytes, a.backward_workspace_bytes);
    EXPECT_EQ(m.gradient_bytes, a.gradient_bytes);
  }
}

// "loss_upcast": false (BertForMaskedLM's CrossEntropyLoss): the loss of
// the 16-bit logits keeps 16-bit log-probabilities, in both.
TEST(Bf16Loss, WithoutTheUpcastTheLossIs16BitAsTheAnalyticModel) {
  const ModelConfig c = testing::TinyGpt();
  LayerProfile m, a;
  ASSERT_TRUE(LossLayers(Precision::kBf16, false, &m, &a));
  const int64_t n = c.micro_batch * c.seq_len, V = c.vocab;
  EXPECT_EQ(a.activation_bytes, 2 * n * V + 4);
  // The loss in bf16 (2 B) and nll_loss's total weight.
  EXPECT_EQ(m.activation_bytes, 2 * n * V + 4);
  EXPECT_EQ(m.backward_workspace_bytes, a.backward_workspace_bytes);
}

// The loss layer's backward on random bf16 logits against float64's
// (softmax(z) - one_hot) / n: fp32 arithmetic (a softmax over V terms, each
// within (V + 4) fp32 roundings, 2^-24 each, of the probability p <= 1)
// rounded once to bf16 (within 2^-8 of the value). A 16-bit log_softmax
// rounds the log-probabilities to bf16 first, an error of 2^-8 |log p| in
// each exp(log p), several bf16 roundings of the gradient.
TEST(Bf16Loss, TheLogitsGradientIsTheFloat64OneRoundedToBf16) {
  ModelConfig c = testing::TinyGpt();
  c.precision = Precision::kBf16;
  c.dropout = 0;
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 7);
  const int loss_layer = model->num_layers() - 1;
  const at::Tensor batch = model->MakeBatch(7, 3);
  at::manual_seed(5);
  const int64_t n = c.micro_batch * c.seq_len, V = c.vocab;
  at::Tensor logits = (at::randn({c.micro_batch, c.seq_len, V}) * 3).to(at::kBFloat16);
  logits.set_requires_grad(true);
  at::Tensor loss = model->Forward(loss_layer, logits, batch, DropoutSeeds{});
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  loss.backward();
  const at::Tensor grad = logits.grad();
  ASSERT_EQ(grad.scalar_type(), at::kBFloat16);

  const at::Tensor z = logits.detach().to(at::kDouble).view({n, V});
  const at::Tensor one_hot = at::one_hot(batch[1].reshape({n}), V).to(at::kDouble);
  const at::Tensor reference = (at::softmax(z, 1) - one_hot) / static_cast<double>(n);
  const at::Tensor error = (grad.to(at::kDouble).view({n, V}) - reference).abs();
  const at::Tensor bound =
      reference.abs() * std::ldexp(1.0, -8) + 2.0 * (V + 4) * std::ldexp(1.0, -24) / n;
  EXPECT_TRUE(error.le(bound).all().item<bool>())
      << "largest error over its bound " << (error / bound).max().item<double>();
}

}  // namespace
}  // namespace remat::runtime
