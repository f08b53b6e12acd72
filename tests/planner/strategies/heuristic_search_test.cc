// The heuristic families and the search the optimal strategies run over
// them: the step formula it prunes by is the simulated step, the peak bound
// is below the simulated peak, the pruned search returns what each
// strategy's exhaustive search does, and the search over kept candidates
// returns what simulating every candidate at the budget does.
#include "strategies/heuristic_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <utility>

#include "remat/plan/plan_memo.h"
#include "remat/planning/job.h"
#include "remat/strategies/strategies.h"
#include "strategies/offload_floor.h"
#include "testing/chains.h"
#include "testing/dp_cases.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

using strategies::BestHeuristicPlan;
using strategies::EvaluateDecisions;
using strategies::FamilySearchLimits;
using strategies::HeuristicCandidate;
using strategies::HeuristicFamily;
using strategies::KeepBetter;
using strategies::SearchFamily;
using strategies::SingleLevelPeakLowerBound;
using strategies::SingleLevelStepMs;

using testing::BudgetAt;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Random chains (half with a selective option per layer), transformer
// chains and a GPT chain with measured-like times.
std::vector<Profile> Chains() {
  std::vector<Profile> out;
  for (uint32_t seed = 1; seed <= 12; ++seed) out.push_back(testing::RandomChain(2 + 3 * seed, seed));
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    out.push_back(testing::JitterTimes(testing::TransformerChain(10 + 5 * seed, seed), 0.1, seed));
  }
  out.push_back(testing::JitterTimes(testing::GptChain(12, 2), 0.1, 7));
  return out;
}

// Llama 3.1 8B's per-rank profiles at 2,048 tokens a sequence and 4
// micro-batches a step: FSDP2 on 8 GPUs, tensor and sequence parallel by
// 2 under FSDP2 on 16, and the first of 2 pipeline stages.
std::vector<Profile> RealLayouts() {
  Parallelism fsdp;
  fsdp.data = DataParallel::kFsdp2;
  fsdp.gpus = 8;
  Parallelism tp = fsdp;
  tp.gpus = 16;
  tp.tensor = 2;
  tp.sequence = true;
  Parallelism pp = fsdp;
  pp.pipeline = 2;
  std::vector<Profile> out;
  for (const auto& [name, layout] : {std::pair{"fsdp 8", fsdp}, {"tp 2 sp", tp}, {"pp 2", pp}}) {
    JobOverrides o;
    o.parallel = layout;
    o.grad_accumulation = 4;
    o.micro_batch = 1;
    o.seq_len = 2048;
    o.precision = Precision::kMixedBf16;
    Result<Job> job =
        LoadJob(std::string(REMAT_SOURCE_DIR) + "/examples/hf/llama-3.1-8b.config.json", o);
    EXPECT_TRUE(job.ok()) << job.status().message();
    if (!job.ok()) continue;
    out.push_back(job->profile);
    out.back().model = std::string("llama-3.1-8b ") + name;
  }
  return out;
}

// Budgets across the chain's range, from below the lowest peak to above
// keeping everything.
std::vector<int64_t> Budgets(const Profile& p) {
  std::vector<int64_t> out;
  for (int percent : {0, 5, 15, 30, 40, 55, 70, 85, 100}) {
    out.push_back(p.static_bytes() + BudgetAt(p, percent));
  }
  out.push_back(p.static_bytes() + BudgetAt(p, 0) - 1);
  return out;
}

// The unpruned reference for the heuristic search: each heuristic
// strategy's own plan (every parameter simulated), the fastest that fits.
std::optional<Plan> Exhaustive(const Profile& p, int64_t budget) {
  std::optional<Plan> best;
  for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
    PlanOptions o;
    o.strategy = s;
    o.budget_bytes = budget;
    Result<Plan> plan = FindSolver(s)->Solve(p, o);
    if (!plan.ok() || !plan->fits) continue;
    if (!best || plan->predicted.step_ms < best->predicted.step_ms) best = *std::move(plan);
  }
  return best;
}

void ExpectSamePlan(const Plan& a, const Plan& b, const std::string& where) {
  EXPECT_EQ(a.strategy, b.strategy) << where;
  EXPECT_EQ(a.parameter, b.parameter) << where;
  EXPECT_EQ(a.predicted.step_ms, b.predicted.step_ms) << where;
  EXPECT_EQ(a.predicted.peak_bytes, b.predicted.peak_bytes) << where;
  EXPECT_EQ(a.decisions, b.decisions) << where;
}

