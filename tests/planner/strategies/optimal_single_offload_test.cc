// optimal-single with activation offload (SingleLevelOffloadDp) against the
// exhaustive enumeration of every single-level decision vector, kOffload
// included, each simulated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "remat/strategies/strategies.h"
#include "solver/chain_terms.h"
#include "solver/memory_units.h"
#include "solver/single_level_dp.h"
#include "strategies/solvers.h"
#include "testing/brute_force.h"
#include "testing/chains.h"

namespace remat {
namespace {

using strategies::EvaluateDecisions;

using Simulated = testing::SimulatedDecisions;

bool Offloads(const Simulated& s) {
  return std::count(s.decisions.begin(), s.decisions.end(), LayerDecision::kOffload) > 0;
}

// Every single-level decision vector, kOffload included, simulated.
std::vector<Simulated> AllPlans(const Profile& p) {
  return testing::AllSingleLevelPlans(p, /*with_offload=*/true);
}

// The least step time within `budget` (and `host_budget`, 0: none) among
// `plans`, those that offload only when `with_offload`; < 0 if none fits.
double Best(const std::vector<Simulated>& plans, int64_t budget, bool with_offload,
            int64_t host_budget = 0) {
  double best = -1;
  for (const Simulated& s : plans) {
    if (!with_offload && Offloads(s)) continue;
    if (host_budget > 0 && s.host_peak_bytes > host_budget) continue;
    if (s.peak_bytes <= budget && (best < 0 || s.step_ms < best)) best = s.step_ms;
  }
  return best;
}

// Every distinct peak some plan reaches, one byte below each, and the extremes.
std::vector<int64_t> Budgets(const std::vector<Simulated>& plans) {
  std::vector<int64_t> peaks;
  for (const Simulated& s : plans) peaks.push_back(s.peak_bytes);
  std::sort(peaks.begin(), peaks.end());
  peaks.erase(std::unique(peaks.begin(), peaks.end()), peaks.end());
  std::vector<int64_t> budgets;
  const size_t step = std::max<size_t>(1, peaks.size() / 12);
  for (size_t i = 0; i < peaks.size(); i += step) {
    budgets.push_back(peaks[i]);
    budgets.push_back(peaks[i] - 1);
  }
  budgets.push_back(peaks.back());
  return budgets;
}

// A link over which a copy of the random chains' tensors (1..100 bytes)
// takes about `ms_per_50_bytes` ms.
HostLink Link(bool overlapped, double ms_per_50_bytes, double latency_us = 0) {
  HostLink link;
  link.name = overlapped ? "test-overlapped" : "test-inline";
  link.gb_per_s = 50.0 / (ms_per_50_bytes * 1e6);
  link.latency_us = latency_us;
  link.overlapped = overlapped;
  return link;
}

struct Counts {
  int budgets = 0, offloaded_wins = 0, equal = 0;
};

// optimal-single at every budget of `p` (with its link): fits exactly when
// some plan does, equals the exhaustive optimum with offload when `exact`,
// and is never slower than the exhaustive optimum without offload.
void Check(const Profile& p, bool exact, Counts* counts) {
  const std::vector<Simulated> plans = AllPlans(p);
  ASSERT_FALSE(plans.empty());
  for (int64_t budget : Budgets(plans)) {
    const double best = Best(plans, budget, true, p.host_link.budget_bytes);
    const double plain = Best(plans, budget, false);
    const Plan plan = testing::SolveAt(p, Strategy::kOptimalSingle, budget);
    const std::string where = p.model + " link " + p.host_link.name + " " +
                              std::to_string(p.host_link.gb_per_s) + " budget " +
                              std::to_string(budget);
    if (p.host_link.budget_bytes > 0 && plan.fits) {
      EXPECT_LE(plan.predicted.host_peak_bytes, p.host_link.budget_bytes) << where;
    }
    if (plain >= 0) {
      ASSERT_TRUE(plan.fits) << where;
      EXPECT_LE(plan.predicted.step_ms, plain + 1e-6) << where;
    }
    if (exact) {
      EXPECT_EQ(plan.fits, best >= 0) << where;
    }
    if (plan.fits) {
      EXPECT_LE(plan.predicted.peak_bytes, budget) << where;
      EXPECT_GE(plan.predicted.step_ms, best - 1e-6) << where;  // the exhaustive optimum is a bound
      if (exact) {
        EXPECT_NEAR(plan.predicted.step_ms, best, 1e-6) << where;
      }
    }
    ++counts->budgets;
    if (plan.fits == (best >= 0) &&
        (!plan.fits || std::abs(plan.predicted.step_ms - best) < 1e-6)) {
      ++counts->equal;
    }
    if (best >= 0 && (plain < 0 || best < plain - 1e-9)) ++counts->offloaded_wins;
  }
}

TEST(OptimalSingleOffload, InLineLinkEqualsExhaustive) {
  Counts counts;
  for (double ms : {0.05, 0.5, 3.0}) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      Profile p = testing::RandomChain(2 + seed % 6, seed);
      p.host_link = Link(false, ms, 10);
      Check(p, true, &counts);
    }
  }
  // The test means something: at some budgets offloading beats every plan without it.
  EXPECT_GT(counts.offloaded_wins, 20);
  std::printf("in line: %d budgets, %d where offload wins\n", counts.budgets,
              counts.offloaded_wins);
}

