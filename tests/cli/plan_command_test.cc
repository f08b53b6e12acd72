#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

// Every bundled input plans: examples/ (model.json) and profiles/fixtures/
// (the analytic profile and the runtime's measured profiles).
TEST(PlanCommand, EveryBundledModelAndProfilePlans) {
  int files = 0;
  for (const char* dir : {"examples", "profiles/fixtures"}) {
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(REMAT_SOURCE_DIR) + "/" + dir)) {
      if (entry.path().extension() != ".json") continue;
      ++files;
      const Captured c = RunCli({entry.path().string()});
      EXPECT_EQ(c.code, 0) << entry.path() << ": " << c.err;
      EXPECT_NE(c.out.find("Without checkpointing: peak"), std::string::npos) << entry.path();
    }
  }
  EXPECT_GE(files, 8);
}

TEST(PlanCommand, PrintsTheReportWithParsedBudget) {
  const Captured c = RunCli({"--budget", "24GB", kExample});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("24,000,000,000 bytes (22.35 GiB)"), std::string::npos);
  EXPECT_NE(c.out.find("Without checkpointing: peak"), std::string::npos);
  EXPECT_NE(c.out.find("Where the memory goes at the peak"), std::string::npos);
  EXPECT_NE(c.out.find("optimizer state"), std::string::npos);
  EXPECT_NE(c.out.find("FITS"), std::string::npos);
  EXPECT_TRUE(c.err.empty()) << c.err;
}