TEST(HeuristicSearch, StepIsTheSimulatedOneAndPeakBoundIsBelowThePeak) {
  int candidates = 0;
  for (const Profile& p : Chains()) {
    for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
      const HeuristicFamily family(p, s);
      for (int k = family.first_parameter(); k <= family.last_parameter(); ++k) {
        const HeuristicCandidate c = family.Candidate(k);
        Result<Plan> plan = EvaluateDecisions(p, s, c.parameter, c.decisions, c.selective_option, 0);
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        const double simulated = plan->predicted.step_ms;
        EXPECT_NEAR(SingleLevelStepMs(p, c.decisions, c.selective_option), simulated,
                    1e-12 * simulated)
            << p.model << " " << c.parameter;
        EXPECT_LE(SingleLevelPeakLowerBound(p, c.decisions, c.selective_option),
                  plan->predicted.peak_bytes)
            << p.model << " " << c.parameter;
        ++candidates;
      }
    }
  }
  EXPECT_GT(candidates, 300);
}

// The floors the search leaves candidates out by (with a budget): each
// candidate's plan without a budget (what the search compares) is at least
// SingleLevelStepMs less its rounding slack (1e-7, SingleLevelStepMs being
// within 1e-12) and, where FloorHolds, at least its peak lower bound and
// its SegmentFloorBytes in device total.
TEST(HeuristicSearch, EveryCandidateIsAtOrAboveItsFloors) {
  int candidates = 0, held = 0;
  std::vector<Profile> profiles = Chains();
  for (Profile& p : RealLayouts()) profiles.push_back(std::move(p));
  for (const Profile& p : profiles) {
    const bool holds = strategies::FloorHolds(p);
    held += holds;
    for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
      const HeuristicFamily family(p, s);
      for (int k = family.first_parameter(); k <= family.last_parameter(); ++k) {
        const HeuristicCandidate c = family.Candidate(k);
        Result<Plan> plan = EvaluateDecisions(p, s, c.parameter, c.decisions, c.selective_option,
                                              0, SimulationDetail::kTotals);
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        const std::string where = p.model + " " + c.parameter;
        EXPECT_LE(SingleLevelStepMs(p, c.decisions, c.selective_option) * (1 - 1e-7),
                  plan->predicted.step_ms)
            << where;
        if (holds) {
          EXPECT_LE(SingleLevelPeakLowerBound(p, c.decisions, c.selective_option),
                    plan->memory.total_bytes)
              << where;
          EXPECT_LE(strategies::SegmentFloorBytes(p, c.decisions), plan->memory.total_bytes)
              << where;
        }
        ++candidates;
      }
    }
  }
  EXPECT_GT(candidates, 400);
  EXPECT_GE(held, 3);
}

TEST(HeuristicSearch, UnboundedIsEachStrategysExhaustiveSearch) {
  int fitting = 0;
  for (const Profile& p : Chains()) {
    for (int64_t budget : Budgets(p)) {
      PlanOptions o;
      o.budget_bytes = budget;
      const std::optional<Plan> searched = BestHeuristicPlan(p, o, kInf);
      const std::optional<Plan> exhaustive = Exhaustive(p, budget);
      const std::string where = p.model + " at " + std::to_string(budget);
      ASSERT_EQ(searched.has_value(), exhaustive.has_value()) << where;
      if (!searched) continue;
      ExpectSamePlan(*searched, *exhaustive, where);
      ++fitting;
    }
  }
  EXPECT_GT(fitting, 100);
}

