// Bad input: exit code 2, one clear line naming the file/field/value, no
// output file written, a previous output file left intact.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

// The inputs the catalogue names, beside the ones written inline above.
void WriteCatalogueFiles(const ScratchDir& dir) {
  const std::string model = R"("hidden": 64, "heads": 4, "vocab": 10, "seq_len": 8)";
  dir.Write("layers_string.json", R"({"layers": "12", )" + model + "}");
  dir.Write("layers_float.json", R"({"layers": 2.5, )" + model + "}");
  dir.Write("layers_zero.json", R"({"layers": 0, )" + model + "}");
  dir.Write("layers_huge.json", R"({"layers": 99999999999999999999, )" + model + "}");
  dir.Write("dropout_type.json", R"({"layers": 2, "dropout": "high", )" + model + "}");
  dir.Write("typo.json", R"({"layer": 2, )" + model + "}");
  dir.Write("vocab_1e30.json",
            R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 1e30, "seq_len": 8})");
  dir.Write("overflow.json",
            R"({"name": "wide", "layers": 1, "hidden": 64, "heads": 1, "vocab": 128,
                "seq_len": 16777216, "micro_batch": 4096})");
  dir.Write("tiny.json", R"({"name": "tiny", "layers": 2, )" + model + "}");
  dir.Write("nan.json", R"({"layers": 2, "hidden": NaN, "heads": 4, "vocab": 10, "seq_len": 8})");
  dir.Write("empty.json", "");
  dir.Write("array.json", "[1, 2]");
  dir.Write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  dir.Write("newline_key.json", "{\"la\\nyers\": 2}");
  dir.Write("lora_target.json",
            R"({"layers": 2, "lora_rank": 8, "lora_targets": ["q", "qq"], )" + model + "}");
  dir.Write("lora_no_rank.json", R"({"layers": 2, "lora_targets": "q,v", )" + model + "}");
  dir.Write("lora_gate_gpt.json",
            R"({"layers": 2, "lora_rank": 8, "lora_targets": "gate", )" + model + "}");
  dir.Write("lora_rank_negative.json", R"({"layers": 2, "lora_rank": -1, )" + model + "}");
  dir.Write("quant_unknown.json",
            R"({"layers": 2, "lora_rank": 8, "quantization": "int3", )" + model + "}");
  dir.Write("double_quant.json",
            R"({"layers": 2, "lora_rank": 8, "double_quant": true, )" + model + "}");
  dir.Write("hf_t5.json", R"({"model_type": "t5", "num_layers": 6})");
  dir.Write("hf_missing.json", R"({"model_type": "gpt2", "n_embd": 64})");
  const std::string layer =
      R"("kind": "block", "forward_ms": 1, "backward_ms": 2, "input_bytes": 10,
         "output_bytes": 10, "forward_workspace_bytes": 0, "backward_workspace_bytes": 0)";
  auto profile = [&](const std::string& layers) {
    return R"({"model": "p", "static_bytes": 100, "layers": [)" + layers + "]}";
  };
  dir.Write("profile_empty.json", profile(""));
  dir.Write("profile_ok.json", profile(R"({"name": "l0", "activation_bytes": 30, )" + layer + "}"));
  dir.Write("profile_truncated.json", profile(R"({"name": "l0", )" + layer).substr(0, 90));
  dir.Write("profile_negative.json",
            profile(R"({"name": "l0", "activation_bytes": -5, )" + layer + "}"));
  dir.Write(
      "profile_inf.json",
      profile(R"({"name": "l0", "activation_bytes": 30, "forward_ms": 1e999, )" + layer + "}"));
  dir.Write("profile_chain.json",
            profile(R"({"name": "l0", "activation_bytes": 30, )" + layer + R"(}, {"name": "l1",
                "activation_bytes": 30, "kind": "block", "forward_ms": 1, "backward_ms": 2,
                "input_bytes": 12, "output_bytes": 10, "forward_workspace_bytes": 0,
                "backward_workspace_bytes": 0})"));
  dir.Write("profile_4eib.json",
            profile(R"({"name": "l0", "activation_bytes": 4611686018427387904, )" + layer + "}"));
}

