// `planner train` end to end on a tiny model with the LibTorch runtime: a
// plan that fits under B runs under --memory-limit B, `none` at the same B
// stops with the out-of-memory message and exit code 4, plans for another
// model are refused, and the JSON report carries the comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_test_util.h"
#include "remat/runtime/torch_runtime.h"

namespace remat::cli {
namespace {

const char kTinyModel[] = R"({"name": "tiny-gpt", "architecture": "gpt", "layers": 6,
  "hidden": 32, "heads": 4, "vocab": 64, "seq_len": 32, "micro_batch": 2,
  "precision": "fp32", "optimizer": "adamw", "attention": "eager", "dropout": 0.1})";

Captured RunWithRuntime(const std::vector<std::string>& args) {
  static std::unique_ptr<Runtime> runtime = runtime::MakeTorchRuntime();
  std::ostringstream out, err;
  Environment env;
  env.out = &out;
  env.err = &err;
  env.runtime = []() -> Result<Runtime*> { return runtime.get(); };
  const int code = Run(args, env);
  return {code, out.str(), err.str()};
}

class TrainCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.Write("tiny.json", kTinyModel);
    profile_ = dir_.Path("tiny-cpu.json");
    const Captured p = RunWithRuntime({"profile", "--repeats", "1", "-o", profile_, model_});
    ASSERT_EQ(p.code, 0) << p.err;
  }
  // Plans `strategy` from the measured profile; returns the plan path.
  std::string PlanFile(const std::string& strategy) {
    const std::string path = dir_.Path("plan-" + strategy + ".json");
    const Captured c = RunWithRuntime({"--strategy", strategy, "-o", path, profile_});
    EXPECT_EQ(c.code, 0) << c.err;
    return path;
  }
  static int64_t PredictedPeak(const std::string& plan) {
    return nlohmann::json::parse(ReadAll(plan))["predicted"]["peak_bytes"].get<int64_t>();
  }

  ScratchDir dir_;
  std::string model_, profile_;
};

TEST_F(TrainCommand, APlanThatFitsRunsUnderTheLimitAndNoneRunsOutOfMemory) {
  const std::string segment = PlanFile("segment"), none = PlanFile("none");
  const int64_t fits = PredictedPeak(segment), needs = PredictedPeak(none);
  ASSERT_LT(fits, needs);
  const std::string limit = std::to_string((fits + needs) / 2) + "B";

  const Captured ok =
      RunWithRuntime({"train", "--plan", segment, "--steps", "2", "--memory-limit", limit, model_});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("step    2"), std::string::npos) << ok.out;

  const Captured oom =
      RunWithRuntime({"train", "--plan", none, "--steps", "2", "--memory-limit", limit, model_});
  EXPECT_EQ(oom.code, 4) << oom.out << oom.err;
  EXPECT_NE(oom.err.find("planner: error: out of memory at step 1, schedule op "),
            std::string::npos)
      << oom.err;
  for (const char* part : {"asked for ", " in use; the limit is ", "layer '"}) {
    EXPECT_NE(oom.err.find(part), std::string::npos) << part << " in " << oom.err;
  }
  EXPECT_EQ(std::count(oom.err.begin(), oom.err.end(), '\n'), 1) << oom.err;
}

TEST_F(TrainCommand, JsonReportComparesPredictedAndMeasured) {
  for (const std::string strategy : {"none", "uniform", "segment", "selective"}) {
    const Captured c =
        RunWithRuntime({"train", "--plan", PlanFile(strategy), "--steps", "2", "--json", model_});
    ASSERT_EQ(c.code, 0) << c.err;
    const nlohmann::json j = nlohmann::json::parse(c.out);
    const int64_t predicted = j["predicted"]["peak_bytes"], measured = j["measured"]["peak_bytes"];
    // On CPU the meter counts exact bytes and the profile measures the
    // simulator's quantities: the peak is predicted to the byte.
    EXPECT_EQ(measured, predicted) << strategy;
    EXPECT_GT(j["predicted"]["step_ms"].get<double>(), 0);
    EXPECT_GT(j["measured"]["step_ms"].get<double>(), 0);
    EXPECT_EQ(j["steps"].size(), 2u);
    EXPECT_GT(j["ops"].size(), 10u);
  }
}

