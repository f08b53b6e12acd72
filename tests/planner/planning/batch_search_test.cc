// SearchBatch against exhaustive enumeration of (micro-batch, plan) pairs,
// and its rows against each micro-batch planned alone, one after another.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "remat/planning/planning.h"
#include "remat/model/precision.h"
#include "remat/strategies/strategies.h"
#include "testing/same_plan.h"
#include "testing/small_gpt_job.h"

namespace remat {
namespace {

Job SmallJob() { return testing::SmallGptJob(); }

PlanOptions Budget(int64_t bytes) {
  PlanOptions o;
  o.budget_bytes = bytes;
  return o;
}

// Every divisor b of G, every strategy's best plan at b: the fastest update
// among fitting pairs, by brute force (no pruning).
double FastestUpdateByEnumeration(const Job& job, int64_t global, const PlanOptions& options) {
  double best = std::numeric_limits<double>::infinity();
  for (int64_t b = 1; b <= global; ++b) {
    if (global % b != 0) continue;
    Result<Job> at = WithMicroBatch(job, b, global / b);
    EXPECT_TRUE(at.ok());
    Result<PlanSet> plans = MakePlan(at->profile, options);
    EXPECT_TRUE(plans.ok());
    for (const Plan& p : plans->candidates) {
      if (!p.fits) continue;
      best = std::min(best, PredictUpdate(at->profile, p.predicted, global / b).update_ms);
    }
  }
  return best;
}

TEST(BatchSearch, ChoosesTheFastestFittingPairAsExhaustiveEnumerationDoes) {
  const Job job = SmallJob();
  for (int64_t budget : {40'000'000, 60'000'000, 120'000'000, 400'000'000}) {
    for (int64_t global : {12, 16}) {
      Result<BatchSearch> s = SearchBatch(job, global, Budget(budget));
      ASSERT_TRUE(s.ok()) << s.status().message();
      const double expected = FastestUpdateByEnumeration(job, global, Budget(budget));
      SCOPED_TRACE("budget " + std::to_string(budget) + ", global " + std::to_string(global));
      if (expected == std::numeric_limits<double>::infinity()) {
        EXPECT_EQ(s->chosen, -1);
        continue;
      }
      ASSERT_GE(s->chosen, 0);
      const BatchCandidate& c = s->weighed[s->chosen];
      EXPECT_TRUE(c.plan.fits);
      EXPECT_EQ(c.micro_batch * c.grad_accumulation, global);
      EXPECT_NEAR(c.update.update_ms, expected, 1e-9 * expected);
    }
  }
}

TEST(BatchSearch, MicroBatchOneIsNotFree) {
  // With room for everything, the per-micro-batch sums make b = 1 slower
  // than the largest b (same work, G - 1 sums instead of none).
  const Job job = SmallJob();
  Result<BatchSearch> s = SearchBatch(job, 8, Budget(int64_t{1} << 40));
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->weighed.size(), 4u);  // 1, 2, 4, 8
  EXPECT_EQ(s->skipped, 0);
  EXPECT_GT(s->weighed.front().update.update_ms, s->weighed.back().update.update_ms);
  EXPECT_GT(s->weighed.front().update.accumulate_ms, 0);
  EXPECT_EQ(s->weighed[s->chosen].micro_batch, 8);
}

TEST(BatchSearch, StopsAtTheFirstMicroBatchThatDoesNotFit) {
  const Job job = SmallJob();
  Result<BatchSearch> s = SearchBatch(job, 64, Budget(60'000'000));
  ASSERT_TRUE(s.ok());
  ASSERT_FALSE(s->weighed.empty());
  EXPECT_FALSE(s->weighed.back().plan.fits);
  EXPECT_EQ(s->weighed.size() + s->skipped, 7u);  // the divisors of 64
  for (size_t i = 0; i + 1 < s->weighed.size(); ++i) EXPECT_TRUE(s->weighed[i].plan.fits);
}

TEST(BatchSearch, RefusesGlobalBatchBelowOneAndProfiles) {
  const Job job = SmallJob();
  EXPECT_EQ(SearchBatch(job, 0, Budget(1 << 30)).status().code(), StatusCode::kInvalidInput);
  Job profile_job = job;
  profile_job.kind = PlannerInput::Kind::kProfile;
  EXPECT_EQ(SearchBatch(profile_job, 8, Budget(1 << 30)).status().code(),
            StatusCode::kInvalidInput);
}

Result<PlanningResult> PlanGlobalBatch(int64_t budget, int64_t global) {
  PlanningRequest request;
  request.options = Budget(budget);
  request.global_batch = global;
  return RunPlanner(SmallJob(), request);
}

TEST(BatchSearch, RunPlannerPlansTheChosenMicroBatch) {
  Result<PlanningResult> r = PlanGlobalBatch(60'000'000, 32);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->batch && r->batch_job);
  const BatchCandidate& c = r->batch->weighed[r->batch->chosen];
  EXPECT_EQ(r->batch_job->config().micro_batch, c.micro_batch);
  EXPECT_EQ(r->batch_job->grad_accumulation(), c.grad_accumulation);
  EXPECT_EQ(r->plans.chosen.predicted.peak_bytes, c.plan.predicted.peak_bytes);
  EXPECT_TRUE(r->fit_status().ok());
  EXPECT_TRUE(r->warnings.empty());
}

