// Byte arithmetic: real 100B+ models at long sequences are computed exactly
// in 64 bits; absurd inputs are rejected with a message instead of wrapping.
// Several cases are inputs on which UBSan reports undefined behaviour without
// the checks.
#include <gtest/gtest.h>

#include <limits>

#include "remat/analytic/analytic.h"
#include "remat/report/report.h"
#include "remat/simulate/simulator.h"
#include "remat/strategies/strategies.h"
#include "remat/io/units.h"
#include "testing/chains.h"

namespace remat {
namespace {

ModelConfig Gpt3(int64_t seq_len, AttentionImpl attention) {
  ModelConfig c;
  c.name = "gpt3-175b";
  c.layers = 96;
  c.hidden = 12288;
  c.heads = 96;
  c.ffn_hidden = 4 * 12288;
  c.vocab = 50257;
  c.seq_len = seq_len;
  c.max_position = seq_len;
  c.micro_batch = 1;
  c.precision = Precision::kBf16;
  c.attention = attention;
  return c;
}

TEST(Overflow, A175BModelAtAMillionTokensIsExact) {
  const int64_t s = 1 << 20, h = 12288;
  Result<Profile> p = AnalyticProfile(Gpt3(s, AttentionImpl::kFlash), {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_GT(p->parameters, 174'000'000'000);
  // bf16 weights, grads (created in backward), two moments.
  EXPECT_EQ(p->static_bytes() + p->total_gradient_bytes(), 8 * p->parameters);
  // The residual stream between blocks: s * h bf16 values, about 2^35 bytes.
  EXPECT_EQ(p->layers[1].input_bytes, s * h * 2);
  // The logits: s * vocab bf16 values, about 2^36.6 bytes.
  EXPECT_EQ(p->layers[p->num_layers() - 2].output_bytes, s * 50257 * 2);
  PlanOptions o;
  o.budget_bytes = int64_t{8} << 40;
  Result<PlanSet> plans = MakePlan(*p, o);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  EXPECT_GT(plans->baseline.predicted.peak_bytes, int64_t{1} << 45);
}

TEST(Overflow, EagerAttentionAt128kTokensIsExact) {
  const int64_t s = 1 << 17, h = 12288, a = 96;
  ModelConfig c = Gpt3(s, AttentionImpl::kEager);
  c.layers = 2;
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  // Korthikanti: s*b*h*(34 + 5*a*s/h), here about 2^43 bytes per block, and
  // the fp32 mean and rstd of two LayerNorms (16 bytes a token).
  EXPECT_EQ(p->layers[1].activation_bytes, s * h * 34 + 5 * a * s * s + 16 * s);
}

// Each tensor within 4 EiB but their sum past 2^63: the chain derivation
// added them in int64 (UBSan: signed integer overflow in chain.cc).
TEST(Overflow, TensorsThatAddUpPastInt64AreRejected) {
  ModelConfig c;
  c.name = "wide-attention";
  c.layers = 1;
  c.hidden = 64;
  c.heads = 1;
  c.ffn_hidden = 256;
  c.vocab = 128;
  c.seq_len = 1 << 24;
  c.max_position = 1 << 24;
  c.micro_batch = 1 << 12;  // heads * s^2 * b = 2^60 scores, 2^62 bytes in fp32
  Result<Profile> p = AnalyticProfile(c, {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(p.status().message().find("wide-attention: the model's byte counts overflow"),
            std::string::npos)
      << p.status().message();
}

// A selective option may keep more than the layer itself: its bytes are
// part of the profile's overflow bound, so the simulator's sums cannot wrap.
TEST(Overflow, SelectiveBytesCountTowardsTheProfileBound) {
  Profile p = testing::UniformChain(4);
  for (LayerProfile& l : p.layers) l.selective.push_back({"core", int64_t{1} << 61, 1.0, 0});
  const Status s = ValidateProfile(p, "profile.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("profile.json: layers[1] ('l1'): byte counts add up past 4 EiB"),
            std::string::npos)
      << s.message();
  PlanOptions o;
  o.strategy = Strategy::kSelective;
  EXPECT_FALSE(MakePlan(p, o).ok());
}

// x[i] and its gradient g[i] can both be live: input bytes count twice.
TEST(Overflow, InputsAndTheirGradientsCountTwice) {
  Profile p = testing::UniformChain(2, int64_t{1} << 61, int64_t{1} << 61);
  EXPECT_FALSE(ValidateProfile(p, "profile.json").ok());
  Profile fine = testing::UniformChain(2, int64_t{1} << 58, int64_t{1} << 59);
  ASSERT_TRUE(ValidateProfile(fine, "profile.json").ok());
  Result<PlanSet> plans = MakePlan(fine, PlanOptions{});
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  EXPECT_GT(plans->chosen.predicted.peak_bytes, 0);
}

// An analytic profile whose times exceed what a profile file may hold is
// refused when made, not written by `planner profile --analytic` and then
// refused as input.
TEST(Overflow, AbsurdTimesAreRejectedSoProfilesReadBack) {
  ModelConfig c = Gpt3(1 << 24, AttentionImpl::kEager);
  c.layers = 1;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = 256;
  c.vocab = 100;
  AnalyticOptions slow;
  slow.tflops = 1e-6;
  Result<Profile> p = AnalyticProfile(c, slow);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("times must be in [0, 1e12] ms"), std::string::npos)
      << p.status().message();
  Result<Profile> fast = AnalyticProfile(c, AnalyticOptions{});
  ASSERT_TRUE(fast.ok()) << fast.status().message();
  EXPECT_TRUE(ParseProfile(ProfileToJson(*fast), "p.json").ok());
}

TEST(Overflow, ModelFieldsHaveUpperBounds) {
  ModelConfig c = Gpt3(2048, AttentionImpl::kFlash);
  ASSERT_TRUE(ValidateModelConfig(c, "m.json").ok());
  for (auto set : std::vector<void (*)(ModelConfig&)>{
           [](ModelConfig& m) { m.vocab = int64_t{1} << 40; },
           [](ModelConfig& m) { m.ffn_hidden = int64_t{1} << 40; },
           [](ModelConfig& m) { m.grad_accumulation = int64_t{1} << 40; },
           [](ModelConfig& m) { m.max_position = int64_t{1} << 40; },
           [](ModelConfig& m) { m.layers = 100000; },
       }) {
    ModelConfig bad = c;
    set(bad);
    const Status s = ValidateModelConfig(bad, "m.json");
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("m.json: field '"), std::string::npos) << s.message();
  }
}

TEST(Overflow, ChainsLongerThan8192LayersAreRejected) {
  const Status s = ValidateProfile(testing::UniformChain(8193), "long.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("long.json: field 'layers': 8193 layers, at most 8192"),
            std::string::npos)
      << s.message();
}

// -INT64_MIN overflowed (UBSan: negation cannot be represented).
TEST(Overflow, FormattersTakeAnyValue) {
  EXPECT_EQ(FormatCount(std::numeric_limits<int64_t>::min()), "-9,223,372,036,854,775,808");
  EXPECT_EQ(FormatCount(std::numeric_limits<int64_t>::max()), "9,223,372,036,854,775,807");
  EXPECT_EQ(FormatBytes(std::numeric_limits<int64_t>::min()), "-8.00 EiB");
}

TEST(Overflow, BudgetsBeyond4EiBAreRejected) {
  EXPECT_EQ(*ParseBytes("4194304TiB"), int64_t{1} << 62);
  EXPECT_NE(ParseBytes("4194305TiB").status().message().find("too large"), std::string::npos);
  EXPECT_NE(ParseBytes(std::string(400, '9') + "GB").status().message().find("bad byte quantity"),
            std::string::npos);
}

}  // namespace
}  // namespace remat
