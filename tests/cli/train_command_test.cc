// `planner train` and a measured `planner profile` through the CLI with a
// fake runtime: argument checks, what reaches the runtime, reports, exit
// codes and the out-of-memory message, all without LibTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_test_util.h"
#include "fake_runtime.h"
#include "remat/planning/job.h"
#include "remat/model/model_config.h"
#include "remat/plan/plan_file.h"

namespace remat::cli {
namespace {

const char kTinyModel[] = R"({"name": "tiny-gpt", "architecture": "gpt", "layers": 6,
  "hidden": 64, "heads": 4, "vocab": 128, "seq_len": 64, "micro_batch": 2,
  "precision": "fp32", "optimizer": "adamw", "attention": "eager", "dropout": 0.1})";

class FakeTrain : public ::testing::Test {
 protected:
  void SetUp() override { model_ = dir_.Write("tiny.json", kTinyModel); }

  Captured Run(const std::vector<std::string>& args, bool with_runtime = true) {
    std::ostringstream out, err;
    Environment env;
    env.out = &out;
    env.err = &err;
    if (with_runtime) env.runtime = [this]() -> Result<Runtime*> { return &runtime_; };
    const int code = cli::Run(args, env);
    return {code, out.str(), err.str()};
  }
  std::string PlanFile(const std::vector<std::string>& plan_args, const std::string& name) {
    const std::string path = dir_.Path(name);
    std::vector<std::string> args = plan_args;
    args.insert(args.end(), {"-o", path, model_});
    const Captured c = Run(args);
    EXPECT_EQ(c.code, 0) << c.err;
    return path;
  }
  static int64_t PredictedPeak(const std::string& plan) {
    return nlohmann::json::parse(ReadAll(plan))["predicted"]["peak_bytes"].get<int64_t>();
  }
  static int Lines(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
  }

  ScratchDir dir_;
  FakeRuntime runtime_;
  std::string model_;
};

