// ReplayTrainingSteps: the caching allocator model over a plan's training
// steps, against reserved peaks derived by hand from PyTorch's allocator
// rules (CUDACachingAllocator.cpp, remat/device/caching_allocator.h).
#include <gtest/gtest.h>

#include <cmath>

#include "remat/plan/plan.h"
#include "remat/strategies/strategies.h"
#include "testing/chains.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// `n` layers whose every request has the same size: x[i], the saved part of
// a[i] (activation less output) and g[i] are `unit` bytes each; no
// workspaces; the model state one 100 MiB request.
Profile UnitChain(int n, int64_t unit) {
  Profile p = testing::UniformChain(n, unit, 2 * unit);
  p.static_memory.parameter_bytes = 100 * kMiB;
  return p;
}

// The rule-derived reserved peak of a chain of equal `unit` requests:
// the model state is one segment of its own (100 MiB: >= 10 MiB, a multiple
// of 2 MiB). The unit requests share segments of `segment` bytes that hold
// `segment / unit` of them exactly (a 4 MiB request splits a 20 MiB
// large-pool segment, the remainder being > 1 MiB; a 1 MiB one a 2 MiB
// small-pool segment). A freed unit merges with its free neighbours into a
// multiple of units, which best fit splits again for the next unit: a new
// segment is taken only when every segment is full. So the segments are
// ceil(most units live at once / units per segment), whatever the plan.
// Expandable segments give the same: one large segment of 20 MiB pages,
// grown only when no free unit is left, the model state filling 5 pages.
int64_t RuleReserved(int64_t allocated_peak, int64_t unit, int64_t segment) {
  const int64_t units = (allocated_peak - 100 * kMiB) / unit;
  const int64_t per_segment = segment / unit;
  return 100 * kMiB + (units + per_segment - 1) / per_segment * segment;
}

struct PlanCase {
  Strategy strategy;
  int every;  // uniform / segment setting
};

const PlanCase kPlans[] = {{Strategy::kNone, 0},    {Strategy::kUniform, 2},
                           {Strategy::kUniform, 3}, {Strategy::kSegment, 2},
                           {Strategy::kSegment, 4}, {Strategy::kOptimal, 0}};

Plan MakeCase(const Profile& p, const PlanCase& c, int64_t budget) {
  PlanOptions o;
  o.strategy = c.strategy;
  o.every = c.strategy == Strategy::kUniform ? c.every : 0;
  o.segments = c.strategy == Strategy::kSegment ? c.every : 0;
  o.budget_bytes = budget;
  return MakePlan(p, o).value().chosen;
}

void ExpectRuleReserved(const Profile& p, int64_t unit, int64_t segment,
                        const AllocatorOptions& options) {
  const int64_t keep_peak = MakeCase(p, {Strategy::kNone, 0}, 0).predicted.peak_bytes;
  for (const PlanCase& c : kPlans) {
    const Plan plan = MakeCase(p, c, c.strategy == Strategy::kOptimal ? keep_peak * 6 / 10 : 0);
    const std::string where = std::string(ToString(c.strategy)) + " " + plan.parameter;
    const TrainingStepReplay r = ReplayTrainingSteps(p, plan.schedule, options).value();
    const int64_t expected = RuleReserved(plan.predicted.peak_bytes, unit, segment);
    EXPECT_LE(std::llabs(r.reserved_peak_bytes - expected), expected / 100) << where;
    EXPECT_EQ(r.reserved_peak_bytes, expected) << where;  // the rules give it exactly
    EXPECT_EQ(r.allocated_peak_bytes, plan.predicted.peak_bytes) << where;
    // Step 1 takes the segments, step 2 reuses them: steady.
    EXPECT_TRUE(r.summary.steady) << where;
    EXPECT_EQ(r.summary.micro_steps, 2) << where;
  }
}

TEST(ReplayTrainingSteps, LargePoolUnitsPackFivePerSegment) {
  ExpectRuleReserved(UnitChain(8, 4 * kMiB), 4 * kMiB, 20 * kMiB, AllocatorOptions{});
}

TEST(ReplayTrainingSteps, SmallPoolUnitsPackTwoPerSegment) {
  ExpectRuleReserved(UnitChain(8, kMiB), kMiB, 2 * kMiB, AllocatorOptions{});
}

TEST(ReplayTrainingSteps, ExpandableSegmentsGrowByPages) {
  AllocatorOptions o;
  o.expandable_segments = true;
  ExpectRuleReserved(UnitChain(8, 4 * kMiB), 4 * kMiB, 20 * kMiB, o);
}

// Layer 0's 10 MiB forward workspace takes a segment of its own (10 MiB is
// not below the 10 MiB shared-segment bound) and leaves it cached; every
// later request (12, 28 and 32 MiB) is larger, so it stays unused:
// reserved = allocated peak + 10 MiB. Under a driver limit of the allocated
// peak, the 32 MiB backward workspace would pass the limit: PyTorch frees
// the cached segment that holds no live block and retries, and the step
// fits. Step 2 then splits the smallest free 12 MiB segment for the 10 MiB
// workspace (remainder 2 MiB > 1 MiB) and merges it back on the free: no
// new segment, steady.
Profile CachedWorkspaceChain() {
  Profile p = testing::UniformChain(3, 12 * kMiB, 40 * kMiB);
  p.static_memory.parameter_bytes = 100 * kMiB;
  p.layers[0].forward_workspace_bytes = 10 * kMiB;
  p.layers[2].backward_workspace_bytes = 32 * kMiB;
  return p;
}

