// `planner train` on encoders with LoRA and QLoRA (bert MLM, the
// sentence-transformers pooling + mnrl model of bench/fidelity/models/cpu-sbert-s.json
// at tiny shapes): from a measured profile, every strategy's measured peak is
// its predicted peak, as for the decoders (train_command_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "remat/runtime/torch_runtime.h"

namespace remat::cli {
namespace {

// `planner <args>` in process with the LibTorch runtime.
Captured RunPlanner(const std::vector<std::string>& args) {
  static std::unique_ptr<Runtime> runtime = runtime::MakeTorchRuntime();
  Environment env;
  env.runtime = []() -> Result<Runtime*> { return runtime.get(); };
  return RunCli(args, env);
}

struct EncoderJob {
  const char* name;
  const char* json;
};

class EncoderLoraTrain : public ::testing::TestWithParam<EncoderJob> {};

TEST_P(EncoderLoraTrain, MeasuredPeakIsThePredictedPeakFromAMeasuredProfile) {
  ScratchDir dir;
  const std::string model = dir.Write("model.json", GetParam().json);
  const std::string profile = dir.Path("profile.json");
  const Captured p = RunPlanner({"profile", "--repeats", "1", "-o", profile, model});
  ASSERT_EQ(p.code, 0) << p.err;
  for (const std::string strategy : {"none", "uniform", "segment", "selective"}) {
    const std::string plan = dir.Path(strategy + "-plan.json");
    const Captured planned = RunPlanner({"--strategy", strategy, "-o", plan, profile});
    ASSERT_EQ(planned.code, 0) << planned.err;
    const Captured c = RunPlanner({"train", "--plan", plan, "--steps", "2", "--json", model});
    ASSERT_EQ(c.code, 0) << c.err;
    const nlohmann::json j = nlohmann::json::parse(c.out);
    const int64_t predicted = j["predicted"]["peak_bytes"], measured = j["measured"]["peak_bytes"];
    // As train_command_test.cc's families: exact.
    EXPECT_EQ(measured, predicted) << GetParam().name << " " << strategy;
    EXPECT_TRUE(std::isfinite(j["steps"][1]["loss"].get<double>()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, EncoderLoraTrain,
    ::testing::Values(EncoderJob{"bert_mlm_lora",
                                 R"({"name": "tiny-bert-lora", "architecture": "bert",
          "layers": 4, "hidden": 32, "heads": 4, "vocab": 64, "seq_len": 32,
          "max_position": 40, "type_vocab": 2, "micro_batch": 2, "precision": "fp32",
          "dropout": 0.1, "lora_rank": 4, "lora_targets": "all-linear", "lora_dropout": 0.1})"},
                      EncoderJob{"sbert_qlora_double_quant", R"({"name": "tiny-sbert-qlora",
          "architecture": "bert", "layers": 4, "hidden": 32, "heads": 4, "vocab": 64,
          "seq_len": 32, "max_position": 40, "type_vocab": 1, "head": "pooling",
          "pooling": "mean", "loss": "mnrl", "texts_per_example": 3, "pooler": true,
          "micro_batch": 2, "precision": "fp32", "dropout": 0.1, "lora_rank": 4,
          "lora_targets": ["query", "value"], "lora_dropout": 0.1, "quantization": "nf4",
          "double_quant": true})"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace remat::cli
