// The offload search's floors (strategies/offload_floor.h): under every
// plan of their layer list, and a skip rule that never skips a plan
// BetterPlan would keep.
#include "strategies/offload_floor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "remat/plan/plan.h"
#include "remat/planning/job.h"
#include "remat/schedule/decisions.h"
#include "strategies/solvers.h"
#include "testing/chains.h"

namespace remat::strategies {
namespace {

// Uniform's layer list of a checkpoint every `k` blocks with its first `j`
// movable checkpoints offloaded (j = -1: all), built from its decisions.
Schedule EveryKOffloaded(const Profile& p, int k, int j, int* movable_count,
                         int64_t* segment_floor = nullptr) {
  const std::vector<int> blocks = BlockLayers(p);
  std::vector<char> start(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) start[b] = b % k == 0;
  std::vector<LayerDecision> d = SegmentDecisions(p.num_layers(), blocks, start);
  int moved = 0;
  for (int i = 1; i < p.num_layers(); ++i) {
    if (d[i] == LayerDecision::kCheckpoint && RunsWithoutGrad(d[i - 1])) {
      if (j < 0 || moved < j) d[i] = LayerDecision::kOffload;
      ++moved;
    }
  }
  *movable_count = moved;
  if (segment_floor != nullptr) *segment_floor = SegmentFloorBytes(p, d);
  Result<Schedule> s = BuildSingleLevelSchedule(p, d, {});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : Schedule{};
}

// Chains with host links from free to slow (copies that stall), in line
// and overlapped, created gradients and accumulation, backwards that
// release saved bytes early, and one analytic profile.
std::vector<Profile> Profiles() {
  std::vector<Profile> out;
  const std::vector<HostLink> links = {
      {"fast", 1e3, 1, true}, {"slow", 1e-4, 20, true}, {"in line", 1e-3, 5, false}};
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    for (const HostLink& link : links) {
      Profile r = testing::RandomChain(9, seed);
      r.host_link = link;
      out.push_back(r);
      Profile t = testing::WithNegativeBackwardWorkspaces(testing::TransformerChain(8, seed), seed);
      t.grad_accumulation = 2;
      t.host_link = link;
      out.push_back(t);
    }
  }
  JobOverrides overrides;
  overrides.device = "h100";
  overrides.seq_len = 2048;
  overrides.micro_batch = 2;
  Result<Job> job =
      LoadJob(std::string(REMAT_SOURCE_DIR) + "/examples/hf/llama-3.2-1b.config.json", overrides);
  EXPECT_TRUE(job.ok()) << job.status().message();
  if (job.ok()) {
    for (const HostLink& link : {HostLink{"pcie5", 64, 5, true}, HostLink{"x", 0.5, 5, true}}) {
      Profile p = job->profile;
      p.host_link = link;
      out.push_back(p);
    }
  }
  return out;
}

TEST(OffloadFloor, IsUnderEveryPlanOfItsLayerList) {
  int lists = 0, plans = 0, stalled = 0, tight = 0;
  for (const Profile& p : Profiles()) {
    ASSERT_TRUE(FloorHolds(p)) << p.model;
    const Profile free_link = WithFreeLink(p);
    const int n = static_cast<int>(BlockLayers(p).size());
    for (int k = 1; k <= n; ++k) {
      int movable = 0;
      int64_t least = 0;
      const Schedule all = EveryKOffloaded(p, k, -1, &movable, &least);
      if (movable == 0) continue;
      Result<OffloadFloor> floor = FloorOf(free_link, all);
      ASSERT_TRUE(floor.ok()) << floor.status().message();
      ++lists;
      for (int j = 1; j <= movable; ++j) {
        Result<Plan> plan = MakePlanFromSchedule(p, Strategy::kOffload, "",
                                                 EveryKOffloaded(p, k, j, &movable), 0);
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        const std::string what = p.model + " " + p.host_link.name + ", every " +
                                 std::to_string(k) + ", " + std::to_string(j) + " offloaded";
        EXPECT_GE(plan->memory.total_bytes, floor->total_bytes) << what;
        EXPECT_GE(plan->memory.total_bytes, least) << what;
        tight += plan->memory.total_bytes < least + (least - p.static_bytes()) / 2;
        EXPECT_GE(plan->predicted.step_ms, floor->step_ms) << what;
        ++plans;
        stalled += plan->predicted.transfer_ms > 0;
      }
    }
  }
  EXPECT_GT(lists, 50);
  EXPECT_GT(plans, 150);
  EXPECT_GT(stalled, 20);  // copies that cost time are among them
  EXPECT_GT(tight, 20);    // segment floors within half their saved bytes of the plan
}

// Blocks that pass nothing between them (x = 0 bytes) and keep only what
// they save: every plan's peak is a segment's recompute, and the segment
// floor is the plan's total, no more and no less.
TEST(OffloadFloor, SegmentFloorIsThePeakWhereOnlySegmentsHoldMemory) {
  Profile p = testing::UniformChain(7, 0);
  p.static_memory.parameter_bytes = 1000;
  for (int i = 0; i < 7; ++i) p.layers[i].activation_bytes = 100 + 37 * i;
  p.host_link = HostLink{"test", 1e-3, 0, true};
  ASSERT_TRUE(FloorHolds(p));
  for (int k = 1; k <= 7; ++k) {
    int movable = 0;
    int64_t least = 0;
    const Schedule s = EveryKOffloaded(p, k, -1, &movable, &least);
    Result<Plan> plan = MakePlanFromSchedule(p, Strategy::kOffload, "", s, 0);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->memory.total_bytes, least) << "every " << k;
  }
}