TEST_F(TrainCommand, EverySelectiveForwardIsPredictedOpByOp) {
  // A selective forward runs the attention core without grad: its s x s
  // transients are that op's workspace, which the profile measures per
  // selective option (forward_workspace_bytes). With a sequence long for the
  // width, that workspace exceeds the full forward's, so each selective
  // forward's peak is right only if the option's own workspace is used.
  const std::string model = dir_.Write(
      "long.json",
      std::string(kTinyModel)
          .replace(std::string(kTinyModel).find("\"seq_len\": 32"), 13, "\"seq_len\": 128"));
  const std::string profile = dir_.Path("long-cpu.json"), plan = dir_.Path("long-plan.json");
  ASSERT_EQ(RunWithRuntime({"profile", "--repeats", "1", "-o", profile, model}).code, 0);
  ASSERT_EQ(RunWithRuntime({"--strategy", "selective", "-o", plan, profile}).code, 0);
  const Captured c = RunWithRuntime({"train", "--plan", plan, "--steps", "1", "--json", model});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json report = nlohmann::json::parse(c.out);
  int selective_forwards = 0;
  for (const nlohmann::json& op : report["ops"]) {
    const std::string name = op["op"];
    if (name.rfind("forward", 0) != 0 || name.find("selective") == std::string::npos) continue;
    ++selective_forwards;
    const int64_t predicted = op["predicted_peak"], measured = op["measured_peak"];
    EXPECT_NEAR(measured, predicted, 0.002 * predicted) << name;
  }
  EXPECT_EQ(selective_forwards, 6);
}

TEST_F(TrainCommand, WritesTheReportsWithTheMeasuredRun) {
  const std::string html = dir_.Path("report.html"), trace = dir_.Path("trace.json");
  const Captured c =
      RunWithRuntime({"train", "--plan", PlanFile("uniform"), "--steps", "2", "--report", html,
                      "--trace", trace, "--pareto-points", "0", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(ReadAll(html).find("Measured peak"), std::string::npos);
  EXPECT_NE(ReadAll(html).find("planner train --plan"), std::string::npos);
  EXPECT_NE(ReadAll(trace).find("measured"), std::string::npos);
}

TEST_F(TrainCommand, RefusesAPlanForAnotherModel) {
  const std::string plan = PlanFile("none");
  const std::string other =
      dir_.Write("other.json",
                 std::string(kTinyModel)
                     .replace(std::string(kTinyModel).find("\"layers\": 6"), 11, "\"layers\": 3"));
  const Captured c = RunWithRuntime({"train", "--plan", plan, other});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("the plan's chain has 10 layers (embedding, block0..block5, "
                       "final_norm, head, loss), the model's 7"),
            std::string::npos)
      << c.err;
}

TEST_F(TrainCommand, RefusesAPlanForAnotherShape) {
  const Captured c =
      RunWithRuntime({"train", "--plan", PlanFile("none"), "--micro-batch", "3", model_});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("was made for --micro-batch 2, and --micro-batch 3 was asked for"),
            std::string::npos)
      << c.err;
}

// What the runtime does not run is refused before anything starts: exit 2,
// one line naming what it is and what runs instead, nothing written.
TEST_F(TrainCommand, WhatTheRuntimeDoesNotRunIsRefusedBeforeAnythingRuns) {
  std::string json = kTinyModel;
  json.replace(json.rfind('}'), 1, ", \"head\": \"pooling\", \"texts_per_example\": 2}");
  const std::string pooled = dir_.Write("gpt-pooling.json", json);
  const std::string plan = dir_.Path("gpt-pooling-plan.json");
  ASSERT_EQ(RunWithRuntime({"--strategy", "none", "-o", plan, "--quiet", pooled}).code, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"profile", "-o", dir_.Path("p.json"), pooled},
        std::vector<std::string>{"train", "--plan", plan, "--steps", "1", pooled}}) {
    const Captured c = RunWithRuntime(args);
    EXPECT_EQ(c.code, 2) << args[0] << ": " << c.err;
    EXPECT_NE(c.err.find("head 'pooling'"), std::string::npos) << c.err;
    EXPECT_NE(c.err.find("the runtime runs mlm, pooling and classification on bert"),
              std::string::npos)
        << c.err;
    EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  }
  EXPECT_FALSE(std::ifstream(dir_.Path("p.json")).good());  // nothing written
}

// mixed_bf16 (16-bit weights, fp32 master weights) trains: profile, plan
// from the measured profile, train.
TEST_F(TrainCommand, MixedPrecisionProfilesAndTrains) {
  std::string json = kTinyModel;
  json.replace(json.find("\"fp32\""), 6, "\"mixed_bf16\"");
  const std::string mixed = dir_.Write("mixed.json", json);
  const std::string profile = dir_.Path("mixed-profile.json");
  const std::string plan = dir_.Path("mixed-plan.json");
  ASSERT_EQ(RunWithRuntime({"profile", "--repeats", "1", "-o", profile, mixed}).code, 0);
  ASSERT_EQ(RunWithRuntime({"--strategy", "segment", "-o", plan, "--quiet", profile}).code, 0);
  const Captured c = RunWithRuntime({"train", "--plan", plan, "--steps", "2", "--json", mixed});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json r = nlohmann::json::parse(c.out);
  EXPECT_EQ(r["measured"]["peak_bytes"], r["predicted"]["peak_bytes"]);
}

