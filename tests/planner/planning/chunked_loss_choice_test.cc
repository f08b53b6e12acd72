// --strategy auto weighing the chunked loss (PlanningRequest::
// weigh_chunked_loss): a model whose logits dominate its activations (vocab
// 32768 on hidden 64), planned at budgets derived from its plain and
// chunked plans.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "remat/input/input.h"
#include "remat/planning/job.h"
#include "remat/planning/planning.h"
#include "remat/model/precision.h"
#include "remat/strategies/strategies.h"

namespace remat {
namespace {

const char kWideVocab[] =
    R"({"architecture": "llama", "layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128,
        "vocab": 32768, "seq_len": 256, "micro_batch": 2, "dropout": 0})";

Job MakeWideJob(std::optional<int64_t> loss_chunks) {
  Result<PlannerInput> in = ParsePlannerInput(kWideVocab, "m.json");
  EXPECT_TRUE(in.ok()) << in.status().message();
  JobOverrides o;
  o.loss_chunks = loss_chunks;
  Result<Job> job = MakeJob(*in, o);
  EXPECT_TRUE(job.ok()) << job.status().message();
  return *job;
}

int64_t AutoChunks(const Job& job) {
  ModelConfig c = job.config();
  c.loss_chunks = kLossChunksAuto;
  return WithDefaults(c).loss_chunks;
}

PlanningRequest Request(int64_t budget, bool weigh) {
  PlanningRequest r;
  r.options.strategy = Strategy::kAuto;
  r.options.budget_bytes = budget;
  r.weigh_chunked_loss = weigh;
  return r;
}

