#include "remat/model/precision.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "remat/analytic/analytic.h"
#include "remat/planning/planning.h"

namespace remat {
namespace {

int Total(Precision p, Optimizer o, GradDtype g = GradDtype::kDefault) {
  return ModelStatePerParameter(p, o, g).total();
}

TEST(Precision, BytesPerParameterOfEachConvention) {
  EXPECT_EQ(Total(Precision::kFp32, Optimizer::kAdamW), 16);     // 4 + 4 + 8
  EXPECT_EQ(Total(Precision::kBf16, Optimizer::kAdamW), 8);      // 2 + 2 + 4
  EXPECT_EQ(Total(Precision::kAmpBf16, Optimizer::kAdamW), 16);  // fp32 weights, grads, moments
  EXPECT_EQ(Total(Precision::kAmpFp16, Optimizer::kAdamW), 16);
  // Megatron: 2 + 4 (main_grad) + 4 (master) + 8 = 18; DeepSpeed/ZeRO: 2 + 2 + 12 = 16.
  EXPECT_EQ(Total(Precision::kMixedBf16, Optimizer::kAdamW), 18);
  EXPECT_EQ(Total(Precision::kMixedBf16, Optimizer::kAdamW, GradDtype::kBf16), 16);
  EXPECT_EQ(Total(Precision::kMixedFp16, Optimizer::kAdamW, GradDtype::kFp16), 16);
  const BytesPerParameter zero =
      ModelStatePerParameter(Precision::kMixedBf16, Optimizer::kAdamW, GradDtype::kBf16);
  EXPECT_EQ(zero.weights, 2);
  EXPECT_EQ(zero.gradients, 2);
  EXPECT_EQ(zero.optimizer, 12);  // fp32 master weights + two fp32 moments
  EXPECT_EQ(Total(Precision::kMixedBf16, Optimizer::kSgd), 10);  // 2 + 4 + master 4
  EXPECT_EQ(Total(Precision::kMixedBf16, Optimizer::kNone), 6);  // no update, no master
}

TEST(Precision, SevenBillionParametersInMixedBf16) {
  const int64_t params = 6'738'415'616;  // Llama-2-7B
  Result<StaticMemory> zero =
      ModelStateBytes(params, params, Precision::kMixedBf16, Optimizer::kAdamW, GradDtype::kBf16);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->total(), 16 * params);
  Result<StaticMemory> megatron =
      ModelStateBytes(params, params, Precision::kMixedBf16, Optimizer::kAdamW);
  ASSERT_TRUE(megatron.ok());
  EXPECT_EQ(megatron->total(), 18 * params);
  EXPECT_EQ(megatron->parameter_bytes, 2 * params);
  EXPECT_EQ(megatron->gradient_bytes, 4 * params);
  EXPECT_EQ(megatron->optimizer_bytes, 12 * params);
}

TEST(Precision, TheTableIsInPrecisionOrder) {
  const std::vector<PrecisionConvention>& t = PrecisionConventions();
  ASSERT_EQ(t.size(), 7u);
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(t[i].precision), i);
    EXPECT_TRUE(ParsePrecision(ToString(t[i].precision)).ok());
  }
  EXPECT_TRUE(ConventionOf(Precision::kAmpFp16).loss_scaler);
  EXPECT_TRUE(ConventionOf(Precision::kMixedFp16).loss_scaler);
  EXPECT_FALSE(ConventionOf(Precision::kFp16).loss_scaler);  // GradScaler refuses fp16 grads
  EXPECT_TRUE(ConventionOf(Precision::kAmpBf16).autocast);
  EXPECT_FALSE(ConventionOf(Precision::kMixedBf16).autocast);
}

TEST(Precision, GradDtypeIsAChoiceForMixedOnly) {
  EXPECT_EQ(GradDtypeProblem(Precision::kMixedBf16, GradDtype::kFp32), "");
  EXPECT_EQ(GradDtypeProblem(Precision::kMixedBf16, GradDtype::kBf16), "");
  EXPECT_NE(GradDtypeProblem(Precision::kMixedBf16, GradDtype::kFp16), "");
  EXPECT_EQ(GradDtypeProblem(Precision::kBf16, GradDtype::kBf16), "");
  EXPECT_NE(GradDtypeProblem(Precision::kBf16, GradDtype::kFp32).find("mixed_bf16"),
            std::string::npos);
  EXPECT_EQ(GradDtypeProblem(Precision::kAmpFp16, GradDtype::kFp32), "");
  EXPECT_NE(GradDtypeProblem(Precision::kFp32, GradDtype::kBf16), "");
  Result<ModelConfig> bad = ParseModelConfig(
      R"({"layers": 1, "hidden": 8, "heads": 2, "vocab": 16, "seq_len": 4,
          "precision": "bf16", "grad_dtype": "fp32"})",
      "m.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("m.json"), std::string::npos);
  EXPECT_NE(bad.status().message().find("grad_dtype"), std::string::npos);
  Result<ModelConfig> good = ParseModelConfig(
      R"({"layers": 1, "hidden": 8, "heads": 2, "vocab": 16, "seq_len": 4,
          "precision": "mixed_bf16", "grad_dtype": "bf16"})",
      "m.json");
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->grad_dtype, GradDtype::kBf16);
  Result<ModelConfig> back = ParseModelConfig(ModelConfigToJson(*good), "again.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->grad_dtype, GradDtype::kBf16);
}

