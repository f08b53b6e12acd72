// The runtime's selective options (attention_core, mlp_activation, both,
// norm_output, all three, dropout_mask and all four, ChainModel PartsOf) of
// gpt, llama and bert (mlm, eager and sdpa; mean pooling + mnrl, three
// text passes): each gives the gradients of running without checkpointing
// (fp32, dropout 0.1, within 1e-6 of the largest gradient), and plans
// mixing them, from a measured profile, reach the peak the simulator
// predicts.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "chain_model.h"
#include "cpu_step.h"
#include "lora_tiny.h"
#include "memory_meter.h"
#include "optimizer.h"
#include "profiler.h"
#include "remat/schedule/decisions.h"
#include "remat/simulate/simulator.h"
#include "schedule_executor.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

// Every block selective under `option` (the profile's index), the rest kept.
Schedule AllBlocksUnder(const Profile& p, const std::vector<int>& options) {
  std::vector<LayerDecision> decisions(p.num_layers(), LayerDecision::kKeep);
  std::vector<int> chosen(p.num_layers(), -1);
  int block = 0;
  for (int i = 0; i < p.num_layers(); ++i) {
    if (p.layers[i].kind != kBlockKind) continue;
    const int option = options[block++ % options.size()];
    if (option < 0) continue;
    decisions[i] = LayerDecision::kSelective;
    chosen[i] = option;
  }
  Result<Schedule> s = BuildSingleLevelSchedule(p, decisions, chosen);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : Schedule{};
}

std::vector<at::Tensor> GradientsOf(const ModelConfig& c, const Schedule& schedule, double* loss) {
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 7);
  model->AllocateGradients();
  ScheduleExecutor executor(*model, nullptr, CpuMeter(), 7);
  Result<StepResult> r = executor.RunStep(schedule, model->MakeBatch(7, 3), 3);
  EXPECT_TRUE(r.ok()) << r.status().message();
  *loss = r.ok() ? r->loss : 0;
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : model->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

struct Case {
  std::string name;
  ModelConfig config;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (AttentionImpl a : {AttentionImpl::kEager, AttentionImpl::kSdpa}) {
    const std::string suffix = a == AttentionImpl::kEager ? "_eager" : "_sdpa";
    ModelConfig gpt = testing::TinyGpt(), llama = testing::TinyLlama();
    gpt.attention = llama.attention = a;
    out.push_back({"gpt" + suffix, gpt});
    out.push_back({"llama" + suffix, llama});
  }
  // Post-LN encoders: the MLP activation, ln1's output and the dropout
  // masks.
  out.push_back({"bert_mlm", testing::TinyBert(Head::kMlm)});
  out.push_back({"bert_mean_mnrl", testing::TinyBert(Head::kPooling)});
  // SDPA's math path keeps its own mask: only the residual masks go.
  ModelConfig sdpa = testing::TinyBert(Head::kMlm);
  sdpa.attention = AttentionImpl::kSdpa;
  out.push_back({"bert_mlm_sdpa", sdpa});
  return out;
}

class SelectiveOptions : public ::testing::TestWithParam<Case> {};

TEST_P(SelectiveOptions, EachOptionGivesTheGradientsOfNoCheckpointing) {
  const ModelConfig& c = GetParam().config;
  const Profile p = testing::AnalyticOf(c);
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 7);
  const int options = 7;
  ASSERT_EQ(model->selective_options(), options);
  ASSERT_EQ(p.layers[1].selective.size(), static_cast<size_t>(options));
  double reference_loss = 0;
  const std::vector<at::Tensor> reference =
      GradientsOf(c, testing::PlannerSchedule(p, Strategy::kNone), &reference_loss);
  double largest = 0;
  for (const at::Tensor& r : reference) largest = std::max(largest, r.abs().max().item<double>());
  ASSERT_GT(largest, 0);
  for (int option = 0; option < options; ++option) {
    SCOPED_TRACE(p.layers[1].selective[option].name);
    const Schedule s = AllBlocksUnder(p, {option});
    ASSERT_TRUE(ValidateSchedule(s, p).ok());
    double loss = 0;
    const std::vector<at::Tensor> g = GradientsOf(c, s, &loss);
    ASSERT_EQ(g.size(), reference.size());
    EXPECT_EQ(loss, reference_loss);
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      worst = std::max(worst, (g[i] - reference[i]).abs().max().item<double>());
    }
    EXPECT_LE(worst, 1e-6 * std::max(1.0, largest)) << "largest " << largest;
  }
}