// Auto's plans of `job` with no budget: the baseline is the peak without
// checkpointing; with budget 1, nothing fits and the chosen plan is the
// lowest peak any strategy reaches.
PlanSet Plans(const Job& job, int64_t budget) {
  PlanOptions o;
  o.strategy = Strategy::kAuto;
  o.budget_bytes = budget;
  Result<PlanSet> s = MakePlan(job.profile, o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

// Between the chunked job's lowest peak and the plain job's, only the
// chunked loss fits: auto takes it, its job carries loss_chunks, and the
// message says what it saves.
TEST(ChunkedLossChoice, AutoTakesItWhereOnlyItFits) {
  const Job plain = MakeWideJob(std::nullopt), chunked = MakeWideJob(kLossChunksAuto);
  const int64_t plain_low = Plans(plain, 1).chosen.memory.total_bytes;
  const int64_t chunked_low = Plans(chunked, 1).chosen.memory.total_bytes;
  ASSERT_LT(chunked_low, plain_low);
  const int64_t budget = chunked_low + (plain_low - chunked_low) / 2;

  Result<PlanningResult> off = RunPlanner(plain, Request(budget, false));
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_FALSE(off->plans.chosen.fits);
  EXPECT_FALSE(off->chunked_loss);

  Result<PlanningResult> on = RunPlanner(plain, Request(budget, true));
  ASSERT_TRUE(on.ok()) << on.status().message();
  ASSERT_TRUE(on->chunked_loss);
  EXPECT_TRUE(on->plans.chosen.fits);
  EXPECT_FALSE(on->advice);
  EXPECT_TRUE(on->fit_status().ok());
  ASSERT_TRUE(on->batch_job);
  EXPECT_EQ(on->batch_job->config().loss_chunks, AutoChunks(plain));
  EXPECT_EQ(on->chunked_loss->chunks, AutoChunks(plain));
  EXPECT_EQ(on->chunked_loss->saves_bytes, Plans(plain, 0).baseline.memory.total_bytes -
                                               Plans(chunked, 0).baseline.memory.total_bytes);
  EXPECT_GT(on->chunked_loss->saves_bytes, 0);
  EXPECT_EQ(on->chunked_loss->message.rfind("chunked loss chosen by auto: saves ", 0), 0u)
      << on->chunked_loss->message;
  EXPECT_NE(on->chunked_loss->message.find("no plan fits without it"), std::string::npos);
}

// Where the plain job's plan fits without recomputing anything, it is as
// fast as any: auto keeps it, the result the same as without weighing.
TEST(ChunkedLossChoice, AutoKeepsThePlainJobThatFitsWithoutRecompute) {
  const Job plain = MakeWideJob(std::nullopt);
  const int64_t budget = 2 * Plans(plain, 0).baseline.memory.total_bytes;
  Result<PlanningResult> on = RunPlanner(plain, Request(budget, true));
  Result<PlanningResult> off = RunPlanner(plain, Request(budget, false));
  ASSERT_TRUE(on.ok() && off.ok());
  ASSERT_TRUE(on->plans.chosen.fits);
  EXPECT_EQ(on->plans.chosen.predicted.recompute_ms, 0);
  EXPECT_FALSE(on->chunked_loss);
  EXPECT_FALSE(on->batch_job);
  EXPECT_EQ(on->plans.chosen.strategy, off->plans.chosen.strategy);
  EXPECT_EQ(on->plans.chosen.memory.total_bytes, off->plans.chosen.memory.total_bytes);
}

// Llama-3.2-1B (vocab 128,256), 8 x 2048 tokens, amp_bf16, just above the
// chunked job's peak without checkpointing: the plain job fits only by
// recomputing; the chunked one recomputes nothing. Auto takes the chunked
// loss exactly when its step is the faster.
Job Llama1B(std::optional<int64_t> loss_chunks) {
  Result<PlannerInput> in =
      LoadPlannerInput(REMAT_SOURCE_DIR "/examples/hf/llama-3.2-1b.config.json");
  EXPECT_TRUE(in.ok()) << in.status().message();
  JobOverrides o;
  o.micro_batch = 8;
  o.seq_len = 2048;
  o.precision = Precision::kAmpBf16;
  o.loss_chunks = loss_chunks;
  Result<Job> job = MakeJob(*in, o);
  EXPECT_TRUE(job.ok()) << job.status().message();
  return *job;
}

TEST(ChunkedLossChoice, AutoTakesItWhereItsPlanIsFaster) {
  const Job plain = Llama1B(std::nullopt), chunked = Llama1B(kLossChunksAuto);
  const int64_t budget = Plans(chunked, 0).baseline.memory.total_bytes + (int64_t{1} << 20);
  const PlanSet p = Plans(plain, budget), q = Plans(chunked, budget);
  ASSERT_TRUE(p.chosen.fits);
  ASSERT_GT(p.chosen.predicted.recompute_ms, 0);
  ASSERT_TRUE(q.chosen.fits);
  EXPECT_EQ(q.chosen.predicted.recompute_ms, 0);
  const bool faster = q.chosen.predicted.recompute_ms < p.chosen.predicted.recompute_ms;

  Result<PlanningResult> on = RunPlanner(plain, Request(budget, true));
  ASSERT_TRUE(on.ok()) << on.status().message();
  ASSERT_EQ(on->chunked_loss.has_value(), faster);
  ASSERT_TRUE(faster) << "the chunked job's recompute " << q.chosen.predicted.recompute_ms
                      << " ms, the plain job's " << p.chosen.predicted.recompute_ms << " ms";
  EXPECT_NE(on->chunked_loss->message.find(" instead of "), std::string::npos)
      << on->chunked_loss->message;
  EXPECT_DOUBLE_EQ(on->plans.chosen.predicted.step_ms, q.chosen.predicted.step_ms);
  // Without weighing (--chunked-loss 0), the plain plan with its recompute.
  Result<PlanningResult> off = RunPlanner(plain, Request(budget, false));
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->chunked_loss);
  EXPECT_DOUBLE_EQ(off->plans.chosen.predicted.step_ms, p.chosen.predicted.step_ms);
}

// A job that sets the chunked loss is planned as set.
TEST(ChunkedLossChoice, AJobThatChunksAlreadyIsPlannedAsIs) {
  const Job chunked = MakeWideJob(4);
  const int64_t low = Plans(chunked, 1).chosen.memory.total_bytes;
  Result<PlanningResult> r = RunPlanner(chunked, Request(low + 1024, true));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->chunked_loss);
  EXPECT_FALSE(r->batch_job);
}

// With a global batch the chunked job's micro-batch search is taken whole.
TEST(ChunkedLossChoice, WithAGlobalBatchTheChunkedSearchIsTaken) {
  const Job plain = MakeWideJob(std::nullopt), chunked = MakeWideJob(kLossChunksAuto);
  Result<Job> one = WithMicroBatch(plain, 1), chunked_one = WithMicroBatch(chunked, 1);
  ASSERT_TRUE(one.ok() && chunked_one.ok());
  const int64_t plain_low = Plans(*one, 1).chosen.memory.total_bytes;
  const int64_t chunked_low = Plans(*chunked_one, 1).chosen.memory.total_bytes;
  ASSERT_LT(chunked_low, plain_low);
  PlanningRequest r = Request(chunked_low + (plain_low - chunked_low) / 2, true);
  r.global_batch = 4;
  Result<PlanningResult> on = RunPlanner(plain, r);
  ASSERT_TRUE(on.ok()) << on.status().message();
  ASSERT_TRUE(on->chunked_loss);
  ASSERT_TRUE(on->batch && on->batch_job);
  EXPECT_GE(on->batch->chosen, 0);
  EXPECT_EQ(on->batch_job->config().loss_chunks, on->chunked_loss->chunks);
  EXPECT_EQ(on->batch_job->config().micro_batch * on->batch_job->grad_accumulation(), 4);
}

}  // namespace
}  // namespace remat