TEST(BatchSearch, NothingFitsSaysWhatWould) {
  Result<PlanningResult> r = PlanGlobalBatch(6'000'000, 16);  // below the model state
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->batch->chosen, -1);
  EXPECT_EQ(r->fit_status().code(), StatusCode::kNoFit);
  const std::string& m = r->advice->message;
  EXPECT_NE(m.find("global batch of 16"), std::string::npos) << m;
  EXPECT_NE(m.find("model state alone"), std::string::npos) << m;
  EXPECT_EQ(r->batch_job->config().micro_batch, 1);
}

TEST(BatchSearch, WarnsAboveOneHundredTwentyEightMicroBatches) {
  // 22 MiB: only micro-batch 1 fits, so K = 256.
  Result<PlanningResult> r = PlanGlobalBatch(22 << 20, 256);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->batch->chosen, 0);
  EXPECT_EQ(r->batch->weighed[0].grad_accumulation, 256);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("grad_accumulation 256 is above 128"), std::string::npos);
  // Set directly, too.
  JobOverrides o;
  o.grad_accumulation = 200;
  Result<PlannerInput> in = ParsePlannerInput(testing::kSmallGpt, "small.json");
  ASSERT_TRUE(in.ok());
  Result<Job> many = MakeJob(*in, o);
  ASSERT_TRUE(many.ok());
  PlanningRequest plain;
  plain.options = Budget(int64_t{1} << 40);
  Result<PlanningResult> w = RunPlanner(*many, plain);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->warnings.size(), 1u);
  EXPECT_NE(w->warnings[0].find("200"), std::string::npos);
}

// SearchBatch plans its micro-batches ahead on the machine's cores, and one
// whose peak floor is above the budget only when the weighing reaches it:
// each row is the plan PlanRanks gives that micro-batch alone, the rows
// stop at the first that does not fit, and the rows after it are skipped,
// on one GPU, under FSDP2 and over pipeline stages.
TEST(BatchSearch, EveryRowIsItsMicroBatchPlannedAlone) {
  Parallelism fsdp;
  fsdp.gpus = 2;
  fsdp.data = DataParallel::kFsdp2;
  Parallelism stages;
  stages.gpus = 2;
  stages.pipeline = 2;
  int rows = 0, stopped = 0, stopped_by_floor = 0;
  for (const std::optional<Parallelism>& p :
       {std::optional<Parallelism>{}, std::optional<Parallelism>{fsdp},
        std::optional<Parallelism>{stages}}) {
    const Job job = testing::SmallGptJob(p);
    const int64_t global = 32 * job.parallel().data_ranks();
    for (int64_t budget : {30'000'000, 45'000'000, 60'000'000, 120'000'000}) {
      SCOPED_TRACE("gpus " + std::to_string(job.parallel().gpus) + ", pipeline " +
                   std::to_string(job.parallel().pipeline) + ", budget " +
                   std::to_string(budget));
      Result<BatchSearch> s = SearchBatch(job, global, Budget(budget));
      ASSERT_TRUE(s.ok()) << s.status().message();
      size_t row = 0;
      for (int64_t b : {1, 2, 4, 8, 16, 32}) {
        Result<Job> at = WithMicroBatch(job, b, 32 / b);
        ASSERT_TRUE(at.ok()) << at.status().message();
        Result<std::vector<RankPlan>> ranks = PlanRanks(*at, Budget(budget));
        ASSERT_TRUE(ranks.ok()) << ranks.status().message();
        const Plan alone = WorstRankPlans(*ranks).chosen;
        ASSERT_LT(row, s->weighed.size());
        const BatchCandidate& c = s->weighed[row++];
        EXPECT_EQ(c.micro_batch, b);
        EXPECT_EQ(c.grad_accumulation, 32 / b);
        testing::ExpectSamePlan(c.plan, alone);
        EXPECT_EQ(c.update.update_ms,
                  PredictUpdate(at->profile, alone.predicted, 32 / b).update_ms);
        ++rows;
        if (!alone.fits) {
          ++stopped;
          if (JobPeakFloor(*at, Budget(budget)) > budget) ++stopped_by_floor;
          break;
        }
      }
      EXPECT_EQ(s->weighed.size(), row);
      EXPECT_EQ(s->weighed.size() + s->skipped, 6u);  // the divisors of 32
    }
  }
  // Searches that stop early, some at a micro-batch no plan can fit by
  // its floor: the deferred path is weighed, not only the plain one.
  EXPECT_GT(rows, 20);
  EXPECT_GT(stopped, 3);
  EXPECT_GT(stopped_by_floor, 0);
}

}  // namespace
}  // namespace remat
