// WithParallel from a model's profile made once (ModelProfile): the same
// job as WithParallel making it again, on any data-parallel layout of the
// same tensor and sequence degrees.
#include "remat/planning/job.h"

#include <gtest/gtest.h>

#include <string>

#include "remat/planning/planning.h"
#include "testing/small_gpt_job.h"

namespace remat {
namespace {

using testing::SmallGptJob;

Parallelism Layout(DataParallel data, int64_t data_ranks, int64_t tensor, bool sequence) {
  Parallelism p;
  p.data = data;
  p.tensor = tensor;
  p.sequence = sequence;
  p.gpus = data_ranks * tensor;
  return p;
}

// Everything of `job` its planning reads: the profile, and each rank's.
std::string Described(const Job& job) {
  std::string out = ProfileToJson(job.profile);
  for (const RankMemory& r : job.ranks) {
    out += "\nrank " + std::to_string(r.rank) + " x" + std::to_string(r.ranks) + " stage " +
           std::to_string(r.stage) + " host " + std::to_string(r.state.host_bytes()) + "\n" +
           ProfileToJson(r.profile) + "\n" + ProfileToJson(*r.stage_profile);
  }
  return out;
}

TEST(ModelProfile, SharedByTheDataLayoutsOfOneTensorDegree) {
  const Job job = SmallGptJob();
  for (int64_t tensor : {1, 2}) {
    for (bool sequence : {false, true}) {
      if (sequence && tensor == 1) continue;
      // Made once, on one layout: every other layout of these degrees.
      const Result<Profile> made =
          ModelProfile(job, Layout(DataParallel::kDdp, 2, tensor, sequence));
      ASSERT_TRUE(made.ok()) << made.status().message();
      for (DataParallel data : {DataParallel::kNone, DataParallel::kDdp, DataParallel::kZero3,
                                DataParallel::kFsdp2}) {
        for (int64_t ranks : {1, 2, 8}) {
          if ((data == DataParallel::kNone) != (ranks == 1)) continue;
          const Parallelism p = Layout(data, ranks, tensor, sequence);
          const Result<Job> again = WithParallel(job, p);
          const Result<Job> shared = WithParallel(job, p, *made);
          ASSERT_TRUE(again.ok()) << again.status().message();
          ASSERT_TRUE(shared.ok()) << shared.status().message();
          EXPECT_EQ(Described(*shared), Described(*again))
              << "tensor " << tensor << " sequence " << sequence << " ranks " << ranks;
          EXPECT_EQ(shared->ranks.size(), again->ranks.size());
        }
      }
    }
  }
}

TEST(WithoutProfile, KeepsWhatWithParallelAndWithMicroBatchRead) {
  Job job = SmallGptJob();
  job.profile.host_link.name = "pcie5";
  job.profile.host_link.gb_per_s = 50;
  job.default_seq_len = true;
  const Job bare = WithoutProfile(job);
  EXPECT_TRUE(bare.profile.layers.empty());
  EXPECT_TRUE(bare.ranks.empty());
  EXPECT_EQ(bare.path, job.path);
  EXPECT_EQ(bare.default_seq_len, job.default_seq_len);
  EXPECT_EQ(bare.profile.host_link.name, "pcie5");
  for (const Parallelism& p :
       {Layout(DataParallel::kNone, 1, 1, false), Layout(DataParallel::kFsdp2, 8, 2, true)}) {
    const Result<Job> whole = WithParallel(job, p);
    const Result<Job> from_bare = WithParallel(bare, p);
    ASSERT_TRUE(whole.ok() && from_bare.ok());
    EXPECT_EQ(Described(*from_bare), Described(*whole));
    const Result<Job> batch = WithMicroBatch(*whole, 3);
    const Result<Job> batch_bare = WithMicroBatch(WithoutProfile(*whole), 3);
    ASSERT_TRUE(batch.ok() && batch_bare.ok());
    EXPECT_EQ(Described(*batch_bare), Described(*batch));
  }
}

TEST(JobLayout, KeptWhereTheJobMadeItsRanks) {
  EXPECT_EQ(SmallGptJob().layout, nullptr);  // one GPU: no ranks
  const Job job = SmallGptJob(Layout(DataParallel::kFsdp2, 4, 1, false));
  ASSERT_NE(job.layout, nullptr);
  EXPECT_EQ(TrainableParameters(*job.layout), TrainableParameterCount(job.model));
  // A job made again with a changed model makes its own.
  const Result<Job> batch = WithMicroBatch(job, 3);
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  ASSERT_NE(batch->layout, nullptr);
  EXPECT_NE(batch->layout, job.layout);
  EXPECT_EQ(TrainableParameters(*batch->layout), TrainableParameterCount(batch->model));
  // Ranks made from a lent layout: none kept.
  const Result<Job> lent = WithMicroBatch(job, 2, 0, job.layout.get());
  ASSERT_TRUE(lent.ok()) << lent.status().message();
  EXPECT_EQ(lent->layout, nullptr);
  EXPECT_EQ(Described(*lent), Described(*WithMicroBatch(job, 2)));
}

TEST(ModelProfile, DependsOnTheTensorDegree) {
  const Job job = SmallGptJob();
  const Result<Profile> one = ModelProfile(job, Layout(DataParallel::kDdp, 2, 1, false));
  const Result<Profile> two = ModelProfile(job, Layout(DataParallel::kDdp, 2, 2, false));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_NE(ProfileToJson(*one), ProfileToJson(*two));
}

TEST(ModelProfile, AProfileInputHasNoModel) {
  Job job = SmallGptJob();
  Result<Profile> profile = ParseProfile(ProfileToJson(job.profile), "small.profile.json");
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  Result<PlannerInput> in = ParsePlannerInput(ProfileToJson(*profile), "small.profile.json");
  ASSERT_TRUE(in.ok()) << in.status().message();
  Result<Job> measured = MakeJob(*in, JobOverrides{});
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  const Parallelism p = Layout(DataParallel::kDdp, 2, 1, false);
  const Result<Profile> made = ModelProfile(*measured, p);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("small.profile.json is a profile"), std::string::npos)
      << made.status().message();
  EXPECT_FALSE(WithParallel(*measured, p, job.profile).ok());
}

}  // namespace
}  // namespace remat
