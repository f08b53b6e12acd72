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
  // An export plans the same job as the plan. hf runs its chunked loss
  // (Liger-Kernel's fused linear cross-entropy, the same count): exit 0, as
  // the plan.
  const Captured hf = RunCli({"--budget", budget, "--export", "hf", "--quiet", model});
  EXPECT_EQ(hf.code, 0) << hf.err;
  const nlohmann::json fields = nlohmann::json::parse(hf.out);
  EXPECT_EQ(fields["use_liger_kernel"], true) << hf.out;
  EXPECT_EQ(fields["liger_kernel_config"]["fused_linear_cross_entropy"], true) << hf.out;
  EXPECT_NE(hf.err.find("hf runs the plan exactly: "), std::string::npos) << hf.err;
  EXPECT_NE(hf.err.find(" chunks (Liger-Kernel's fused linear cross-entropy)"), std::string::npos)
      << hf.err;
  // deepspeed's configuration has no chunked loss: its closest plan is
  // planned without it, and where that does not fit, exit 3 saying so.
  const Captured ds = RunCli({"--budget", budget, "--export", "deepspeed", "--quiet", model});
  EXPECT_EQ(ds.code, 3) << ds.err;
  EXPECT_NE(ds.err.find("deepspeed's configuration has no chunked loss"), std::string::npos)
      << ds.err;
  EXPECT_NE(ds.err.find("no plan deepspeed can express fits the budget"), std::string::npos)
      << ds.err;
  EXPECT_EQ(ds.out.find("liger"), std::string::npos) << ds.out;
}

}  // namespace
}  // namespace remat::cli
