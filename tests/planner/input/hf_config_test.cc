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

}  // namespace
}  // namespace remat
