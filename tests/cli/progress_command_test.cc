// Long commands show progress on standard error only (stdout stays clean
// for --json), and --quiet silences it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "report_files.h"

namespace remat::cli {
namespace {

// A clock that moves half a second each time it is read: every sweep looks
// slow enough to report.
Environment SlowProgress() {
  Environment env;
  env.progress.style = ProgressStyle::kLines;
  env.progress.clock = [t = 0.0]() mutable { return t += 0.5; };
  return env;
}

TEST(ProgressCommands, ParetoShowsProgressOnStandardErrorOnly) {
  const Captured c = RunCli({"pareto", "--points", "3", "--json", kExample}, SlowProgress());
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(nlohmann::json::accept(c.out)) << c.out;
  EXPECT_EQ(c.err.rfind("planner: pareto sweep ", 0), 0u) << c.err;
  EXPECT_NE(c.err.find("planner: pareto sweep done: "), std::string::npos) << c.err;
  const Captured quiet =
      RunCli({"pareto", "--points", "3", "--json", "--quiet", kExample}, SlowProgress());
  EXPECT_EQ(quiet.code, 0);
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(quiet.out, c.out);
}

TEST(ProgressCommands, TheReportsParetoSweepShowsProgress) {
  if (!kHaveVisualize) GTEST_SKIP() << "built without the visualize library";
  ScratchDir dir;
  const std::vector<std::string> args = {
      "--budget", "24GB", "--pareto-points", "3", "--report", dir.Path("r.html"), kExample};
  const Captured c = RunCli(args, SlowProgress());
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("planner: pareto sweep"), std::string::npos) << c.err;
  std::vector<std::string> quiet = args;
  quiet.insert(quiet.begin(), "--quiet");
  EXPECT_EQ(RunCli(quiet, SlowProgress()).err, "");
}

}  // namespace
}  // namespace remat::cli
