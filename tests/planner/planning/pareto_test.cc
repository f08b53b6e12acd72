// ParetoSweep reports its progress as remat/io/progress.h promises: from 0 to
// total, one item per plan made (the points planned at once reported as
// they finish), and nothing changes in the curve.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "remat/planning/pareto.h"
#include "remat/strategies/strategies.h"
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

// Each default's best plan within its peak is the fastest fitting of the
// strategies planned alone at that peak, where that peak is a budget of
// the sweep or another default's (those points planned once, reused).
TEST(ParetoSweep, BestAtADefaultsPeakIsEachStrategyPlannedAloneThere) {
  const Profile profile = testing::GptChain(12, 2);
  ParetoOptions options;
  options.points = 3;
  options.strategies = {Strategy::kUniform, Strategy::kSegment, Strategy::kOptimalSingle,
                        Strategy::kOptimal};
  // The sweep's highest budget at the peak of a default that another
  // strategy beats there: the points at that budget serve it too.
  const Result<ParetoCurve> first = ParetoSweep(profile, options);
  ASSERT_TRUE(first.ok()) << first.status().message();
  size_t beaten = 0;
  while (beaten < first->defaults.size() &&
         first->best_at_default_peaks[beaten].strategy == first->defaults[beaten].strategy) {
    ++beaten;
  }
  ASSERT_LT(beaten, first->defaults.size());
  options.max_budget = first->defaults[beaten].peak_bytes;
  const Result<ParetoCurve> curve = ParetoSweep(profile, options);
  ASSERT_TRUE(curve.ok()) << curve.status().message();
  ASSERT_EQ(curve->best_at_default_peaks.size(), curve->defaults.size());
  EXPECT_EQ(curve->budgets.back(), options.max_budget);
  EXPECT_NE(curve->best_at_default_peaks[beaten].strategy, curve->defaults[beaten].strategy);
  std::map<int64_t, int> peaks;
  for (const ParetoPoint& d : curve->defaults) ++peaks[d.peak_bytes];
  int shared = 0;
  for (const auto& [peak, n] : peaks) {
    shared += n > 1 || std::count(curve->budgets.begin(), curve->budgets.end(), peak) > 0;
  }
  EXPECT_GT(shared, 0);  // points reused
  for (size_t i = 0; i < curve->defaults.size(); ++i) {
    const ParetoPoint& d = curve->defaults[i];
    ParetoPoint best = d;
    for (Strategy s : options.strategies) {
      PlanOptions o;
      o.strategy = s;
      o.budget_bytes = d.peak_bytes;
      const Result<PlanSet> set = MakePlan(profile, o);
      ASSERT_TRUE(set.ok()) << set.status().message();
      const Plan& p = set->chosen;
      if (p.fits && p.predicted.step_ms < best.step_ms * (1 - 1e-12)) {
        best = ParetoPoint{s, d.peak_bytes, p.fits, p.predicted.peak_bytes, p.predicted.step_ms,
                           p.predicted.recompute_ms, p.parameter};
      }
    }
    const ParetoPoint& got = curve->best_at_default_peaks[i];
    const std::string where = "default " + std::string(ToString(d.strategy));
    EXPECT_EQ(got.strategy, best.strategy) << where;
    EXPECT_EQ(got.budget_bytes, d.peak_bytes) << where;
    EXPECT_EQ(got.fits, best.fits) << where;
    EXPECT_EQ(got.peak_bytes, best.peak_bytes) << where;
    EXPECT_EQ(got.step_ms, best.step_ms) << where;
    EXPECT_EQ(got.parameter, best.parameter) << where;
  }
}

}  // namespace
}  // namespace remat
