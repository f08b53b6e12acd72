// Bad input: exit code 2, one clear line naming the file/field/value, no
// output file written, a previous output file left intact.
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

struct Case {
  const char* name;
  std::vector<std::string> args;  // "{dir}" is replaced by the scratch directory
  const char* expect;             // substring of the error line
};

class BadInput : public ::testing::TestWithParam<Case> {};

TEST_P(BadInput, ExitsTwoWithOneClearLineAndWritesNothing) {
  ScratchDir dir;
  dir.Write("malformed.json", "{\"layers\": 12, \"hidden\": ");
  dir.Write("heads.json",
            R"({"layers": 2, "hidden": 100, "heads": 3, "vocab": 10, "seq_len": 8})");
  dir.Write("negative.json",
            R"({"layers": 2, "hidden": -64, "heads": 4, "vocab": 10, "seq_len": 8})");
  dir.Write("precision.json",
            R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "seq_len": 8, "precision": "fp8"})");
  dir.Write("zero.json", R"({"layers": 2, "hidden": 64, "heads": 4, "vocab": 10, "seq_len": 0})");
  const std::string out = dir.Write("out.json", "previous plan");
  std::vector<std::string> args = {"-o", out};
  for (std::string a : GetParam().args) {
    const size_t at = a.find("{dir}");
    if (at != std::string::npos) a.replace(at, 5, dir.Path(""));
    args.push_back(a);
  }
  const Captured c = RunCli(args);
  EXPECT_EQ(c.code, 2) << c.out << c.err;
  EXPECT_NE(c.err.find(GetParam().expect), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_EQ(c.err.rfind("planner: error: ", 0), 0u) << c.err;
  EXPECT_TRUE(c.out.empty());
  EXPECT_EQ(ReadAll(out), "previous plan");  // untouched
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, BadInput,
    ::testing::Values(
        Case{"missing_file", {"--budget", "24GB", "{dir}/nope.json"}, "nope.json: no such file"},
        Case{"directory", {"--budget", "24GB", "{dir}"}, "is a directory"},
        Case{"malformed", {"--budget", "24GB", "{dir}/malformed.json"},
             "malformed.json: malformed JSON"},
        Case{"heads", {"--budget", "24GB", "{dir}/heads.json"}, "field 'heads'"},
        Case{"negative", {"--budget", "24GB", "{dir}/negative.json"}, "field 'hidden'"},
        Case{"precision", {"--budget", "24GB", "{dir}/precision.json"}, "unknown value \"fp8\""},
        Case{"zero_seq", {"--budget", "24GB", "{dir}/zero.json"}, "field 'seq_len'"},
        Case{"budget_unit", {"--budget", "24XB", kExample}, "unknown unit 'XB'"},
        Case{"budget_no_unit", {"--budget", "24", kExample}, "has no unit"},
        Case{"budget_negative", {"--budget", "-3GB", kExample}, "--budget"},
        Case{"strategy", {"--budget", "24GB", "--strategy", "greedy", kExample},
             "unknown strategy 'greedy'"},
        Case{"every_zero", {"--budget", "24GB", "--every", "0", kExample}, "--every"},
        Case{"layers_range", {"--checkpoint-layers", "0,40", kExample}, "out of range"},
        Case{"layers_text", {"--checkpoint-layers", "a,b", kExample}, "--checkpoint-layers"},
        Case{"conflict", {"--strategy", "uniform", "--segments", "3", kExample},
             "applies to --strategy segment"},
        Case{"no_input", {"--budget", "24GB"}, "missing input file"},
        Case{"two_inputs", {kExample, kExample}, "expected one input file"},
        Case{"device", {"--device", "tpu", kExample}, "unknown device 'tpu'"},
        Case{"micro_batch", {"--micro-batch", "0", kExample}, "--micro-batch"},
        Case{"missing_value", {kExample, "--budget"}, "needs a value"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace remat::cli
