// Tiny GPT configurations and schedules for runtime tests (seconds on 2 cores).
#ifndef REMAT_TESTS_RUNTIME_TINY_MODEL_H_
#define REMAT_TESTS_RUNTIME_TINY_MODEL_H_

#include <gtest/gtest.h>

#include <string>

#include "remat/analytic.h"
#include "remat/model_config.h"
#include "remat/strategies.h"

namespace remat::testing {

// 4 blocks, hidden 32, 4 heads, 16 tokens x 2 sequences, vocabulary 64,
// fp32, dropout 0.1: an 8-layer chain.
inline ModelConfig TinyGpt(int blocks = 4) {
  ModelConfig c;
  c.name = "tiny-gpt";
  c.layers = blocks;
  c.hidden = 32;
  c.heads = 4;
  c.ffn_hidden = 128;
  c.vocab = 64;
  c.seq_len = 16;
  c.max_position = 16;
  c.micro_batch = 2;
  c.precision = Precision::kFp32;
  c.dropout = 0.1;
  return c;
}

// The analytic profile of `c` (layer names and selective options are what
// schedules need).
inline Profile AnalyticOf(const ModelConfig& c) {
  Result<Profile> p = AnalyticProfile(c, AnalyticOptions{});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

// The planner's schedule for a strategy (no budget: default parameters).
inline Schedule PlannerSchedule(const Profile& p, Strategy s,
                                std::vector<int> checkpoint_layers = {}) {
  PlanOptions o;
  o.strategy = s;
  o.checkpoint_layers = std::move(checkpoint_layers);
  Result<PlanSet> plans = MakePlan(p, o);
  EXPECT_TRUE(plans.ok()) << plans.status().message();
  return plans.ok() ? plans->chosen.schedule : Schedule{};
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_RUNTIME_TINY_MODEL_H_
