#include "remat/model/model_config.h"

#include <gtest/gtest.h>

#include "remat/input/input.h"

namespace remat {
namespace {

constexpr char kMinimal[] =
    R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32})";

TEST(ModelConfig, DefaultsAreDocumented) {
  Result<ModelConfig> c = ParseModelConfig(kMinimal, "m.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "model");
  EXPECT_EQ(c->architecture, Architecture::kGpt);
  EXPECT_EQ(c->ffn_hidden, 256);
  EXPECT_EQ(c->micro_batch, 1);
  EXPECT_EQ(c->max_position, 32);
  EXPECT_EQ(c->grad_accumulation, 1);
  EXPECT_EQ(c->precision, Precision::kFp32);
  EXPECT_EQ(c->optimizer, Optimizer::kAdamW);
  EXPECT_EQ(c->attention, AttentionImpl::kEager);
  EXPECT_DOUBLE_EQ(c->dropout, 0.1);
  EXPECT_TRUE(c->tie_embeddings);
  Result<ModelConfig> llama = ParseModelConfig(
      R"({"architecture":"llama","layers":1,"hidden":4096,"heads":32,"vocab":10,"seq_len":8})",
      "m");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->ffn_hidden, 11008);
  EXPECT_FALSE(llama->tie_embeddings);
}

TEST(ModelConfig, GradientsConventionIsAKeyWithAPrecisionDefault) {
  ModelConfig c = *ParseModelConfig(kMinimal, "m.json");
  EXPECT_EQ(c.gradients, Gradients::kDefault);
  EXPECT_EQ(GradientsOf(c), Gradients::kCreatedInBackward);
  c.precision = Precision::kMixedFp16;
  EXPECT_EQ(GradientsOf(c), Gradients::kPersistent);
  Result<ModelConfig> p = ParseModelConfig(
      R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32,
          "gradients": "persistent"})",
      "m.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(GradientsOf(*p), Gradients::kPersistent);
  EXPECT_EQ(ParseModelConfig(ModelConfigToJson(*p), "back.json")->gradients,
            Gradients::kPersistent);
  Result<ModelConfig> bad = ParseModelConfig(
      R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32,
          "gradients": "default"})",
      "m.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("m.json: field 'gradients'"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(*ParseGradients("created_in_backward"), Gradients::kCreatedInBackward);
  EXPECT_FALSE(ParseGradients("lazy").ok());
}

TEST(ModelConfig, RoundTripsThroughJson) {
  ModelConfig c = *ParseModelConfig(kMinimal, "m.json");
  c.precision = Precision::kAmpBf16;
  Result<ModelConfig> back = ParseModelConfig(ModelConfigToJson(c), "m.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(ModelConfigToJson(*back), ModelConfigToJson(c));
}

std::string Error(const std::string& json) {
  Result<ModelConfig> c = ParseModelConfig(json, "model.json");
  EXPECT_FALSE(c.ok()) << json;
  return c.ok() ? "" : c.status().message();
}

TEST(ModelConfig, TrainingLoopKeysParseRoundTripAndRejectBadValues) {
  Result<ModelConfig> d = ParseModelConfig(kMinimal, "m.json");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->max_grad_norm, 0);  // no clipping unless asked
  EXPECT_EQ(d->lr_schedule, LrSchedule::kConstant);
  EXPECT_EQ(d->warmup_steps, 0);
  EXPECT_EQ(ModelConfigToJson(*d).find("max_grad_norm"), std::string::npos);
  Result<ModelConfig> c = ParseModelConfig(
      R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32,
          "max_grad_norm": 1.0, "lr_schedule": "cosine", "warmup_steps": 10})",
      "m.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_DOUBLE_EQ(c->max_grad_norm, 1.0);
  EXPECT_EQ(c->lr_schedule, LrSchedule::kCosine);
  EXPECT_EQ(c->warmup_steps, 10);
  Result<ModelConfig> back = ParseModelConfig(ModelConfigToJson(*c), "m.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->lr_schedule, LrSchedule::kCosine);
  EXPECT_EQ(ModelConfigToJson(*back), ModelConfigToJson(*c));
  const std::string base =
      R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32, )";
  std::string m = Error(base + R"("max_grad_norm": -1})");
  EXPECT_NE(m.find("'max_grad_norm'"), std::string::npos) << m;
  m = Error(base + R"("lr_schedule": "step"})");
  EXPECT_NE(m.find("expected constant, linear or cosine"), std::string::npos) << m;
  m = Error(base + R"("warmup_steps": -3})");
  EXPECT_NE(m.find("'warmup_steps'"), std::string::npos) << m;
}

