// The per-layer decision "checkpoint, offloaded" (LayerDecision::kOffload)
// and the offload strategy built on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "remat/plan/plan.h"
#include "remat/plan/plan_memo.h"
#include "remat/strategies/strategies.h"
#include "strategies/solvers.h"
#include "testing/chains.h"

namespace remat {
namespace {

// An embedding, six equal blocks and a head: x = 100 bytes, 900 more kept.
Profile Chain(bool overlapped) {
  Profile p;
  p.model = "chain";
  p.static_memory.parameter_bytes = 1000;
  for (int i = 0; i < 8; ++i) {
    LayerProfile l;
    l.name = i == 0 ? "embedding" : i == 7 ? "head" : "block" + std::to_string(i - 1);
    l.kind = i == 0 || i == 7 ? l.name : "block";
    l.input_bytes = 100;
    l.output_bytes = 100;
    l.activation_bytes = 1000;
    l.forward_ms = 1;
    l.backward_ms = 2;
    p.layers.push_back(l);
  }
  p.host_link = HostLink{"test", 1e-3, 0, overlapped};  // 0.1 ms per 100 bytes
  return p;
}

// Every candidate of the offload search, in its order: uniform's layer list
// of a checkpoint every k blocks (k = 1, 2, ...) with its first j movable
// checkpoints (as many as the host budget holds) offloaded (j = 1, 2, ...),
// each built from its decisions and simulated in full at `budget`.
std::vector<Plan> EveryCandidate(const Profile& p, int64_t budget) {
  std::vector<Plan> all;
  const std::vector<int> blocks = BlockLayers(p);
  for (int k = 1; k <= static_cast<int>(blocks.size()); ++k) {
    std::vector<char> start(blocks.size());
    for (size_t b = 0; b < blocks.size(); ++b) start[b] = b % k == 0;
    const std::vector<LayerDecision> d =
        strategies::SegmentDecisions(p.num_layers(), blocks, start);
    std::vector<int> movable;
    int64_t host = 0;
    for (int i = 1; i < p.num_layers(); ++i) {
      if (d[i] != LayerDecision::kCheckpoint || !RunsWithoutGrad(d[i - 1])) continue;
      host += p.layers[i - 1].output_bytes;
      if (p.host_link.budget_bytes > 0 && host > p.host_link.budget_bytes) break;
      movable.push_back(i);
    }
    for (size_t j = 1; j <= movable.size(); ++j) {
      std::vector<LayerDecision> dj = d;
      for (size_t m = 0; m < j; ++m) dj[movable[m]] = LayerDecision::kOffload;
      Result<Schedule> s = BuildSingleLevelSchedule(p, dj, {});
      EXPECT_TRUE(s.ok()) << s.status().message();
      if (!s.ok()) return {};
      Result<Plan> plan = MakePlanFromSchedule(
          p, Strategy::kOffload,
          "every " + std::to_string(k) + ", " + std::to_string(j) + " offloaded", *s, budget);
      EXPECT_TRUE(plan.ok()) << plan.status().message();
      if (!plan.ok()) return {};
      all.push_back(*plan);
    }
  }
  return all;
}

TEST(OffloadDecision, BuildsOffloadsAndReadsThemBack) {
  const Profile p = Chain(true);
  std::vector<LayerDecision> d(8, LayerDecision::kCheckpoint);
  d[0] = LayerDecision::kKeep;
  d[7] = LayerDecision::kKeep;
  d[3] = d[5] = LayerDecision::kOffload;
  Result<Schedule> s = BuildSingleLevelSchedule(p, d, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  const auto count = [&](OpKind k) {
    return std::count_if(s->ops.begin(), s->ops.end(), [&](const Op& op) { return op.kind == k; });
  };
  EXPECT_EQ(count(OpKind::kOffload), 2);
  EXPECT_EQ(count(OpKind::kPrefetch), 2);
  std::vector<LayerDecision> back;
  std::vector<int> options;
  SummarizeDecisions(*s, &back, &options);
  EXPECT_EQ(back, d);
  // x1's writer (the embedding) runs with grad: x1 is no checkpoint.
  d[1] = LayerDecision::kOffload;
  Result<Schedule> bad = BuildSingleLevelSchedule(p, d, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer 1 ('block0') is marked offload"), std::string::npos)
      << bad.status().message();
  d[1] = LayerDecision::kCheckpoint;
  d[0] = LayerDecision::kOffload;
  EXPECT_FALSE(BuildSingleLevelSchedule(p, d, {}).ok());
}

TEST(OffloadStrategy, LowersTheFloorBelowCheckpointingEveryBlock) {
  const Profile p = Chain(true);
  PlanOptions o;
  o.strategy = Strategy::kUniform;
  o.every = 1;
  const Plan every = MakePlan(p, o)->chosen;
  o.strategy = Strategy::kOffload;
  o.every = 0;
  const Plan off = MakePlan(p, o)->chosen;
  // Blocks 1..5's checkpoints move (block0's input is the embedding's
  // output, written with grad).
  EXPECT_EQ(std::count(off.decisions.begin(), off.decisions.end(), LayerDecision::kOffload), 5);
  EXPECT_EQ(off.predicted.offloaded_bytes, 500);
  EXPECT_LT(off.predicted.peak_bytes, every.predicted.peak_bytes);
  // Fast copies over an overlapped link hide behind the backwards.
  EXPECT_DOUBLE_EQ(off.predicted.transfer_ms, 0);
  EXPECT_DOUBLE_EQ(off.predicted.step_ms, every.predicted.step_ms);
  // In line they cost their copy time.
  const Profile in_line = Chain(false);
  const Plan slow = MakePlan(in_line, o)->chosen;
  EXPECT_NEAR(slow.predicted.transfer_ms, 10 * 0.1, 1e-9);
}

TEST(OffloadStrategy, WithABudgetIsTheFastestThatFitsAndHonoursTheHostBudget) {
  Profile p = Chain(true);
  PlanOptions o;
  o.strategy = Strategy::kOffload;
  const Plan floor = MakePlan(p, o)->chosen;
  o.budget_bytes = floor.predicted.peak_bytes;
  const Plan at_floor = MakePlan(p, o)->chosen;
  EXPECT_TRUE(at_floor.fits);
  EXPECT_LE(at_floor.predicted.step_ms, floor.predicted.step_ms);
  // Room for two checkpoints on the host: no plan holds more there.
  p.host_link.budget_bytes = 200;
  o.budget_bytes = 1'000'000;
  const Plan capped = MakePlan(p, o)->chosen;
  EXPECT_TRUE(capped.fits);
  EXPECT_LE(capped.predicted.host_peak_bytes, 200);
  o.budget_bytes = 0;
  const Plan capped_floor = MakePlan(p, o)->chosen;
  EXPECT_EQ(capped_floor.predicted.host_peak_bytes, 200);
  EXPECT_GT(capped_floor.predicted.peak_bytes, floor.predicted.peak_bytes);
}

// The strategy's plan at a budget is the best (BetterPlan, first of equals)
// of every (every k, first j movable checkpoints offloaded) candidate, each
// built from its decisions and simulated in full: the search's own way of
// building and simulating them changes no plan. Blocks of different sizes,
// so that the candidates' peaks and copies differ.
TEST(OffloadStrategy, PlanIsTheBestOfEveryCandidateSimulatedInFull) {
  Profile p = Chain(true);
  for (int i = 1; i < 7; ++i) {
    p.layers[i].output_bytes = 60 + 25 * i;
    p.layers[i + 1].input_bytes = p.layers[i].output_bytes;
    p.layers[i].activation_bytes = 700 + 90 * i;
  }
  auto reference = [&](int64_t budget) {
    Plan best;
    bool have = false;
    for (const Plan& plan : EveryCandidate(p, budget)) {
      if (!have || BetterPlan(plan, best)) best = plan, have = true;
    }
    return best;
  };
  PlanOptions o;
  o.strategy = Strategy::kOffload;
  int fitting = 0;
  for (int64_t budget = 1500; budget <= 9000; budget += 250) {
    o.budget_bytes = budget;
    const Plan want = reference(budget);
    if (!want.fits) continue;  // (then the fit search weighs other plans)
    ++fitting;
    Result<PlanSet> got = MakePlan(p, o);
    ASSERT_TRUE(got.ok()) << got.status().message();
    const Plan& plan = got->chosen;
    EXPECT_EQ(plan.parameter, want.parameter) << budget;
    EXPECT_EQ(plan.decisions, want.decisions) << budget;
    EXPECT_EQ(plan.schedule.ops.size(), want.schedule.ops.size()) << budget;
    EXPECT_EQ(plan.predicted.peak_bytes, want.predicted.peak_bytes) << budget;
    EXPECT_EQ(plan.predicted.host_peak_bytes, want.predicted.host_peak_bytes) << budget;
    EXPECT_DOUBLE_EQ(plan.predicted.step_ms, want.predicted.step_ms) << budget;
    EXPECT_EQ(plan.predicted.timeline.size(), want.predicted.timeline.size()) << budget;
    EXPECT_EQ(plan.predicted.layer_bytes_at_peak, want.predicted.layer_bytes_at_peak) << budget;
  }
  EXPECT_GT(fitting, 5);
  // The solver at every budget, one memo open on the profile (as in one fit
  // search: the candidates made at the first budget are chosen among at
  // the others): the same plan as the reference, fitting or not.
  const StrategySolver* solver = FindSolver(Strategy::kOffload);
  ASSERT_NE(solver, nullptr);
  PlanMemo memo(p);
  for (int64_t budget = 9000; budget >= 1500; budget -= 250) {
    o.budget_bytes = budget;
    const Plan want = reference(budget);
    Result<Plan> plan = solver->Solve(p, o);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->fits, want.fits) << budget;
    EXPECT_EQ(plan->budget_bytes, want.budget_bytes) << budget;
    EXPECT_EQ(plan->parameter, want.parameter) << budget;
    EXPECT_EQ(plan->decisions, want.decisions) << budget;
    EXPECT_EQ(plan->schedule.ops.size(), want.schedule.ops.size()) << budget;
    EXPECT_EQ(plan->memory.total_bytes, want.memory.total_bytes) << budget;
    EXPECT_EQ(plan->predicted.peak_bytes, want.predicted.peak_bytes) << budget;
    EXPECT_EQ(plan->predicted.host_peak_bytes, want.predicted.host_peak_bytes) << budget;
    EXPECT_DOUBLE_EQ(plan->predicted.step_ms, want.predicted.step_ms) << budget;
    EXPECT_EQ(plan->predicted.layer_bytes_at_peak, want.predicted.layer_bytes_at_peak) << budget;
  }
}

// The solver's plan at a budget is the first best (BetterPlan) of every
// candidate in the search's order (k, then j), each simulated: the layer
// lists it skips by their floors (offload_floor.h) hold none that would
// change it. Random and transformer chains, fast, stalling and in-line
// links, with and without a host budget, at every budget where a
// candidate starts or stops fitting, with the memo shared across budgets
// (as in a fit search) and without one.
TEST(OffloadStrategy, SkippingLayerListsChangesNoPlan) {
  const StrategySolver* solver = FindSolver(Strategy::kOffload);
  ASSERT_NE(solver, nullptr);
  std::vector<Profile> profiles;
  const std::vector<HostLink> links = {
      {"fast", 1e3, 1, true}, {"slow", 1e-4, 20, true}, {"in line", 1e-3, 5, false}};
  for (uint32_t seed = 1; seed <= 2; ++seed) {
    for (const HostLink& link : links) {
      for (int64_t host_budget : {int64_t{0}, int64_t{150}}) {
        Profile r = testing::RandomChain(10, seed);
        r.host_link = link;
        r.host_link.budget_bytes = host_budget;
        profiles.push_back(r);
        Profile t = testing::TransformerChain(9, seed);
        t.host_link = link;
        t.host_link.budget_bytes = host_budget * 20;
        profiles.push_back(t);
      }
    }
  }
  int compared = 0;
  for (const Profile& p : profiles) {
    const std::string name = p.model + " " + p.host_link.name + " host " +
                             std::to_string(p.host_link.budget_bytes);
    // Every candidate, in order, made without a budget.
    const std::vector<Plan> all = EveryCandidate(p, 0);
    ASSERT_FALSE(all.empty()) << name;
    std::vector<int64_t> budgets;
    for (const Plan& c : all) {
      budgets.push_back(c.memory.total_bytes);
      budgets.push_back(c.memory.total_bytes - 1);
    }
    std::sort(budgets.begin(), budgets.end());
    budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
    auto want_at = [&](int64_t budget) {
      const Plan* best = nullptr;
      Plan kept;
      for (const Plan& c : all) {
        Plan at = c;
        at.fits = c.fits && c.memory.total_bytes <= budget;
        if (best == nullptr || BetterPlan(at, kept)) best = &c, kept = at;
      }
      kept.budget_bytes = budget;
      return kept;
    };
    auto expect_same = [&](int64_t budget, const std::string& how) {
      PlanOptions o;
      o.strategy = Strategy::kOffload;
      o.budget_bytes = budget;
      const Plan want = want_at(budget);
      Result<Plan> got = solver->Solve(p, o);
      ASSERT_TRUE(got.ok()) << got.status().message();
      const std::string what = name + ", budget " + std::to_string(budget) + how;
      EXPECT_EQ(got->parameter, want.parameter) << what;
      EXPECT_EQ(got->fits, want.fits) << what;
      EXPECT_EQ(got->memory.total_bytes, want.memory.total_bytes) << what;
      EXPECT_EQ(got->predicted.step_ms, want.predicted.step_ms) << what;
      ++compared;
    };
    {
      // One memo across the budgets, largest first and then the rest
      // shuffled: the layer lists made for one budget serve the others.
      PlanMemo memo(p);
      std::vector<int64_t> order(budgets.rbegin(), budgets.rend());
      std::shuffle(order.begin() + 1, order.end(), std::mt19937(11));
      for (int64_t budget : order) expect_same(budget, ", one memo");
    }
    for (size_t i = 0; i < budgets.size(); i += 3) expect_same(budgets[i], ", no memo");
  }
  EXPECT_GT(compared, 500);
}

TEST(OffloadStrategy, AutoWeighsItOnlyWithALink) {
  Profile p = Chain(true);
  EXPECT_TRUE(AppliesTo(Strategy::kOffload, p));
  PlanOptions o;
  o.budget_bytes = 1'000'000;
  auto has_offload = [](const PlanSet& s) {
    return std::any_of(s.candidates.begin(), s.candidates.end(),
                       [](const Plan& c) { return c.strategy == Strategy::kOffload; });
  };
  EXPECT_TRUE(has_offload(*MakePlan(p, o)));
  p.host_link = HostLink{};
  EXPECT_FALSE(AppliesTo(Strategy::kOffload, p));
  EXPECT_FALSE(has_offload(*MakePlan(p, o)));
  o.strategy = Strategy::kOffload;
  EXPECT_FALSE(MakePlan(p, o).ok());
}

}  // namespace
}  // namespace remat
