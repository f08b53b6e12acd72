// The chunked (fused linear) cross-entropy (chunked_loss.h,
// ModelConfig::loss_chunks): its gradients are the plain loss's (plain and
// soft-capped logits), and the peak it saves on the CPU is the one the
// planner predicts.
#include "chunked_loss.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "chain_model.h"
#include "cpu_step.h"
#include "memory_meter.h"
#include "remat/analytic/analytic.h"
#include "remat/planning/planning.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

// Each gradient element below is a sum of at most max(tokens, vocab,
// hidden) = 1024 fp32 products, summed blockwise by ATen and BLAS: about
// log2(1024) * 2^-24 = 6e-7 relative rounding in each, whichever order the
// chunks impose. 1e-5 of the tensor's largest element bounds that with a
// margin for the layers it passes through.
constexpr double kRelative = 1e-5;

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  const double scale = std::max(want.abs().max().item<double>(), 1e-30);
  return (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>() / scale;
}

TEST(ChunkedLoss, EqualsCrossEntropyOfTheLinearInFloat64) {
  at::manual_seed(5);
  const int64_t n = 37, h = 16, V = 1024;
  const at::Tensor x0 = at::randn({n, h}, at::kDouble), w0 = at::randn({V, h}, at::kDouble) * 0.1;
  at::Tensor targets = at::randint(V, {n}, at::kLong);
  targets[3] = -100;  // ignored, as F.cross_entropy ignores it
  // The reference: F.cross_entropy of the whole logits, in float64.
  const at::Tensor xr = x0.clone().requires_grad_(true), wr = w0.clone().requires_grad_(true);
  const at::Tensor ref =
      at::cross_entropy_loss(at::linear(xr, wr), targets, {}, at::Reduction::Mean, -100);
  ref.backward();
  for (int64_t chunks : {1, 4, 5, 37, 100}) {
    SCOPED_TRACE(chunks);
    const at::Tensor x = x0.to(at::kFloat).requires_grad_(true);
    const at::Tensor w = w0.to(at::kFloat).requires_grad_(true);
    const at::Tensor loss = ChunkedLmLoss(x, w, targets, chunks);
    (loss * 2).backward();  // a loss gradient other than 1 scales both
    EXPECT_LE(std::abs(loss.item<double>() - ref.item<double>()), kRelative * ref.item<double>());
    EXPECT_LE(RelativeError(x.grad() / 2, xr.grad()), kRelative);
    EXPECT_LE(RelativeError(w.grad() / 2, wr.grad()), kRelative);
  }
  // A frozen weight (LoRA's head) gets no gradient; x still does.
  const at::Tensor x = x0.to(at::kFloat).requires_grad_(true);
  ChunkedLmLoss(x, w0.to(at::kFloat), targets, 3).backward();
  EXPECT_LE(RelativeError(x.grad(), xr.grad()), kRelative);
}

// Soft-capped logits (Gemma 2's final_logit_softcapping): the loss of
// cap * tanh(logits / cap). Logits of about 0.4 (x of 1, weights of 0.1
// over 16) against a cap of 0.5: tanh far from linear.
TEST(ChunkedLoss, SoftCappedEqualsCrossEntropyOfTheCappedLinearInFloat64) {
  at::manual_seed(5);
  const int64_t n = 37, h = 16, V = 1024;
  const double cap = 0.5;
  const at::Tensor x0 = at::randn({n, h}, at::kDouble), w0 = at::randn({V, h}, at::kDouble) * 0.1;
  at::Tensor targets = at::randint(V, {n}, at::kLong);
  targets[3] = -100;
  const at::Tensor xr = x0.clone().requires_grad_(true), wr = w0.clone().requires_grad_(true);
  const at::Tensor capped = at::tanh(at::linear(xr, wr) / cap) * cap;
  const at::Tensor ref = at::cross_entropy_loss(capped, targets, {}, at::Reduction::Mean, -100);
  ref.backward();
  for (int64_t chunks : {1, 4, 5, 37, 100}) {
    SCOPED_TRACE(chunks);
    const at::Tensor x = x0.to(at::kFloat).requires_grad_(true);
    const at::Tensor w = w0.to(at::kFloat).requires_grad_(true);
    const at::Tensor loss = ChunkedLmLoss(x, w, targets, chunks, cap);
    (loss * 2).backward();
    EXPECT_LE(std::abs(loss.item<double>() - ref.item<double>()), kRelative * ref.item<double>());
    EXPECT_LE(RelativeError(x.grad() / 2, xr.grad()), kRelative);
    EXPECT_LE(RelativeError(w.grad() / 2, wr.grad()), kRelative);
  }
}

// A tiny llama and gpt whose vocabulary (1024 over hidden 32) makes the
// logits the step's largest tensors; no dropout, so that both runs draw
// nothing.
ModelConfig Tiny(Architecture a, bool tied, int64_t chunks) {
  ModelConfig c = a == Architecture::kLlama ? testing::TinyLlama() : testing::TinyGpt(2);
  c.vocab = 1024;
  c.dropout = 0;
  c.tie_embeddings = tied;
  c.loss_chunks = chunks;
  return c;
}

std::vector<at::Tensor> Gradients(const ModelConfig& c, double* loss) {
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 7);
  model->AllocateGradients();
  ScheduleExecutor executor(*model, nullptr, CpuMeter(), 7);
  const Profile p = testing::AnalyticOf(c);
  Result<StepResult> r =
      executor.RunStep(testing::PlannerSchedule(p, Strategy::kNone), model->MakeBatch(7, 3), 3);
  EXPECT_TRUE(r.ok()) << r.status().message();
  *loss = r.ok() ? r->loss : 0;
  std::vector<at::Tensor> grads;
  for (const at::Tensor& g : model->parameters()) grads.push_back(g.grad().clone());
  return grads;
}

