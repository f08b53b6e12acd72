// --device's memory terms and --cuda-context / --cuda-workspace /
// --fragmentation / --alloc-conf: the report's named lines, the plan JSON's
// fields, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "testing/scratch_dir.h"

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
        BadFlag{{"--device", "tpu", "--cuda-context", "1GiB"}, "unknown device 'tpu'"},
        BadFlag{{"--device", "h200", "--alloc-conf", "expandable_segment:True"},
                "option --alloc-conf: allocator config: unknown key 'expandable_segment'"},
        BadFlag{{"--device", "h200", "--alloc-conf", "max_split_size_mb:8"},
                "option --alloc-conf: allocator config: max_split_size_mb:8"},
        BadFlag{{"--device", "h200", "--alloc-conf", "expandable_segments:yes"},
                "option --alloc-conf: allocator config: expandable_segments:yes"},
        BadFlag{{"--device", "h200", "--alloc-conf", "garbage_collection_threshold:1.5"},
                "option --alloc-conf: allocator config: garbage_collection_threshold:1.5"},
        BadFlag{{"--device", "h200", "--alloc-conf", "backend:cudaMallocAsync"},
                "option --alloc-conf: allocator config: backend:cudaMallocAsync"},
        BadFlag{{"--device", "cpu", "--alloc-trace", "trace.json"},
                "option --alloc-trace: the plan has no caching allocator to replay"}));

TEST(DeviceMemoryFlags, H200PresetAddsNamedLinesAndFields) {
  const Captured text = RunCli({"--budget", "24GB", "--device", "h200", kExample});
  ASSERT_EQ(text.code, 0) << text.err;
  for (const char* line :
       {"  device terms     h200 preset: cuda_context 749.00 MiB, workspaces 65.00 MiB, "
        "caching allocator replayed (PyTorch's defaults); ",
        " held by the caching allocator, replayed over ", "micro-steps to a steady state",
        "  device peak      ", "  allocated peak   ", "  reserved peak    ",
        "  replay margin    ", " of the reserved peak: the tensor replay's largest shortfall",
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
  EXPECT_GT(d["replay_margin_bytes"].get<int64_t>(), 0);  // an analytic profile, replayed
  EXPECT_EQ(p["device_peak_bytes"].get<int64_t>(), p["reserved_peak_bytes"].get<int64_t>() +
                                                       d["replay_margin_bytes"].get<int64_t>() +
                                                       d["cuda_context_bytes"].get<int64_t>() +
                                                       d["workspace_bytes"].get<int64_t>());
  EXPECT_LE(p["device_peak_bytes"].get<int64_t>(), 24'000'000'000);
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(d["cuda_context_bytes"], 749 << 20);
  EXPECT_EQ(d["source"], "h200 preset");
  EXPECT_EQ(d["reserved_model"], "replay");
  EXPECT_EQ(d["fragmentation_bytes"], 0);
  EXPECT_TRUE(d["replay"]["steady"].get<bool>());
  EXPECT_GE(d["replay"]["micro_steps"].get<int>(), 1);
}

// --alloc-conf: the replay follows it, the report names it, and the plan
// JSON carries it in device_memory and in the job (for a run to set).
TEST(DeviceMemoryFlags, AllocConfIsReplayedAndCarried) {
  const std::string conf = "expandable_segments:True,max_split_size_mb:128";
  const Captured text =
      RunCli({"--budget", "24GB", "--device", "h200", "--alloc-conf", conf, kExample});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("caching allocator replayed (" + conf + ")"), std::string::npos)
      << text.out;
  const Captured json =
      RunCli({"--budget", "24GB", "--device", "h200", "--alloc-conf", conf, "--json", kExample});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["device_memory"]["alloc_conf"], conf);
  EXPECT_EQ(j["job"]["alloc_conf"], conf);
  // Expandable segments map 20 MiB pages: the reserved peak is at most one
  // page per pool above the allocated blocks' peak.
  const nlohmann::json& p = j["predicted"];
  EXPECT_GE(p["reserved_peak_bytes"].get<int64_t>(), p["allocated_peak_bytes"].get<int64_t>());
}

// --alloc-trace: the chosen plan's replayed events and the model's
// timelines, whose reserved peak is the plan's (at 80GB the plan fits
// without the allocator freeing its cache, so both replays are unlimited).
TEST(DeviceMemoryFlags, AllocTraceWritesTheReplayedEvents) {
  testing::ScratchDir dir;
  const std::string path = dir.Path("trace.json");
  const Captured c =
      RunCli({"--budget", "80GB", "--device", "h200", "--json", "--alloc-trace", path, kExample});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json plan = nlohmann::json::parse(c.out);
  ASSERT_FALSE(plan["device_memory"]["replay"]["under_budget_limit"].get<bool>());
  const nlohmann::json trace = nlohmann::json::parse(ReadAll(path));
  const nlohmann::json& events = trace["events"];
  ASSERT_GT(events.size(), 10u);
  EXPECT_EQ(events[0][0], "a");
  EXPECT_EQ(trace["predicted"]["reserved_timeline_bytes"].size(), events.size());
  EXPECT_EQ(trace["predicted"]["reserved_peak_bytes"], plan["predicted"]["reserved_peak_bytes"]);
  EXPECT_EQ(trace["micro_steps"], plan["device_memory"]["replay"]["micro_steps"]);
  int64_t live = 0, peak = 0;
  std::map<int64_t, int64_t> sizes;
  for (const nlohmann::json& e : events) {
    if (e[0] == "a") {
      sizes[e[1].get<int64_t>()] = e[2].get<int64_t>();
      live += e[2].get<int64_t>();
    } else {
      live -= sizes.at(e[1].get<int64_t>());
      sizes.erase(e[1].get<int64_t>());
    }
    peak = std::max(peak, live);
  }
  EXPECT_EQ(peak, plan["predicted"]["allocated_peak_bytes"].get<int64_t>());
}

// --fragmentation replaces the replay with the user's fraction; the report
// says whose fraction it is.
TEST(DeviceMemoryFlags, FragmentationIsTheUsersFraction) {
  const Captured text =
      RunCli({"--budget", "24GB", "--device", "h200", "--fragmentation", "5%", kExample});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("fragmentation at 5.0%, the user's fraction)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("caching allocator rounding + the user's fragmentation 5.0%"),
            std::string::npos)
      << text.out;
  const Captured json =
      RunCli({"--budget", "24GB", "--device", "h200", "--fragmentation", "5%", "--json", kExample});
  const nlohmann::json d = nlohmann::json::parse(json.out)["device_memory"];
  EXPECT_EQ(d["reserved_model"], "fragmentation");
  EXPECT_FALSE(d.contains("replay"));
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
