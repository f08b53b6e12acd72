// PlanMemo: a schedule simulated or replayed again on the profile a memo is
// open for is answered from the memo, with the result computed without it;
// another profile object (a changed copy) is never answered from it; a
// memo that joins shares the one open for the profile.
#include "remat/plan/plan_memo.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "remat/device/device_memory.h"
#include "remat/schedule/decisions.h"
#include "testing/chains.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

Profile Chain() {
  Profile p = testing::UniformChain(12, 8 * kMiB, 24 * kMiB);
  p.static_memory.parameter_bytes = 100 * kMiB;
  return p;
}

Schedule EveryThird(const Profile& p) {
  std::vector<LayerDecision> d(p.num_layers(), LayerDecision::kKeep);
  for (int i = 0; i < p.num_layers(); ++i) {
    d[i] = i % 3 == 0 ? LayerDecision::kCheckpoint : LayerDecision::kRecompute;
  }
  return BuildSingleLevelSchedule(p, d, {}).value();
}

Plan Planned(const Profile& p, const Schedule& s) {
  return MakePlanFromSchedule(p, Strategy::kUniform, "every 3", s, 0).value();
}

void ExpectSamePrediction(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.predicted.peak_bytes, b.predicted.peak_bytes);
  EXPECT_EQ(a.predicted.reserved_peak_bytes, b.predicted.reserved_peak_bytes);
  EXPECT_EQ(a.predicted.step_ms, b.predicted.step_ms);
  EXPECT_EQ(a.predicted.recompute_ms, b.predicted.recompute_ms);
  EXPECT_EQ(a.predicted.peak_op, b.predicted.peak_op);
  ASSERT_EQ(a.predicted.timeline.size(), b.predicted.timeline.size());
  for (size_t i = 0; i < a.predicted.timeline.size(); ++i) {
    EXPECT_EQ(a.predicted.timeline[i].peak, b.predicted.timeline[i].peak);
    EXPECT_EQ(a.predicted.timeline[i].end_ms, b.predicted.timeline[i].end_ms);
  }
}

TEST(PlanMemo, ReusesASimulationOfTheSameSchedule) {
  const Profile p = Chain();
  const Schedule s = EveryThird(p);
  const Plan alone = Planned(p, s);
  PlanMemo memo(p);
  const Plan first = Planned(p, s);
  const Plan again = Planned(p, s);
  ExpectSamePrediction(alone, first);
  ExpectSamePrediction(alone, again);
  EXPECT_EQ(memo.stats().simulations_run, 1);
  EXPECT_EQ(memo.stats().simulations_reused, 1);
}

// The memo keeps its own copy of a schedule: the caller's, changed or gone
// after the call, neither answers for it nor matches another schedule.
TEST(PlanMemo, KeepsItsOwnCopyOfTheSchedule) {
  const Profile p = Chain();
  const Schedule s = EveryThird(p);
  const Plan alone = Planned(p, s);
  PlanMemo memo(p);
  {
    Schedule caller = s;
    ASSERT_TRUE(plan_memo::Simulated(p, caller, SimulationDetail::kFull).ok());
    caller.ops.resize(caller.ops.size() / 2);  // the caller's copy changed after the call
  }
  const Schedule other = BuildSingleLevelSchedule(
      p, std::vector<LayerDecision>(p.num_layers(), LayerDecision::kKeep), {}).value();
  ASSERT_TRUE(plan_memo::Simulated(p, other, SimulationDetail::kFull).ok());
  EXPECT_EQ(memo.stats().simulations_run, 2);
  EXPECT_EQ(memo.stats().simulations_reused, 0);
  ExpectSamePrediction(alone, Planned(p, s));
  EXPECT_EQ(memo.stats().simulations_reused, 1);
}

// Schedules that differ (the checkpoint spacing, so a few ops' kinds,
// layers and tensors) are each simulated, and each answer is its own.
TEST(PlanMemo, EachScheduleHasItsOwnEntry) {
  const Profile p = Chain();
  std::vector<Schedule> schedules;
  for (int every = 1; every <= p.num_layers(); ++every) {
    std::vector<LayerDecision> d(p.num_layers(), LayerDecision::kRecompute);
    for (int i = 0; i < p.num_layers(); i += every) d[i] = LayerDecision::kCheckpoint;
    schedules.push_back(BuildSingleLevelSchedule(p, d, {}).value());
  }
  std::vector<SimulationResult> alone;
  for (const Schedule& s : schedules) alone.push_back(Simulate(p, s).value());
  PlanMemo memo(p);
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < schedules.size(); ++k) {
      const SimulationResult r =
          plan_memo::Simulated(p, schedules[k], SimulationDetail::kTotals).value();
      EXPECT_EQ(r.peak_bytes, alone[k].peak_bytes) << k;
      EXPECT_EQ(r.peak_op, alone[k].peak_op) << k;
      EXPECT_EQ(r.step_ms, alone[k].step_ms) << k;
      EXPECT_EQ(r.recompute_ops, alone[k].recompute_ops) << k;
    }
  }
  EXPECT_EQ(memo.stats().simulations_run, static_cast<int64_t>(schedules.size()));
  EXPECT_EQ(memo.stats().simulations_reused, static_cast<int64_t>(schedules.size()));
}

