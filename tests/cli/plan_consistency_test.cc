// The plan command's answer agrees with itself on the jobs users bring:
// the 70B job on 64 GPUs fits, each row of its strategies table (JSON
// candidates, text) is that strategy run alone, a config.json without a
// sequence length says the default it plans at, and the fit advice plans
// its alternatives with the chunked loss the plan weighs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

std::string Hf(const std::string& name) {
  return std::string(REMAT_SOURCE_DIR) + "/examples/hf/" + name + ".config.json";
}

const std::vector<std::string> kLlama70bOn64 = {
    "--budget", "80GB", "--gpus", "64", "--fsdp", "full_shard", "--micro-batch", "1",
    "--seq-len", "8192", "--quiet"};

std::vector<std::string> With(std::vector<std::string> args,
                              const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(PlanConsistency, Llama70bOn64GpusFitsAndEachRowIsTheStrategyAlone) {
  const std::string config = Hf("llama-3.1-70b");
  const Captured plan = RunCli(With(kLlama70bOn64, {"--json", config}));
  ASSERT_EQ(plan.code, 0) << plan.err;
  const nlohmann::json j = nlohmann::json::parse(plan.out);
  EXPECT_TRUE(j["fits"].get<bool>());
  ASSERT_GE(j["candidates"].size(), 5u);
  // The job auto planned: with the chunked loss where it chose it.
  std::vector<std::string> job = kLlama70bOn64;
  if (j["job"].contains("loss_chunks")) {
    job = With(job, {"--chunked-loss", std::to_string(j["job"]["loss_chunks"].get<int64_t>())});
  }
  for (const nlohmann::json& row : j["candidates"]) {
    const std::string s = row["strategy"];
    SCOPED_TRACE(s);
    const Captured alone = RunCli(With(job, {"--strategy", s, "--json", config}));
    ASSERT_TRUE(alone.code == 0 || alone.code == 3) << alone.err;
    const nlohmann::json a = nlohmann::json::parse(alone.out);
    EXPECT_EQ(row["parameter"], a["parameter"]);
    EXPECT_EQ(row["fits"], a["fits"]);
    EXPECT_EQ(row["peak_bytes"], a["predicted"]["peak_bytes"]);
    EXPECT_EQ(row["step_ms"], a["predicted"]["step_ms"]);
    // A strategy that fits alone fits in the table, and auto no slower.
    if (a["fits"].get<bool>()) {
      EXPECT_LE(j["predicted"]["step_ms"].get<double>(), a["predicted"]["step_ms"].get<double>());
    }
  }
  // The text table names the same settings.
  const Captured text = RunCli(With(kLlama70bOn64, {config}));
  ASSERT_EQ(text.code, 0) << text.err;
  for (const nlohmann::json& row : j["candidates"]) {
    const std::string parameter = row["parameter"];
    if (!parameter.empty()) {
      EXPECT_NE(text.out.find(parameter), std::string::npos) << parameter;
    }
  }
}

TEST(PlanConsistency, AConfigWithoutASequenceLengthPlansAtTheStatedDefault) {
  const Captured text = RunCli({"--budget", "80GB", "--quiet", Hf("llama-3.1-8b")});
  EXPECT_NE(text.out.find("seq_len 4096 (the default: the config.json sets none; --seq-len N)"),
            std::string::npos)
      << text.out;
  const Captured json = RunCli({"--budget", "80GB", "--quiet", "--json", Hf("llama-3.1-8b")});
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["model"]["seq_len"], 4096);
  EXPECT_EQ(j["model"]["seq_len_default"], true);
  // A length given is the job's, and not called a default.
  const Captured given =
      RunCli({"--budget", "80GB", "--quiet", "--json", "--seq-len", "2048", Hf("llama-3.1-8b")});
  const nlohmann::json g = nlohmann::json::parse(given.out);
  EXPECT_EQ(g["model"]["seq_len"], 2048);
  EXPECT_FALSE(g["model"].contains("seq_len_default"));
  // A model shorter than the default plans at its maximum.
  const Captured gpt2 = RunCli({"--budget", "80GB", "--quiet", "--json", Hf("gpt2-xl")});
  EXPECT_EQ(nlohmann::json::parse(gpt2.out)["model"]["seq_len"], 1024);
}

// Qwen2.5-7B with LoRA on every linear at 2 x 4096 does not fit 24 GB in
// amp_bf16; QLoRA fits only with the chunked loss auto weighs, and the
// advice plans it so: the job auto chunked, each alternative with it and
// naming it.
TEST(PlanConsistency, FitAdviceWeighsTheChunkedLossAsThePlanDoes) {
  const Captured r = RunCli({"--budget", "24GB", "--micro-batch", "2", "--seq-len", "4096",
                             "--lora-rank", "16", "--lora-targets", "all-linear", "--quiet",
                             Hf("qwen2.5-7b")});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("precision bf16 + chunked loss fits"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("QLoRA (nf4 base weights, lora_rank 16) + chunked loss fits ("),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--quantization nf4 --chunked-loss 32)"), std::string::npos) << r.err;
}

// Nothing fits with the chunked loss or without: auto shows the lower of
// the two lowest peaks, and the no-fit line names it, no higher than any
// strategy reaches alone with the chunked loss.
TEST(PlanConsistency, NoFitUnderAutoNamesTheLowerPeakChunkedOrNot) {
  const std::string gpt2 = std::string(REMAT_SOURCE_DIR) + "/examples/gpt2-small.json";
  const Captured plan = RunCli({"--budget", "3GB", "--format", "json", "--quiet", gpt2});
  ASSERT_EQ(plan.code, 3) << plan.err;
  const nlohmann::json j = nlohmann::json::parse(plan.out);
  EXPECT_EQ(j["job"]["loss_chunks"], 64) << plan.out.substr(0, 400);
  const int64_t auto_peak = j["predicted"]["peak_bytes"];
  for (const char* strategy : {"uniform", "segment", "optimal"}) {
    const Captured alone = RunCli({"--budget", "3GB", "--format", "json", "--quiet",
                                   "--chunked-loss", "0", "--strategy", strategy, gpt2});
    ASSERT_EQ(alone.code, 3) << alone.err;
    EXPECT_LT(auto_peak, nlohmann::json::parse(alone.out)["predicted"]["peak_bytes"]) << strategy;
  }
  EXPECT_NE(plan.err.find("the smallest peak any strategy reaches is 4.65 GiB"),
            std::string::npos)
      << plan.err;
}

}  // namespace
}  // namespace remat::cli