TEST(OffloadFloor, NeedsWorkspacesAndSizesThatAreNotNegative) {
  Profile p = testing::RandomChain(5, 1);
  EXPECT_TRUE(FloorHolds(p));
  p.layers[2].forward_workspace_bytes = -1;
  EXPECT_FALSE(FloorHolds(p));
  p.layers[2].forward_workspace_bytes = 0;
  p.layers[3].forward_nograd_workspace_bytes = 0;
  EXPECT_TRUE(FloorHolds(p));
  p.optimizer_workspace_bytes = -5;
  EXPECT_FALSE(FloorHolds(p));
  p.optimizer_workspace_bytes = 0;
  p.layers[1].activation_bytes = p.layers[1].output_bytes - 1;
  EXPECT_FALSE(FloorHolds(p));
}

// Against BetterPlan itself: no plan at or above a floor the rule skips is
// better than the plan kept, over small values where ties are common.
TEST(OffloadFloor, SkipsOnlyWhatBetterPlanWouldNotKeep) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int skipped = 0, kept_others = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int64_t budget = 1 + pick(10);
    Plan kept;
    kept.memory.total_bytes = 1 + pick(10);
    kept.predicted.step_ms = 1 + pick(4) + (pick(3) == 0 ? 1e-10 : 0);
    kept.fits = pick(4) != 0 && kept.memory.total_bytes <= budget;
    OffloadFloor floor;
    floor.total_bytes = 1 + pick(10);
    floor.step_ms = 1 + pick(4) + (pick(3) == 0 ? 1e-10 : 0);
    if (pick(4) == 0) floor.step_ms = -std::numeric_limits<double>::infinity();  // bytes alone
    if (!CannotBeat(floor, kept, budget)) continue;
    ++skipped;
    for (int64_t m = floor.total_bytes; m <= floor.total_bytes + 3; ++m) {
      const double t0 = std::max(floor.step_ms, 0.5 + pick(5));
      for (double t : {t0, t0 + 1e-10, t0 + 1.0}) {
        for (bool host_fits : {true, false}) {
          Plan c;
          c.memory.total_bytes = m;
          c.predicted.step_ms = t;
          c.fits = host_fits && m <= budget;
          EXPECT_FALSE(BetterPlan(c, kept)) << "budget " << budget << ", kept " << kept.fits
                                            << " " << kept.memory.total_bytes << " "
                                            << kept.predicted.step_ms << ", candidate " << m
                                            << " " << t;
          kept_others += !BetterPlan(c, kept);
        }
      }
    }
  }
  EXPECT_GT(skipped, 2000);
  EXPECT_GT(kept_others, 0);
}

}  // namespace
}  // namespace remat::strategies
