// Where no plan fits, each optimal strategy returns its least-memory plan:
// never above the heuristics' least-memory plans (their layer lists are
// single-level schedules too), and optimal never above optimal-single.
#include <gtest/gtest.h>

#include <string>

#include "remat/analytic/analytic.h"
#include "remat/model/model_config.h"
#include "remat/strategies/strategies.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

int64_t LeastPeak(const Profile& p, Strategy s) {
  PlanOptions o;
  o.strategy = s;
  o.budget_bytes = 1;
  const Plan plan = MakePlan(p, o).value().chosen;
  EXPECT_FALSE(plan.fits);
  return plan.predicted.peak_bytes;
}

// A Llama-3.2-1B-shaped job (16 layers, GQA, a 128,256-token vocabulary) at
// micro-batch 8 x 2,048 tokens: its loss's logits dominate the backward, and
// the single-level DP's terms put its least-memory split 2.9 GiB above
// uniform's every 8.
Profile LlamaShaped() {
  ModelConfig c;
  c.name = "llama-1b-shape";
  c.architecture = Architecture::kLlama;
  c.layers = 16;
  c.hidden = 2048;
  c.heads = 32;
  c.kv_heads = 8;
  c.ffn_hidden = 8192;
  c.vocab = 128256;
  c.seq_len = 2048;
  c.max_position = 2048;
  c.micro_batch = 8;
  c.precision = Precision::kAmpBf16;
  AnalyticOptions o;
  o.device = LookupDevice("a100").value();
  return AnalyticProfile(c, o).value();
}

TEST(LeastMemory, TheOptimalStrategiesHoldNoMoreThanTheHeuristics) {
  for (const Profile& p : {testing::GptChain(12, 16), LlamaShaped()}) {
    const int64_t uniform = LeastPeak(p, Strategy::kUniform);
    const int64_t segment = LeastPeak(p, Strategy::kSegment);
    const int64_t single = LeastPeak(p, Strategy::kOptimalSingle);
    const int64_t optimal = LeastPeak(p, Strategy::kOptimal);
    EXPECT_LE(single, uniform) << p.model;
    EXPECT_LE(single, segment) << p.model;
    EXPECT_LE(optimal, single) << p.model;
  }
}

}  // namespace
}  // namespace remat
