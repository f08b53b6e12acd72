// The peak floor the fit advice skips alternatives by (JobPeakFloor,
// remat/plan/peak_floor.h): over real configs and layouts, each with the
// changes the advice weighs (precision, optimizer, LoRA, QLoRA, the chunked
// loss), no plan any strategy gives any rank has a device peak below the
// job's floor, so an alternative whose floor is above the budget has no
// plan that fits. And the floor is not vacuous: it holds the model state.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remat/device/device_memory.h"
#include "remat/plan/peak_floor.h"
#include "remat/planning/planning.h"
#include "testing/advice_jobs.h"

namespace remat {
namespace {

constexpr int64_t kGB = 1000LL * 1000 * 1000;

using testing::AdviceChange;
using testing::AdviceJob;
using testing::kAdviceChanges;
using testing::kAdviceJobs;

TEST(PeakFloor, NoPlanOfAnyRankIsBelowTheJobsFloor) {
  int planned = 0, left_out = 0;
  int backward_decides = 0;  // ranks whose floor a layer's backward sets
  for (const AdviceJob& g : kAdviceJobs) {
    for (const AdviceChange& c : kAdviceChanges) {
      SCOPED_TRACE(testing::Describe(g, c));
      Result<Job> job = testing::LoadAdviceJob(g, c);
      // LoRA, QLoRA and the chunked loss under tensor parallelism are not
      // modelled: the advice does not weigh them either.
      if (g.tensor > 1 && !job.ok()) {
        ++left_out;
        continue;
      }
      ASSERT_TRUE(job.ok()) << job.status().message();
      PlanOptions options;
      options.strategy = Strategy::kAuto;
      options.budget_bytes = 80 * kGB;
      Result<DeviceMemoryTerms> terms = ResolveDeviceMemory(g.device, DeviceMemoryOverrides{}, "");
      ASSERT_TRUE(terms.ok()) << terms.status().message();
      options.device_memory = *terms;
      const int64_t floor = JobPeakFloor(*job, options);
      Result<std::vector<RankPlan>> ranks = PlanRanks(*job, options);
      ASSERT_TRUE(ranks.ok()) << ranks.status().message();
      ++planned;
      // Not vacuous: at least every rank's model state and fixed terms.
      for (const RankPlan& r : *ranks) {
        EXPECT_GE(floor, r.memory.profile.model_state_bytes() + terms->fixed_bytes());
        EXPECT_GE(floor, DevicePeakFloor(r.memory.profile, *terms));
      }
      // Every strategy's plan of every rank, and the plan the job gets.
      for (const RankPlan& r : *ranks) {
        const Profile& profile = r.memory.profile;
        const int64_t backward_floor = BackwardPeakFloor(profile);
        int64_t step_floor = profile.static_bytes() + profile.optimizer_workspace_bytes;
        for (const LayerProfile& l : profile.layers) step_floor += l.gradient_bytes;
        if (backward_floor > step_floor) ++backward_decides;
        EXPECT_LE(backward_floor, r.plans.chosen.predicted.peak_bytes)
            << "rank " << r.memory.rank << ": " << ToString(r.plans.chosen.strategy);
        const int64_t rank_floor = DevicePeakFloor(r.memory.profile, *terms);
        EXPECT_LE(rank_floor, r.plans.chosen.memory.total_bytes)
            << "rank " << r.memory.rank << ": " << ToString(r.plans.chosen.strategy);
        for (const Plan& p : r.plans.candidates) {
          EXPECT_LE(rank_floor, p.memory.total_bytes)
              << "rank " << r.memory.rank << ": " << ToString(p.strategy) << " " << p.parameter;
          EXPECT_LE(AllocatedPeakFloor(r.memory.profile), p.predicted.peak_bytes)
              << "rank " << r.memory.rank << ": " << ToString(p.strategy) << " " << p.parameter;
          EXPECT_LE(backward_floor, p.predicted.peak_bytes)
              << "rank " << r.memory.rank << ": " << ToString(p.strategy) << " " << p.parameter;
        }
      }
      EXPECT_LE(floor, WorstRankPlans(*ranks).chosen.memory.total_bytes);
    }
  }
  EXPECT_EQ(left_out, 3);
  // The layers' backwards are what decides the floor on most of these
  // jobs (the engines' gathers and unsharded gradients in their workspace,
  // a block's saved activations): not vacuous.
  EXPECT_GT(backward_decides, planned / 2);
  EXPECT_EQ(planned + left_out, static_cast<int>(std::size(kAdviceJobs) * std::size(kAdviceChanges)));
}

// The floor is what decides: a budget just below it fits no plan, and the
// lowest peak of the job lies at or above it.
TEST(PeakFloor, ABudgetBelowTheFloorFitsNothing) {
  JobOverrides o;
  o.precision = Precision::kMixedBf16;
  o.seq_len = 8192;
  o.micro_batch = 2;
  Parallelism p;
  p.gpus = 8;
  p.data = DataParallel::kFsdp2;
  o.parallel = p;
  Result<Job> job =
      LoadJob(std::string(REMAT_SOURCE_DIR) + "/examples/hf/llama-3.1-8b.config.json", o);
  ASSERT_TRUE(job.ok()) << job.status().message();
  PlanOptions options;
  options.strategy = Strategy::kAuto;
  Result<DeviceMemoryTerms> terms = ResolveDeviceMemory("h100", DeviceMemoryOverrides{}, "");
  ASSERT_TRUE(terms.ok()) << terms.status().message();
  options.device_memory = *terms;
  options.budget_bytes = 80 * kGB;
  const int64_t floor = JobPeakFloor(*job, options);
  ASSERT_GT(floor, 0);
  options.budget_bytes = floor - 1;
  Result<std::vector<RankPlan>> ranks = PlanRanks(*job, options);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  const PlanSet worst = WorstRankPlans(*ranks);
  EXPECT_FALSE(worst.chosen.fits);
  for (const Plan& c : worst.candidates) {
    EXPECT_FALSE(c.fits) << ToString(c.strategy);
    EXPECT_GE(c.memory.total_bytes, floor) << ToString(c.strategy);
  }
}

}  // namespace
}  // namespace remat
