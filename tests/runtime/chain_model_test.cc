// The runtime's models against the planner's analytic op model: the same
// chain, the planner's exact parameter counts, and the bytes each layer keeps
// for backward (measured by the CPU meter) as the op graph says.
#include "chain_model.h"

#include <gtest/gtest.h>

#include "cpu_profiles.h"
#include "device.h"
#include "encoder_lora_tiny.h"
#include "lora_tiny.h"
#include "memory_meter.h"
#include "profiler.h"
#include "remat/analytic/analytic.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

class Families : public ::testing::TestWithParam<std::pair<std::string, ModelConfig>> {
 protected:
  const ModelConfig& config() const { return GetParam().second; }
};

TEST_P(Families, ParameterCountsAreThePlannersExactCounts) {
  const Profile analytic = testing::AnalyticOf(config());
  std::unique_ptr<ChainModel> model = MakeChainModel(config(), at::Device(at::kCPU), 1);
  EXPECT_EQ(model->parameter_count(), analytic.parameters);
  // Only trained weights get gradients (an unused pooler does not).
  int64_t trained = 0;
  for (const at::Tensor& p : model->parameters()) trained += p.numel();
  EXPECT_EQ(4 * trained, analytic.total_gradient_bytes());
  EXPECT_EQ(model->num_layers(), analytic.num_layers());
}

TEST_P(Families, InputsKeptAreThePlannersAndGradientsAreCreatedPerLayer) {
  const Profile analytic = testing::AnalyticOf(config());
  std::unique_ptr<ChainModel> model = MakeChainModel(config(), at::Device(at::kCPU), 1);
  for (int i = 0; i < model->num_layers(); ++i) {
    EXPECT_EQ(model->keeps_input(i), analytic.layers[i].keeps_input) << model->layer_name(i);
  }
  MeasureOptions o;
  o.warmup = 0;
  o.repeats = 1;
  Result<Profile> measured = MeasureProfile(config(), o, Timing{}, CpuMeter());
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  for (int i = 0; i < model->num_layers(); ++i) {
    // Each layer's backward creates the gradients the analytic model gives
    // it (a tied embedding's at the head).
    EXPECT_EQ(measured->layers[i].gradient_bytes, analytic.layers[i].gradient_bytes)
        << model->layer_name(i);
    EXPECT_EQ(measured->layers[i].keeps_input, analytic.layers[i].keeps_input);
  }
}

// Each layer's kept bytes (activation_bytes: everything a forward with grad
// keeps, output included), in full and under the selective option, measured
// by the CPU meter, against the analytic op graph's for `c` on --device cpu
// (dropout masks and LayerNorm statistics in the activation dtype, as
// PyTorch's CPU kernels keep them): equal to the byte, but for a few scalars
// of the loss (a scalar in the model's dtype, modeled fp32; nll_loss's total
// weight, mnrl's norms).
void ExpectKeptBytesOfTheAnalyticModel(const ModelConfig& c) {
  SCOPED_TRACE(std::string("attention ") + ToString(c.attention) + ", " + ToString(c.precision));
  Profile measured, analytic;
  ASSERT_TRUE(testing::MeasuredAndAnalyticOnCpu(c, &measured, &analytic));
  for (int i = 0; i < analytic.num_layers(); ++i) {
    const LayerProfile &m = measured.layers[i], &a = analytic.layers[i];
    EXPECT_EQ(m.name, a.name);
    EXPECT_EQ(m.kind, a.kind);
    if (m.kind == "loss") {
      EXPECT_NEAR(m.activation_bytes, a.activation_bytes, 32) << m.name;
      continue;
    }
    EXPECT_EQ(m.output_bytes, a.output_bytes) << m.name;
    EXPECT_EQ(m.skip_bytes, a.skip_bytes) << m.name;
    if (m.kind == "head" && c.head == Head::kPooling && c.precision == Precision::kFp32) {
      // Mean pooling's backward: the sum's gradient only (the product's is a
      // broadcast view of it); a few bytes of the meter's rounding.
      EXPECT_NEAR(m.backward_workspace_bytes, a.backward_workspace_bytes, 64) << m.name;
    }
    EXPECT_EQ(m.activation_bytes, a.activation_bytes) << m.name;
    if (m.kind == "block") {
      // Every selective option, in the same order (attention_core, and for
      // gpt, llama and the encoders without LoRA mlp_activation, both,
      // norm_output and all three; with dropout dropout_mask and all four).
      ASSERT_EQ(m.selective.size(), a.selective.size()) << m.name;
      for (size_t k = 0; k < a.selective.size(); ++k) {
        EXPECT_EQ(m.selective[k].name, a.selective[k].name) << m.name;
        EXPECT_EQ(m.selective[k].activation_bytes, a.selective[k].activation_bytes)
            << m.name << " " << a.selective[k].name;
      }
    }
  }
}

// Every attention implementation the runtime runs.
std::vector<ModelConfig> WithEachAttention(ModelConfig c) {
  std::vector<ModelConfig> out;
  for (AttentionImpl a : {AttentionImpl::kEager, AttentionImpl::kSdpa, AttentionImpl::kFlash}) {
    c.attention = a;
    out.push_back(c);
  }
  return out;
}

