// A Hugging Face config.json given inline, parsed as `planner` parses one;
// a parse error fails the test (and yields a default ModelConfig).
#ifndef REMAT_TESTS_TESTING_HF_CONFIG_H_
#define REMAT_TESTS_TESTING_HF_CONFIG_H_

#include <gtest/gtest.h>

#include <string>

#include "remat/input/input.h"
#include "remat/model/model_config.h"

namespace remat::testing {

inline ModelConfig Hf(const std::string& json) {
  Result<ModelConfig> c = ParseHfConfig(json, "config.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_HF_CONFIG_H_