// The gradient accumulation demonstration on CPU (docs/accumulation.md): for a global batch of 8, the planner
// chooses (b, K, plan) under a budget B; `train --memory-limit B` runs that
// choice, while the naive one (b = 8, K = 1, no checkpointing) stops with
// the out-of-memory message and exit code 4.
TEST_F(TrainCommand, TheGlobalBatchChoiceTrainsUnderTheBudgetAndTheNaiveOneDoesNot) {
  const std::string naive = dir_.Path("naive.json"), chosen = dir_.Path("chosen.json");
  Captured c = RunWithRuntime({"--device", "cpu", "--strategy", "none", "--micro-batch", "8",
                               "--grad-accumulation", "1", "-o", naive, "--quiet", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  const int64_t budget = PredictedPeak(naive) * 6 / 10;
  const std::string limit = std::to_string(budget) + "B";
  c = RunWithRuntime(
      {"--device", "cpu", "--budget", limit, "--global-batch", "8", "-o", chosen, model_});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json plan = nlohmann::json::parse(ReadAll(chosen));
  const int64_t b = plan["micro_batch"], k = plan["grad_accumulation"];
  EXPECT_LT(b, 8);
  EXPECT_EQ(b * k, 8);
  EXPECT_LE(PredictedPeak(chosen), budget);

  // train runs the plan's micro-batch and accumulation as planned.
  const std::vector<std::string> train = {"train",          "--plan", chosen,   "--steps", "2",
                                          "--memory-limit", limit,    "--json", model_};
  const Captured ok = RunWithRuntime(train);
  ASSERT_EQ(ok.code, 0) << ok.err;
  const nlohmann::json j = nlohmann::json::parse(ok.out);
  const int64_t measured = j["measured"]["peak_bytes"];
  std::cout << "budget " << budget << " B: chosen b=" << b << " K=" << k << " predicted "
            << PredictedPeak(chosen) << " B, measured " << measured << " B\n";
  EXPECT_LE(measured, budget);

  const Captured oom =
      RunWithRuntime({"train", "--plan", naive, "--steps", "2", "--memory-limit", limit, model_});
  std::cout << "naive b=8 K=1 none: exit " << oom.code << ": " << oom.err;
  EXPECT_EQ(oom.code, 4) << oom.out << oom.err;
  EXPECT_NE(oom.err.find("planner: error: out of memory at step 1, schedule op "),
            std::string::npos)
      << oom.err;
}

// A llama with grouped-query attention, a bert with its MLM head and a bert
// trained as a sentence-embedding model (mean pooling, mnrl on triplets):
// from a measured profile, every strategy's measured peak is its predicted
// peak (the CPU meter counts exact bytes; the profile measured what runs).
struct FamilyModel {
  const char* name;
  const char* json;
};

class TrainFamilies : public ::testing::TestWithParam<FamilyModel> {};

TEST_P(TrainFamilies, MeasuredPeakIsThePredictedPeakFromAMeasuredProfile) {
  ScratchDir dir;
  const std::string model = dir.Write("model.json", GetParam().json);
  const std::string profile = dir.Path("profile.json");
  const Captured p = RunWithRuntime({"profile", "--repeats", "1", "-o", profile, model});
  ASSERT_EQ(p.code, 0) << p.err;
  for (const std::string strategy : {"none", "uniform", "segment", "selective"}) {
    const std::string plan = dir.Path(strategy + "-plan.json");
    const Captured planned = RunWithRuntime({"--strategy", strategy, "-o", plan, profile});
    ASSERT_EQ(planned.code, 0) << planned.err;
    const Captured c = RunWithRuntime({"train", "--plan", plan, "--steps", "2", "--json", model});
    ASSERT_EQ(c.code, 0) << c.err;
    const nlohmann::json j = nlohmann::json::parse(c.out);
    const int64_t predicted = j["predicted"]["peak_bytes"], measured = j["measured"]["peak_bytes"];
    // Exact: a backward that creates its layer's gradients after autograd
    // let go of saved tensors has a negative measured workspace, which the
    // simulator applies (LayerProfile::backward_workspace_bytes).
    EXPECT_EQ(measured, predicted) << GetParam().name << " " << strategy;
    EXPECT_TRUE(std::isfinite(j["steps"][1]["loss"].get<double>()));
  }
}

// FITS means fits: a plan made from the analytic profile against 99% of a
// budget B runs under --memory-limit B, for each strategy. B lies between
// checkpointing every block and none, so the plans are tight.
TEST_P(TrainFamilies, AnAnalyticPlanAtNinetyNinePercentOfABudgetRunsUnderIt) {
  ScratchDir dir;
  const std::string model = dir.Write("model.json", GetParam().json);
  auto peak = [&](const std::string& strategy) {
    const std::string plan = dir.Path("bound-" + strategy + ".json");
    const Captured c = RunWithRuntime(
        {"--strategy", strategy, "--device", "cpu", "--budget", "1TB", "-o", plan, model});
    EXPECT_EQ(c.code, 0) << c.err;
    return nlohmann::json::parse(ReadAll(plan))["predicted"]["peak_bytes"].get<int64_t>();
  };
  const int64_t none = peak("none"), every = peak("uniform");
  ASSERT_LT(every, none);
  const int64_t budget = (none + 3 * every) / 4;
  const std::string planned_at = std::to_string(budget * 99 / 100) + "B";
  for (const std::string strategy : {"uniform", "segment", "selective", "optimal-single"}) {
    const std::string plan = dir.Path(strategy + "-plan.json");
    const Captured planned = RunWithRuntime(
        {"--strategy", strategy, "--device", "cpu", "--budget", planned_at, "-o", plan, model});
    if (planned.code == 3) continue;  // nothing of this strategy fits: nothing to run
    ASSERT_EQ(planned.code, 0) << planned.err;
    const Captured c =
        RunWithRuntime({"train", "--plan", plan, "--steps", "2", "--memory-limit",
                        std::to_string(budget) + "B", "--json", model});
    ASSERT_EQ(c.code, 0) << GetParam().name << " " << strategy << ": " << c.err;
    const nlohmann::json j = nlohmann::json::parse(c.out);
    EXPECT_LE(j["measured"]["peak_bytes"].get<int64_t>(), budget) << GetParam().name << " "
                                                                   << strategy;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, TrainFamilies,
    ::testing::Values(
        FamilyModel{"llama_gqa", R"({"name": "tiny-llama", "architecture": "llama", "layers": 4,
          "hidden": 32, "heads": 4, "kv_heads": 2, "ffn_hidden": 64, "vocab": 64, "seq_len": 32,
          "micro_batch": 2, "precision": "fp32", "dropout": 0.1, "tie_embeddings": false})"},
        FamilyModel{"llama_tied", R"({"name": "tiny-llama-tied", "architecture": "llama",
          "layers": 2, "hidden": 32, "heads": 4, "kv_heads": 2, "ffn_hidden": 64, "vocab": 1024,
          "seq_len": 32, "micro_batch": 2, "precision": "fp32", "tie_embeddings": true})"},
        FamilyModel{"bert_mlm", R"({"name": "tiny-bert", "architecture": "bert", "layers": 4,
          "hidden": 32, "heads": 4, "vocab": 64, "seq_len": 32, "max_position": 40,
          "type_vocab": 2, "micro_batch": 2, "precision": "fp32", "dropout": 0.1})"},
        FamilyModel{"bert_mnrl", R"({"name": "tiny-sbert", "architecture": "bert", "layers": 4,
          "hidden": 32, "heads": 4, "vocab": 64, "seq_len": 32, "head": "pooling",
          "texts_per_example": 3, "pooler": true, "micro_batch": 2, "precision": "fp32",
          "dropout": 0.1})"},
        FamilyModel{"llama_lora", R"({"name": "tiny-llama-lora", "architecture": "llama",
          "layers": 4, "hidden": 32, "heads": 4, "kv_heads": 2, "ffn_hidden": 64, "vocab": 64,
          "seq_len": 32, "micro_batch": 2, "precision": "fp32", "dropout": 0.1,
          "tie_embeddings": false, "lora_rank": 4, "lora_targets": "all-linear",
          "lora_dropout": 0.1})"},
        FamilyModel{"llama_qlora", R"({"name": "tiny-llama-qlora", "architecture": "llama",
          "layers": 4, "hidden": 32, "heads": 4, "kv_heads": 2, "ffn_hidden": 64, "vocab": 64,
          "seq_len": 32, "micro_batch": 2, "precision": "fp32", "dropout": 0.1,
          "tie_embeddings": false, "lora_rank": 4, "lora_targets": "all-linear",
          "lora_dropout": 0.1, "quantization": "nf4"})"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace remat::cli