// With dropout (sdpa on CPU: PyTorch's math path) and without (sdpa: the
// fused CPU kernel). bf16: llama's RMSNorm keeps an fp32 copy of x and its
// eager softmax an fp32 probability matrix beside the bf16 one; mean
// pooling sums in fp32.
TEST_P(Families, KeptBytesAreTheAnalyticModels) {
  for (const ModelConfig& c : WithEachAttention(config())) ExpectKeptBytesOfTheAnalyticModel(c);
}

TEST_P(Families, KeptBytesAreTheAnalyticModelsWithoutDropout) {
  ModelConfig c = config();
  c.dropout = 0;
  for (const ModelConfig& each : WithEachAttention(c)) ExpectKeptBytesOfTheAnalyticModel(each);
}

TEST_P(Families, KeptBytesAreTheAnalyticModelsInBf16) {
  ModelConfig c = config();
  c.precision = Precision::kBf16;
  for (const ModelConfig& each : WithEachAttention(c)) ExpectKeptBytesOfTheAnalyticModel(each);
}

// LoRA and QLoRA: the frozen base keeps only what the adapters and the
// input gradient need; nf4 bases keep nothing (dequantized per call).
TEST(LoraFamilies, KeptBytesAreTheAnalyticModels) {
  std::vector<std::pair<std::string, ModelConfig>> families = testing::TinyLoraFamilies();
  for (auto& each : testing::TinyEncoderLoraFamilies()) families.push_back(each);
  for (const auto& [name, c] : families) {
    SCOPED_TRACE(name);
    ExpectKeptBytesOfTheAnalyticModel(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, Families, ::testing::ValuesIn(testing::TinyFamilies()),
                         [](const auto& info) { return info.param.first; });

// sentence-transformers without column merging (merge_columns false)
// encodes each text group in its own pass: the chain repeats embedding,
// blocks and head per pass, the first passes' heads skip their sentence
// embeddings to the loss. Merged columns: merged_columns_test.cc.
TEST(TextPasses, TripletsRunThreePassesThenTheLoss) {
  ModelConfig c = testing::TinyBert(Head::kPooling);
  c.merge_columns = false;
  ASSERT_EQ(c.texts_per_example, 3);
  std::unique_ptr<ChainModel> model = MakeChainModel(c, at::Device(at::kCPU), 1);
  const int per_pass = static_cast<int>(c.layers) + 2;
  ASSERT_EQ(model->num_layers(), 3 * per_pass + 1);
  EXPECT_EQ(model->passes(), 3);
  EXPECT_EQ(model->layer_name(0), "p1.embedding");
  EXPECT_EQ(model->layer_name(per_pass + 2), "p2.block1");
  EXPECT_EQ(model->layer_name(3 * per_pass - 1), "p3.head");
  EXPECT_EQ(model->layer_name(3 * per_pass), "loss");
  EXPECT_EQ(model->DescribeChain(),
            "3 passes of (embedding, " + std::to_string(c.layers) + " blocks, head), loss");
  std::vector<int> skipping;
  for (int i = 0; i < model->num_layers(); ++i) {
    if (model->skips_to_loss(i)) skipping.push_back(i);
  }
  EXPECT_EQ(skipping, (std::vector<int>{per_pass - 1, 2 * per_pass - 1}));
  EXPECT_EQ(model->PassBoundary().numel(), 0);
  const std::unique_ptr<ChainModel> mlm =
      MakeChainModel(testing::TinyBert(Head::kMlm), at::Device(at::kCPU), 1);
  EXPECT_EQ(mlm->passes(), 1);
  EXPECT_EQ(mlm->layer_name(0), "embedding");
  EXPECT_EQ(mlm->DescribeChain(), "embedding, " + std::to_string(c.layers) + " blocks, head, loss");
}

TEST(ModelSupports, RefusesWhatItCannotRunInOneLine) {
  ModelConfig gpt = testing::TinyGpt();
  gpt.head = Head::kPooling;
  EXPECT_EQ(ModelSupports(gpt).message(),
            "the runtime's gpt has the lm head only; head 'pooling' can be planned (analytic) but "
            "not run (the runtime runs mlm, pooling and classification on bert)");
  for (AttentionImpl a : {AttentionImpl::kSdpa, AttentionImpl::kFlash}) {
    ModelConfig fused = testing::TinyLlama();
    fused.attention = a;
    EXPECT_TRUE(ModelSupports(fused).ok()) << ToString(a);
  }
  ModelConfig odd = testing::TinyLlama();
  odd.head_dim = 7;
  EXPECT_EQ(ModelSupports(odd).message(),
            "head_dim 7 is odd: rotary embeddings rotate pairs of channels");
  for (const auto& [name, c] : testing::TinyFamilies()) EXPECT_TRUE(ModelSupports(c).ok()) << name;
}

}  // namespace
}  // namespace remat::runtime
