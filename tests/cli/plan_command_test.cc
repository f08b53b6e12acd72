#include <gtest/gtest.h>

#include <algorithm>
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
  EXPECT_NE(c.err.find("; micro_batch 5 fits ("), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("with grad_accumulation 20000, keeping the global batch of 100000"),
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
  const Captured c = RunCli({"--budget", "6GB", "--chunked-loss", "0", kExample});
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
  const Captured from_model = RunCli({"--budget", "24GB", "--chunked-loss", "0", "--json", kExample});
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
    // 8 x 512 tokens: the backward, not the optimizer step, is the peak.
    std::vector<std::string> args = {"--budget",     "1TB", "--strategy", "none", "--json",
                                     "--micro-batch", "8",  "--seq-len",  "512"};
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

// The job of a config.json's "remat" block, typed as flags instead, is the
// same job: the same layers and the same predicted peak.
TEST(Cli, TheSentenceEmbeddingJobOnTheCommandLinePlansLikeItsRematBlock) {
  const std::string hf = std::string(REMAT_SOURCE_DIR) + "/examples/hf/";
  const std::vector<std::string> plan = {"--budget", "80GiB", "--json"};
  std::vector<std::string> flags = plan;
  flags.insert(flags.end(), {"--micro-batch", "128", "--seq-len", "75", "--precision", "amp_fp16",
                             "--head", "pooling", "--pooling", "mean", "--loss", "mnrl",
                             "--texts-per-example", "3", hf + "distilroberta-base.config.json"});
  std::vector<std::string> block = plan;
  block.push_back(hf + "distilroberta-base.mnrl.config.json");
  const Captured a = RunCli(flags), b = RunCli(block);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  const nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["predicted"], jb["predicted"]);
  EXPECT_EQ(ja["layers"], jb["layers"]);
  EXPECT_EQ(ja["strategy"], jb["strategy"]);
  EXPECT_EQ(ja["model"]["parameters"], jb["model"]["parameters"]);
  // Without the flags it is another job (the masked-LM head of the class).
  std::vector<std::string> plain = plan;
  plain.push_back(hf + "distilroberta-base.config.json");
  const Captured c = RunCli(plain);
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(nlohmann::json::parse(c.out)["layers"], jb["layers"]);
}

// --lora-dropout is the remat block's lora_dropout: each adapter then keeps
// a dropped copy of its input and the mask, and the plan records it for
// `train`.
TEST(Cli, LoraDropoutOnTheCommandLinePlansLikeItsRematKey) {
  ScratchDir dir;
  const std::string hf =
      std::string(REMAT_SOURCE_DIR) + "/bench/fidelity/models/hf/llama-gqa-s.config.json";
  nlohmann::json config = nlohmann::json::parse(ReadAll(hf));
  config["remat"]["lora_rank"] = 8;
  config["remat"]["lora_dropout"] = 0.1;
  const std::string keyed = dir.Write("keyed.config.json", config.dump());
  auto plan = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--budget", "1TB", "--strategy", "none", "--json"});
    const Captured c = RunCli(args);
    EXPECT_EQ(c.code, 0) << c.err;
    return c.code == 0 ? nlohmann::json::parse(c.out) : nlohmann::json();
  };
  const nlohmann::json flagged = plan({"--lora-rank", "8", "--lora-dropout", "0.1", hf});
  const nlohmann::json plain = plan({"--lora-rank", "8", hf});
  const nlohmann::json from_key = plan({keyed});
  EXPECT_EQ(flagged["predicted"], from_key["predicted"]);
  EXPECT_EQ(flagged["job"]["lora_dropout"], 0.1);
  EXPECT_EQ(plain["job"]["lora_dropout"], 0.0);
  EXPECT_GT(flagged["predicted"]["peak_bytes"].get<int64_t>(),
            plain["predicted"]["peak_bytes"].get<int64_t>());
  // The flag overrides the key, 0 as PEFT's default.
  EXPECT_EQ(plan({"--lora-dropout", "0", keyed})["predicted"], plain["predicted"]);
}

TEST(Cli, BadJobFlagValuesNameTheFlagTheValueAndWhatIsAccepted) {
  const std::string config =
      std::string(REMAT_SOURCE_DIR) + "/examples/hf/distilroberta-base.config.json";
  ScratchDir dir;
  const std::string profile = dir.Path("profile.json");
  ASSERT_EQ(RunCli({"profile", "--analytic", "-o", profile, kExample}).code, 0);
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"--head", "pooling", "--pooling", "max", config},
       "option --pooling: unknown pooling 'max', expected mean or cls"},
      {{"--head", "decoder", config},
       "option --head: unknown head 'decoder', expected lm, mlm, pooling or classification"},
      {{"--head", "pooling", "--loss", "triplet", config},
       "option --loss: unknown loss 'triplet', expected cross_entropy or mnrl"},
      {{"--optimizer", "adam", config}, "option --optimizer: unknown optimizer 'adam'"},
      {{"--texts-per-example", "0", config}, "--texts-per-example"},
      {{"--merge-columns", "yes", config}, "option --merge-columns: expected true or false"},
      {{"--pooling", "cls", config}, "only the pooling head pools (head is mlm)"},
      {{"--head", "pooling", "--texts-per-example", "3", profile}, "is a profile"},
      {{"--chunked-loss", "some", config},
       "option --chunked-loss: expected a number of chunks in [0, 16777216] (0: off) or auto, "
       "got 'some'"},
      {{"--chunked-loss", "4", config}, "field 'loss_chunks': the chunked loss is the lm head's"},
      {{"--chunked-loss", "auto", profile}, "is a profile"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--budget", "80GiB"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Captured r = RunCli(args);
    EXPECT_EQ(r.code, 2) << c.says << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << c.says;
  }
  const Captured help = RunCli({"plan", "--help"});
  for (const char* flag :
       {"--head", "--pooling", "--loss", "--texts-per-example", "--num-labels", "--optimizer",
        "--grad-dtype", "--dropout", "--merge-columns", "--chunked-loss"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
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