TEST(ModelConfig, BadInputSaysFileFieldAndWhatIsAccepted) {
  EXPECT_EQ(Error(R"({"layers": 2, "hidden": 64, "heads": 5, "vocab": 100, "seq_len": 32})"),
            "model.json: field 'heads': 5 does not divide hidden = 64 (head size must be a whole "
            "number)");
  EXPECT_EQ(Error(R"({"layers": 0, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32})"),
            "model.json: field 'layers': expected an integer in [1, 4096], got 0");
  EXPECT_EQ(Error(R"({"hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32})"),
            "model.json: field 'layers': missing (required)");
  std::string m = Error(R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32,
                            "precision": "fp8"})");
  EXPECT_NE(m.find("unknown value \"fp8\", expected fp32, bf16, fp16, amp_bf16, amp_fp16, "
                   "mixed_bf16 or mixed_fp16"),
            std::string::npos)
      << m;
  m = Error(
      R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32, "micro_bach": 4})");
  EXPECT_NE(m.find("unknown field 'micro_bach'"), std::string::npos) << m;
  m = Error(R"({"layers": "12", "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32})");
  EXPECT_NE(m.find("got \"12\""), std::string::npos) << m;
  m = Error(R"({"layers": 2.5, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32})");
  EXPECT_NE(m.find("'layers'"), std::string::npos) << m;
  m = Error(
      R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32, "dropout": 1.5})");
  EXPECT_NE(m.find("'dropout'"), std::string::npos) << m;
  m = Error(
      R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 64, "max_position": 32})");
  EXPECT_NE(m.find("'max_position'"), std::string::npos) << m;
  m = Error(
      R"({"layers": 99999999999999999999, "hidden": 64, "heads": 4, "vocab": 100, "seq_len": 32})");
  EXPECT_NE(m.find("'layers'"), std::string::npos) << m;
  EXPECT_NE(Error("{\"layers\": 2,").find("malformed JSON"), std::string::npos);
  EXPECT_NE(Error("[]").find("expected a JSON object"), std::string::npos);
}

constexpr char kLlamaShape[] =
    R"({"architecture":"llama","layers":1,"hidden":64,"heads":8,"vocab":10,"seq_len":8)";

TEST(ModelConfig, HeadAndAttentionFieldsAreChecked) {
  EXPECT_EQ(Error(std::string(kLlamaShape) + R"(,"kv_heads":3})"),
            "model.json: field 'kv_heads': 3 does not divide heads = 8 (each key/value head "
            "serves a whole group of query heads)");
  EXPECT_EQ(Error(R"({"layers":1,"hidden":64,"heads":4,"vocab":10,"seq_len":8,"head":"mlm"})"),
            "model.json: field 'head': \"mlm\" needs an encoder (architecture bert); for gpt use "
            "lm, pooling or classification");
  EXPECT_EQ(Error(R"({"layers":1,"hidden":64,"heads":4,"vocab":10,"seq_len":8,"num_labels":3})"),
            "model.json: field 'num_labels': only the classification head has labels (head is "
            "lm)");
  EXPECT_EQ(Error(R"({"layers":1,"hidden":64,"heads":4,"vocab":10,"seq_len":8,"loss":"mnrl"})"),
            "model.json: field 'loss': \"mnrl\" does not fit head \"lm\" (pooling takes mnrl; lm, "
            "mlm and classification take cross_entropy)");
  EXPECT_EQ(Error(R"({"layers":1,"hidden":64,"heads":4,"vocab":10,"seq_len":8,"pooler":true})"),
            "model.json: field 'pooler': true: only bert has a pooler (gpt has none)");
  std::string m = Error(R"({"layers":1,"hidden":64,"heads":4,"vocab":10,"seq_len":8,
                            "head":"pooling","pooling":"max"})");
  EXPECT_NE(m.find("unknown value \"max\", expected mean or cls"), std::string::npos) << m;
  m = Error(R"({"layers":1,"hidden":64,"heads":4,"vocab":10,"seq_len":8,"head":"default"})");
  EXPECT_NE(m.find("expected lm, mlm, pooling or classification"), std::string::npos) << m;
}

