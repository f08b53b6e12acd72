// A Hugging Face config.json given inline, parsed as `planner` parses one;
// a parse error fails the test (and yields a default ModelConfig).
#ifndef REMAT_TESTS_TESTING_HF_CONFIG_H_
#define REMAT_TESTS_TESTING_HF_CONFIG_H_

#include <gtest/gtest.h>

#include <string>

#include "remat/input/input.h"
#include "remat/model/model_config.h"

namespace remat::testing {

// A 4-block Llama config.json (GQA, 256 wide), small enough for tests that
// build many profiles of it.
inline constexpr char kTinyLlamaConfig[] = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama",
    "hidden_size":256,"intermediate_size":688,"num_hidden_layers":4,"num_attention_heads":8,
    "num_key_value_heads":2,"max_position_embeddings":512,"vocab_size":8000})";

inline ModelConfig Hf(const std::string& json) {
  Result<ModelConfig> c = ParseHfConfig(json, "config.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_HF_CONFIG_H_
