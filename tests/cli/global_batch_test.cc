// planner --global-batch G and --grad-accumulation K.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

const char kSmall[] = REMAT_SOURCE_DIR "/bench/fidelity/models/cpu-s.json";

TEST(GlobalBatch, PrintsTheTableItWeighedAndPlansTheChoice) {
  const Captured c = RunCli({"--budget", "60MB", "--global-batch", "32", "--quiet", kSmall});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("Micro-batches for a global batch of 32"), std::string::npos) << c.out;
  for (const char* column : {"b", "K", "strategy", "peak", "per update", "tokens/s"}) {
    EXPECT_NE(c.out.find(column), std::string::npos) << column;
  }
  const size_t chosen = c.out.find("Chosen (*): micro_batch ");
  ASSERT_NE(chosen, std::string::npos) << c.out;
  const int64_t b = std::stoll(c.out.substr(chosen + 24));
  // The report below it is the plan at that micro-batch.
  EXPECT_NE(c.out.find("micro_batch " + std::to_string(b) + ", fp32"), std::string::npos) << c.out;
  if (b < 32) {
    EXPECT_NE(c.out.find("grad_accumulation " + std::to_string(32 / b)), std::string::npos);
    EXPECT_NE(c.out.find("per update"), std::string::npos);
  }
}

TEST(GlobalBatch, JsonCarriesMicroBatchAccumulationAndTheUpdate) {
  const Captured c =
      RunCli({"--budget", "60MB", "--global-batch", "32", "--json", "--quiet", kSmall});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  const int64_t b = j["micro_batch"], k = j["grad_accumulation"];
  EXPECT_EQ(b * k, 32);
  const nlohmann::json& p = j["predicted"];
  EXPECT_DOUBLE_EQ(p["optimizer_step_ms"].get<double>(), p["optimizer_ms"].get<double>());
  EXPECT_NEAR(p["update_ms"].get<double>(),
              k * p["micro_step_ms"].get<double>() + (k - 1) * p["accumulate_ms"].get<double>() +
                  p["optimizer_step_ms"].get<double>(),
              1e-9);
}

TEST(GlobalBatch, PlanJsonCarriesTheTableItWeighed) {
  const Captured c =
      RunCli({"--budget", "60MB", "--global-batch", "32", "--json", "--quiet", kSmall});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  ASSERT_TRUE(j.contains("global_batch")) << c.out.substr(0, 400);
  const nlohmann::json& table = j["global_batch"];
  EXPECT_EQ(table["global_batch"], 32);
  int chosen = 0;
  double best = 1e300;
  for (const nlohmann::json& row : table["weighed"]) {
    EXPECT_EQ(row["micro_batch"].get<int64_t>() * row["grad_accumulation"].get<int64_t>(), 32);
    EXPECT_GT(row["peak_bytes"].get<int64_t>(), 0);
    EXPECT_GT(row["tokens_per_s"].get<double>(), 0);
    if (row["fits"]) best = std::min(best, row["update_ms"].get<double>());
    if (row["chosen"]) {
      ++chosen;
      EXPECT_EQ(row["micro_batch"], j["micro_batch"]);
      EXPECT_EQ(row["grad_accumulation"], j["grad_accumulation"]);
      EXPECT_DOUBLE_EQ(row["update_ms"].get<double>(), j["predicted"]["update_ms"].get<double>());
    }
  }
  EXPECT_EQ(chosen, 1);
  EXPECT_GE(table["weighed"].size(), 2u);
  EXPECT_DOUBLE_EQ(best, j["predicted"]["update_ms"].get<double>());  // the fastest that fits
  // Without --global-batch there is no table.
  const Captured plain = RunCli({"--budget", "60MB", "--json", "--quiet", kSmall});
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("global_batch"));
}

TEST(GlobalBatch, EveryPlanHasTheOptimizerStepAndAccumulationOverrides) {
  Captured c = RunCli({"--budget", "1GB", "--json", kSmall});
  ASSERT_EQ(c.code, 0) << c.err;
  nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["micro_batch"], 4);
  EXPECT_EQ(j["grad_accumulation"], 1);
  EXPECT_TRUE(j["predicted"].contains("optimizer_step_ms"));
  const double one = j["predicted"]["update_ms"];
  c = RunCli({"--budget", "1GB", "--json", "--grad-accumulation", "8", kSmall});
  ASSERT_EQ(c.code, 0) << c.err;
  j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["grad_accumulation"], 8);
  EXPECT_GT(j["predicted"]["update_ms"].get<double>(), 7 * one);
}

TEST(GlobalBatch, BadValuesExitTwoAndNothingFitsExitsThree) {
  Captured c = RunCli({"--budget", "60MB", "--global-batch", "0", kSmall});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("--global-batch"), std::string::npos) << c.err;
  c = RunCli({"--budget", "60MB", "--global-batch", "8", "--micro-batch", "2", kSmall});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("contradicts --micro-batch"), std::string::npos) << c.err;
  c = RunCli({"--budget", "60MB", "--grad-accumulation", "0", kSmall});
  EXPECT_EQ(c.code, 2);
  c = RunCli({"--budget", "18MiB", "--global-batch", "8", "--quiet", kSmall});
  EXPECT_EQ(c.code, 3);
  EXPECT_NE(c.err.find("global batch of 8"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("would fit"), std::string::npos) << c.err;
}

TEST(GlobalBatch, WarnsAboveOneHundredTwentyEightMicroBatchesPerUpdate) {
  const Captured c = RunCli({"--budget", "1GB", "--grad-accumulation", "200", "--quiet", kSmall});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("planner: warning: grad_accumulation 200"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace remat::cli