// A plan with the blocks under `options` (in turn), from the measured
// profile `p`, reaches the simulated peak: every forward and every backward
// to the byte, but the backward of an option whose measured backward peaks
// below the full one (norm_output: its recompute workspace, the difference,
// is clamped at 0 in the profile, so the simulator is that much above
// there), and the step's peak to the byte.
void ExpectMeasuredPeakIsPredicted(const ModelConfig& c, const Profile& p,
                                   const std::vector<int>& options) {
  const Schedule s = AllBlocksUnder(p, options);
  testing::SimulatedAndRun both;
  ASSERT_TRUE(testing::SimulateAndRunOnCpu(c, p, s, &both));
  const SimulationResult* sim = &both.sim;
  const StepResult* r = &both.run;
  const int64_t measured_base = both.measured_base, simulated_base = both.simulated_base;
  std::vector<int> option_of(p.num_layers(), -1);
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::kForward && op.save == SaveMode::kSelective) {
      option_of[op.layer] = op.option;
    }
  }
  for (size_t k = 0; k < s.ops.size(); ++k) {
    if (s.ops[k].kind == OpKind::kBackward) {
      const int option = option_of[s.ops[k].layer];
      const int64_t measured_peak = r->ops[k].peak - measured_base;
      const int64_t simulated_peak = sim->timeline[k].peak - simulated_base;
      const LayerProfile& layer = p.layers[s.ops[k].layer];
      if (option >= 0 && layer.selective[option].recompute_workspace_bytes == 0) {
        EXPECT_LE(measured_peak, simulated_peak) << "op " << k << " " << DescribeOp(s.ops[k]);
      } else {
        EXPECT_EQ(measured_peak, simulated_peak) << "op " << k << " " << DescribeOp(s.ops[k]);
      }
    }
    if (s.ops[k].kind != OpKind::kForward) continue;
    EXPECT_EQ(r->ops[k].live_after - measured_base, sim->timeline[k].live_after - simulated_base)
        << "op " << k << " " << DescribeOp(s.ops[k]);
    EXPECT_EQ(r->ops[k].peak - measured_base, sim->timeline[k].peak - simulated_base)
        << "op " << k << " " << DescribeOp(s.ops[k]);
  }
  const int64_t measured = r->peak_bytes - measured_base;
  const int64_t predicted = sim->peak_bytes - simulated_base;
  std::cout << c.name << " under options " << options[0] << "," << options[1] << ": predicted peak "
            << predicted << " B, measured " << measured << " B\n";
  EXPECT_EQ(measured, predicted);
}

// A measured profile lists the seven options with what they keep; plans
// with the blocks under mlp_activation and attention_core+mlp_activation,
// under norm_output and all three, and under dropout_mask and all four,
// reach the simulated peak.
TEST_P(SelectiveOptions, MeasuredPeakIsThePredictedPeakFromAMeasuredProfile) {
  const ModelConfig& c = GetParam().config;
  MeasureOptions m;
  m.warmup = 0;
  m.repeats = 1;
  Result<Profile> profile = MeasureProfile(c, m, Timing{}, CpuMeter());
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  const LayerProfile& block = profile->layers[1];
  ASSERT_EQ(block.selective.size(), 7u);
  EXPECT_EQ(block.selective[1].name, kMlpActivationOption);
  EXPECT_EQ(block.selective[3].name, kNormOutputOption);
  EXPECT_EQ(block.selective[4].name, kAllSelectiveOption);
  EXPECT_LT(block.selective[1].activation_bytes, block.activation_bytes);
  EXPECT_LT(block.selective[2].activation_bytes, block.selective[0].activation_bytes);
  EXPECT_LT(block.selective[2].activation_bytes, block.selective[1].activation_bytes);
  EXPECT_LT(block.selective[3].activation_bytes, block.activation_bytes);
  EXPECT_LT(block.selective[4].activation_bytes, block.selective[2].activation_bytes);
  EXPECT_GT(block.selective[3].extra_recompute_ms, 0);
  EXPECT_EQ(block.selective[5].name, kDropoutMaskOption);
  EXPECT_EQ(block.selective[6].name, kAllWithDropoutOption);
  EXPECT_LT(block.selective[5].activation_bytes, block.activation_bytes);
  EXPECT_LT(block.selective[6].activation_bytes, block.selective[4].activation_bytes);
  EXPECT_GT(block.selective[5].extra_recompute_ms, 0);
  {
    SCOPED_TRACE("mlp_activation, attention_core+mlp_activation");
    ExpectMeasuredPeakIsPredicted(c, *profile, {1, 2});
  }
  {
    SCOPED_TRACE("norm_output, attention_core+mlp_activation+norm_output");
    ExpectMeasuredPeakIsPredicted(c, *profile, {3, 4});
  }
  {
    SCOPED_TRACE("dropout_mask, attention_core+mlp_activation+norm_output+dropout_mask");
    ExpectMeasuredPeakIsPredicted(c, *profile, {5, 6});
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, SelectiveOptions, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// A schedule naming an option the model does not run is refused up front.
TEST(SelectiveOptionsCheck, LoraBertRunsTheAttentionCoreOnly) {
  const ModelConfig c = testing::WithLora(testing::TinyBert(Head::kMlm), kLoraAllLinear, false);
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 7);
  EXPECT_EQ(model->selective_options(), 1);
  Schedule s;
  s.num_layers = model->num_layers();
  s.ops = {Op::Forward(1, SaveMode::kSelective, 1)};
  const Status st = ScheduleExecutor::Check(s, *model);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("0 (attention_core) for this model"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace remat::runtime