// With a bound (the DP plan's step time in optimal-single), the result is
// the exhaustive one whenever that is faster than the bound, and never
// faster than the bound otherwise: the strategy's choice is the same.
TEST(HeuristicSearch, BoundedChoosesAsTheExhaustiveSearch) {
  int faster = 0, pruned_away = 0;
  for (const Profile& p : Chains()) {
    for (int64_t budget : Budgets(p)) {
      PlanOptions o;
      o.budget_bytes = budget;
      const std::optional<Plan> exhaustive = Exhaustive(p, budget);
      if (!exhaustive) {
        EXPECT_FALSE(BestHeuristicPlan(p, o, kInf).has_value());
        continue;
      }
      const double step = exhaustive->predicted.step_ms;
      for (double bound : {step * 0.5, step * 0.999, step, step * (1 + 1e-12), step * 1.001,
                           step * 1.3}) {
        const std::optional<Plan> searched = BestHeuristicPlan(p, o, bound);
        const std::string where = p.model + " at " + std::to_string(budget) + " below " +
                                  std::to_string(bound);
        if (step < bound) {
          ASSERT_TRUE(searched.has_value()) << where;
          ExpectSamePlan(*searched, *exhaustive, where);
          ++faster;
        } else if (searched) {
          EXPECT_GE(searched->predicted.step_ms, bound * (1 - 1e-9)) << where;
        } else {
          ++pruned_away;
        }
      }
    }
  }
  EXPECT_GT(faster, 100);
  EXPECT_GT(pruned_away, 100);  // below every candidate's step, nothing is simulated
}

// The family search as it reads without kept candidates: every candidate
// left in simulated at the budget, the best by KeepBetter, again in full.
std::optional<Plan> PlainSearch(const Profile& p, const HeuristicFamily& family, int64_t budget,
                                const FamilySearchLimits& limits) {
  Plan best;
  bool have = false;
  for (int k = family.first_parameter(); k <= family.last_parameter(); ++k) {
    const HeuristicCandidate c = family.Candidate(k);
    if (SingleLevelStepMs(p, c.decisions, c.selective_option) > limits.step_ms) continue;
    if (limits.only_fitting && budget > 0 &&
        SingleLevelPeakLowerBound(p, c.decisions, c.selective_option) > budget) {
      continue;
    }
    Result<Plan> plan = EvaluateDecisions(p, family.strategy(), c.parameter, c.decisions,
                                          c.selective_option, budget, SimulationDetail::kTotals);
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    if (!plan.ok()) return std::nullopt;
    KeepBetter(*std::move(plan), &best, &have);
  }
  if (!have) return std::nullopt;
  Result<SimulationResult> full = Simulate(p, best.schedule, nullptr, SimulationDetail::kFull);
  EXPECT_TRUE(full.ok());
  best.predicted = *full;
  return best;
}

void ExpectSameSearch(const std::optional<Plan>& a, const std::optional<Plan>& b,
                      const std::string& where) {
  ASSERT_EQ(a.has_value(), b.has_value()) << where;
  if (!a) return;
  ExpectSamePlan(*a, *b, where);
  EXPECT_EQ(a->budget_bytes, b->budget_bytes) << where;
  EXPECT_EQ(a->fits, b->fits) << where;
  EXPECT_EQ(a->memory.total_bytes, b->memory.total_bytes) << where;
  EXPECT_EQ(a->predicted.reserved_peak_bytes, b->predicted.reserved_peak_bytes) << where;
  EXPECT_EQ(a->predicted.timeline.size(), b->predicted.timeline.size()) << where;
  EXPECT_EQ(a->selective_option, b->selective_option) << where;
  EXPECT_EQ(a->schedule.ops.size(), b->schedule.ops.size()) << where;
}

// Budgets in a shuffled order, each with no limits, only fitting
// candidates and step bounds around the unlimited pick: the candidates
// one search leaves unsimulated or unbounded are made by a later one.
void ExpectKeptSearchIsPlain(const Profile& p, Strategy s, uint32_t seed, int* compared) {
  const HeuristicFamily family(p, s);
  std::vector<int64_t> budgets = Budgets(p);
  std::mt19937 rng(seed);
  for (int i = 0; i < 3; ++i) {
    budgets.push_back(std::uniform_int_distribution<int64_t>(
        p.static_bytes(), p.static_bytes() + BudgetAt(p, 100))(rng));
  }
  budgets.push_back(0);
  std::shuffle(budgets.begin(), budgets.end(), rng);
  for (int64_t budget : budgets) {
    const std::optional<Plan> unlimited = PlainSearch(p, family, budget, {});
    const double step = unlimited ? unlimited->predicted.step_ms : 1.0;
    std::vector<FamilySearchLimits> all = {
        {}, {kInf, true}, {step, false}, {step * 0.9, true}, {step * 1.2, true}};
    std::shuffle(all.begin(), all.end(), rng);
    for (const FamilySearchLimits& limits : all) {
      const std::string where = p.model + " " + ToString(s) + " at " + std::to_string(budget) +
                                " below " + std::to_string(limits.step_ms) +
                                (limits.only_fitting ? " fitting" : "");
      Result<std::optional<Plan>> kept = SearchFamily(p, family, budget, limits);
      ASSERT_TRUE(kept.ok()) << kept.status().message();
      ExpectSameSearch(*kept, PlainSearch(p, family, budget, limits), where);
      ++*compared;
    }
  }
}