TEST(ReplayTrainingSteps, ACachedSegmentIsFreedAtTheLimit) {
  const Profile p = CachedWorkspaceChain();
  const Plan keep = MakeCase(p, {Strategy::kNone, 0}, 0);
  const int64_t allocated = keep.predicted.peak_bytes;
  // 100 + x0..x3 4 x 12 + saved 3 x 28 + g3 12 + workspace 32.
  ASSERT_EQ(allocated, 276 * kMiB);
  const TrainingStepReplay free_run = ReplayTrainingSteps(p, keep.schedule, {}).value();
  EXPECT_EQ(free_run.reserved_peak_bytes, allocated + 10 * kMiB);
  EXPECT_EQ(free_run.summary.alloc_retries, 0);
  EXPECT_TRUE(free_run.summary.steady);
  AllocatorLimit card;
  card.driver_bytes = allocated;
  const TrainingStepReplay capped = ReplayTrainingSteps(p, keep.schedule, {}, card).value();
  EXPECT_FALSE(capped.summary.out_of_memory);
  EXPECT_EQ(capped.reserved_peak_bytes, allocated);
  EXPECT_EQ(capped.summary.alloc_retries, 1);
  EXPECT_TRUE(capped.summary.steady);
  EXPECT_EQ(capped.summary.micro_steps, 2);
  card.driver_bytes = allocated - kMiB;
  const TrainingStepReplay short_run = ReplayTrainingSteps(p, keep.schedule, {}, card).value();
  EXPECT_TRUE(short_run.summary.out_of_memory);
  EXPECT_GE(short_run.oom_micro_step, 0);
}

// The planner's accounting: the device peak is the replayed reserved peak
// plus the fixed terms; at a budget between the allocated and the unlimited
// reserved peak the plan fits through the allocator's free-and-retry, and
// the summary says so; below the allocated peak it does not fit.
TEST(ReplayTrainingSteps, AccountPlanMemoryJudgesTheCard) {
  const Profile p = CachedWorkspaceChain();
  const Plan keep = MakeCase(p, {Strategy::kNone, 0}, 0);
  DeviceMemoryOverrides o;
  o.cuda_context_bytes = 500 * kMiB;
  const DeviceMemoryTerms terms = ResolveDeviceMemory("", o).value();
  ASSERT_TRUE(terms.replays_allocator());
  Plan plan = keep;
  ASSERT_TRUE(AccountPlanMemory(p, terms, 0, &plan).ok());
  EXPECT_EQ(plan.memory.reserved_peak_bytes, 286 * kMiB);
  EXPECT_EQ(plan.memory.total_bytes, 786 * kMiB);
  EXPECT_EQ(plan.memory.allocator_rounding_bytes, 10 * kMiB);
  EXPECT_EQ(plan.memory.fragmentation_bytes, 0);
  EXPECT_TRUE(plan.fits);

  ASSERT_TRUE(AccountPlanMemory(p, terms, 780 * kMiB, &plan).ok());
  EXPECT_TRUE(plan.fits);
  EXPECT_TRUE(plan.memory.replay->under_budget_limit);
  EXPECT_EQ(plan.memory.total_bytes, 776 * kMiB);

  ASSERT_TRUE(AccountPlanMemory(p, terms, 775 * kMiB, &plan).ok());
  EXPECT_FALSE(plan.fits);
  EXPECT_TRUE(plan.memory.replay->out_of_memory);
  EXPECT_EQ(plan.memory.total_bytes, 786 * kMiB);  // the unlimited replay's, for the report
}

// With gradient accumulation the parameter gradients live across the
// micro-batches of an update: the replay runs the update's first micro-batch
// and a later one, and is steady once each kind repeats.
TEST(ReplayTrainingSteps, AccumulationReplaysBothKindsOfMicroStep) {
  Profile p = UnitChain(4, 4 * kMiB);
  for (LayerProfile& l : p.layers) l.gradient_bytes = 4 * kMiB;
  p.grad_accumulation = 4;
  const Plan keep = MakeCase(p, {Strategy::kNone, 0}, 0);
  const TrainingStepReplay r = ReplayTrainingSteps(p, keep.schedule, {}).value();
  EXPECT_TRUE(r.summary.steady);
  EXPECT_GE(r.summary.micro_steps, 2);
  EXPECT_GE(r.reserved_peak_bytes, keep.predicted.peak_bytes);
  // A single micro-step is not steady yet.
  const TrainingStepReplay one = ReplayTrainingSteps(p, keep.schedule, {}, {}, 1).value();
  EXPECT_FALSE(one.summary.steady);
  EXPECT_EQ(one.summary.micro_steps, 1);
}

}  // namespace
}  // namespace remat
