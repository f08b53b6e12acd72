// The chunked (fused linear) cross-entropy in the analytic model
// (heads.cc ChunkedLmLoss, ModelConfig::loss_chunks): what the head and the
// loss keep and allocate, the model.json field and its checks, Liger-Kernel's
// automatic chunk count, and the no-fit advice that plans it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "remat/analytic/analytic.h"
#include "remat/input/input.h"
#include "remat/planning/job.h"
#include "remat/planning/planning.h"
#include "remat/profile/profile.h"
#include "testing/cpu_kept.h"

namespace remat {
namespace {

constexpr int64_t kH = 64, kV = 4096, kS = 32, kB = 2, kTokens = kS * kB;

ModelConfig Llama(Precision precision, int64_t chunks) {
  ModelConfig c;
  c.name = "llama";
  c.architecture = Architecture::kLlama;
  c.layers = 2;
  c.hidden = kH;
  c.heads = 4;
  c.ffn_hidden = 128;
  c.vocab = kV;
  c.seq_len = kS;
  c.micro_batch = kB;
  c.dropout = 0;
  c.precision = precision;
  c.loss_chunks = chunks;
  return c;
}

const LayerProfile& Layer(const Profile& p, const std::string& name) {
  for (const LayerProfile& l : p.layers) {
    if (l.name == name) return l;
  }
  ADD_FAILURE() << "no layer " << name;
  return p.layers.front();
}

Profile Cpu(const ModelConfig& c) { return testing::ProfileOnCpu(c); }

// The rows' small tensors of a chunk of m rows beside its logits: the n
// targets' valid mask (1 byte each) and each row's target index (int64)
// and weight (fp32); after the softmax's reductions also each row's picked
// logit, max and sum (fp32); while the chunk's loss is summed the four fp32
// row temporaries of that expression and their fp32 sum.
constexpr int64_t Rows(int64_t m) { return kTokens + m * (8 + 4); }
constexpr int64_t Reduced(int64_t m) { return Rows(m) + m * 3 * 4; }
constexpr int64_t Summing(int64_t m) { return Reduced(m) + m * 4 * 4 + 4; }

// fp32, 8 chunks of 8 rows: the head keeps the input's gradient (n x h)
// and its loss; through its forward it holds the weight's gradient (V x h)
// and one chunk's logits, in which the gradient is made in place (8 x V),
// with its rows' small tensors.
// The loss keeps nothing of the logits: the plain head keeps x for the
// weight's gradient and the loss the log-probabilities (n x V).
TEST(ChunkedLoss, HeadKeepsTheInputsGradientAndHoldsOneChunk) {
  const Profile plain = Cpu(Llama(Precision::kFp32, 0)), chunked = Cpu(Llama(Precision::kFp32, 8));
  const LayerProfile& head = Layer(chunked, "head");
  EXPECT_EQ(head.output_bytes, 4);
  EXPECT_EQ(head.activation_bytes, 4 + kTokens * kH * 4);
  EXPECT_EQ(head.forward_workspace_bytes, kV * kH * 4 + 8 * kV * 4 + Summing(8));
  EXPECT_EQ(Layer(chunked, "loss").activation_bytes, 4);
  EXPECT_EQ(Layer(plain, "loss").activation_bytes, 4 + kTokens * kV * 4);
  // The weight's gradient is still the head's parameter gradient.
  EXPECT_EQ(head.gradient_bytes, Layer(plain, "head").gradient_bytes);
  EXPECT_EQ(chunked.parameters, plain.parameters);
}

// amp_bf16: x and the fp32 weight cast to bf16 once; a chunk's bf16 logits
// and their fp32 copy live together, as do the fp32 gradient and its bf16
// cast (6 bytes an element); the bf16 weight gradient of a chunk (V x h x
// 2) is added into the fp32 one.
TEST(ChunkedLoss, AutocastCastsOnceAndKeepsTheChunkInFp32) {
  const Profile profile = Cpu(Llama(Precision::kAmpBf16, 8));
  const LayerProfile& head = Layer(profile, "head");
  const int64_t chunk = std::max({8 * kV * 4 + Summing(8), 8 * kV * 6 + Rows(8),
                                  8 * kV * 2 + kV * kH * 2 + Reduced(8)});
  EXPECT_EQ(head.forward_workspace_bytes, kV * kH * 2 + kTokens * kH * 2 + kV * kH * 4 + chunk);
}

// Soft-capped logits (Gemma 2's final_logit_softcapping): a chunk's fp32
// tanh output t and the capped logits c * t, in which the gradient is made,
// live together (8 bytes an element, over the 4 or 6 of the plain chunk);
// nothing logits-sized is kept, where the plain soft-capped loss keeps
// tanh's output and the log-probabilities.
TEST(ChunkedLoss, SoftCapHoldsTheTanhOutputBesideTheChunk) {
  ModelConfig c = Llama(Precision::kFp32, 8);
  c.logit_softcap = 30;
  const Profile fp32 = Cpu(c);
  EXPECT_EQ(Layer(fp32, "head").forward_workspace_bytes, kV * kH * 4 + 8 * kV * 8 + Summing(8));
  EXPECT_EQ(Layer(fp32, "head").activation_bytes, 4 + kTokens * kH * 4);
  EXPECT_EQ(Layer(fp32, "loss").activation_bytes, 4);
  c.loss_chunks = 0;
  EXPECT_EQ(Layer(Cpu(c), "loss").activation_bytes, 4 + kTokens * kV * 4);
  EXPECT_GE(Layer(Cpu(c), "head").activation_bytes, kTokens * kV * 4);  // tanh's output
  c.precision = Precision::kAmpBf16;
  c.loss_chunks = 8;
  const int64_t chunk = std::max({8 * kV * 6 + Rows(8), 8 * kV * 8 + Summing(8),
                                  8 * kV * 2 + kV * kH * 2 + Reduced(8)});
  EXPECT_EQ(Layer(Cpu(c), "head").forward_workspace_bytes,
            kV * kH * 2 + kTokens * kH * 2 + kV * kH * 4 + chunk);
  // model.json takes the two together and writes them back.
  Result<ModelConfig> parsed = ParseModelConfig(
      R"({"architecture": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128,
          "vocab": 4096, "seq_len": 32, "loss_chunks": 4, "logit_softcap": 30})",
      "m.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->loss_chunks, 4);
  EXPECT_EQ(parsed->logit_softcap, 30.0);
}

TEST(ChunkedLoss, AutoIsLigerKernelsChunkSize) {
  // ceil(4096 / 64) = 64; 64 tokens / 64 = 1 row a chunk: 64 chunks.
  ModelConfig c = Llama(Precision::kFp32, kLossChunksAuto);
  EXPECT_EQ(WithDefaults(c).loss_chunks, 64);
  // 2048 tokens, vocab 128256 over 4096: factor 32, 64 rows a chunk.
  c.seq_len = 1024;
  c.hidden = 4096;
  c.vocab = 128256;
  EXPECT_EQ(WithDefaults(c).loss_chunks, 32);
  // 100 tokens over factor 64: 2 rows, rounded up to a power of two.
  c = Llama(Precision::kFp32, kLossChunksAuto);
  c.seq_len = 50;
  EXPECT_EQ(WithDefaults(c).loss_chunks, 50);
}

TEST(ChunkedLoss, ModelJsonFieldAndItsChecks) {
  const std::string base =
      R"({"architecture": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128,
          "vocab": 4096, "seq_len": 32)";
  Result<ModelConfig> c = ParseModelConfig(base + R"(, "loss_chunks": 8})", "m.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->loss_chunks, 8);
  Result<ModelConfig> again = ParseModelConfig(ModelConfigToJson(*c), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->loss_chunks, 8);
  // "auto" resolves with the file's other defaults (32 tokens over
  // ceil(4096 / 64) = 64: one row a chunk).
  c = ParseModelConfig(base + R"(, "loss_chunks": "auto"})", "m.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->loss_chunks, 32);
  // A config.json's "remat" block sets it as model.json does.
  c = ParseHfConfig(R"({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
                        "remat": {"loss_chunks": 4}})",
                    "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->loss_chunks, 4);
  // Without the field the file is written as it was.
  c = ParseModelConfig(base + "}", "m.json");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ModelConfigToJson(*c).find("loss_chunks"), std::string::npos);
  for (const auto& [json, message] : std::vector<std::pair<std::string, std::string>>{
           {base + R"(, "loss_chunks": 0})", "expected an integer in [1"},
           {base + R"(, "loss_chunks": "some"})", "or \"auto\", got \"some\""},
           {base + R"(, "loss_chunks": 4, "head": "classification"})",
            "head is \"classification\""}}) {
    Result<ModelConfig> bad = ParseModelConfig(json, "m.json");
    ASSERT_FALSE(bad.ok()) << json;
    EXPECT_NE(bad.status().message().find("m.json: field 'loss_chunks'"), std::string::npos)
        << bad.status().message();
    EXPECT_NE(bad.status().message().find(message), std::string::npos) << bad.status().message();
  }
}

