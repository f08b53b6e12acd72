#include "profiler.h"

#include <gtest/gtest.h>

#include "device.h"
#include "memory_meter.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

class Profiler : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TinyGpt();
    MeasureOptions o;
    o.warmup = 0;
    o.repeats = 1;
    Result<Profile> p = MeasureProfile(config_, o, Timing{}, CpuMeter());
    ASSERT_TRUE(p.ok()) << p.status().message();
    profile_ = *p;
  }
  ModelConfig config_;
  Profile profile_;
};

TEST_F(Profiler, ChainMatchesTheAnalyticChain) {
  const Profile analytic = testing::AnalyticOf(config_);
  ASSERT_EQ(profile_.num_layers(), analytic.num_layers());
  for (int i = 0; i < analytic.num_layers(); ++i) {
    EXPECT_EQ(profile_.layers[i].name, analytic.layers[i].name);
    EXPECT_EQ(profile_.layers[i].kind, analytic.layers[i].kind);
  }
  EXPECT_EQ(profile_.source, "libtorch-cpu");
  EXPECT_EQ(profile_.parameters, analytic.parameters);
  EXPECT_TRUE(ValidateProfile(profile_, "measured").ok());
}

TEST_F(Profiler, StaticMemoryIsExact) {
  // fp32 AdamW: 4 bytes of weights, 4 of gradients, 8 of moments per
  // parameter; the causal mask ((b, 1, s, s) fp32) is a buffer beside the
  // weights. The gradients are created in backward: the layers' (PyTorch's
  // zero_grad).
  const int64_t n = profile_.parameters, s = config_.seq_len, b = config_.micro_batch;
  EXPECT_EQ(profile_.static_memory.parameter_bytes, 4 * n);
  EXPECT_EQ(profile_.static_memory.buffer_bytes, 4 * b * s * s);
  EXPECT_EQ(profile_.static_memory.gradient_bytes, 0);
  EXPECT_EQ(profile_.total_gradient_bytes(), 4 * n);
  EXPECT_EQ(profile_.static_memory.optimizer_bytes, 8 * n);
}

TEST(ProfilerGradients, PersistentBuffersAreModelState) {
  ModelConfig c = testing::TinyGpt();
  c.gradients = Gradients::kPersistent;
  MeasureOptions o;
  o.warmup = 0;
  o.repeats = 1;
  Result<Profile> p = MeasureProfile(c, o, Timing{}, CpuMeter());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->static_memory.gradient_bytes, 4 * p->parameters);
  EXPECT_EQ(p->total_gradient_bytes(), 4 * p->parameters);
}

TEST_F(Profiler, SizesAreTheTensorsOfTheChain) {
  const int64_t tokens = config_.micro_batch * config_.seq_len;
  const LayerProfile& embedding = profile_.layers.front();
  EXPECT_EQ(embedding.input_bytes, 2 * tokens * 8);  // inputs and targets, int64
  EXPECT_EQ(embedding.output_bytes, tokens * config_.hidden * 4);
  EXPECT_EQ(profile_.layers.back().output_bytes, 4);  // the loss
  for (const LayerProfile& l : profile_.layers) {
    EXPECT_GE(l.activation_bytes, l.output_bytes) << l.name;
    if (l.kind != "block") continue;
    // then norm_output, all three, dropout_mask and all four (dropout on)
    ASSERT_EQ(l.selective.size(), 7u);
    EXPECT_EQ(l.selective[0].name, "attention_core");
    EXPECT_EQ(l.selective[1].name, "mlp_activation");
    EXPECT_EQ(l.selective[2].name, "attention_core+mlp_activation");
    // Dropping the s x s attention tensors, GELU's output, or both keeps less.
    EXPECT_LT(l.selective[0].activation_bytes, l.activation_bytes) << l.name;
    EXPECT_LT(l.selective[1].activation_bytes, l.activation_bytes) << l.name;
    EXPECT_LT(l.selective[2].activation_bytes, l.selective[0].activation_bytes) << l.name;
  }
}

TEST(ProfilerStatistic, MinTakesTheFastestRepetitionAndOthersAreRefused) {
  const ModelConfig config = testing::TinyGpt();
  MeasureOptions o;
  o.warmup = 0;
  o.repeats = 3;
  o.statistic = "min";
  Result<Profile> fastest = MeasureProfile(config, o, Timing{}, CpuMeter());
  ASSERT_TRUE(fastest.ok()) << fastest.status().message();
  EXPECT_NE(fastest->device.find("fastest of 3"), std::string::npos) << fastest->device;
  EXPECT_TRUE(ValidateProfile(*fastest, "measured").ok());
  o.statistic = "mean";
  Result<Profile> refused = MeasureProfile(config, o, Timing{}, CpuMeter());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "unknown timing statistic 'mean'; accepted: median, min");
}

}  // namespace
}  // namespace remat::runtime