TEST_F(FakeTrain, RunsThePlanAndReportsPredictedAgainstMeasured) {
  const std::string plan = PlanFile({"--strategy", "uniform", "--every", "2"}, "uniform.json");
  const Captured c = Run({"train", "--plan", plan, "--steps", "3", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(runtime_.train_calls, 1);
  EXPECT_NE(c.out.find("(uniform), 3 steps on cpu"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("step    3"), std::string::npos) << c.out;
  EXPECT_TRUE(c.err.empty()) << c.err;
}

// A CUDA run sets PYTORCH_CUDA_ALLOC_CONF to the plan's --alloc-conf before
// the runtime loads; a CPU run leaves it alone; one the environment holds
// already is kept, with a note when it differs from the plan's.
TEST_F(FakeTrain, ACudaRunTakesThePlansAllocatorSettings) {
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF");
  const std::string conf = "expandable_segments:True";
  const std::string plan =
      PlanFile({"--strategy", "uniform", "--every", "2", "--device", "h200", "--alloc-conf", conf},
               "conf.json");
  Captured c = Run({"train", "--plan", plan, "--steps", "1", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(runtime_.last_alloc_conf, "(unset)");
  c = Run({"train", "--plan", plan, "--steps", "1", "--runtime-device", "cuda", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(runtime_.last_alloc_conf, conf);
  EXPECT_TRUE(c.err.empty()) << c.err;
  setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64", 1);
  c = Run({"train", "--plan", plan, "--steps", "1", "--runtime-device", "cuda", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(runtime_.last_alloc_conf, "max_split_size_mb:64");
  EXPECT_NE(c.err.find("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64 from the environment"),
            std::string::npos)
      << c.err;
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
}

TEST_F(FakeTrain, JsonReportCarriesTheComparison) {
  const std::string plan = PlanFile({"--strategy", "segment"}, "segment.json");
  const Captured c = Run({"train", "--plan", plan, "--steps", "2", "--json", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["predicted"]["peak_bytes"].get<int64_t>(), PredictedPeak(plan));
  EXPECT_EQ(j["measured"]["peak_bytes"].get<int64_t>(), PredictedPeak(plan));
  EXPECT_EQ(j["steps"].size(), 2u);
}

TEST_F(FakeTrain, ThePlansAccumulationReachesTheRuntimeAndThePredictionIsPerUpdate) {
  const std::string plan = PlanFile({"--strategy", "none", "--grad-accumulation", "4"}, "k4.json");
  const nlohmann::json planned = nlohmann::json::parse(ReadAll(plan));
  ASSERT_EQ(planned["grad_accumulation"], 4);
  const Captured c = Run({"train", "--plan", plan, "--steps", "2", "--json", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(runtime_.last_grad_accumulation, 4);
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_DOUBLE_EQ(j["predicted"]["step_ms"].get<double>(),
                   planned["predicted"]["update_ms"].get<double>());
  EXPECT_EQ(j["predicted"]["peak_bytes"], planned["predicted"]["peak_bytes"]);
}

TEST_F(FakeTrain, OutOfMemoryIsOneLineAndExitCode4) {
  const std::string segment = PlanFile({"--strategy", "segment"}, "segment.json");
  const std::string none = PlanFile({"--strategy", "none"}, "none.json");
  const int64_t fits = PredictedPeak(segment), needs = PredictedPeak(none);
  ASSERT_LT(fits, needs);
  const std::string limit = std::to_string((fits + needs) / 2) + "B";
  EXPECT_EQ(Run({"train", "--plan", segment, "--memory-limit", limit, model_}).code, 0);
  const Captured oom = Run({"train", "--plan", none, "--memory-limit", limit, model_});
  EXPECT_EQ(oom.code, 4) << oom.err;
  EXPECT_EQ(oom.err.rfind("planner: error: out of memory at step 1, schedule op ", 0), 0u)
      << oom.err;
  EXPECT_EQ(Lines(oom.err), 1) << oom.err;
}

TEST_F(FakeTrain, APlanRunsTheJobItWasMadeForWithoutTheOverridesTypedAgain) {
  const std::string plan =
      PlanFile({"--strategy", "none", "--micro-batch", "3", "--seq-len", "32"}, "s32.json");
  const Captured c = Run({"train", "--plan", plan, "--json", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(runtime_.last_micro_batch, 3);
  EXPECT_EQ(nlohmann::json::parse(c.out)["predicted"]["peak_bytes"].get<int64_t>(),
            PredictedPeak(plan));
  // The same values typed again agree with the plan.
  EXPECT_EQ(Run({"train", "--plan", plan, "--seq-len", "32", "--micro-batch", "3", model_}).code,
            0);
  EXPECT_EQ(runtime_.train_calls, 2);
}

TEST_F(FakeTrain, ATypedShapeThatContradictsThePlanIsOneLineAndExit2) {
  const std::string plan = PlanFile({"--strategy", "none", "--seq-len", "32"}, "s32.json");
  const Captured c = Run({"train", "--plan", plan, "--seq-len", "64", model_});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("s32.json was made for --seq-len 32, and --seq-len 64 was asked for"),
            std::string::npos)
      << c.err;
  EXPECT_EQ(Lines(c.err), 1) << c.err;
  EXPECT_EQ(runtime_.train_calls, 0);
}

TEST_F(FakeTrain, APlanForAnotherModelIsRefusedBeforeTheRuntimeStarts) {
  const std::string plan = PlanFile({"--strategy", "none"}, "none.json");
  std::string deeper = kTinyModel;
  deeper.replace(deeper.find("\"layers\": 6"), 11, "\"layers\": 4");
  const Captured c = Run({"train", "--plan", plan, dir_.Write("deeper.json", deeper)});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("the plan's chain has 10 layers (embedding, block0..block5, final_norm, "
                       "head, loss), the model's 8"),
            std::string::npos)
      << c.err;
  EXPECT_EQ(Lines(c.err), 1) << c.err;
  EXPECT_EQ(runtime_.train_calls, 0);
}

TEST_F(FakeTrain, TrainRunsThePlansMicroBatchAndRefusesAnotherTyped) {
  // --global-batch chooses a micro-batch; the plan carries it and train runs it.
  const std::string plan = PlanFile({"--strategy", "none", "--micro-batch", "4"}, "mb4.json");
  const Captured c = Run({"train", "--plan", plan, "--json", model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(runtime_.last_micro_batch, 4);
  EXPECT_EQ(nlohmann::json::parse(c.out)["predicted"]["peak_bytes"].get<int64_t>(),
            PredictedPeak(plan));
  const Captured other = Run({"train", "--plan", plan, "--micro-batch", "2", model_});
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(
      other.err.find("mb4.json was made for --micro-batch 4, and --micro-batch 2 was asked for"),
      std::string::npos)
      << other.err;
  EXPECT_EQ(runtime_.train_calls, 1);
}

// A sentence-embedding job planned on a config.json: every job flag typed
// at planning is in the plan, so train is given the plan and the model only.
class FakeTrainEncoder : public FakeTrain {
 protected:
  const std::string config_ =
      std::string(REMAT_SOURCE_DIR) + "/examples/hf/distilroberta-base.config.json";
  const std::vector<std::string> job_ = {"--precision",         "fp32", "--micro-batch", "2",
                                         "--seq-len",           "64",   "--head",        "pooling",
                                         "--pooling",           "mean", "--loss",        "mnrl",
                                         "--texts-per-example", "3"};
  std::string EncoderPlan() {
    const std::string path = dir_.Path("mnrl.json");
    std::vector<std::string> args = {"--strategy", "none"};
    args.insert(args.end(), job_.begin(), job_.end());
    args.insert(args.end(), {"-o", path, config_});
    const Captured c = Run(args);
    EXPECT_EQ(c.code, 0) << c.err;
    return path;
  }
  // The config planning had, its defaults and gradient conventions resolved.
  static std::string Resolved(const ModelConfig& c) {
    ModelConfig r = WithDefaults(c);
    r.gradients = GradientsOf(c);
    r.grad_dtype = *PlannedJobOf(c).grad_dtype;
    return ModelConfigToJson(r);
  }
};

TEST_F(FakeTrainEncoder, APlanCarriesItsJobSoTrainNeedsNoFlagsRetyped) {
  const std::string plan = EncoderPlan();
  const nlohmann::json job = nlohmann::json::parse(ReadAll(plan))["job"];
  EXPECT_EQ(job["head"], "pooling");
  EXPECT_EQ(job["texts_per_example"], 3);
  const Captured c = Run({"train", "--plan", plan, "--json", config_});
  ASSERT_EQ(c.code, 0) << c.err;
  ASSERT_EQ(runtime_.train_calls, 1);
  JobOverrides planned_overrides;
  planned_overrides.precision = Precision::kFp32;
  planned_overrides.micro_batch = 2;
  planned_overrides.seq_len = 64;
  planned_overrides.head = Head::kPooling;
  planned_overrides.pooling = Pooling::kMean;
  planned_overrides.loss = Loss::kMnrl;
  planned_overrides.texts_per_example = 3;
  Result<Job> planned = LoadJob(config_, planned_overrides);
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  const ModelConfig& trained = runtime_.last_config;
  EXPECT_EQ(trained.precision, Precision::kFp32);
  EXPECT_EQ(trained.micro_batch, 2);
  EXPECT_EQ(trained.seq_len, 64);
  EXPECT_EQ(trained.head, Head::kPooling);
  EXPECT_EQ(trained.pooling, Pooling::kMean);
  EXPECT_EQ(trained.loss, Loss::kMnrl);
  EXPECT_EQ(trained.texts_per_example, 3);
  EXPECT_EQ(trained.pooler, planned->config().pooler);
  EXPECT_EQ(Resolved(trained), Resolved(planned->config()));
  EXPECT_EQ(nlohmann::json::parse(c.out)["predicted"]["peak_bytes"].get<int64_t>(),
            PredictedPeak(plan));
  // The plan's own values typed again agree with it.
  EXPECT_EQ(Run({"train", "--plan", plan, "--loss", "mnrl", "--head", "pooling", config_}).code, 0);
}

TEST_F(FakeTrainEncoder, ATypedFlagThatContradictsThePlansJobIsOneLineAndExit2) {
  const std::string plan = EncoderPlan();
  const Captured c = Run({"train", "--plan", plan, "--precision", "bf16", config_});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("mnrl.json was made for --precision fp32, and --precision bf16 was asked "
                       "for"),
            std::string::npos)
      << c.err;
  EXPECT_EQ(Lines(c.err), 1) << c.err;
  const Captured triplets = Run({"train", "--plan", plan, "--texts-per-example", "2", config_});
  EXPECT_EQ(triplets.code, 2);
  EXPECT_NE(triplets.err.find("was made for --texts-per-example 3, and --texts-per-example 2"),
            std::string::npos)
      << triplets.err;
  EXPECT_EQ(runtime_.train_calls, 0);
}

TEST_F(FakeTrainEncoder, APlanWithoutAJobObjectTakesItsShapeAndTheTypedFlags) {
  nlohmann::json doc = nlohmann::json::parse(ReadAll(EncoderPlan()));
  doc.erase("job");
  const std::string plan = dir_.Write("no-job.json", doc.dump());
  // Without the job's fields the head is typed again; the shape is the plan's.
  const Captured c = Run({"train", "--plan", plan, "--head", "pooling", "--loss", "mnrl",
                          "--texts-per-example", "3", config_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(runtime_.last_config.micro_batch, 2);
  EXPECT_EQ(runtime_.last_config.seq_len, 64);
  EXPECT_EQ(runtime_.last_config.texts_per_example, 3);
}

TEST_F(FakeTrain, ABadJobValueInThePlanIsOneLineNamingTheFileAndField) {
  nlohmann::json doc = nlohmann::json::parse(ReadAll(PlanFile({"--strategy", "none"}, "p.json")));
  doc["job"]["attention"] = "paged";
  const std::string plan = dir_.Write("bad-job.json", doc.dump());
  const Captured c = Run({"train", "--plan", plan, model_});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("bad-job.json: job: field 'attention'"), std::string::npos) << c.err;
  EXPECT_EQ(Lines(c.err), 1) << c.err;
  EXPECT_EQ(runtime_.train_calls, 0);
}

// Standard output held until flushed (main's, off a terminal) and standard
// error written at once, both into one log: 2>&1 into a file.
class SharedLog {
 public:
  class Held : public std::stringbuf {
   public:
    explicit Held(std::string* log) : log_(log) {}
    int sync() override {
      *log_ += str();
      str("");
      return 0;
    }

   private:
    std::string* log_;
  };
  class Direct : public std::streambuf {
   public:
    explicit Direct(std::string* log) : log_(log) {}
    int_type overflow(int_type ch) override {
      if (!traits_type::eq_int_type(ch, traits_type::eof())) log_->push_back(static_cast<char>(ch));
      return traits_type::not_eof(ch);
    }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
      log_->append(s, static_cast<size_t>(n));
      return n;
    }

   private:
    std::string* log_;
  };
  std::string log;
  Held held{&log};
  Direct direct{&log};
  std::ostream out{&held};
  std::ostream err{&direct};
};

TEST_F(FakeTrain, WhatWasPrintedIsEndedBeforeTheErrorLine) {
  const std::string segment = PlanFile({"--strategy", "segment"}, "segment.json");
  const std::string limit = std::to_string(PredictedPeak(segment) / 2) + "B";
  SharedLog shared;
  Environment env;
  env.out = &shared.out;
  env.err = &shared.err;
  env.runtime = [this]() -> Result<Runtime*> { return &runtime_; };
  EXPECT_EQ(cli::Run({"train", "--plan", segment, "--memory-limit", limit, model_}, env), 4);
  const size_t header = shared.log.find("(segment), 20 steps on cpu\n");
  const size_t error = shared.log.find("planner: error: out of memory");
  ASSERT_NE(header, std::string::npos) << shared.log;
  ASSERT_NE(error, std::string::npos) << shared.log;
  EXPECT_LT(header, error) << shared.log;
  EXPECT_EQ(shared.log[error - 1], '\n') << shared.log;
}

TEST_F(FakeTrain, ArgumentErrorsExit2WithoutRunning) {
  const std::string plan = PlanFile({"--strategy", "none"}, "none.json");
  const std::string profile = dir_.Path("profile.json");
  ASSERT_EQ(Run({"profile", "--analytic", "-o", profile, model_}).code, 0);
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"train", model_}, "missing --plan"},
      {{"train", "--plan", plan, "--steps", "0", model_}, "--steps"},
      {{"train", "--plan", plan, "--memory-limit", "12", model_}, "option --memory-limit"},
      {{"train", "--plan", plan, "--runtime-device", "tpu", model_}, "unknown device 'tpu'"},
      {{"train", "--plan", dir_.Path("missing.json"), model_}, "missing.json"},
      {{"train", "--plan", plan, profile}, "profile.json is a profile"},
  };
  for (const auto& c : cases) {
    const Captured r = Run(c.args);
    EXPECT_EQ(r.code, 2) << c.says << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(Lines(r.err), 1) << r.err;
  }
  EXPECT_EQ(runtime_.train_calls, 0);
}

TEST_F(FakeTrain, WithoutARuntimeTrainAndMeasuringSayWhyAndExit2) {
  const std::string plan = PlanFile({"--strategy", "none"}, "none.json");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"train", "--plan", plan, model_},
        std::vector<std::string>{"profile", model_}}) {
    const Captured c = Run(args, /*with_runtime=*/false);
    EXPECT_EQ(c.code, 2) << c.err;
    EXPECT_NE(c.err.find("needs the LibTorch runtime"), std::string::npos) << c.err;
    EXPECT_EQ(Lines(c.err), 1);
  }
  EXPECT_EQ(Run({"profile", "--analytic", model_}, false).code, 0);
}

TEST_F(FakeTrain, ARuntimeThatFailsToLoadIsOneLine) {
  std::ostringstream out, err;
  Environment env;
  env.out = &out;
  env.err = &err;
  env.runtime = []() -> Result<Runtime*> {
    return Status::Invalid("cannot load the runtime module /x/libremat_runtime.so: not found");
  };
  const std::string plan = PlanFile({"--strategy", "none"}, "none.json");
  EXPECT_EQ(cli::Run({"train", "--plan", plan, model_}, env), 2);
  EXPECT_EQ(err.str(),
            "planner: error: cannot load the runtime module /x/libremat_runtime.so: not found\n");
}

TEST_F(FakeTrain, MeasuredProfilePassesTheOptionsToTheRuntime) {
  const std::string out = dir_.Path("measured.json");
  const Captured c = Run(
      {"profile", "--repeats", "3", "--statistic", "min", "--clock", "thread", "-o", out, model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(runtime_.measure_calls, 1);
  EXPECT_EQ(runtime_.last_measure.repeats, 3);
  EXPECT_EQ(runtime_.last_measure.statistic, "min");
  EXPECT_EQ(runtime_.last_measure.clock, "thread");
  EXPECT_NE(ReadAll(out).find("\"source\": \"fake\""), std::string::npos);
  EXPECT_EQ(Run({"profile", "--analytic", model_}).code, 0);
  EXPECT_EQ(runtime_.measure_calls, 1);
}

TEST_F(FakeTrain, ReportsNameThePlansSetting) {
  const std::string plan = PlanFile({"--strategy", "uniform", "--every", "2"}, "uniform.json");
  const std::string html = dir_.Path("r.html");
  const Captured c = Run(
      {"train", "--plan", plan, "--steps", "1", "--pareto-points", "0", "--report", html, model_});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(ReadAll(html).find("every 2"), std::string::npos);
}

// One plan, one verdict: under a budget the run without checkpointing
// exceeds, the train report says it does not fit, as the plan's own report does.
TEST_F(FakeTrain, TheTrainReportSaysWhatThePlanReportSaysOfTheRunWithoutCheckpointing) {
  const Captured none = Run({"--budget", "1TB", "--strategy", "none", "--json", model_});
  ASSERT_EQ(none.code, 0) << none.err;
  const int64_t peak = nlohmann::json::parse(none.out)["predicted"]["peak_bytes"].get<int64_t>();
  const std::string budget = std::to_string(peak * 9 / 10) + "B";
  const Captured planned =
      Run({"--budget", budget, "--strategy", "uniform", "--every", "1", model_});
  ASSERT_EQ(planned.code, 0) << planned.err;
  EXPECT_NE(planned.out.find("does not fit"), std::string::npos) << planned.out;
  const std::string plan =
      PlanFile({"--budget", budget, "--strategy", "uniform", "--every", "1"}, "every1.json");
  const std::string html = dir_.Path("r.html");
  const Captured c = Run(
      {"train", "--plan", plan, "--steps", "1", "--pareto-points", "0", "--report", html, model_});
  ASSERT_EQ(c.code, 0) << c.err;
  const std::string report = ReadAll(html);
  EXPECT_NE(report.find(", does not fit"), std::string::npos);
  EXPECT_EQ(report.find(", fits"), std::string::npos);
}

}  // namespace
}  // namespace remat::cli
