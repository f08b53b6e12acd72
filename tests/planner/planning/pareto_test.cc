// ParetoSweep reports its progress as remat/io/progress.h promises: from 0 to
// total, one item per plan made (the points planned at once reported as
// they finish), and nothing changes in the curve.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
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

// The points are planned as their budgets become known, optimal after
// optimal-single at the same budget: each is still the strategy's plan
// made alone there, and the sweep starts at the lowest peak any strategy
// reaches alone.
TEST(ParetoSweep, EveryPointIsTheStrategyPlannedAloneAtItsBudget) {
  const Profile profile = testing::GptChain(10, 2);
  ParetoOptions options;
  options.points = 4;
  options.strategies = {Strategy::kOptimal, Strategy::kUniform, Strategy::kOptimalSingle,
                        Strategy::kSelective};
  const Result<ParetoCurve> curve = ParetoSweep(profile, options);
  ASSERT_TRUE(curve.ok()) << curve.status().message();
  ASSERT_EQ(curve->points.size(), 4u * options.strategies.size());
  int64_t lowest = curve->none_peak_bytes;
  for (Strategy s : options.strategies) {
    PlanOptions o;
    o.strategy = s;
    o.budget_bytes = 1;
    const Result<PlanSet> set = MakePlan(profile, o);
    ASSERT_TRUE(set.ok()) << set.status().message();
    lowest = std::min(lowest, set->chosen.predicted.peak_bytes);
  }
  EXPECT_EQ(curve->budgets.front(), lowest);
  EXPECT_EQ(curve->budgets.back(), curve->none_peak_bytes);
  for (size_t i = 0; i < curve->points.size(); ++i) {
    const ParetoPoint& got = curve->points[i];
    EXPECT_EQ(got.strategy, options.strategies[i % options.strategies.size()]);
    EXPECT_EQ(got.budget_bytes, curve->budgets[i / options.strategies.size()]);
    PlanOptions o;
    o.strategy = got.strategy;
    o.budget_bytes = got.budget_bytes;
    const Result<PlanSet> set = MakePlan(profile, o);
    ASSERT_TRUE(set.ok()) << set.status().message();
    const Plan& p = set->chosen;
    const std::string where =
        std::string(ToString(got.strategy)) + " at " + std::to_string(got.budget_bytes);
    EXPECT_EQ(got.fits, p.fits) << where;
    EXPECT_EQ(got.peak_bytes, p.predicted.peak_bytes) << where;
    EXPECT_EQ(got.step_ms, p.predicted.step_ms) << where;
    EXPECT_EQ(got.recompute_ms, p.predicted.recompute_ms) << where;
    EXPECT_EQ(got.parameter, p.parameter) << where;
  }
}

// Started ahead, the sweep's curve is ParetoSweep's, point for point,
// with its progress counted as ParetoSweep counts it; destroyed before its
// curve is asked for, it stops.
TEST(ParetoSweepAhead, GetsTheCurveParetoSweepGets) {
  const Profile profile = testing::GptChain(10, 2);
  ParetoOptions options;
  options.points = 4;
  const Result<ParetoCurve> alone = ParetoSweep(profile, options);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  std::vector<ProgressUpdate> seen;
  options.progress = [&](const ProgressUpdate& u) { seen.push_back(u); };
  ParetoSweepAhead ahead(profile, options);
  const Result<ParetoCurve> curve = ahead.Get();
  ASSERT_TRUE(curve.ok()) << curve.status().message();
  EXPECT_EQ(curve->budgets, alone->budgets);
  EXPECT_EQ(curve->strategies, alone->strategies);
  EXPECT_EQ(curve->none_peak_bytes, alone->none_peak_bytes);
  auto same = [](const std::vector<ParetoPoint>& a, const std::vector<ParetoPoint>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].strategy, b[i].strategy) << i;
      EXPECT_EQ(a[i].budget_bytes, b[i].budget_bytes) << i;
      EXPECT_EQ(a[i].fits, b[i].fits) << i;
      EXPECT_EQ(a[i].peak_bytes, b[i].peak_bytes) << i;
      EXPECT_EQ(a[i].step_ms, b[i].step_ms) << i;
      EXPECT_EQ(a[i].parameter, b[i].parameter) << i;
    }
  };
  same(curve->points, alone->points);
  same(curve->defaults, alone->defaults);
  same(curve->best_at_default_peaks, alone->best_at_default_peaks);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().done, seen.back().total);
  EXPECT_EQ(seen.size(), static_cast<size_t>(seen.back().total + 1));
}

TEST(ParetoSweepAhead, DestroyedWithoutGetItStops) {
  const Profile profile = testing::GptChain(10, 2);
  ParetoOptions options;
  options.points = 50;
  std::atomic<int64_t> done{0}, total{0};
  options.progress = [&](const ProgressUpdate& u) {
    total = u.total;
    done = u.done;
  };
  {
    ParetoSweepAhead ahead(profile, options);
    // Once it has planned something (no-checkpointing's plan first).
    while (done.load() < 1) std::this_thread::yield();
  }
  // It stopped before the end: of 1 + n + 50 n + n + n^2 plans (n
  // strategies, 6 without a host link), those running then finished.
  EXPECT_GE(total.load(), 349);
  EXPECT_LT(done.load(), total.load());
}

}  // namespace
}  // namespace remat
