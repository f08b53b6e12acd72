// torchtitan's published Llama 3.1 runs (bench/fidelity/torchtitan_runs.json,
// docs/published-runs.md): a plan with the checkpointing a run used fits the
// card it ran on, and does not where it ran out of memory; where remat
// cannot express the run's checkpointing, its measured reserved peak lies
// between the plans without checkpointing and with every block checkpointed.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

using nlohmann::json;

json Runs() {
  std::ifstream in(REMAT_SOURCE_DIR "/bench/fidelity/torchtitan_runs.json");
  return json::parse(in)["runs"];
}

// The plan JSON of `run` under one strategy (its --strategy arguments).
json Plan(const json& run, const json& strategy) {
  std::vector<std::string> args = {"--json",   "--quiet",
                                   "--budget", run["budget"].get<std::string>(),
                                   "--device", run["device"].get<std::string>()};
  for (const json& a : run["args"]) args.push_back(a.get<std::string>());
  args.push_back("--strategy");
  for (const json& a : strategy) args.push_back(a.get<std::string>());
  args.push_back(std::string(REMAT_SOURCE_DIR "/") + run["config"].get<std::string>());
  const Captured c = RunCli(args);
  EXPECT_TRUE(c.code == 0 || c.code == 3) << c.err;
  return json::parse(c.out);
}

TEST(PublishedRuns, PlansFitWhereTorchtitanRanAndNotWhereItRanOutOfMemory) {
  int exact = 0;
  for (const json& run : Runs()) {
    if (!run["strategies"].contains("exact")) continue;
    for (const json& strategy : run["strategies"]["exact"]) {
      const json plan = Plan(run, strategy);
      const bool ran = run["outcome"] == "ran";
      EXPECT_EQ(plan["fits"].get<bool>(), ran)
          << run["id"] << ": device peak " << plan["predicted"]["device_peak_bytes"]
          << " B on " << run["budget"];
      ++exact;
    }
  }
  EXPECT_GE(exact, 3);
}

TEST(PublishedRuns, MeasuredPeakLiesBetweenNoCheckpointingAndEveryBlock) {
  int bracketed = 0;
  for (const json& run : Runs()) {
    if (!run["strategies"].contains("bracket")) continue;
    const double published = run["published_reserved_gib"].get<double>() * (1 << 30);
    const json none = Plan(run, json::array({"none"}));
    const json every = Plan(run, json::array({"uniform", "--every", "1"}));
    EXPECT_LT(every["predicted"]["reserved_peak_bytes"].get<double>(), published) << run["id"];
    EXPECT_GT(none["predicted"]["reserved_peak_bytes"].get<double>(), published) << run["id"];
    ++bracketed;
  }
  EXPECT_GE(bracketed, 2);
}

}  // namespace
}  // namespace remat::cli
