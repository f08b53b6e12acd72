// LoRA and QLoRA in the runtime's models (gpt, llama, the encoders): the frozen base gets
// no gradient, only the adapters are trained, and every checkpointing
// strategy gives the adapters the gradients of running without it (fp32,
// lora_dropout and dropout on, within 1e-6), nf4 bases included.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "chain_model.h"
#include "encoder_lora_tiny.h"
#include "lora_tiny.h"
#include "memory_meter.h"
#include "schedule_executor.h"

namespace remat::runtime {
namespace {

class LoraModels : public ::testing::TestWithParam<std::pair<std::string, ModelConfig>> {
 protected:
  const ModelConfig& config() const { return GetParam().second; }

  // A fresh model whose adapters (B too, zeros at PEFT's init) are drawn
  // uniform(-0.1, 0.1), so that A's gradients are not zero.
  std::unique_ptr<ChainModel> MakeModel() const {
    std::unique_ptr<ChainModel> model = MakeChainModel(config(), at::Device(at::kCPU), 7);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
    c10::NoGradGuard no_grad;
    for (const at::Tensor& p : model->parameters()) at::Tensor(p).uniform_(-0.1, 0.1, gen);
    model->AllocateGradients();
    return model;
  }

  // The adapters' gradients after one step of `schedule` (no update).
  std::vector<at::Tensor> Gradients(const Schedule& schedule, double* loss) const {
    std::unique_ptr<ChainModel> model = MakeModel();
    ScheduleExecutor executor(*model, nullptr, CpuMeter(), 5);
    Result<StepResult> r = executor.RunStep(schedule, model->MakeBatch(7, 3), 3);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) *loss = r->loss;
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : model->parameters()) grads.push_back(p.grad().clone());
    for (const at::Tensor& w : model->frozen_weights()) EXPECT_FALSE(w.grad().defined());
    return grads;
  }
};

TEST_P(LoraModels, OnlyTheAdaptersTrainAndAllWeightsCount) {
  ASSERT_TRUE(ModelSupports(config()).ok()) << ModelSupports(config()).message();
  const Profile analytic = testing::AnalyticOf(config());
  std::unique_ptr<ChainModel> model = MakeChainModel(config(), at::Device(at::kCPU), 1);
  EXPECT_EQ(model->parameter_count(), analytic.parameters);
  int64_t trained = 0;
  for (const at::Tensor& p : model->parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_EQ(p.dim(), 2);
    EXPECT_TRUE(p.size(0) == config().lora_rank || p.size(1) == config().lora_rank);
    trained += p.numel();
  }
  EXPECT_GT(trained, 0);
  EXPECT_EQ(4 * trained, analytic.total_gradient_bytes());  // created in backward
  for (const at::Tensor& w : model->frozen_weights()) EXPECT_FALSE(w.requires_grad());
  // PEFT's init: B zeros, so the adapted model computes the base model's
  // function (the same loss as without adapters, before any update).
  ModelConfig base = config();
  base.lora_rank = 0;
  base.lora_targets = 0;
  base.lora_dropout = 0;
  ModelConfig lora = config();
  lora.lora_dropout = 0;
  const bool nf4 = config().quantization == Quantization::kNf4;
  if (!nf4) {
    std::unique_ptr<ChainModel> a = MakeChainModel(base, at::Device(at::kCPU), 1);
    std::unique_ptr<ChainModel> b = MakeChainModel(lora, at::Device(at::kCPU), 1);
    const Profile p = testing::AnalyticOf(base);
    const Schedule none = testing::PlannerSchedule(p, Strategy::kNone);
    ScheduleExecutor ea(*a, nullptr, CpuMeter(), 5), eb(*b, nullptr, CpuMeter(), 5);
    a->AllocateGradients();
    b->AllocateGradients();
    Result<StepResult> ra = ea.RunStep(none, a->MakeBatch(7, 3), 3);
    Result<StepResult> rb = eb.RunStep(none, b->MakeBatch(7, 3), 3);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->loss, rb->loss);
  }
}

TEST_P(LoraModels, EveryStrategyGivesTheAdaptersTheGradientsOfNone) {
  ASSERT_TRUE(ModelSupports(config()).ok()) << ModelSupports(config()).message();
  const Profile profile = testing::AnalyticOf(config());
  double reference_loss = 0;
  const std::vector<at::Tensor> reference =
      Gradients(testing::PlannerSchedule(profile, Strategy::kNone), &reference_loss);
  ASSERT_FALSE(reference.empty());
  double largest = 0;
  for (const at::Tensor& g : reference) {
    // Every adapter, A and B, gets a gradient.
    EXPECT_GT(g.abs().max().item<double>(), 0);
    largest = std::max(largest, g.abs().max().item<double>());
  }
  // A different dropout draw gives different gradients: lora_dropout is on.
  {
    std::unique_ptr<ChainModel> model = MakeModel();
    ScheduleExecutor executor(*model, nullptr, CpuMeter(), 6);
    ASSERT_TRUE(
        executor
            .RunStep(testing::PlannerSchedule(profile, Strategy::kNone), model->MakeBatch(7, 3), 3)
            .ok());
    EXPECT_FALSE(at::equal(model->parameters()[0].grad(), reference[0]));
  }
  const std::vector<std::pair<Strategy, std::vector<int>>> strategies = {
      {Strategy::kUniform, {}},
      {Strategy::kSegment, {}},
      {Strategy::kSelective, {}},
      {Strategy::kManual, {0, 2, 3}}};
  for (const auto& [strategy, layers] : strategies) {
    SCOPED_TRACE(ToString(strategy));
    const Schedule schedule = testing::PlannerSchedule(profile, strategy, layers);
    ASSERT_TRUE(ValidateSchedule(schedule, profile).ok());
    double loss = 0;
    const std::vector<at::Tensor> g = Gradients(schedule, &loss);
    ASSERT_EQ(g.size(), reference.size());
    EXPECT_EQ(loss, reference_loss);
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      worst = std::max(worst, (g[i] - reference[i]).abs().max().item<double>());
    }
    EXPECT_LE(worst, 1e-6 * std::max(1.0, largest));
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, LoraModels, ::testing::ValuesIn(testing::TinyLoraFamilies()),
                         [](const auto& info) { return info.param.first; });
INSTANTIATE_TEST_SUITE_P(TinyEncoders, LoraModels,
                         ::testing::ValuesIn(testing::TinyEncoderLoraFamilies()),
                         [](const auto& info) { return info.param.first; });

}  // namespace
}  // namespace remat::runtime
