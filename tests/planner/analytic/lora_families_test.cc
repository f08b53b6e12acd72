// LoRA targets by the families' module names (Phi-3's fused qkv_proj and
// gate_up_proj, Mixtral's experts w1/w3/w2, a mixture of experts' router),
// the adapters PEFT puts on a mixture of experts' stacked parameters,
// counted exactly (tests/python/lora_families_test.py checks the same tiny
// configs against PEFT where it is installed), and what they keep.
#include <gtest/gtest.h>

#include <string>

#include "remat/analytic/analytic.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "testing/cpu_kept.h"
#include "testing/hf_config.h"

namespace remat {
namespace {

using testing::Hf;

// The tiny configs of tests/python/lora_families_test.py: h 64, 2 layers,
// 4 heads of 16, 2 key/value heads, f 96 (qwen3_moe's experts: 32), 4
// experts, top 2.
constexpr int64_t kH = 64, kF = 96, kE = 4, kR = 4, kLayers = 2;
const char* const kTiny =
    R"("architectures": ["ForCausalLM"], "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2)";

ModelConfig Tiny(const std::string& fields, const char* targets) {
  ModelConfig c = Hf("{" + std::string(kTiny) + ", " + fields + "}");
  c.lora_rank = kR;
  Result<uint32_t> bits = ParseLoraTargets(targets);
  EXPECT_TRUE(bits.ok()) << bits.status().message();
  c.lora_targets = bits.ok() ? *bits : 0;
  return c;
}

ModelConfig Mixtral(const char* targets) {
  return Tiny(R"("model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2)",
              targets);
}

// An adapter of rank r on `count` stacked in x out matrices (PEFT's
// lora_A count*r x in, lora_B out x count*r).
int64_t Adapter(int64_t count, int64_t rank, int64_t in, int64_t out) {
  return count * rank * (in + out);
}

TEST(LoraFamilies, ModuleNamesOfTheFamilies) {
  EXPECT_EQ(*ParseLoraTargets("qkv_proj"), kLoraQ | kLoraK | kLoraV);
  EXPECT_EQ(*ParseLoraTargets("gate_up_proj"), kLoraGate | kLoraUp);
  EXPECT_EQ(*ParseLoraTargets("w1,w3,w2"), kLoraGate | kLoraUp | kLoraDown);
  EXPECT_EQ(*ParseLoraTargets("router"), kLoraRouter);
  EXPECT_EQ(LoraTargetsToString(kLoraAllLinear), "all-linear");
  EXPECT_EQ(LoraTargetsToString(kLoraRouter | kLoraDown), "down,router");
  EXPECT_EQ(*ParseLoraTargets(LoraTargetsToString(kLoraAllLinear)), kLoraAllLinear);
}

TEST(LoraFamilies, MixtralExpertsAndRouterCountedAsPeftCountsThem) {
  const int64_t kv = 2 * 16, attention = Adapter(1, kR, kH, kH) + 2 * Adapter(1, kR, kH, kv) +
                                         Adapter(1, kR, kH, kH);
  // The fused gate_up_proj with twice the rank, down_proj with r; the
  // router (E x h) with r.
  const int64_t experts = Adapter(kE, 2 * kR, kH, 2 * kF) + Adapter(kE, kR, kF, kH);
  const int64_t router = Adapter(1, kR, kH, kE);
  EXPECT_EQ(TrainableParameterCount(Mixtral("w1,w3,w2")), kLayers * experts);
  EXPECT_EQ(TrainableParameterCount(Mixtral("router")), kLayers * router);
  EXPECT_EQ(TrainableParameterCount(Mixtral("all-linear")),
            kLayers * (attention + router + experts));
  // PEFT's get_nb_trainable_parameters on these configs (peft 0.21.2).
  EXPECT_EQ(TrainableParameterCount(Mixtral("all-linear")), 25'632);
  EXPECT_EQ(TrainableParameterCount(Mixtral("w2,o_proj")), 6'144);
  EXPECT_EQ(TrainableParameterCount(Tiny(R"("model_type": "qwen3_moe", "num_experts": 4,
      "num_experts_per_tok": 2, "moe_intermediate_size": 32, "head_dim": 16)",
                                         "all-linear")),
            15'392);
  // The adapters add to the model's parameters; the frozen base is as before.
  ModelConfig full = Mixtral("q");
  full.lora_rank = 0;
  full.lora_targets = 0;
  EXPECT_EQ(ParameterCount(Mixtral("all-linear")), ParameterCount(full) + 25'632);
}

TEST(LoraFamilies, PhiThreeFusedProjectionsAreOneAdapterEach) {
  const char* phi3 = R"("model_type": "phi3")";
  EXPECT_EQ(TrainableParameterCount(Tiny(phi3, "qkv_proj")),
            kLayers * Adapter(1, kR, kH, kH + 2 * 32));
  EXPECT_EQ(TrainableParameterCount(Tiny(phi3, "gate_up_proj,o_proj")),
            kLayers * (Adapter(1, kR, kH, 2 * kF) + Adapter(1, kR, kH, kH)));
  // q alone adapts the fused module as PEFT's qkv_proj does.
  EXPECT_EQ(TrainableParameterCount(Tiny(phi3, "q")),
            TrainableParameterCount(Tiny(phi3, "qkv_proj")));
}

TEST(LoraFamilies, RefusesTargetsPeftRefuses) {
  // One of the experts' fused gate and up.
  Status s = ValidateModelConfig(Mixtral("w1"), "config.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gate without up"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("gate_up_proj"), std::string::npos) << s.message();
  EXPECT_FALSE(ValidateModelConfig(Mixtral("up"), "config.json").ok());
  // A router in a dense model.
  s = ValidateModelConfig(Tiny(R"("model_type": "gemma2", "head_dim": 16)", "router"), "c.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no router"), std::string::npos) << s.message();
  // all-linear on a dense model has no router to adapt, and is accepted.
  EXPECT_TRUE(
      ValidateModelConfig(Tiny(R"("model_type": "gemma2", "head_dim": 16)", "all-linear"), "c")
          .ok());
}

int64_t Kept(const ModelConfig& c) { return testing::KeptOnCpu(c, "block0"); }

// In fp32 a stack of experts folds W + B @ A in one baddbmm: the grouped
// GEMM keeps the folded weight (E x out x in) and its input, the routed
// rows, which the frozen base GEMM did not keep. The router (an F.linear of
// W + delta) keeps its folded weight (E x h) and its input, the norm's
// output (the frozen router kept neither).
TEST(LoraFamilies, AdaptedExpertsKeepTheirFoldedWeightAndInput) {
  ModelConfig base = Mixtral("q"), down = Mixtral("q,w2"), router = Mixtral("q,router");
  base.seq_len = down.seq_len = router.seq_len = 16;
  base.micro_batch = down.micro_batch = router.micro_batch = 1;
  const int64_t routed = 16 * 2;  // tokens * top-k
  EXPECT_EQ(Kept(down) - Kept(base), 4 * (kE * kF * kH + routed * kF));
  EXPECT_EQ(Kept(router) - Kept(base), 4 * (kE * kH + 16 * kH));
}

}  // namespace
}  // namespace remat