// A config with several problems reports the first in the checks' order
// (model_config_validate.cc), whichever way it was split into checks.
TEST(ModelConfig, ValidationReportsTheFirstProblemInCheckOrder) {
  ModelConfig c;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = 256;
  c.vocab = 100;
  c.seq_len = 32;
  c.max_position = 32;
  ASSERT_TRUE(ValidateModelConfig(c, "m.json").ok());
  // gpt's pooling head with a pooler and a chunked loss: the pooler first.
  c.head = Head::kPooling;
  c.pooler = true;
  c.loss_chunks = 4;
  EXPECT_EQ(ValidateModelConfig(c, "m.json").message(),
            "m.json: field 'pooler': true: only bert has a pooler (gpt has none)");
  // bert's classification head with a pooler and a chunked loss: the
  // chunked loss first, then the pooler against the head.
  c.architecture = Architecture::kBert;
  c.head = Head::kClassification;
  EXPECT_EQ(ValidateModelConfig(c, "m.json").message(),
            "m.json: field 'loss_chunks': the chunked loss is the lm head's cross-entropy (head "
            "is \"classification\"); expected head lm or no loss_chunks");
  c.loss_chunks = 0;
  EXPECT_EQ(ValidateModelConfig(c, "m.json").message(),
            "m.json: field 'pooler': true: the classification head's dense layer is the pooler "
            "(trained); expected false");
  // The attention's shape before the token types.
  c.architecture = Architecture::kGpt;
  c.head = Head::kLm;
  c.pooler = false;
  c.kv_heads = 2;
  c.type_vocab = 2;
  EXPECT_EQ(ValidateModelConfig(c, "m.json").message(),
            "m.json: field 'kv_heads': 2 differs from heads = 4: grouped-query attention is for "
            "llama only (gpt has one key/value head per query head)");
  c.kv_heads = 0;
  EXPECT_EQ(ValidateModelConfig(c, "m.json").message(),
            "m.json: field 'type_vocab': 2: only bert has token-type embeddings (gpt has none; "
            "accepted: 0)");
}

TEST(ModelConfig, NewFieldsRoundTripWithDefaultsResolved) {
  Result<ModelConfig> c = ParseModelConfig(
      R"({"architecture":"bert","layers":2,"hidden":64,"heads":4,"vocab":100,"seq_len":32,
          "head":"pooling","pooling":"cls","texts_per_example":3,"pooler":true})",
      "m.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->loss, Loss::kMnrl);
  EXPECT_EQ(c->type_vocab, 1);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->kv_heads, 4);
  Result<ModelConfig> back = ParseModelConfig(ModelConfigToJson(*c), "m.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ModelConfigToJson(*back), ModelConfigToJson(*c));
  Result<ModelConfig> llama =
      ParseModelConfig(std::string(kLlamaShape) + R"(,"kv_heads":2,"head_dim":32})", "m.json");
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  EXPECT_EQ(ParseModelConfig(ModelConfigToJson(*llama), "m.json")->head_dim, 32);
}

TEST(HfConfig, Gpt2AndLlama) {
  Result<ModelConfig> gpt2 = ParseHfConfig(R"({"model_type":"gpt2","n_layer":12,"n_embd":768,
      "n_head":12,"n_inner":null,"n_positions":1024,"vocab_size":50257,"resid_pdrop":0.1})",
                                           "config.json");
  ASSERT_TRUE(gpt2.ok()) << gpt2.status().message();
  EXPECT_EQ(gpt2->ffn_hidden, 3072);
  EXPECT_EQ(gpt2->seq_len, 1024);
  Result<ModelConfig> llama = ParseHfConfig(R"({"model_type":"llama","num_hidden_layers":32,
      "hidden_size":4096,"num_attention_heads":32,"intermediate_size":11008,
      "max_position_embeddings":2048,"vocab_size":32000,"torch_dtype":"bfloat16"})",
                                            "config.json");
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  EXPECT_EQ(llama->architecture, Architecture::kLlama);
  EXPECT_EQ(llama->precision, Precision::kAmpBf16);
  Result<ModelConfig> t5 = ParseHfConfig(R"({"model_type":"t5"})", "config.json");
  ASSERT_FALSE(t5.ok());
  EXPECT_NE(t5.status().message().find("unsupported value \"t5\""), std::string::npos);
  Result<ModelConfig> gqa = ParseHfConfig(R"({"model_type":"mistral","num_hidden_layers":2,
      "hidden_size":64,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":null,
      "intermediate_size":128,"max_position_embeddings":64,"vocab_size":100})",
                                          "config.json");
  ASSERT_TRUE(gqa.ok()) << gqa.status().message();
  EXPECT_EQ(gqa->kv_heads, 2);
  EXPECT_EQ(gqa->head_dim, 8);
  EXPECT_EQ(gqa->head, Head::kPooling);  // no architectures: AutoModel
}

TEST(PlannerInput, DetectsTheKindOfFile) {
  EXPECT_EQ(ParsePlannerInput(kMinimal, "m")->kind, PlannerInput::Kind::kModel);
  EXPECT_EQ(ParsePlannerInput(R"({"model_type":"gpt2","n_layer":1,"n_embd":8,"n_head":2,
      "n_positions":16,"vocab_size":10})",
                              "c")
                ->kind,
            PlannerInput::Kind::kHfConfig);
  EXPECT_EQ(ParsePlannerInput(R"({"static_bytes":0,"layers":[{"name":"a","forward_ms":1,
      "backward_ms":1,"input_bytes":1,"output_bytes":1,"activation_bytes":1,
      "forward_workspace_bytes":0,"backward_workspace_bytes":0}]})",
                              "p")
                ->kind,
            PlannerInput::Kind::kProfile);
}

}  // namespace
}  // namespace remat
