// --device's memory terms and --cuda-context / --cuda-workspace /
// --fragmentation: the report's named lines, the plan JSON's fields, and
// the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

struct BadFlag {
  std::vector<std::string> args;
  std::string expect;
};

class DeviceMemoryBadFlag : public ::testing::TestWithParam<BadFlag> {};

TEST_P(DeviceMemoryBadFlag, ExitsTwoWithOneLine) {
  std::vector<std::string> args = {"--budget", "24GB"};
  for (const std::string& a : GetParam().args) args.push_back(a);
  args.push_back(kExample);
  const Captured c = RunCli(args);
  EXPECT_EQ(c.code, 2) << c.out << c.err;
  EXPECT_NE(c.err.find(GetParam().expect), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_TRUE(c.out.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, DeviceMemoryBadFlag,
    ::testing::Values(
        BadFlag{{"--cuda-context", "600"},
                "option --cuda-context: byte quantity '600' has no unit"},
        BadFlag{{"--cuda-context", "-1MiB"}, "option --cuda-context"},
        BadFlag{{"--cuda-workspace", "lots"}, "option --cuda-workspace"},
        BadFlag{{"--fragmentation", "80%"},
                "option --fragmentation: expected a fraction from 0 to 50%, as 5% or 0.05, got "
                "'80%'"},
        BadFlag{{"--fragmentation", "five"}, "option --fragmentation"},
        BadFlag{{"--device", "tpu", "--cuda-context", "1GiB"}, "unknown device 'tpu'"}));

TEST(DeviceMemoryFlags, H200PresetAddsNamedLinesAndFields) {
  const Captured text = RunCli({"--budget", "24GB", "--device", "h200", kExample});
  ASSERT_EQ(text.code, 0) << text.err;
  for (const char* line :
       {"  device terms     h200 preset: cuda_context 749.00 MiB, workspaces 65.00 MiB, "
        "fragmentation 5.0%, caching allocator rounding; ",
        "  device peak      ", "  allocated peak   ", "  reserved peak    ",
        "  fixed terms      814.00 MiB (cuda_context 749.00 MiB + workspaces 65.00 MiB; h200 "
        "preset)"}) {
    EXPECT_NE(text.out.find(line), std::string::npos) << line << "\n" << text.out;
  }
  const Captured json = RunCli({"--budget", "24GB", "--device", "h200", "--json", kExample});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  const nlohmann::json& p = j["predicted"];
  const nlohmann::json& d = j["device_memory"];
  EXPECT_EQ(p["allocated_peak_bytes"], p["peak_bytes"]);
  EXPECT_GT(p["reserved_peak_bytes"].get<int64_t>(), p["allocated_peak_bytes"].get<int64_t>());
  EXPECT_EQ(p["reserved_peak_bytes"].get<int64_t>(),
            p["allocated_peak_bytes"].get<int64_t>() +
                d["allocator_rounding_bytes"].get<int64_t>() +
                d["fragmentation_bytes"].get<int64_t>());
  EXPECT_EQ(p["device_peak_bytes"].get<int64_t>(), p["reserved_peak_bytes"].get<int64_t>() +
                                                       d["cuda_context_bytes"].get<int64_t>() +
                                                       d["workspace_bytes"].get<int64_t>());
  EXPECT_LE(p["device_peak_bytes"].get<int64_t>(), 24'000'000'000);
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(d["cuda_context_bytes"], 749 << 20);
  EXPECT_EQ(d["source"], "h200 preset");
}

TEST(DeviceMemoryFlags, MarkdownNamesTheTerms) {
  const Captured c = RunCli({"--budget", "24GB", "--device", "h200", "--format", "md", kExample});
  ASSERT_EQ(c.code, 0) << c.err;
  for (const char* term : {"device peak", "allocated peak", "reserved peak", "fixed terms",
                           "cuda_context 749.00 MiB + workspaces 65.00 MiB (h200 preset)"}) {
    EXPECT_NE(c.out.find(term), std::string::npos) << term << "\n" << c.out;
  }
}

TEST(DeviceMemoryFlags, FlagsOverrideThePreset) {
  const Captured c =
      RunCli({"--budget", "24GB", "--device", "h200", "--cuda-context", "1GiB", "--cuda-workspace",
              "0", "--fragmentation", "0.1", "--json", kExample});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json d = nlohmann::json::parse(c.out)["device_memory"];
  EXPECT_EQ(d["cuda_context_bytes"], int64_t{1} << 30);
  EXPECT_EQ(d["workspace_bytes"], 0);
  EXPECT_DOUBLE_EQ(d["fragmentation"].get<double>(), 0.1);
  EXPECT_EQ(d["source"], "h200 preset with flags");
}

// No device (or the cpu): no terms, the report as before, reserved ==
// allocated in the JSON.
TEST(DeviceMemoryFlags, NoDeviceAndCpuHaveNoTerms) {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--device", "cpu"}}) {
    std::vector<std::string> args = {"--budget", "24GB"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(kExample);
    const Captured text = RunCli(args);
    ASSERT_EQ(text.code, 0) << text.err;
    EXPECT_NE(text.out.find("  predicted peak   "), std::string::npos);
    EXPECT_EQ(text.out.find("reserved peak"), std::string::npos);
    EXPECT_EQ(text.out.find("device terms"), std::string::npos);
    args.insert(args.begin(), "--json");
    const nlohmann::json p = nlohmann::json::parse(RunCli(args).out)["predicted"];
    EXPECT_EQ(p["reserved_peak_bytes"], p["peak_bytes"]);
    EXPECT_EQ(p["allocated_peak_bytes"], p["peak_bytes"]);
    EXPECT_EQ(p["device_peak_bytes"], p["peak_bytes"]);
  }
}

}  // namespace
}  // namespace remat::cli