// A budget between the chunked and the plain job's lowest peaks: the advice
// plans the chunked loss and says what it saves.
TEST(ChunkedLoss, FitAdvicePlansTheChunkedLoss) {
  Result<PlannerInput> in = ParsePlannerInput(
      R"({"architecture": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128,
          "vocab": 32768, "seq_len": 256, "micro_batch": 2, "dropout": 0})",
      "m.json");
  ASSERT_TRUE(in.ok()) << in.status().message();
  Result<Job> job = MakeJob(*in, {});
  ASSERT_TRUE(job.ok()) << job.status().message();
  JobOverrides chunked_overrides;
  chunked_overrides.loss_chunks = kLossChunksAuto;
  Result<Job> chunked = MakeJob(*in, chunked_overrides);
  ASSERT_TRUE(chunked.ok()) << chunked.status().message();
  PlanOptions o;
  o.strategy = Strategy::kAuto;
  Result<PlanSet> best = MakePlan(chunked->profile, o);
  ASSERT_TRUE(best.ok());
  o.budget_bytes = best->chosen.memory.total_bytes + 1024;
  Result<PlanSet> plans = MakePlan(job->profile, o);
  ASSERT_TRUE(plans.ok());
  ASSERT_FALSE(plans->chosen.fits);
  const FitAdvice a = AdviseFit(*job, *plans, o, false);
  EXPECT_NE(a.message.find("; --chunked-loss "), std::string::npos) << a.message;
  EXPECT_NE(a.message.find(": chunked loss saves "), std::string::npos) << a.message;
  // A job that chunks its loss already is not told to.
  const FitAdvice again = AdviseFit(*chunked, *MakePlan(chunked->profile, o), o, false);
  EXPECT_EQ(again.message.find("chunked loss"), std::string::npos) << again.message;
}

}  // namespace
}  // namespace remat