TEST(PlanMemo, AJoiningMemoSharesTheOneOpenAndANewOneDoesNot) {
  const Profile p = Chain();
  const Schedule s = EveryThird(p);
  const Plan alone = Planned(p, s);
  PlanMemo outer(p);
  const Plan first = Planned(p, s);
  {
    PlanMemo joined(p, PlanMemo::Open::kJoin);
    ExpectSamePrediction(alone, Planned(p, s));  // from the outer memo's result
    EXPECT_EQ(joined.stats().simulations_run, 1);
    EXPECT_EQ(joined.stats().simulations_reused, 1);
    {
      PlanMemo fresh(p);  // nests: simulates again
      ExpectSamePrediction(alone, Planned(p, s));
      EXPECT_EQ(fresh.stats().simulations_run, 1);
      EXPECT_EQ(fresh.stats().simulations_reused, 0);
    }
  }
  // Open still after the joined one closed, with what it added.
  ExpectSamePrediction(first, Planned(p, s));
  EXPECT_EQ(outer.stats().simulations_run, 1);
  EXPECT_EQ(outer.stats().simulations_reused, 2);
  // With no memo open, a joining one is a new one.
  const Profile q = Chain();
  PlanMemo only(q, PlanMemo::Open::kJoin);
  Planned(q, s);
  EXPECT_EQ(only.stats().simulations_run, 1);
  EXPECT_EQ(outer.stats().simulations_run, 1);
}

TEST(PlanMemo, KeepsAValueForTheProfileWhileOpen) {
  const Profile p = Chain();
  Profile other = p;
  plan_memo::Keep(p, "n", std::make_shared<const int>(1));  // no memo open: not kept
  EXPECT_EQ(plan_memo::Kept(p, "n"), nullptr);
  {
    PlanMemo memo(p);
    plan_memo::Keep(p, "n", std::make_shared<const int>(2));
    plan_memo::Keep(p, "n", std::make_shared<const int>(3));  // the first value stays
    const std::shared_ptr<const void> kept = plan_memo::Kept(p, "n");
    ASSERT_NE(kept, nullptr);
    EXPECT_EQ(*std::static_pointer_cast<const int>(kept), 2);
    EXPECT_EQ(plan_memo::Kept(p, "other name"), nullptr);
    EXPECT_EQ(plan_memo::Kept(other, "n"), nullptr);
  }
  EXPECT_EQ(plan_memo::Kept(p, "n"), nullptr);
}

TEST(PlanMemo, AnotherProfileObjectIsSimulatedAfresh) {
  const Profile p = Chain();
  Profile heavier = p;
  heavier.static_memory.parameter_bytes += 50 * kMiB;
  const Schedule s = EveryThird(p);
  PlanMemo memo(p);
  const Plan light = Planned(p, s);
  const Plan heavy = Planned(heavier, s);
  EXPECT_EQ(heavy.predicted.peak_bytes, light.predicted.peak_bytes + 50 * kMiB);
  EXPECT_EQ(memo.stats().simulations_run, 1);
  EXPECT_EQ(memo.stats().simulations_reused, 0);
}

TEST(PlanMemo, ReusesAReplayWithTheSameOptionsAndLimit) {
  const Profile p = Chain();
  const Schedule s = EveryThird(p);
  DeviceMemoryOverrides o;
  o.cuda_context_bytes = 500 * kMiB;
  const DeviceMemoryTerms terms = ResolveDeviceMemory("", o).value();
  ASSERT_TRUE(terms.replays_allocator());
  Plan alone = Planned(p, s);
  ASSERT_TRUE(AccountPlanMemory(p, terms, 0, &alone).ok());
  PlanMemo memo(p);
  Plan first = Planned(p, s);
  ASSERT_TRUE(AccountPlanMemory(p, terms, 0, &first).ok());
  Plan again = Planned(p, s);
  ASSERT_TRUE(AccountPlanMemory(p, terms, 0, &again).ok());
  EXPECT_EQ(first.memory.total_bytes, alone.memory.total_bytes);
  EXPECT_EQ(again.memory.total_bytes, alone.memory.total_bytes);
  EXPECT_EQ(again.memory.reserved_peak_bytes, alone.memory.reserved_peak_bytes);
  EXPECT_EQ(memo.stats().replays_run, 1);
  EXPECT_EQ(memo.stats().replays_reused, 1);
  // Other allocator options are replayed afresh.
  DeviceMemoryTerms expandable = terms;
  expandable.alloc_conf.expandable_segments = true;
  Plan other = Planned(p, s);
  ASSERT_TRUE(AccountPlanMemory(p, expandable, 0, &other).ok());
  EXPECT_EQ(memo.stats().replays_run, 2);
}

TEST(PlanMemo, TheInnermostMemoOfAProfileAnswers) {
  const Profile p = Chain();
  const Schedule s = EveryThird(p);
  PlanMemo outer(p);
  {
    PlanMemo inner(p);
    Planned(p, s);
    Planned(p, s);
    EXPECT_EQ(inner.stats().simulations_run, 1);
    EXPECT_EQ(inner.stats().simulations_reused, 1);
  }
  EXPECT_EQ(outer.stats().simulations_run, 0);
  Planned(p, s);
  EXPECT_EQ(outer.stats().simulations_run, 1);
}

}  // namespace
}  // namespace remat