TEST(ChunkedLoss, TheChainsGradientsAreThePlainLosss) {
  for (Architecture a : {Architecture::kLlama, Architecture::kGpt}) {
    for (bool tied : {false, true}) {
      SCOPED_TRACE(std::string(ToString(a)) + (tied ? " tied" : " untied"));
      double plain_loss = 0, chunked_loss = 0;
      const std::vector<at::Tensor> plain = Gradients(Tiny(a, tied, 0), &plain_loss);
      const std::vector<at::Tensor> chunked = Gradients(Tiny(a, tied, 5), &chunked_loss);
      ASSERT_EQ(plain.size(), chunked.size());
      EXPECT_NEAR(chunked_loss, plain_loss, kRelative * plain_loss);
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_LE(RelativeError(chunked[i], plain[i]), kRelative) << "parameter " << i;
      }
    }
  }
}

// The step without checkpointing, plain and chunked, simulated against the
// CPU's analytic profile and run with the CPU meter: what the chunked loss
// saves at the peak of the forward and backward ops is what the planner
// predicts, within 1%. (The optimizer step, whose first call makes AdamW's
// moments, is not the subject: with the logits chunked it can become the
// step's peak.) The runtime holds the weight's gradient from the head's
// forward to its backward, which the planner counts in the head's forward
// and then as the gradient its backward makes: the same at both peaks, and
// the loss layer between them allocates nothing.
TEST(ChunkedLoss, MeasuredPeakSavingIsThePredictedOne) {
  AnalyticOptions cpu;
  cpu.device = *LookupDevice("cpu");
  for (int64_t chunks : {4, 16}) {
    SCOPED_TRACE(chunks);
    int64_t predicted[2] = {0, 0}, measured[2] = {0, 0};
    for (int chunked = 0; chunked < 2; ++chunked) {
      ModelConfig c = Tiny(Architecture::kLlama, false, chunked ? chunks : 0);
      c.vocab = 4096;  // the head's peak stays the step's with the logits chunked
      Result<Profile> p = AnalyticProfile(c, cpu);
      ASSERT_TRUE(p.ok()) << p.status().message();
      const Schedule s = testing::PlannerSchedule(*p, Strategy::kNone);
      testing::SimulatedAndRun r;
      ASSERT_TRUE(testing::SimulateAndRunOnCpu(c, *p, s, &r));
      for (size_t k = 0; k < s.ops.size(); ++k) {
        if (s.ops[k].kind == OpKind::kOptimizerStep) continue;
        predicted[chunked] =
            std::max(predicted[chunked], r.sim.timeline[k].peak - r.simulated_base);
        measured[chunked] = std::max(measured[chunked], r.run.ops[k].peak - r.measured_base);
      }
    }
    const int64_t want = predicted[0] - predicted[1], got = measured[0] - measured[1];
    EXPECT_GT(want, 0);
    EXPECT_LE(std::abs(got - want), want / 100) << "predicted " << want << ", measured " << got;
  }
}

// The chunked head's forward in fp32, run with the CPU meter, peaks at the
// bytes the planner predicts for it, to the byte: a chunk's logits (beside
// t where soft-capped), the weight's gradient and the rows' small tensors
// (each row's target index, weight, picked logit, max and sum, and the
// temporaries of the chunk's loss sum). (In 16 bits the CPU's matmuls
// allocate buffers of their own, which depend on the CPU's kernels:
// docs/chunked-loss.md.)
TEST(ChunkedLoss, TheHeadsForwardPeakIsThePredictedOneToTheByte) {
  AnalyticOptions cpu;
  cpu.device = *LookupDevice("cpu");
  struct Case {
    const char* name;
    Architecture architecture;
    double softcap;
    int64_t chunks;
  };
  for (const Case& k : {Case{"llama, 4 chunks", Architecture::kLlama, 0, 4},
                        Case{"gpt, 16 chunks", Architecture::kGpt, 0, 16},
                        Case{"llama soft-capped", Architecture::kLlama, 30, 4}}) {
    SCOPED_TRACE(k.name);
    ModelConfig c = Tiny(k.architecture, false, k.chunks);
    c.logit_softcap = k.softcap;
    Result<Profile> p = AnalyticProfile(c, cpu);
    ASSERT_TRUE(p.ok()) << p.status().message();
    int head = -1;
    for (size_t i = 0; i < p->layers.size(); ++i) {
      if (p->layers[i].name == "head") head = static_cast<int>(i);
    }
    ASSERT_GE(head, 0);
    const Schedule s = testing::PlannerSchedule(*p, Strategy::kNone);
    testing::SimulatedAndRun r;
    ASSERT_TRUE(testing::SimulateAndRunOnCpu(c, *p, s, &r));
    bool seen = false;
    for (size_t i = 0; i < s.ops.size(); ++i) {
      if (s.ops[i].kind != OpKind::kForward || s.ops[i].layer != head) continue;
      seen = true;
      EXPECT_EQ(r.run.ops[i].peak - r.measured_base, r.sim.timeline[i].peak - r.simulated_base);
    }
    EXPECT_TRUE(seen);
  }
}

}  // namespace
}  // namespace remat::runtime
