// all-MiniLM-L6-v2 trained as bench/fidelity/hf_fidelity.sh trains it, for the
// planner's text-pass tests: the config.json, its analytic profile on CPU
// and its layers by name.
#ifndef REMAT_TESTS_TESTING_MINILM_JOB_H_
#define REMAT_TESTS_TESTING_MINILM_JOB_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "remat/analytic/analytic.h"
#include "remat/input/input.h"
#include "remat/profile/profile.h"

namespace remat::testing {

// all-MiniLM-L6-v2's shape (6 blocks, hidden 384, 12 heads, sdpa, dropout
// 0.1, fp32) with mean pooling and the mnrl loss on `texts` texts per
// example, seq_len 75. `merge_columns`: "true", "false", or "" for the
// default.
inline ModelConfig MiniLmJob(int texts, int64_t micro_batch, const std::string& merge_columns) {
  const std::string json =
      R"({"architectures":["BertModel"],"model_type":"bert","num_hidden_layers":6,
      "hidden_size":384,"num_attention_heads":12,"intermediate_size":1536,
      "max_position_embeddings":512,"type_vocab_size":2,"vocab_size":30522,
      "hidden_dropout_prob":0.1,"attention_probs_dropout_prob":0.1,
      "remat":{"head":"pooling","pooling":"mean","loss":"mnrl","texts_per_example":)" +
      std::to_string(texts) + R"(,"micro_batch":)" + std::to_string(micro_batch) +
      R"(,"seq_len":75,"precision":"fp32")" +
      (merge_columns.empty() ? "" : R"(,"merge_columns":)" + merge_columns) + "}}";
  Result<ModelConfig> c = ParseHfConfig(json, "config.json");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

// The analytic profile of `c` on --device cpu.
inline Profile AnalyticOnCpu(const ModelConfig& c) {
  AnalyticOptions o;
  Result<DeviceSpec> cpu = LookupDevice("cpu");
  EXPECT_TRUE(cpu.ok());
  if (cpu.ok()) o.device = *cpu;
  Result<Profile> p = AnalyticProfile(c, o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

// The layer of `p` named `name` (a failure, and an empty layer, if none).
inline const LayerProfile& NamedLayer(const Profile& p, const std::string& name) {
  for (const LayerProfile& l : p.layers) {
    if (l.name == name) return l;
  }
  ADD_FAILURE() << "no layer " << name;
  static const LayerProfile none;
  return none;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_MINILM_JOB_H_
