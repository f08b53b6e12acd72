// Comparing two plans in tests.
#ifndef REMAT_TESTS_TESTING_SAME_PLAN_H_
#define REMAT_TESTS_TESTING_SAME_PLAN_H_

#include <gtest/gtest.h>

#include "remat/plan/plan.h"

namespace remat::testing {

// Every figure and word of a plan a report shows.
inline void ExpectSamePlan(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.parameter, b.parameter);
  EXPECT_EQ(a.budget_bytes, b.budget_bytes);
  EXPECT_EQ(a.fits, b.fits);
  EXPECT_EQ(a.decisions, b.decisions);
  EXPECT_EQ(a.selective_option, b.selective_option);
  EXPECT_EQ(a.schedule.ops.size(), b.schedule.ops.size());
  EXPECT_EQ(a.predicted.step_ms, b.predicted.step_ms);
  EXPECT_EQ(a.predicted.peak_bytes, b.predicted.peak_bytes);
  EXPECT_EQ(a.predicted.reserved_peak_bytes, b.predicted.reserved_peak_bytes);
  EXPECT_EQ(a.predicted.host_peak_bytes, b.predicted.host_peak_bytes);
  EXPECT_EQ(a.predicted.recompute_ops, b.predicted.recompute_ops);
  EXPECT_EQ(a.predicted.timeline.size(), b.predicted.timeline.size());
  const DeviceMemoryUse& m = a.memory;
  const DeviceMemoryUse& n = b.memory;
  EXPECT_EQ(m.allocated_peak_bytes, n.allocated_peak_bytes);
  EXPECT_EQ(m.allocator_rounding_bytes, n.allocator_rounding_bytes);
  EXPECT_EQ(m.fragmentation_bytes, n.fragmentation_bytes);
  EXPECT_EQ(m.reserved_peak_bytes, n.reserved_peak_bytes);
  EXPECT_EQ(m.cuda_context_bytes, n.cuda_context_bytes);
  EXPECT_EQ(m.workspace_bytes, n.workspace_bytes);
  EXPECT_EQ(m.replay_margin_bytes, n.replay_margin_bytes);
  EXPECT_EQ(m.total_bytes, n.total_bytes);
  ASSERT_EQ(m.replay.has_value(), n.replay.has_value());
  if (m.replay) {
    EXPECT_EQ(m.replay->micro_steps, n.replay->micro_steps);
    EXPECT_EQ(m.replay->steady, n.replay->steady);
    EXPECT_EQ(m.replay->alloc_retries, n.replay->alloc_retries);
    EXPECT_EQ(m.replay->device_allocs, n.replay->device_allocs);
    EXPECT_EQ(m.replay->under_budget_limit, n.replay->under_budget_limit);
    EXPECT_EQ(m.replay->out_of_memory, n.replay->out_of_memory);
  }
  EXPECT_EQ(a.terms.source, b.terms.source);
  EXPECT_EQ(a.terms.fixed_bytes(), b.terms.fixed_bytes());
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_SAME_PLAN_H_
