// SearchBatch against exhaustive enumeration of (micro-batch, plan) pairs.
#include <gtest/gtest.h>

#include <limits>

#include "remat/planning/planning.h"
#include "remat/model/precision.h"
#include "remat/strategies/strategies.h"
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

}  // namespace
}  // namespace remat
