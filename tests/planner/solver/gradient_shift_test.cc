// Interval rows shared across positions with gradients created in backward
// (GradientKey::kShifted, interval_classes.h): a member's row is its
// canonical interval's, shifted by the slots of the gradients between them.
// Against the full DP (reference fill, exact classes) on random chains with
// gradients created in backward: equal cell by cell in one-byte slots, a
// relaxation rounding down and a conservative bound rounding up in coarse
// slots. Also: the forward and sweep peaks count the gradients after the
// interval (the full DP's schedules fit to the byte), and `--strategy
// optimal` on such chains is no slower than the full DP's schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "remat/simulate/simulator.h"
#include "remat/strategies/strategies.h"
#include "solver/multilevel_dp.h"
#include "testing/chains.h"
#include "testing/dp_cases.h"
#include "testing/gpt_chain.h"

namespace remat::solver {
namespace {

using testing::BudgetAt;
using testing::FullDp;

DpOptions Shifted() {
  DpOptions o;
  o.gradients = GradientKey::kShifted;
  return o;
}

Profile Chain(int layers, uint32_t seed) {
  return testing::WithCreatedGradients(testing::RandomChain(layers, seed), seed);
}

// Compares every cell of `a` and `b` with `ok(x, y)`; returns the failures.
template <typename Ok>
int CompareCells(const MultiLevelDp& a, const MultiLevelDp& b, int L, int64_t M, Ok ok,
                 const std::string& what) {
  int bad = 0;
  for (int s = 0; s < L; ++s) {
    for (int t = s + 1; t <= L; ++t) {
      for (int64_t m = 0; m <= M; ++m) {
        const float x = a.Cost(s, t, m), y = b.Cost(s, t, m);
        if (!ok(x, y) && ++bad <= 3) {
          ADD_FAILURE() << what << " (" << s << ", " << t << ") m " << m << ": " << x << " vs "
                        << y;
        }
      }
    }
  }
  return bad;
}

bool Near(float x, float y) { return x == y || std::abs(x - y) <= 1e-5f * (1 + std::abs(x)); }

TEST(GradientShift, SharesRowsAcrossPositions) {
  const Profile p = testing::GptChain(24, 4);
  const int L = p.num_layers();
  const IntervalClasses exact(p), shifted(p, GradientKey::kShifted);
  EXPECT_GT(exact.count(), L * (L + 1) / 2 / 2);
  EXPECT_LT(shifted.count() * 3, exact.count());
  // Blocks 1..24: (1, 3) and (2, 4) share; (2, 4) ends later, has fewer
  // gradients after it.
  EXPECT_EQ(shifted.of(1, 3), shifted.of(2, 4));
  EXPECT_EQ(shifted.shift_bytes(1, 3) - shifted.shift_bytes(2, 4), p.layers[3].gradient_bytes);
  for (int s = 0; s < L; ++s) {
    for (int t = s + 1; t <= L; ++t) {
      const int c = shifted.of(s, t);
      EXPECT_EQ(shifted.canonical_t(c) - shifted.canonical_s(c), t - s);
      EXPECT_GE(shifted.shift_bytes(s, t), 0);
      EXPECT_EQ(exact.shift_bytes(s, t), 0);
    }
  }
}

TEST(GradientShift, TableBytesBoundBoundsTheSharedTables) {
  for (const Profile& p : {testing::GptChain(20, 4), Chain(25, 3)}) {
    const ChainTerms terms(p, MemoryUnits(BudgetAt(p, 40), 500));
    const MultiLevelDp exact(terms, FullDp()), shifted(terms, Shifted());
    const int64_t bound = MultiLevelDp::TableBytesBound(terms, GradientKey::kShifted);
    EXPECT_GE(bound, shifted.table_bytes()) << p.model;
    EXPECT_LE(bound, MultiLevelDp::TableBytesBound(terms)) << p.model;
    EXPECT_LE(shifted.table_bytes(), exact.table_bytes()) << p.model;
  }
}

TEST(GradientShift, EqualsTheFullDpCellByCellInOneByteSlots) {
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const Profile p = Chain(14, seed);
    for (int percent : {10, 50}) {
      const int64_t budget = BudgetAt(p, percent);
      const ChainTerms terms(p, MemoryUnits(budget, budget));
      MultiLevelDp full(terms, FullDp()), shifted(terms, Shifted());
      const auto a = full.Solve(nullptr), b = shifted.Solve(nullptr);
      ASSERT_EQ(a.has_value(), b.has_value());
      EXPECT_EQ(CompareCells(full, shifted, p.num_layers(), terms.slots(), Near,
                             "seed " + std::to_string(seed)),
                0);
    }
  }
}

TEST(GradientShift, RelaxedRoundingDownConservativeRoundingUp) {
  int solved = 0;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    for (int layers : {8, 17, 30}) {
      const Profile p = Chain(layers, seed);
      for (int percent : {5, 40, 75}) {
        const int64_t budget = BudgetAt(p, percent);
        for (int64_t slots : {16, 60}) {
          const std::string what = "seed " + std::to_string(seed) + " L " +
                                   std::to_string(layers) + " " + std::to_string(percent) +
                                   "% slots " + std::to_string(slots);
          for (Rounding r : {Rounding::kDown, Rounding::kUp}) {
            const ChainTerms terms(p, MemoryUnits(budget, slots, r));
            MultiLevelDp full(terms, FullDp()), shifted(terms, Shifted());
            const auto a = full.Solve(nullptr), b = shifted.Solve(nullptr);
            const bool down = r == Rounding::kDown;
            // Rounding down accepts at least what the full DP accepts, and
            // rounding up at most.
            if (down && a) {
              EXPECT_TRUE(b.has_value()) << what;
            }
            if (!down && b) {
              EXPECT_TRUE(a.has_value()) << what;
            }
            if (!a || !b) continue;
            ++solved;
            EXPECT_EQ(CompareCells(
                          full, shifted, layers, terms.slots(),
                          [&](float x, float y) { return Near(x, y) || (down ? y < x : y > x); },
                          what + (down ? " down" : " up")),
                      0);
            const Result<SimulationResult> sim = Simulate(p, AddFrees(b->ops, layers));
            ASSERT_TRUE(sim.ok()) << what;
            EXPECT_NEAR(sim->recompute_ms, b->recompute_ms, 1e-4 * (1 + b->recompute_ms)) << what;
            // Rounding up, the shifted schedule fits in bytes.
            if (!down) {
              EXPECT_LE(sim->activation_peak_bytes, budget) << what;
            }
          }
        }
      }
    }
  }
  EXPECT_GE(solved, 100);
}

