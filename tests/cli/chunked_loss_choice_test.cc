// planner --strategy auto weighing the chunked loss: at a budget only the
// chunked loss fits, auto takes it unless --chunked-loss is given.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli_test_util.h"
#include "remat/input/input.h"
#include "remat/planning/job.h"
#include "remat/strategies/strategies.h"

namespace remat::cli {
namespace {

const char kWideVocab[] =
    R"({"architecture": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128,
        "vocab": 32768, "seq_len": 256, "micro_batch": 2, "dropout": 0})";

// The lowest peak auto reaches for the model, plain or with the chunked loss.
int64_t LowestPeak(const std::string& path, std::optional<int64_t> loss_chunks) {
  Result<PlannerInput> in = LoadPlannerInput(path);
  EXPECT_TRUE(in.ok()) << in.status().message();
  JobOverrides o;
  o.loss_chunks = loss_chunks;
  Result<Job> job = MakeJob(*in, o);
  EXPECT_TRUE(job.ok()) << job.status().message();
  PlanOptions options;
  options.budget_bytes = 1;
  Result<PlanSet> plans = MakePlan(job->profile, options);
  EXPECT_TRUE(plans.ok());
  return plans->chosen.memory.total_bytes;
}

TEST(ChunkedLossChoice, AutoTakesTheChunkedLossWhereOnlyItFits) {
  ScratchDir dir;
  const std::string model = dir.Write("wide.json", kWideVocab);
  const int64_t plain = LowestPeak(model, std::nullopt);
  const int64_t chunked = LowestPeak(model, kLossChunksAuto);
  ASSERT_LT(chunked, plain);
  const std::string budget = std::to_string(chunked + (plain - chunked) / 2) + "B";

  const Captured text = RunCli({"--budget", budget, "--quiet", model});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("chunked loss chosen by auto: saves "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" chunks\n"), std::string::npos) << text.out;  // the job line

  const Captured json = RunCli({"--budget", budget, "--json", "--quiet", model});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  ASSERT_TRUE(j["job"].contains("loss_chunks")) << json.out.substr(0, 400);
  EXPECT_GT(j["job"]["loss_chunks"].get<int64_t>(), 1);

  // --chunked-loss 0: off, never chosen; nothing fits.
  const Captured off = RunCli({"--budget", budget, "--chunked-loss", "0", "--quiet", model});
  EXPECT_EQ(off.code, 3) << off.err;
  EXPECT_EQ(off.out.find("chosen by auto"), std::string::npos) << off.out;
  // Another strategy than auto plans the job as given.
  const Captured uniform = RunCli({"--budget", budget, "--strategy", "uniform", "--quiet", model});
  EXPECT_EQ(uniform.out.find("chosen by auto"), std::string::npos) << uniform.out;
  // An export plans the job as given: the engines' configs do not chunk the loss.
  const Captured exported = RunCli({"--budget", budget, "--export", "hf", "--quiet", model});
  EXPECT_EQ(exported.code, 3) << exported.err;
  EXPECT_EQ(exported.err.find("chosen by auto"), std::string::npos) << exported.err;
}

}  // namespace
}  // namespace remat::cli