TEST(HeuristicSearch, KeptCandidatesChooseAsSimulatingEachAtTheBudget) {
  int compared = 0;
  uint32_t seed = 0;
  for (const Profile& p : Chains()) {
    for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
      {
        const PlanMemo memo(p);  // one memo across the budgets
        ExpectKeptSearchIsPlain(p, s, ++seed, &compared);
        // Every candidate is made: a search at another budget simulates
        // nothing and looks up its pick alone (totals, then in full).
        const PlanMemo::Stats before = memo.stats();
        Result<std::optional<Plan>> again =
            SearchFamily(p, HeuristicFamily(p, s), p.static_bytes() + BudgetAt(p, 50) + 1);
        ASSERT_TRUE(again.ok() && again->has_value()) << p.model;
        const PlanMemo::Stats after = memo.stats();
        EXPECT_EQ(after.simulations_run, before.simulations_run) << p.model;
        EXPECT_EQ(after.simulations_reused - before.simulations_reused, 2) << p.model;
      }
      ExpectKeptSearchIsPlain(p, s, ++seed, &compared);  // no memo
    }
  }
  EXPECT_GT(compared, 6000);
}

// On real layouts, at budgets where the families fit, where only some
// candidates do and where none does: the search that leaves candidates
// out by their floors picks what simulating every candidate picks, and
// leaves some out (a search at one budget simulates fewer candidates
// than the family has).
TEST(HeuristicSearch, FlooredSearchIsPlainOnRealLayouts) {
  int compared = 0, fewer = 0;
  for (const Profile& p : RealLayouts()) {
    std::vector<int64_t> budgets = Budgets(p);
    budgets.push_back(1);
    for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
      const HeuristicFamily family(p, s);
      for (int64_t budget : budgets) {
        const std::string where = p.model + " " + ToString(s) + " at " + std::to_string(budget);
        const PlanMemo memo(p);
        Result<std::optional<Plan>> searched = SearchFamily(p, family, budget);
        ASSERT_TRUE(searched.ok()) << searched.status().message();
        fewer += memo.stats().simulations_run <
                 family.last_parameter() - family.first_parameter() + 1;
        ExpectSameSearch(*searched, PlainSearch(p, family, budget, {}), where);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 80);
  EXPECT_GT(fewer, compared / 5);
}

// Where no candidate fits, the search weighs them least floor first: on
// chains of equal layers, where candidates tie in device total and step
// time (then the first in the family's order is kept), and on the chains
// above, it picks what simulating every candidate in order picks.
TEST(HeuristicSearch, NoneFittingPicksAsInOrderWithTies) {
  int compared = 0, ties = 0;
  std::vector<Profile> profiles = Chains();
  for (int n = 2; n <= 12; ++n) profiles.push_back(testing::UniformChain(n));
  for (const Profile& p : profiles) {
    for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
      const HeuristicFamily family(p, s);
      std::vector<std::pair<int64_t, double>> seen;
      for (int k = family.first_parameter(); k <= family.last_parameter(); ++k) {
        const HeuristicCandidate c = family.Candidate(k);
        Result<Plan> plan = EvaluateDecisions(p, s, c.parameter, c.decisions, c.selective_option,
                                              0, SimulationDetail::kTotals);
        ASSERT_TRUE(plan.ok());
        seen.emplace_back(plan->memory.total_bytes, plan->predicted.step_ms);
      }
      std::sort(seen.begin(), seen.end());
      ties += std::adjacent_find(seen.begin(), seen.end()) != seen.end();
      for (int64_t budget : {int64_t{1}, p.static_bytes() + BudgetAt(p, 0) - 1}) {
        const std::string where = p.model + " " + ToString(s) + " at " + std::to_string(budget);
        Result<std::optional<Plan>> searched = SearchFamily(p, family, budget);
        ASSERT_TRUE(searched.ok()) << searched.status().message();
        ExpectSameSearch(*searched, PlainSearch(p, family, budget, {}), where);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(ties, 5);
}

}  // namespace
}  // namespace remat
