// A small GPT job (4 blocks, hidden 128, 4 heads, vocab 2048, seq_len 128,
// micro-batch 4) planned as the planner plans a model.json, on the ranks
// `p` describes: the planning layer's tests' job.
#ifndef REMAT_TESTS_TESTING_SMALL_GPT_JOB_H_
#define REMAT_TESTS_TESTING_SMALL_GPT_JOB_H_

#include <gtest/gtest.h>

#include <optional>

#include "remat/input/input.h"
#include "remat/planning/job.h"

namespace remat::testing {

inline constexpr char kSmallGpt[] = R"({"name": "small", "layers": 4, "hidden": 128, "heads": 4,
  "vocab": 2048, "seq_len": 128, "micro_batch": 4, "dropout": 0.1})";

// The job of kSmallGpt (read as "small.json") on `p` (none: one GPU); a
// test failure where it cannot be made.
inline Job SmallGptJob(std::optional<Parallelism> p = std::nullopt) {
  Result<PlannerInput> in = ParsePlannerInput(kSmallGpt, "small.json");
  EXPECT_TRUE(in.ok()) << in.status().message();
  JobOverrides o;
  o.parallel = p;
  Result<Job> job = MakeJob(*in, o);
  EXPECT_TRUE(job.ok()) << job.status().message();
  return *job;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_SMALL_GPT_JOB_H_
