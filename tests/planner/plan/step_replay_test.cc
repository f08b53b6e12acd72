// ReplayTrainingSteps: the caching allocator model over a plan's training
// steps, against reserved peaks derived by hand from PyTorch's allocator
// rules (CUDACachingAllocator.cpp, remat/device/caching_allocator.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

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

// A chain of `n` layers whose sizes are random multiples of 1 MiB (1..40),
// with random workspaces: requests of mixed sizes that split and cache
// segments, so replays at a card's limit free and retry.
Profile MixedChain(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> mib(1, 40);
  Profile p;
  p.model = "mixed" + std::to_string(seed);
  p.source = "test";
  p.static_memory.parameter_bytes = mib(rng) * 5 * kMiB;
  int64_t x = mib(rng) * kMiB;
  for (int i = 0; i < n; ++i) {
    LayerProfile l;
    l.name = "m" + std::to_string(i);
    l.kind = "block";
    l.input_bytes = x;
    l.output_bytes = x = mib(rng) * kMiB;
    l.activation_bytes = l.output_bytes + mib(rng) * kMiB * static_cast<int64_t>(rng() % 3);
    l.forward_ms = 1 + static_cast<double>(rng() % 5);
    l.backward_ms = 2 * l.forward_ms;
    l.forward_workspace_bytes = mib(rng) * kMiB / 3;
    l.backward_workspace_bytes = mib(rng) * kMiB / 2;
    p.layers.push_back(l);
  }
  return p;
}

// AccountPlanMemory's device memory as its contract defines it: the replay
// without the card's limit, and where its reserved peak passes the budget
// (and neither it ran out nor the tensors alone pass), the replay at the
// card's limit if that one does not run out.
DeviceMemoryUse ReplayedWithoutLimitFirst(const Profile& p, const Plan& plan,
                                          const DeviceMemoryTerms& terms, int64_t budget) {
  AllocatorLimit limit;
  if (terms.alloc_conf.per_process_memory_fraction < 1.0) {
    limit.fraction_cap_bytes =
        MemoryFractionCapBytes(terms.alloc_conf.per_process_memory_fraction, budget);
  }
  TrainingStepReplay free_run =
      ReplayTrainingSteps(p, plan.schedule, terms.alloc_conf, limit).value();
  const int64_t allocated = plan.predicted.peak_bytes;
  const int64_t room = budget - terms.fixed_bytes();  // no tensor lists: no margin
  const bool over = free_run.reserved_peak_bytes > room;
  if (over && !free_run.summary.out_of_memory && allocated <= room && room > 0) {
    limit.driver_bytes = room;
    TrainingStepReplay capped =
        ReplayTrainingSteps(p, plan.schedule, terms.alloc_conf, limit).value();
    if (!capped.summary.out_of_memory) {
      capped.summary.under_budget_limit = true;
      return AccountReplayedDeviceMemory(allocated, capped.reserved_peak_bytes, capped.summary,
                                         terms, 0);
    }
  }
  if (over) free_run.summary.out_of_memory = true;
  return AccountReplayedDeviceMemory(allocated, free_run.reserved_peak_bytes, free_run.summary,
                                     terms, 0);
}

