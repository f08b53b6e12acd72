// ParetoSweep reports its progress as remat/io/progress.h promises: from 0 to
// total, one item per plan made (the points planned at once reported as
// they finish), and nothing changes in the curve.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "remat/planning/pareto.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

TEST(ParetoProgress, CountsEveryPlanFromZeroToTotal) {
  const Profile profile = testing::GptChain(4, 4);
  ParetoOptions options;
  options.points = 3;
  options.strategies = {Strategy::kUniform, Strategy::kOptimal};
  std::vector<ProgressUpdate> seen;
  options.progress = [&](const ProgressUpdate& u) { seen.push_back(u); };
  const Result<ParetoCurve> curve = ParetoSweep(profile, options);
  ASSERT_TRUE(curve.ok()) << curve.status().message();
  // none, 2 lowest-peak probes, 3 budgets x 2, 2 defaults, 2 x 2 at their peaks.
  const int64_t total = 1 + 2 + 6 + 2 + 4;
  ASSERT_EQ(seen.size(), static_cast<size_t>(total + 1));
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].what, "pareto sweep");
    EXPECT_EQ(seen[i].done, static_cast<int64_t>(i));
    EXPECT_EQ(seen[i].total, total);
  }
  EXPECT_EQ(seen[1].item, "none");
  // Each plan once: per strategy its lowest peak, its 3 budgets and the 2
  // defaults' peaks ("at"), and its default (no budget).
  std::map<std::string, int> kinds;
  for (size_t i = 2; i < seen.size(); ++i) {
    const std::string& item = seen[i].item;
    const size_t cut = item.find(" at ");
    kinds[cut != std::string::npos ? item.substr(0, cut + 4) : item]++;
  }
  const std::map<std::string, int> want = {
      {"uniform, lowest peak", 1}, {"optimal, lowest peak", 1}, {"uniform at ", 5},
      {"optimal at ", 5},          {"uniform, no budget", 1},   {"optimal, no budget", 1}};
  EXPECT_EQ(kinds, want);

  ParetoOptions silent = options;
  silent.progress = nullptr;
  const Result<ParetoCurve> same = ParetoSweep(profile, silent);
  ASSERT_TRUE(same.ok());
  ASSERT_EQ(same->points.size(), curve->points.size());
  for (size_t i = 0; i < same->points.size(); ++i) {
    EXPECT_EQ(same->points[i].step_ms, curve->points[i].step_ms);
  }
}

}  // namespace
}  // namespace remat