ModelConfig Gpt(Precision p) {
  ModelConfig c;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 2;
  c.vocab = 512;
  c.seq_len = 32;
  c.max_position = 32;
  c.micro_batch = 2;
  c.precision = p;
  c.ffn_hidden = 4 * c.hidden;
  return WithDefaults(c);
}

TEST(Precision, MixedActivationsAreSixteenBitLikePureBf16) {
  Result<Profile> pure = AnalyticProfile(Gpt(Precision::kBf16), {});
  Result<Profile> mixed = AnalyticProfile(Gpt(Precision::kMixedBf16), {});
  ASSERT_TRUE(pure.ok() && mixed.ok());
  ASSERT_EQ(pure->num_layers(), mixed->num_layers());
  for (int i = 0; i < pure->num_layers(); ++i) {
    EXPECT_EQ(pure->layers[i].activation_bytes, mixed->layers[i].activation_bytes) << i;
  }
  EXPECT_EQ(pure->static_memory.parameter_bytes, mixed->static_memory.parameter_bytes);
  EXPECT_GT(mixed->static_memory.optimizer_bytes, pure->static_memory.optimizer_bytes);
  // The fp16 loss scaler unscales the gradients once per update.
  Result<Profile> amp16 = AnalyticProfile(Gpt(Precision::kAmpFp16), {});
  Result<Profile> amp_bf = AnalyticProfile(Gpt(Precision::kAmpBf16), {});
  ASSERT_TRUE(amp16.ok() && amp_bf.ok());
  EXPECT_GT(amp16->optimizer_ms, amp_bf->optimizer_ms);
}

Job JobOf(const std::string& json) {
  Result<PlannerInput> in = ParsePlannerInput(json, "m.json");
  EXPECT_TRUE(in.ok()) << in.status().message();
  Result<Job> job = MakeJob(*in, {});
  EXPECT_TRUE(job.ok()) << job.status().message();
  return *job;
}

// The hint for a small job in `precision` under a budget of `state_fraction`
// of its model state (nothing fits).
FitAdvice AdviceFor(const std::string& precision, double state_fraction) {
  const Job job = JobOf(
      R"({"layers": 4, "hidden": 256, "heads": 4, "vocab": 4096, "seq_len": 64,
          "micro_batch": 1, "dropout": 0, "optimizer": "adamw", "precision": ")" +
      precision + "\"}");
  PlanOptions o;
  o.budget_bytes = static_cast<int64_t>(state_fraction * job.profile.static_bytes());
  Result<PlanSet> plans = MakePlan(job.profile, o);
  EXPECT_TRUE(plans.ok() && !plans->chosen.fits);
  return AdviseFit(job, *plans, o, true);
}

// The model state alone does not fit: the hint names conventions the job
// does not use yet, each with its predicted peak, never the job's own.
TEST(FitAdvice, NamesWhatWouldFitNeverWhatIsSet) {
  // Between the pure-bf16 state with its optimizer step's foreach square
  // roots (8 + 2 B/param) and the amp state (16 B/param).
  const FitAdvice a = AdviceFor("amp_bf16", 0.9);
  EXPECT_TRUE(a.model_state_exceeds_budget);
  EXPECT_NE(a.message.find("precision bf16 + LoRA (lora_rank 16 on q,v) fits ("), std::string::npos)
      << a.message;
  EXPECT_NE(a.message.find("peak"), std::string::npos) << a.message;
  EXPECT_EQ(a.message.find("precision amp_bf16"), std::string::npos) << a.message;

  const FitAdvice b = AdviceFor("bf16", 0.999);
  EXPECT_TRUE(b.model_state_exceeds_budget);
  EXPECT_EQ(b.message.find("precision bf16"), std::string::npos) << b.message;
  EXPECT_EQ(b.message.find("16-bit"), std::string::npos) << b.message;
  EXPECT_NE(b.message.find("shard"), std::string::npos) << b.message;

  // An optimizer with smaller state, with its peak and step time, never
  // the job's own: Adafactor's factored moment (next to no state) here,
  // and 8-bit AdamW's (2 B/param of moments against 8) at a looser budget.
  auto names = [](const FitAdvice& f, const std::string& optimizer) {
    const std::string fits = "optimizer " + optimizer + " fits (";
    const size_t at = f.message.find(fits);
    if (at == std::string::npos) return false;
    const std::string said = f.message.substr(at, f.message.find(')', at) - at);
    return said.find(", device peak ") != std::string::npos &&
           said.find(" per step") != std::string::npos;
  };
  EXPECT_TRUE(names(a, "adafactor")) << a.message;
  EXPECT_EQ(a.message.find("optimizer adamw "), std::string::npos) << a.message;
  const FitAdvice loose = AdviceFor("amp_bf16", 1.2);
  EXPECT_TRUE(names(loose, "adamw8bit")) << loose.message;

  // mixed_bf16 with fp32 gradients (18 B/param): 16-bit gradients (16 B)
  // fit, alone (among the combinations that fit, listed or not).
  const FitAdvice m = AdviceFor("mixed_bf16", 0.999);
  EXPECT_TRUE(std::any_of(m.alternatives.begin(), m.alternatives.end(),
                          [](const FitAlternative& alt) {
                            return alt.changes == std::vector<std::string>{"grad_dtype bf16"} &&
                                   alt.flags == "--grad-dtype bf16" && alt.plan.fits;
                          }))
      << m.message;
  EXPECT_EQ(m.message.find("precision mixed_bf16"), std::string::npos) << m.message;
}

}  // namespace
}  // namespace remat