struct Case {
  const char* name;
  std::vector<std::string> args;  // "{dir}" is replaced by the scratch directory
  const char* expect;             // substring of the error line
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// The case's arguments with "{dir}" replaced by the scratch directory.
std::vector<std::string> ArgsOf(const Case& c, const ScratchDir& dir) {
  std::vector<std::string> args;
  for (std::string a : c.args) {
    const size_t at = a.find("{dir}");
    if (at != std::string::npos) a.replace(at, 5, dir.Path(""));
    args.push_back(a);
  }
  return args;
}

// The catalogue's contract: exit 2, one line "planner: error: ..." holding
// the expected text, nothing on standard output.
void ExpectRefused(const Captured& c, const Case& expected) {
  EXPECT_EQ(c.code, 2) << c.out << c.err;
  EXPECT_NE(c.err.find(expected.expect), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_EQ(c.err.rfind("planner: error: ", 0), 0u) << c.err;
  EXPECT_TRUE(c.out.empty());
}

class BadInput : public ::testing::TestWithParam<Case> {};

TEST_P(BadInput, ExitsTwoWithOneClearLineAndWritesNothing) {
  ScratchDir dir;
  dir.Write("malformed.json", "{\"layers\": 12, \"hidden\": ");
  dir.Write("heads.json", R"({"layers": 2, "hidden": 100, "heads": 3, "vocab": 10, "seq_len": 8})");
  dir.Write("negative.json",
            R"({"layers": 2, "hidden": -64, "heads": 4, "vocab": 10, "seq_len": 8})");
  dir.Write(
      "precision.json",
      R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "seq_len": 8, "precision": "fp8"})");
  dir.Write("zero.json", R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "seq_len": 0})");
  WriteCatalogueFiles(dir);
  const std::string out = dir.Write("out.json", "previous plan");
  std::vector<std::string> args = ArgsOf(GetParam(), dir);
  // -o goes after a subcommand's name ("profile -o out ..."), first otherwise.
  const bool subcommand = !args.empty() && args[0] == "profile";
  args.insert(args.begin() + (subcommand ? 1 : 0), {"-o", out});
  ExpectRefused(RunCli(args), GetParam());
  EXPECT_EQ(ReadAll(out), "previous plan");  // untouched
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, BadInput,
    ::testing::Values(
        Case{"missing_file", {"--budget", "24GB", "{dir}/nope.json"}, "nope.json: no such file"},
        Case{"directory", {"--budget", "24GB", "{dir}"}, "is a directory"},
        Case{"malformed",
             {"--budget", "24GB", "{dir}/malformed.json"},
             "malformed.json: malformed JSON"},
        Case{"heads", {"--budget", "24GB", "{dir}/heads.json"}, "field 'heads'"},
        Case{"negative", {"--budget", "24GB", "{dir}/negative.json"}, "field 'hidden'"},
        Case{"precision", {"--budget", "24GB", "{dir}/precision.json"}, "unknown value \"fp8\""},
        Case{"zero_seq", {"--budget", "24GB", "{dir}/zero.json"}, "field 'seq_len'"},
        Case{"budget_unit", {"--budget", "24XB", kExample}, "unknown unit 'XB'"},
        Case{"budget_no_unit", {"--budget", "24", kExample}, "has no unit"},
        Case{"budget_negative", {"--budget", "-3GB", kExample}, "--budget"},
        Case{"strategy",
             {"--budget", "24GB", "--strategy", "greedy", kExample},
             "unknown strategy 'greedy'"},
        Case{"every_zero", {"--budget", "24GB", "--every", "0", kExample}, "--every"},
        Case{"layers_range", {"--checkpoint-layers", "0,40", kExample}, "out of range"},
        Case{"layers_text", {"--checkpoint-layers", "a,b", kExample}, "--checkpoint-layers"},
        Case{"conflict",
             {"--strategy", "uniform", "--segments", "3", kExample},
             "applies to --strategy segment"},
        Case{"no_input", {"--budget", "24GB"}, "missing input file"},
        Case{"two_inputs", {kExample, kExample}, "expected one input file"},
        Case{"device", {"--device", "tpu", kExample}, "unknown device 'tpu'"},
        Case{"micro_batch", {"--micro-batch", "0", kExample}, "--micro-batch"},
        Case{"missing_value", {kExample, "--budget"}, "needs a value"},
        // Wrong types.
        Case{"layers_string",
             {"{dir}/layers_string.json"},
             "layers_string.json: field 'layers': expected an integer in [1, 4096], got \"12\""},
        Case{"layers_float", {"{dir}/layers_float.json"}, "field 'layers': expected an integer"},
        Case{"dropout_type",
             {"{dir}/dropout_type.json"},
             "field 'dropout': expected a number in [0, 0.999999], got \"high\""},
        Case{"unknown_field", {"{dir}/typo.json"}, "typo.json: unknown field 'layer'"},
        Case{"json_array", {"{dir}/array.json"}, "array.json: expected a JSON object"},
        Case{"empty_file", {"{dir}/empty.json"}, "empty.json: malformed JSON"},
        // Zero, NaN, inf, negative, absurdly large.
        Case{"zero_layers",
             {"{dir}/layers_zero.json"},
             "field 'layers': expected an integer in [1, 4096], got 0"},
        Case{"nan", {"{dir}/nan.json"}, "nan.json: malformed JSON"},
        Case{"layers_huge", {"{dir}/layers_huge.json"}, "field 'layers'"},
        Case{"vocab_1e30", {"{dir}/vocab_1e30.json"}, "field 'vocab'"},
        Case{"bytes_overflow",
             {"{dir}/overflow.json"},
             "wide: the model's byte counts overflow 64-bit arithmetic"},
        Case{"time_overflow",
             {"--tflops", "0.000001", "--seq-len", "16777216", "{dir}/tiny.json"},
             "tiny: layers[1] ('block0'): times must be in [0, 1e12] ms"},
        Case{"deep_nesting",
             {"{dir}/deep.json"},
             "deep.json: malformed JSON: nested deeper than 64"},
        Case{"newline_in_key", {"{dir}/newline_key.json"}, "unknown field 'la\\nyers'"},
        Case{"seq_len_huge", {"--seq-len", "99999999999", kExample}, "option --seq-len"},
        Case{"tflops_nan", {"--tflops", "nan", kExample}, "option --tflops"},
        Case{"budget_too_large", {"--budget", "99999999999TiB", kExample}, "is too large"},
        Case{"budget_nan", {"--budget", "nanGB", kExample}, "bad byte quantity 'nanGB'"},
        Case{"budget_empty", {"--budget", "", kExample}, "empty byte quantity"},
        Case{"budget_zero", {"--budget", "0GB", kExample}, "must be positive"},
        // Profiles.
        Case{"profile_empty", {"{dir}/profile_empty.json"}, "the chain is empty"},
        Case{"profile_truncated",
             {"{dir}/profile_truncated.json"},
             "profile_truncated.json: malformed JSON"},
        Case{"profile_negative",
             {"{dir}/profile_negative.json"},
             "layers[0]: field 'activation_bytes': expected an integer in [0, "},
        Case{"profile_inf", {"{dir}/profile_inf.json"}, "number overflow parsing '1e999'"},
        Case{"profile_chain",
             {"{dir}/profile_chain.json"},
             "layers[1] ('l1'): field 'input_bytes' (12) differs from the previous layer's"},
        Case{"profile_4eib", {"{dir}/profile_4eib.json"}, "byte counts add up past 4 EiB"},
        Case{"profile_override",
             {"--micro-batch", "2", "{dir}/profile_ok.json"},
             "profile_ok.json is a profile"},
        // LoRA and QLoRA.
        Case{"lora_target",
             {"{dir}/lora_target.json"},
             "lora_target.json: field 'lora_targets': unknown LoRA target 'qq', expected q, k,"},
        Case{"lora_no_rank",
             {"{dir}/lora_no_rank.json"},
             "field 'lora_targets': set without lora_rank"},
        Case{"lora_gate_gpt",
             {"{dir}/lora_gate_gpt.json"},
             "field 'lora_targets': gate: gpt has no gate projection"},
        Case{"lora_rank_negative",
             {"{dir}/lora_rank_negative.json"},
             "field 'lora_rank': expected an integer in [0, 1048576], got -1"},
        Case{"quantization",
             {"{dir}/quant_unknown.json"},
             "field 'quantization': unknown value \"int3\", expected none or nf4"},
        Case{"double_quant",
             {"{dir}/double_quant.json"},
             "field 'double_quant': true: double quantization needs quantization \"nf4\""},
        Case{"flag_lora_targets",
             {"--lora-rank", "8", "--lora-targets", "q,,v", kExample},
             "option --lora-targets: empty LoRA target in 'q,,v'"},
        Case{"flag_quantization",
             {"--quantization", "nf4", kExample},
             "field 'quantization': set without lora_rank"},
        Case{"flag_lora_rank", {"--lora-rank", "-2", kExample}, "option --lora-rank"},
        Case{"flag_lora_dropout",
             {"--lora-rank", "8", "--lora-dropout", "1", kExample},
             "option --lora-dropout: expected a probability in [0, 1) (PEFT's lora_dropout), got "
             "'1'"},
        Case{"flag_lora_dropout_text",
             {"--lora-rank", "8", "--lora-dropout", "0.1x", kExample},
             "option --lora-dropout: expected a probability in [0, 1)"},
        Case{"flag_lora_dropout_no_rank",
             {"--lora-dropout", "0.1", kExample},
             "field 'lora_dropout': set without lora_rank"},
        // Hugging Face config.json.
        Case{
            "hf_unsupported", {"{dir}/hf_t5.json"},
            "model_type \"t5\" has no hand-written model; trace it: python -m remat trace"},
        Case{"hf_missing", {"{dir}/hf_missing.json"}, "hf_missing.json: missing 'n_layer'"},
        // Files and flags.
        Case{"not_regular", {"/dev/null"}, "/dev/null: not a regular file"},
        Case{"unknown_flag",
             {"--budgte", "24GB", kExample},
             "unknown option '--budgte' (did you mean --budget?)"},
        Case{"strategy_empty", {"--strategy", "", kExample}, "unknown strategy ''"},
        Case{"output_twice", {"-o", "{dir}/other.json", kExample}, "option -o is given twice"},
        // Measured profiles: options refused before any runtime starts.
        Case{"profile_statistic",
             {"profile", "--statistic", "mean", "{dir}/tiny.json"},
             "option --statistic: unknown timing statistic 'mean'; accepted: median, min"},
        Case{"profile_device",
             {"profile", "--runtime-device", "cuda:x", "{dir}/tiny.json"},
             "option --runtime-device: unknown device 'cuda:x'; accepted: cpu, cuda, cuda:N"},
        Case{"profile_repeats",
             {"profile", "--repeats", "0", "{dir}/tiny.json"},
             "option --repeats"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// `planner train`: the plan file is one more input. Every case is refused
// before the runtime is needed (these tests build without it), with the
// same contract, and an existing --report file is left intact.
class BadTrainInput : public ::testing::TestWithParam<Case> {};

TEST_P(BadTrainInput, ExitsTwoWithOneClearLineAndWritesNothing) {
  ScratchDir dir;
  WriteCatalogueFiles(dir);
  const std::string tiny = dir.Path("tiny.json");
  const Captured planned = RunCli({"--strategy", "uniform", "-o", dir.Path("plan.json"), tiny});
  ASSERT_EQ(planned.code, 0) << planned.err;
  const std::string plan = ReadAll(dir.Path("plan.json"));
  dir.Write("plan_truncated.json", plan.substr(0, plan.size() / 2));
  dir.Write("three.json", std::string(R"({"name": "tiny", "layers": 3, "hidden": 64, "heads": 4,
                                          "vocab": 10, "seq_len": 8})"));
  const std::string report = dir.Write("out.html", "previous report");
  std::vector<std::string> args = ArgsOf(GetParam(), dir);
  args.insert(args.begin(), {"train", "--report", report});
  ExpectRefused(RunCli(args), GetParam());
  EXPECT_EQ(ReadAll(report), "previous report");
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, BadTrainInput,
    ::testing::Values(
        Case{"no_plan", {"{dir}/tiny.json"}, "missing --plan"},
        Case{"plan_missing_file",
             {"--plan", "{dir}/nope.json", "{dir}/tiny.json"},
             "nope.json: no such file"},
        Case{"plan_truncated",
             {"--plan", "{dir}/plan_truncated.json", "{dir}/tiny.json"},
             "plan_truncated.json: malformed JSON"},
        Case{"plan_not_an_object",
             {"--plan", "{dir}/array.json", "{dir}/tiny.json"},
             "array.json: expected a plan object (planner --json output), got an array"},
        Case{"plan_is_a_model", {"--plan", "{dir}/tiny.json", "{dir}/tiny.json"}, "tiny.json: "},
        Case{"plan_for_another_model",
             {"--plan", "{dir}/plan.json", "{dir}/three.json"},
             "plan.json: the plan was made for 'tiny', this is 'tiny': the plan's chain has 6 "
             "layers (embedding, block0..block1, final_norm, head, loss), the model's 7"},
        Case{"plan_for_another_shape",
             {"--plan", "{dir}/plan.json", "--micro-batch", "3", "{dir}/tiny.json"},
             "was made for --micro-batch 1, and --micro-batch 3 was asked for"},
        Case{"profile_as_model",
             {"--plan", "{dir}/plan.json", "{dir}/profile_ok.json"},
             "profile_ok.json is a profile"},
        Case{"memory_limit_no_unit",
             {"--plan", "{dir}/plan.json", "--memory-limit", "2", "{dir}/tiny.json"},
             "option --memory-limit"},
        Case{"steps_zero",
             {"--plan", "{dir}/plan.json", "--steps", "0", "{dir}/tiny.json"},
             "option --steps"},
        Case{"runtime_device",
             {"--plan", "{dir}/plan.json", "--runtime-device", "tpu", "{dir}/tiny.json"},
             "option --runtime-device: unknown device 'tpu'; accepted: cpu, cuda, cuda:N"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// chmod 000 stops everyone but root; as root the case cannot be made.
TEST(BadInput, UnreadableFile) {
  ScratchDir dir;
  const std::string in = dir.Write("secret.json", "{}");
  const std::string out = dir.Write("out.json", "previous plan");
  ASSERT_EQ(::chmod(in.c_str(), 0), 0);
  if (::access(in.c_str(), R_OK) == 0) {
    GTEST_SKIP() << "running as root: a chmod 000 file is still readable";
  }
  const Captured c = RunCli({"-o", out, "--budget", "24GB", in});
  EXPECT_EQ(c.code, 2);
  EXPECT_EQ(c.err, "planner: error: " + in + ": cannot read: Permission denied\n");
  EXPECT_TRUE(c.out.empty());
  EXPECT_EQ(ReadAll(out), "previous plan");
}

}  // namespace
}  // namespace remat::cli