// AccountPlanMemory replays at the card's limit first and skips the replay
// without it where the capped one decides (the driver refused nothing: the
// same events ran; or it refused and nothing else limits the allocator):
// over random chains, plans, allocator settings (a memory fraction among
// them) and budgets from below the allocated peak to above the reserved one,
// its device memory equals the contract's, field by field, and each way of
// deciding is taken.
TEST(ReplayTrainingSteps, TheCappedReplayFirstGivesTheContractsDeviceMemory) {
  AllocatorOptions expandable;
  expandable.expandable_segments = true;
  AllocatorOptions split;
  split.max_split_size_bytes = 40 * kMiB;
  AllocatorOptions fraction;
  fraction.per_process_memory_fraction = 0.97;
  const AllocatorOptions confs[] = {AllocatorOptions{}, expandable, split, fraction};
  int no_refusal = 0, refused_fits = 0, refused_oom = 0;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const Profile p = MixedChain(6 + static_cast<int>(seed % 5), seed);
    for (const PlanCase& c : kPlans) {
      const Plan plan = MakeCase(p, c, 0);
      for (const AllocatorOptions& conf : confs) {
        DeviceMemoryOverrides o;
        o.cuda_context_bytes = 300 * kMiB;
        DeviceMemoryTerms terms = ResolveDeviceMemory("", o).value();
        terms.alloc_conf = conf;
        ASSERT_TRUE(terms.replays_allocator());
        const int64_t allocated = plan.predicted.peak_bytes;
        const int64_t reserved =
            ReplayTrainingSteps(p, plan.schedule, conf).value().reserved_peak_bytes;
        // Budgets from below the allocated peak to above the reserved one,
        // in 20 steps (at least 1 MiB).
        const int64_t step = std::max(kMiB, (reserved - allocated + 5 * kMiB) / 20);
        for (int64_t tensors = allocated - 2 * kMiB; tensors <= reserved + 3 * kMiB;
             tensors += step) {
          const int64_t budget = tensors + terms.fixed_bytes();
          Plan accounted = plan;
          ASSERT_TRUE(AccountPlanMemory(p, terms, budget, &accounted).ok());
          const DeviceMemoryUse want = ReplayedWithoutLimitFirst(p, plan, terms, budget);
          const std::string where = "seed " + std::to_string(seed) + ", " + ToString(c.strategy) +
                                    ", budget " + std::to_string(budget);
          const DeviceMemoryUse& got = accounted.memory;
          EXPECT_EQ(got.total_bytes, want.total_bytes) << where;
          EXPECT_EQ(got.reserved_peak_bytes, want.reserved_peak_bytes) << where;
          EXPECT_EQ(got.allocator_rounding_bytes, want.allocator_rounding_bytes) << where;
          ASSERT_TRUE(got.replay.has_value() && want.replay.has_value()) << where;
          EXPECT_EQ(got.replay->micro_steps, want.replay->micro_steps) << where;
          EXPECT_EQ(got.replay->steady, want.replay->steady) << where;
          EXPECT_EQ(got.replay->alloc_retries, want.replay->alloc_retries) << where;
          EXPECT_EQ(got.replay->device_allocs, want.replay->device_allocs) << where;
          EXPECT_EQ(got.replay->under_budget_limit, want.replay->under_budget_limit) << where;
          EXPECT_EQ(got.replay->out_of_memory, want.replay->out_of_memory) << where;
          // Which way the capped replay decides, where it runs.
          if (tensors <= 0 || allocated > tensors) continue;
          AllocatorLimit card;
          card.driver_bytes = tensors;
          if (conf.per_process_memory_fraction < 1.0) {
            card.fraction_cap_bytes =
                MemoryFractionCapBytes(conf.per_process_memory_fraction, budget);
          }
          const TrainingStepReplay capped =
              ReplayTrainingSteps(p, plan.schedule, conf, card).value();
          if (capped.driver_refusals == 0) {
            ++no_refusal;
          } else if (capped.summary.out_of_memory) {
            ++refused_oom;
          } else {
            ++refused_fits;
          }
        }
      }
    }
  }
  EXPECT_GT(no_refusal, 0);
  EXPECT_GT(refused_fits, 0);
  EXPECT_GT(refused_oom, 0);
}

// The limit a replay ran under is read only where the driver is asked for a
// segment: a replay that the driver refused nothing is the replay without
// the limit, and one it refused passes the limit without it.
TEST(ReplayTrainingSteps, ARefusalIsTheOnlyTraceOfTheDriversLimit) {
  int refused = 0, not_refused = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const Profile p = MixedChain(8, seed);
    for (const PlanCase& c : kPlans) {
      const Plan plan = MakeCase(p, c, 0);
      const TrainingStepReplay free_run = ReplayTrainingSteps(p, plan.schedule, {}).value();
      EXPECT_EQ(free_run.driver_refusals, 0);
      for (int64_t cut = -2; cut <= 2; ++cut) {
        AllocatorLimit card;
        card.driver_bytes = free_run.reserved_peak_bytes + cut * kMiB;
        const TrainingStepReplay capped = ReplayTrainingSteps(p, plan.schedule, {}, card).value();
        if (capped.driver_refusals == 0) {
          ++not_refused;
          EXPECT_EQ(capped.reserved_peak_bytes, free_run.reserved_peak_bytes);
          EXPECT_EQ(capped.allocated_peak_bytes, free_run.allocated_peak_bytes);
          EXPECT_EQ(capped.summary.micro_steps, free_run.summary.micro_steps);
          EXPECT_EQ(capped.summary.device_allocs, free_run.summary.device_allocs);
          EXPECT_EQ(capped.summary.alloc_retries, free_run.summary.alloc_retries);
          EXPECT_EQ(capped.summary.out_of_memory, free_run.summary.out_of_memory);
        } else {
          ++refused;
          EXPECT_GT(free_run.reserved_peak_bytes, card.driver_bytes);
        }
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(not_refused, 0);
}

}  // namespace
}  // namespace remat
