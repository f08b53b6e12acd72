// Auto's choice where only a plan that fits is read (the fit advice's
// alternatives): FastestFitting leaves out the strategies whose step floor
// (FittingStepFloor) proves they cannot be chosen, and never plans those
// whose bytes floor (FittingBytesFloor) is above the budget; its choice is the
// one BetterPlan makes over every strategy. Checked on random plans made to
// tie (within SameStepTime and around the floors' margins), and on real
// configs and layouts (testing/advice_jobs.h) against PlanRanks, with the
// floors checked under every plan of their strategies; stopping at the
// first rank that does not fit leaves the ranks before it and whether the
// job fits as they are.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "planning/job_plans.h"
#include "remat/device/device_memory.h"
#include "remat/planning/planning.h"
#include "remat/strategies/fit_search.h"
#include "testing/advice_jobs.h"

namespace remat {
namespace {

using planning_internal::FastestFitting;
using planning_internal::PlanRanksFastestFitting;

constexpr int64_t kGB = 1000LL * 1000 * 1000;
constexpr double kNoFloor = -std::numeric_limits<double>::infinity();

// BetterPlan over every plan in order, as PlanJobStrategies and MakePlan
// choose; nullopt where none fits.
std::optional<size_t> ChoiceOfAll(const std::vector<Plan>& plans) {
  size_t best = 0;
  for (size_t i = 1; i < plans.size(); ++i) {
    if (BetterPlan(plans[i], plans[best])) best = i;
  }
  if (plans.empty() || !plans[best].fits) return std::nullopt;
  return best;
}

TEST(FastestFitting, ChoosesAsBetterPlanOverEveryStrategyOnRandomPlans) {
  std::mt19937_64 rng(20261207);
  int left_out = 0, all_planned = 0;
  for (int trial = 0; trial < 50000; ++trial) {
    const size_t n = 1 + rng() % 8;
    // Times around a base, some within SameStepTime's tolerance of each
    // other and some around the floor's margins (1e-6 relative).
    const double base = std::ldexp(1.0, static_cast<int>(rng() % 40) - 10);
    const double spreads[] = {0, 1e-10, 1e-9, 5e-7, 1e-6, 2e-6, 1e-3, 0.3};
    auto near_base = [&] {
      const double s = spreads[rng() % std::size(spreads)];
      const double u = std::uniform_real_distribution<double>(-1, 1)(rng);
      return base * (1 + s * u);
    };
    std::vector<Plan> plans(n);
    std::vector<double> floors(n, kNoFloor);
    std::vector<bool> cannot_fit(n, false);
    for (size_t i = 0; i < n; ++i) {
      plans[i].fits = rng() % 4 != 0;
      plans[i].predicted.step_ms = near_base();
      plans[i].memory.total_bytes = static_cast<int64_t>(rng() % 4);
      if (rng() % 2 == 0) {
        // A floor at or below the plan's time (the floor's promise).
        const double f = near_base();
        floors[i] = std::min(f, plans[i].predicted.step_ms);
      }
      // Known not to fit (the bytes floor's promise): never planned.
      cannot_fit[i] = !plans[i].fits && rng() % 2 == 0;
    }
    std::vector<bool> asked(n, false);
    Result<std::optional<size_t>> got =
        FastestFitting(floors, cannot_fit, [&](size_t i) -> Result<const Plan*> {
          asked[i] = true;
          return &plans[i];
        });
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(*got, ChoiceOfAll(plans)) << "trial " << trial;
    bool skipped = false;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_FALSE(cannot_fit[i] && asked[i]);
      skipped = skipped || (!asked[i] && !cannot_fit[i]);
    }
    (skipped ? left_out : all_planned)++;
  }
  // Both ways are taken, often.
  EXPECT_GT(left_out, 2500);
  EXPECT_GT(all_planned, 2500);
}

TEST(FastestFitting, PlansEveryStrategyWhereTheChoiceIsNearAFloor) {
  // The choice (strategy 1) fits 1e-5 ms below the floor of strategy 0 at
  // 100 ms, within the margin (1e-6 relative): strategy 0 is planned.
  std::vector<Plan> plans(2);
  plans[0].predicted.step_ms = 100.0;
  plans[1].predicted.step_ms = 100.0 - 1e-5;
  const std::vector<double> floors = {100.0, kNoFloor};
  const std::vector<bool> cannot_fit(2, false);
  std::vector<bool> asked(2, false);
  auto plan_of = [&](size_t i) -> Result<const Plan*> {
    asked[i] = true;
    return &plans[i];
  };
  Result<std::optional<size_t>> got = FastestFitting(floors, cannot_fit, plan_of);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(asked[0]);
  EXPECT_EQ(*got, ChoiceOfAll(plans));
  // Far below the floor: strategy 0 is not planned.
  plans[1].predicted.step_ms = 90.0;
  asked.assign(2, false);
  got = FastestFitting(floors, cannot_fit, plan_of);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(asked[0]);
  EXPECT_EQ(*got, std::optional<size_t>(1));
}

TEST(FastestFitting, ChoosesAsPlanRanksOnRealJobsAndTheFloorsHold) {
  int compared = 0, fitting = 0, below_floors = 0, floors_checked = 0, tight = 0;
  int cannot_fit = 0;  // plans of none and selective whose bytes floor is above the budget
  int stopped_early = 0;  // jobs whose ranks after one that does not fit were left out
  for (const testing::AdviceJob& g : testing::kAdviceJobs) {
    for (const testing::AdviceChange& c : testing::kAdviceChanges) {
      // The job as given, a smaller optimizer state, LoRA and QLoRA.
      const std::string name = c.name;
      if (name != "as given" && name != "optimizer adafactor" && name != "LoRA" &&
          name != "QLoRA") {
        continue;
      }
      Result<Job> job = testing::LoadAdviceJob(g, c);
      // LoRA and QLoRA under tensor parallelism are not modelled.
      if (g.tensor > 1 && !job.ok()) continue;
      ASSERT_TRUE(job.ok()) << job.status().message();
      Result<DeviceMemoryTerms> terms = ResolveDeviceMemory(g.device, DeviceMemoryOverrides{}, "");
      ASSERT_TRUE(terms.ok()) << terms.status().message();
      for (int64_t budget_gb : {24, 80}) {
        SCOPED_TRACE(testing::Describe(g, c) + ", " + std::to_string(budget_gb) + " GB");
        PlanOptions options;
        options.strategy = Strategy::kAuto;
        options.budget_bytes = budget_gb * kGB;
        options.device_memory = *terms;
        Result<std::vector<RankPlan>> all = PlanRanks(*job, options);
        ASSERT_TRUE(all.ok()) << all.status().message();
        Result<std::vector<RankPlan>> fast = PlanRanksFastestFitting(*job, options);
        ASSERT_TRUE(fast.ok()) << fast.status().message();
        ASSERT_EQ(fast->size(), all->size());
        ++compared;
        const Plan want = WorstRankPlans(*all).chosen;
        const Plan got = WorstRankPlans(*fast).chosen;
        ASSERT_EQ(got.fits, want.fits);
        if (want.fits) {
          ++fitting;
          EXPECT_EQ(ToString(got.strategy), ToString(want.strategy));
          EXPECT_EQ(got.parameter, want.parameter);
          EXPECT_EQ(got.predicted.step_ms, want.predicted.step_ms);
          EXPECT_EQ(got.predicted.peak_bytes, want.predicted.peak_bytes);
          EXPECT_EQ(got.memory.total_bytes, want.memory.total_bytes);
          EXPECT_EQ(got.decisions, want.decisions);
        }
        // Stopping at the first rank that does not fit: the ranks before it
        // as planned in full, it the first that does not fit, none after.
        Result<std::vector<RankPlan>> stopped = PlanRanksFastestFitting(*job, options, true);
        ASSERT_TRUE(stopped.ok()) << stopped.status().message();
        ASSERT_FALSE(stopped->empty());
        ASSERT_LE(stopped->size(), fast->size());
        for (size_t r = 0; r < stopped->size(); ++r) {
          const Plan& s = (*stopped)[r].plans.chosen;
          const Plan& f = (*fast)[r].plans.chosen;
          ASSERT_EQ(s.fits, f.fits) << "rank " << r;
          if (r + 1 < stopped->size()) EXPECT_TRUE(s.fits) << "rank " << r;
          if (!s.fits) continue;
          EXPECT_EQ(ToString(s.strategy), ToString(f.strategy));
          EXPECT_EQ(s.predicted.step_ms, f.predicted.step_ms);
          EXPECT_EQ(s.memory.total_bytes, f.memory.total_bytes);
        }
        EXPECT_EQ(WorstRankPlans(*stopped).chosen.fits, want.fits);
        if (want.fits) EXPECT_EQ(stopped->size(), fast->size());
        if (stopped->size() < fast->size()) {
          EXPECT_FALSE(stopped->back().plans.chosen.fits);
          ++stopped_early;
        }
        // Every rank's plans of the strategies with a floor lie at or above
        // it (those that fit: what the floor promises; the others too).
        for (size_t r = 0; r < all->size(); ++r) {
          const RankPlan& rank = (*all)[r];
          double least = std::numeric_limits<double>::infinity();
          for (const Plan& p : rank.plans.candidates) {
            const int64_t bytes_floor = FittingBytesFloor(rank.memory.profile, p.strategy, options);
            EXPECT_LE(bytes_floor, p.memory.total_bytes) << ToString(p.strategy) << " " << p.parameter;
            if (bytes_floor > options.budget_bytes) ++cannot_fit;
            const double floor = FittingStepFloor(rank.memory.profile, p.strategy);
            if (!std::isfinite(floor)) continue;
            ++floors_checked;
            least = std::min(least, floor);
            EXPECT_GE(p.predicted.step_ms, floor) << ToString(p.strategy) << " " << p.parameter;
            // Not vacuous: uniform recomputes every block at any k, its
            // time is its floor's to rounding.
            if (p.strategy == Strategy::kUniform &&
                p.predicted.step_ms - floor <= 1e-8 * p.predicted.step_ms) {
              ++tight;
            }
          }
          if (want.fits && rank.plans.chosen.predicted.step_ms < least * (1 - 1e-5)) {
            ++below_floors;  // where the floors leave strategies out
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(fitting, compared / 3);
  EXPECT_GT(below_floors, fitting / 2);
  EXPECT_GT(floors_checked, 2 * compared);
  EXPECT_GT(tight, compared);
  EXPECT_GT(cannot_fit, compared);
  EXPECT_GT(stopped_early, 0);
}

}  // namespace
}  // namespace remat