TEST(PlanCommand, JsonHasTheDocumentedFields) {
  const Captured c =
      RunCli({"plan", "--budget", "24GB", "--strategy", "selective", "--json", kExample});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["strategy"], "selective");
  EXPECT_EQ(j["budget_bytes"], 24'000'000'000);
  EXPECT_EQ(j["model"]["name"], "gpt2-small");
  EXPECT_EQ(j["model"]["parameters"], 124'439'808);
  for (const char* k :
       {"peak_bytes", "activation_peak_bytes", "static_bytes", "step_ms", "recompute_ms"}) {
    EXPECT_TRUE(j["predicted"].contains(k)) << k;
  }
  EXPECT_LE(j["predicted"]["peak_bytes"].get<int64_t>(), 24'000'000'000);
  ASSERT_EQ(j["layers"].size(), 16u);
  EXPECT_EQ(j["layers"][1]["name"], "block0");
  for (const auto& l : j["layers"]) {
    const std::string d = l["decision"];
    EXPECT_TRUE(d == "keep" || d == "checkpoint" || d == "selective" || d == "recompute") << d;
  }
  EXPECT_GT(j["schedule"].size(), 32u);
}

TEST(PlanCommand, ManualLayersAndOutputFile) {
  ScratchDir dir;
  const std::string out = dir.Path("plan.json");
  const Captured c =
      RunCli({"--budget", "80GiB", "--checkpoint-layers", "0,4,8", "-o", out, kExample});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json j = nlohmann::json::parse(ReadAll(out));
  EXPECT_EQ(j["strategy"], "manual");
  EXPECT_EQ(j["budget_bytes"], int64_t{80} << 30);
  int checkpoints = 0;
  for (const auto& l : j["layers"]) checkpoints += l["decision"] == "checkpoint";
  EXPECT_EQ(checkpoints, 3);
  EXPECT_EQ(j["layers"][5]["decision"], "checkpoint");  // block4
}

// The suggestion bisects over micro-batches: walking down one by one from
// 100,000 planned 100,000 times (hours).
TEST(PlanCommand, NoFitWithAHugeMicroBatchStillSuggestsOne) {
  const Captured c = RunCli({"--budget", "3GB", "--micro-batch", "100000", kExample});
  EXPECT_EQ(c.code, 3);
  EXPECT_NE(c.err.find("; micro_batch 2 fits ("), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("with grad_accumulation 50000, keeping the global batch of 100000"),
            std::string::npos)
      << c.err;
}

// Found by the CLI fuzzer: a Latin-1 file name ended in "internal error"
// when the plan JSON was written.
TEST(PlanCommand, ANonUtf8FileNameIsFine) {
  ScratchDir dir;
  const std::string in = dir.Write("caf\xe9.json", ReadAll(kExample));
  const std::string out = dir.Path("plan.json");
  const Captured c = RunCli({"--budget", "24GB", "-o", out, in});
  EXPECT_EQ(c.code, 0) << c.err;
  const nlohmann::json j = nlohmann::json::parse(ReadAll(out));
  EXPECT_NE(j["model"]["input"].get<std::string>().find("caf\xef\xbf\xbd.json"), std::string::npos);
}

TEST(PlanCommand, NoPlanFitsExitsThreeAndSuggestsAMicroBatch) {
  const Captured c = RunCli({"--budget", "6GB", kExample});
  EXPECT_EQ(c.code, 3);
  EXPECT_NE(c.err.find("no plan fits in"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("the smallest peak any strategy reaches is"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("micro_batch"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("grad_accumulation"), std::string::npos) << c.err;
  const Captured tiny = RunCli({"--budget", "1GB", kExample});
  EXPECT_EQ(tiny.code, 3);
  EXPECT_NE(tiny.err.find("model state alone"), std::string::npos) << tiny.err;
}

TEST(ProfileCommand, AnalyticProfileFeedsBackIntoThePlanner) {
  ScratchDir dir;
  const std::string profile = dir.Path("gpt2.json");
  ASSERT_EQ(RunCli({"profile", "--analytic", "-o", profile, kExample}).code, 0);
  const Captured from_model = RunCli({"--budget", "24GB", "--json", kExample});
  const Captured from_profile = RunCli({"--budget", "24GB", "--json", profile});
  ASSERT_EQ(from_profile.code, 0) << from_profile.err;
  const auto a = nlohmann::json::parse(from_model.out), b = nlohmann::json::parse(from_profile.out);
  EXPECT_EQ(a["predicted"]["peak_bytes"], b["predicted"]["peak_bytes"]);
  EXPECT_EQ(a["strategy"], b["strategy"]);
  const Captured printed = RunCli({"profile", "--analytic", kExample});
  EXPECT_NE(printed.out.find("\"source\": \"analytic\""), std::string::npos);
}

TEST(Cli, HelpAndUnknownCommands) {
  EXPECT_EQ(RunCli({"--help"}).code, 0);
  EXPECT_NE(RunCli({"--help"}).out.find("profile"), std::string::npos);
  EXPECT_EQ(RunCli({"plan", "--help"}).code, 0);
  const Captured typo = RunCli({"--bugdet", "24GB", kExample});
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.err.find("did you mean --budget?"), std::string::npos) << typo.err;
}

TEST(Cli, AttentionOverridesTheConfigsImplementation) {
  const std::string config =
      std::string(REMAT_SOURCE_DIR) + "/examples/hf/roberta-base.config.json";
  auto peak = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--budget", "1TB", "--strategy", "none", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(config);
    const Captured o = RunCli(args);
    EXPECT_EQ(o.code, 0) << o.err;
    return nlohmann::json::parse(o.out)["predicted"]["peak_bytes"].get<int64_t>();
  };
  // config.json runs transformers' sdpa: on a GPU, no s x s tensors.
  const int64_t sdpa = peak({}), eager = peak({"--attention", "eager"});
  EXPECT_EQ(peak({"--attention", "sdpa"}), sdpa);
  EXPECT_GT(eager, sdpa);
  const Captured bad = RunCli({"--budget", "1TB", "--attention", "fast", config});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("option --attention: unknown attention 'fast', expected eager, flash"),
            std::string::npos)
      << bad.err;
  EXPECT_TRUE(bad.out.empty());
}

TEST(Cli, EveryCommandsHelpListsEachFlagOnce) {
  for (const char* command : {"plan", "profile", "train", "pareto"}) {
    const Captured help = RunCli({command, "--help"});
    ASSERT_EQ(help.code, 0) << command;
    std::istringstream lines(help.out);
    std::set<std::string> seen;
    for (std::string line; std::getline(lines, line);) {
      const size_t dash = line.find_first_not_of(' ');
      if (dash == std::string::npos || line.compare(dash, 2, "--") != 0) continue;
      const std::string flag = line.substr(dash, line.find(' ', dash) - dash);
      EXPECT_TRUE(seen.insert(flag).second) << command << " --help lists " << flag << " twice";
    }
    EXPECT_FALSE(seen.empty()) << command;
  }
}

}  // namespace
}  // namespace remat::cli
