#include <string>

#include <gtest/gtest.h>

#include "remat/input/input.h"

namespace remat {
namespace {

constexpr const char* kLlama = R"("model_type":"llama","num_hidden_layers":2,
    "hidden_size":64,"num_attention_heads":8,"intermediate_size":128,
    "max_position_embeddings":64,"vocab_size":100)";

// transformers 5 writes "dtype": null (and other keys as null): each reads as
// left out, the default, never a type error.
TEST(HfConfig, NullKeysReadAsLeftOut) {
  Result<ModelConfig> plain = ParseHfConfig(std::string("{") + kLlama + "}", "config.json");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  Result<ModelConfig> nulls = ParseHfConfig(
      std::string("{") + kLlama +
          R"(,"dtype":null,"torch_dtype":null,"rope_scaling":null,"attn_implementation":null,
          "architectures":null,"hidden_dropout_prob":null,"remat":null})",
      "config.json");
  ASSERT_TRUE(nulls.ok()) << nulls.status().message();
  EXPECT_EQ(nulls->precision, plain->precision);
  EXPECT_EQ(nulls->attention, plain->attention);
  EXPECT_EQ(nulls->head, plain->head);
  EXPECT_EQ(nulls->dropout, plain->dropout);
  Result<ModelConfig> bf16 = ParseHfConfig(
      std::string("{") + kLlama + R"(,"torch_dtype":null,"dtype":"bfloat16"})", "config.json");
  ASSERT_TRUE(bf16.ok()) << bf16.status().message();
  EXPECT_EQ(bf16->precision, Precision::kAmpBf16);
}

TEST(HfConfig, ANullModelTypeIsMissing) {
  Result<ModelConfig> c = ParseHfConfig(R"({"model_type":null,"hidden_size":64})", "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("config.json: field 'model_type': missing (required)"),
            std::string::npos)
      << c.status().message();
}

// The masked-LM classes whose loss takes the 16-bit logits as they are
// (BertForMaskedLM's and DistilBertForMaskedLM's CrossEntropyLoss) read with
// loss_upcast false; RobertaForMaskedLM (ForMaskedLMLoss) and the causal
// LMs upcast; "remat": {"loss_upcast": ...} sets it either way.
TEST(HfConfig, LossUpcastFollowsTheClassesLoss) {
  auto upcast = [](const std::string& architecture, const std::string& type,
                   const std::string& extra = "") {
    const std::string shape =
        type == "distilbert" ? R"("n_layers":2,"dim":64,"n_heads":4,"hidden_dim":128)"
                             : R"("num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,
                 "intermediate_size":128)";
    const std::string doc = R"({"architectures":[")" + architecture + R"("],"model_type":")" +
                            type + R"(",)" + shape +
                            R"(,"max_position_embeddings":64,"vocab_size":100)" + extra + "}";
    Result<ModelConfig> c = ParseHfConfig(doc, "config.json");
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() && c->loss_upcast;
  };
  EXPECT_FALSE(upcast("BertForMaskedLM", "bert"));
  EXPECT_FALSE(upcast("DistilBertForMaskedLM", "distilbert"));
  EXPECT_TRUE(upcast("RobertaForMaskedLM", "roberta"));
  EXPECT_TRUE(upcast("BertModel", "bert"));
  EXPECT_TRUE(upcast("LlamaForCausalLM", "llama"));
  EXPECT_TRUE(upcast("BertForMaskedLM", "bert", R"(,"remat":{"loss_upcast":true})"));
  EXPECT_FALSE(upcast("LlamaForCausalLM", "llama", R"(,"remat":{"loss_upcast":false})"));
}

}  // namespace
}  // namespace remat
