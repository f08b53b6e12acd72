// The token loss of 16-bit logits (planner/src/analytic/heads.cc,
// CrossEntropy; docs/analytic-model.md, "The token loss runs in fp32"),
// written out per logit for a pure-bf16 gpt: with loss_upcast (the default)
// the fp32 log-probabilities are kept (4 B), the forward holds the fp32 copy
// beside them (4 B) and the backward makes the log-probabilities' and the
// copy's fp32 gradients (4 B each) before the cast back; without it all is
// 16-bit. Sequence classification's loss never upcasts; model.json reads
// and writes the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "remat/analytic/analytic.h"
#include "remat/model/model_config.h"
#include "testing/minilm_job.h"

namespace remat {
namespace {

ModelConfig Bf16Gpt(bool upcast) {
  ModelConfig c;
  c.architecture = Architecture::kGpt;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = 256;
  c.vocab = 512;
  c.seq_len = 32;
  c.max_position = 32;
  c.micro_batch = 2;
  c.precision = Precision::kBf16;
  c.dropout = 0;
  c.loss_upcast = upcast;
  return WithDefaults(c);
}

LayerProfile LossOf(const ModelConfig& c) {
  Result<Profile> p = AnalyticProfile(c, AnalyticOptions{});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? testing::NamedLayer(*p, "loss") : LayerProfile{};
}

TEST(LossUpcast, Bf16LogitsAreCastToFp32ByDefault) {
  const ModelConfig c = Bf16Gpt(true);
  const int64_t logits = c.micro_batch * c.seq_len * c.vocab;  // n V
  const LayerProfile loss = LossOf(c);
  EXPECT_EQ(loss.activation_bytes, 4 * logits + 4);  // fp32 log-probabilities, the fp32 loss
  // The fp32 copy beside the log-probabilities, less the scalar loss.
  EXPECT_EQ(loss.forward_workspace_bytes, 4 * logits - 4);
  // The log-probabilities' gradient and the copy's (fp32), the logits'
  // (bf16) made while the copy's lives, less the kept log-probabilities
  // let go by then: 4 + 4 + 2 - 4 B a logit.
  EXPECT_EQ(loss.backward_workspace_bytes, 6 * logits);
}

TEST(LossUpcast, WithoutItTheLossIs16Bit) {
  const ModelConfig c = Bf16Gpt(false);
  const int64_t logits = c.micro_batch * c.seq_len * c.vocab;
  const LayerProfile loss = LossOf(c);
  EXPECT_EQ(loss.activation_bytes, 2 * logits + 4);
  EXPECT_EQ(loss.forward_workspace_bytes, 0);
}

TEST(LossUpcast, ClassificationLogitsKeepTheirDtype) {
  ModelConfig c = Bf16Gpt(true);
  c.architecture = Architecture::kBert;
  c.head = Head::kClassification;
  c.num_labels = 3;
  c = WithDefaults(c);
  // bf16 log-probabilities of the sequences' labels, the fp32 loss, and
  // the int64 targets nll_loss keeps.
  EXPECT_EQ(LossOf(c).activation_bytes, 2 * c.micro_batch * 3 + 4 + 8 * c.micro_batch);
}

TEST(LossUpcast, ModelJsonReadsAndWritesIt) {
  const std::string base =
      R"({"architecture": "gpt", "layers": 2, "hidden": 64, "heads": 4, "vocab": 512,
          "seq_len": 32, "micro_batch": 2, "precision": "bf16")";
  Result<ModelConfig> plain = ParseModelConfig(base + "}", "m.json");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_TRUE(plain->loss_upcast);
  EXPECT_FALSE(nlohmann::json::parse(ModelConfigToJson(*plain)).contains("loss_upcast"));
  Result<ModelConfig> off = ParseModelConfig(base + R"(, "loss_upcast": false})", "m.json");
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_FALSE(off->loss_upcast);
  EXPECT_EQ(nlohmann::json::parse(ModelConfigToJson(*off))["loss_upcast"], false);
  Result<ModelConfig> bad = ParseModelConfig(base + R"(, "loss_upcast": 1})", "m.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("loss_upcast"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace remat