TEST(GradientShift, FullDpScheduleFitsWithGradientsCreatedInBackward) {
  // Forward and sweep peaks count the gradients after the interval (live
  // until the optimizer step): in one-byte slots the full DP's schedule fits
  // its budget to the byte.
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    // Forwards peaking above their backwards, so that the forward and
    // sweep peaks decide.
    Profile p = Chain(12, seed);
    for (LayerProfile& l : p.layers) {
      l.forward_workspace_bytes += 300;
      l.forward_nograd_workspace_bytes = l.forward_workspace_bytes + 50;
    }
    for (int percent : {0, 10, 30, 60}) {
      const int64_t budget = BudgetAt(p, percent);
      const ChainTerms terms(p, MemoryUnits(budget, budget));
      MultiLevelDp full(terms, FullDp());
      const auto a = full.Solve(nullptr);
      ASSERT_TRUE(a.has_value()) << seed << " " << percent;
      const Result<SimulationResult> sim = Simulate(p, AddFrees(a->ops, p.num_layers()));
      ASSERT_TRUE(sim.ok());
      EXPECT_LE(sim->activation_peak_bytes, budget) << seed << " " << percent;
    }
  }
}

TEST(GradientShift, OptimalStrategyNoSlowerThanTheFullDp) {
  int compared = 0;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    for (const Profile& p : {Chain(20, seed), [&] {
           Profile g = testing::JitterTimes(testing::GptChain(10 + 4 * seed, 4), 0.05, seed);
           g.source = "analytic";
           return g;
         }()}) {
      for (int percent : {5, 30, 70}) {
        const int64_t budget = BudgetAt(p, percent);
        PlanOptions o;
        o.strategy = remat::Strategy::kOptimal;
        o.budget_bytes = p.static_bytes() + budget;
        o.slots = 200;
        o.exact_times = true;
        Result<PlanSet> set = MakePlan(p, o);
        ASSERT_TRUE(set.ok()) << set.status().message();
        const Plan& plan = set->chosen;
        // The full DP in the same slots, rounding up: a schedule that fits.
        const ChainTerms terms(p, MemoryUnits(budget, 200, Rounding::kUp, RecurringKeepBytes(p)));
        MultiLevelDp full(terms, FullDp());
        const auto a = full.Solve(nullptr);
        if (!a) continue;
        ++compared;
        const Result<SimulationResult> sim = Simulate(p, AddFrees(a->ops, p.num_layers()));
        ASSERT_TRUE(sim.ok());
        ASSERT_LE(sim->activation_peak_bytes, budget);
        EXPECT_TRUE(plan.fits);
        EXPECT_LE(plan.predicted.recompute_ms, sim->recompute_ms * (1 + 1e-6) + 1e-6)
            << seed << " " << percent << " " << plan.parameter;
      }
    }
  }
  EXPECT_GE(compared, 15);
}

}  // namespace
}  // namespace remat::solver
