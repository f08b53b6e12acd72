// The runtime's models against the planner's analytic op model: the same
// chain, the planner's exact parameter counts, and the bytes each layer keeps
// for backward (measured by the CPU meter) as the op graph says.
#include "chain_model.h"

#include <gtest/gtest.h>

#include "device.h"
#include "memory_meter.h"
#include "profiler.h"
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

// LayerNorms in a layer of the chain (each keeps a mean and an rstd per row,
// fp32, which the op model leaves out: 8 bytes per row).
int LayerNormsIn(const ModelConfig& c, const std::string& kind) {
  if (c.architecture == Architecture::kLlama) return 0;  // RMSNorm: modeled exactly
  const bool bert = c.architecture == Architecture::kBert;
  if (kind == "block") return 2;
  if (kind == "norm") return 1;
  if (kind == "embedding") return bert ? 1 : 0;
  if (kind == "head") return c.head == Head::kMlm ? 1 : 0;
  return 0;
}

// Each layer's kept bytes (activation_bytes: everything a forward with grad
// keeps, output included), in full and under the selective option, measured
// against the analytic op graph's for `c` (on a CUDA device: the runtime's
// native_dropout keeps 1-byte masks on CPU too): equal but for a
// LayerNorm's mean and rstd, modeled fp32 as CUDA keeps them and kept in the
// weights' dtype on CPU (2 values per row), and a few scalars of the loss
// (nll_loss's total weight, mnrl's norms).
void ExpectKeptBytesOfTheAnalyticModel(const ModelConfig& c) {
  MeasureOptions o;
  o.warmup = 0;
  o.repeats = 1;
  Result<Profile> measured = MeasureProfile(c, o, Timing{}, CpuMeter());
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  const Profile analytic = testing::AnalyticOf(c);
  ASSERT_EQ(measured->num_layers(), analytic.num_layers());
  const int64_t rows = SequencesPerMicroBatch(c) * c.seq_len;
  const int64_t stat_bytes = c.precision == Precision::kFp32 ? 4 : 2;
  for (int i = 0; i < analytic.num_layers(); ++i) {
    const LayerProfile &m = measured->layers[i], &a = analytic.layers[i];
    EXPECT_EQ(m.name, a.name);
    EXPECT_EQ(m.kind, a.kind);
    if (m.kind == "loss") {  // the loss: a scalar in the model's dtype, modeled fp32
      EXPECT_NEAR(m.activation_bytes, a.activation_bytes, 32) << m.name;
      continue;
    }
    EXPECT_EQ(m.output_bytes, a.output_bytes) << m.name;
    if (m.kind == "head" && c.head == Head::kPooling && c.precision == Precision::kFp32) {
      // Mean pooling's backward: the sum's gradient only (the product's is a
      // broadcast view of it); a few bytes of the meter's rounding.
      EXPECT_NEAR(m.backward_workspace_bytes, a.backward_workspace_bytes, 64) << m.name;
    }
    const int64_t norms = 2 * (stat_bytes - 4) * rows * LayerNormsIn(c, m.kind);
    EXPECT_EQ(m.activation_bytes, a.activation_bytes + norms) << m.name;
    if (m.kind == "block") {
      ASSERT_EQ(m.selective.size(), 1u);
      ASSERT_EQ(a.selective.size(), 1u);
      EXPECT_EQ(m.selective[0].activation_bytes, a.selective[0].activation_bytes + norms) << m.name;
    }
  }
}

TEST_P(Families, KeptBytesAreTheAnalyticModels) { ExpectKeptBytesOfTheAnalyticModel(config()); }

// bf16: llama's RMSNorm keeps an fp32 copy of x and its softmax an fp32
// probability matrix beside the bf16 one; mean pooling sums in fp32.
TEST_P(Families, KeptBytesAreTheAnalyticModelsInBf16) {
  ModelConfig c = config();
  c.precision = Precision::kBf16;
  ExpectKeptBytesOfTheAnalyticModel(c);
}

INSTANTIATE_TEST_SUITE_P(Tiny, Families, ::testing::ValuesIn(testing::TinyFamilies()),
                         [](const auto& info) { return info.param.first; });

TEST(ModelSupports, RefusesWhatItCannotRunInOneLine) {
  ModelConfig gpt = testing::TinyGpt();
  gpt.head = Head::kPooling;
  EXPECT_EQ(ModelSupports(gpt).message(),
            "the runtime's gpt has the lm head only; head 'pooling' can be planned (analytic) but "
            "not run (the runtime runs mlm, pooling and classification on bert)");
  ModelConfig flash = testing::TinyLlama();
  flash.attention = AttentionImpl::kFlash;
  EXPECT_NE(ModelSupports(flash).message().find("eager attention only"), std::string::npos);
  ModelConfig odd = testing::TinyLlama();
  odd.head_dim = 7;
  EXPECT_EQ(ModelSupports(odd).message(),
            "head_dim 7 is odd: rotary embeddings rotate pairs of channels");
  for (const auto& [name, c] : testing::TinyFamilies()) EXPECT_TRUE(ModelSupports(c).ok()) << name;
}

}  // namespace
}  // namespace remat::runtime