// Layers that do not keep their input (a loss reading the logits): the
// simulator holds such an input when its producer ran without grad.
TEST(OptimalSingleOffload, InLineLinkWithLayersNotKeepingTheirInput) {
  Counts counts;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    Profile p = testing::RandomChain(2 + seed % 6, seed);
    for (int i = 0; i < p.num_layers(); ++i)
      p.layers[i].keeps_input = i == 0 || (i + seed) % 3 != 0;
    p.host_link = Link(false, 0.5, 10);
    Check(p, true, &counts);
  }
  EXPECT_GT(counts.offloaded_wins, 0);
}

TEST(OptimalSingleOffload, InLineLinkOnATransformerChain) {
  Profile p = testing::TransformerChain(3, 5);
  p.host_link = Link(false, 0.02);
  Counts counts;
  Check(p, true, &counts);
}

// Overlapped copies hidden behind the next layer's backward (a fast link):
// the DP's model is exact, so it equals the exhaustive optimum.
TEST(OptimalSingleOffload, OverlappedHiddenCopiesEqualExhaustive) {
  Counts counts;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    Profile p = testing::RandomChain(2 + seed % 6, seed);
    p.host_link = Link(true, 0.001);
    Check(p, true, &counts);
  }
  EXPECT_GT(counts.offloaded_wins, 0);
}

// Slower overlapped links (copies partly or wholly exposed, the queue may
// back up): never worse than the exhaustive optimum without offload, and
// never better than the exhaustive optimum with it (a bound).
TEST(OptimalSingleOffload, OverlappedSlowLinkNeverWorseThanWithout) {
  Counts counts;
  for (double ms : {0.5, 3.0, 20.0}) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      Profile p = testing::RandomChain(2 + seed % 6, seed);
      p.host_link = Link(true, ms);
      Check(p, false, &counts);
    }
  }
  std::printf(
      "overlapped, slow: %d budgets, %d where offload wins, %d where optimal-single equals the "
      "exhaustive optimum\n",
      counts.budgets, counts.offloaded_wins, counts.equal);
}

// --host-budget: the plan's host peak stays within it, never worse than
// without offload (the Lagrangian search may miss the exact optimum).
TEST(OptimalSingleOffload, HostBudgetRespected) {
  Counts counts;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    Profile p = testing::RandomChain(2 + seed % 6, seed);
    p.host_link = Link(false, 0.05);
    int64_t least = 1000;
    for (int i = 1; i < p.num_layers(); ++i) least = std::min(least, p.layers[i - 1].output_bytes);
    p.host_link.budget_bytes = least + 20;
    Check(p, false, &counts);
  }
  std::printf("host budget: %d budgets, %d where optimal-single equals the exhaustive optimum\n",
              counts.budgets, counts.equal);
}

// Without a link optimal-single is the plain DP's: never an offload.
TEST(OptimalSingleOffload, NoLinkNoOffload) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const Profile p = testing::RandomChain(2 + seed % 6, seed);
    for (int64_t budget : Budgets(AllPlans(p))) {
      const Plan plan = testing::SolveAt(p, Strategy::kOptimalSingle, budget);
      EXPECT_EQ(std::count(plan.decisions.begin(), plan.decisions.end(), LayerDecision::kOffload),
                0);
    }
  }
}

// The DP's value (recompute + copy time) against the simulator's
// recompute_ms + transfer_ms of the schedule it returns: equal for the in-line
// link and for overlapped copies that hide; for exposed overlapped copies an
// estimate (printed).
TEST(OptimalSingleOffload, DpEstimateMatchesSimulator) {
  double worst_overlapped = 0;
  for (int link = 0; link < 3; ++link) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      Profile p = testing::RandomChain(2 + seed % 6, seed);
      p.host_link = link == 0 ? Link(false, 0.5) : link == 1 ? Link(true, 0.001) : Link(true, 3);
      const std::vector<Simulated> plans = AllPlans(p);
      for (int64_t budget : Budgets(plans)) {
        const int64_t activation = budget - p.static_bytes();
        if (activation <= 0) continue;
        const solver::ChainTerms terms(p, solver::MemoryUnits(activation, activation));
        solver::SingleLevelOffloadDp dp(terms, {p.host_link, 0});
        const auto sol = dp.Solve(nullptr);
        if (!sol) continue;
        Result<Plan> plan = EvaluateDecisions(p, Strategy::kManual, "", sol->decisions,
                                              sol->selective_option, budget);
        ASSERT_TRUE(plan.ok());
        if (link < 2) {
          EXPECT_TRUE(plan->fits) << p.model << " budget " << budget << " link " << link;
        }
        const double simulated = plan->predicted.recompute_ms + plan->predicted.transfer_ms;
        if (link < 2) {
          EXPECT_NEAR(sol->recompute_ms, simulated, 1e-6) << p.model << " budget " << budget;
        } else {
          worst_overlapped = std::max(worst_overlapped, std::abs(sol->recompute_ms - simulated));
        }
      }
    }
  }
  std::printf("overlapped 3 ms/50 B: DP estimate within %.4f ms of the simulator\n",
              worst_overlapped);
}

}  // namespace
}  // namespace remat
