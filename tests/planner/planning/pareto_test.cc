// ParetoSweep reports its progress as remat/io/progress.h promises: from 0 to
// total, one item per plan made, and nothing changes in the curve.
#include <gtest/gtest.h>

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
  EXPECT_EQ(seen[2].item, "uniform, lowest peak");
  EXPECT_EQ(seen[4].item.rfind("uniform at ", 0), 0u) << seen[4].item;

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
