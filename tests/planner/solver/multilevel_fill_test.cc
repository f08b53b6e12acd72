// The tiled fill and the cost cap give the reference fill's tables, cell by
// cell (under the cap, every cell a schedule within the cap can use).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>

#include "solver/multilevel_dp.h"
#include "testing/chains.h"
#include "testing/gpt_chain.h"

namespace remat::solver {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every cell of `dp` against `reference` (uncapped): equal to float rounding
// where the reference costs at most the row's cap, +inf where it costs
// more. The row's cap: `cap` for intervals ending at the chain's end, else
// `cap` less the interval's forward time (a schedule solving it recomputes
// that forward), give or take the DP's rounding margin.
int CompareTables(const MultiLevelDp& reference, const MultiLevelDp& dp, const ChainTerms& terms,
                  double cap, const std::string& what) {
  const int L = terms.num_layers();
  int bad = 0;
  for (int s = 0; s < L; ++s) {
    for (int t = s + 1; t <= L; ++t) {
      const double row_cap = t < L ? cap - terms.ForwardMs(s, t) : cap;
      const double margin = std::isinf(cap) ? 0 : 1e-3 * cap;
      for (int64_t m = 0; m <= terms.slots(); ++m) {
        const double x = reference.Cost(s, t, m), y = dp.Cost(s, t, m);
        const double tol = 1e-5 * (1 + std::abs(x));
        bool ok;
        if (x > row_cap + margin + tol) {
          ok = std::isinf(y);
        } else if (x < row_cap - tol) {
          ok = std::isinf(x) ? std::isinf(y) : std::abs(x - y) <= tol;
        } else {
          ok = std::isinf(y) || std::abs(x - y) <= tol;
        }
        if (!ok && ++bad <= 3) {
          ADD_FAILURE() << what << " (" << s << ", " << t << ") m " << m << ": " << x << " vs "
                        << y;
        }
      }
    }
  }
  return bad;
}

// The cells of two solved DPs of an L-layer chain in `slots` slots that
// are not the same float (the first few reported).
int DifferentCells(const MultiLevelDp& a, const MultiLevelDp& b, int L, int64_t slots,
                   const std::string& what) {
  int differ = 0;
  for (int s = 0; s < L; ++s) {
    for (int t = s + 1; t <= L; ++t) {
      for (int64_t m = 0; m <= slots; ++m) {
        const float x = a.Cost(s, t, m), y = b.Cost(s, t, m);
        if (!(x == y) && ++differ <= 3) {
          ADD_FAILURE() << what << " (" << s << ", " << t << ") m " << m << ": " << x << " vs "
                        << y;
        }
      }
    }
  }
  return differ;
}

bool SameOps(const std::vector<Op>& a, const std::vector<Op>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || a[i].layer != b[i].layer || a[i].save != b[i].save ||
        a[i].option != b[i].option) {
      return false;
    }
  }
  return true;
}

// The reference fill without a cap, on one thread, against the tiled fill
// and the reference fill on 3 threads (tiles of rows at once), and both
// fills on 1 and 3 threads under caps: at the optimum (a plan that cheap is known) and
// below it (the root then has no schedule within the cap).
void ExpectSameTables(const Profile& p, int64_t budget, int64_t slots, Rounding rounding) {
  const ChainTerms terms(p, MemoryUnits(budget, slots, rounding));
  MultiLevelDp reference(terms, {DpFill::kReference});
  const std::optional<DpSolution> root = reference.Solve(nullptr);
  EXPECT_GE(MultiLevelDp::TableBytesBound(terms), reference.table_bytes()) << p.model;
  const std::string what =
      p.model + " budget " + std::to_string(budget) + " slots " + std::to_string(slots);
  for (double cap :
       {kInf, root ? root->recompute_ms : kInf, root ? root->recompute_ms * 0.7 : kInf}) {
    for (DpFill fill : {DpFill::kReference, DpFill::kTiled}) {
      for (int threads : {1, 3}) {
        if (fill == DpFill::kReference && std::isinf(cap) && threads == 1) continue;
        DpOptions options;
        options.fill = fill;
        options.cost_cap_ms = cap;
        options.threads = threads;
        options.min_parallel_cells = 0;
        MultiLevelDp dp(terms, options);
        const std::optional<DpSolution> sol = dp.Solve(nullptr);
        const std::string label = what + (fill == DpFill::kTiled ? " tiled" : " reference") +
                                  " cap " + std::to_string(cap) + " threads " +
                                  std::to_string(threads);
        EXPECT_EQ(sol.has_value(), root.has_value() && root->recompute_ms <= cap) << label;
        if (!root) continue;
        EXPECT_EQ(CompareTables(reference, dp, terms, cap, label), 0) << label;
        // Equal tables, equal choices: the same schedule.
        if (sol && std::isinf(cap)) {
          EXPECT_TRUE(SameOps(sol->ops, root->ops)) << label;
        }
      }
    }
  }
}

std::vector<int64_t> Budgets(const Profile& p, int n) {
  const ChainTerms exact(p, MemoryUnits::Bytes(int64_t{1} << 40));
  const int L = p.num_layers();
  const int64_t lo = IntervalBounds(exact, IntervalClasses(p), false).floor(0, L);
  const int64_t hi = KeepAllNeeds(exact)[static_cast<size_t>(L)];
  std::vector<int64_t> out;
  for (int i = 0; i <= n; ++i) out.push_back(lo + (hi - lo) * i / n);
  return out;
}

// Under a cap, an interval ending before the chain's end whose forward alone
// takes longer than the cap is never solved (a schedule solving it
// recomputes that forward): its row is empty and the tables are smaller.
TEST(MultiLevelFill, IntervalsRecomputingMoreThanTheCapAreNotSolved) {
  const Profile p = testing::GptChain(24, 4);
  const int L = p.num_layers();
  const std::vector<int64_t> budgets = Budgets(p, 4);
  const ChainTerms terms(p, MemoryUnits(budgets[2], 500, Rounding::kDown));
  MultiLevelDp full(terms);
  const std::optional<DpSolution> root = full.Solve(nullptr);
  ASSERT_TRUE(root.has_value());
  DpOptions options;
  options.cost_cap_ms = root->recompute_ms;
  MultiLevelDp capped(terms, options);
  const std::optional<DpSolution> sol = capped.Solve(nullptr);
  ASSERT_TRUE(sol.has_value());
  EXPECT_FLOAT_EQ(sol->recompute_ms, root->recompute_ms);
  EXPECT_LT(capped.table_bytes(), full.table_bytes());
  int unsolved = 0;
  for (int s = 0; s < L; ++s) {
    for (int t = s + 1; t < L; ++t) {
      if (terms.ForwardMs(s, t) <= root->recompute_ms * 1.001) continue;
      ++unsolved;
      for (int64_t m = 0; m <= terms.slots(); ++m) {
        ASSERT_TRUE(std::isinf(capped.Cost(s, t, m))) << s << " " << t << " " << m;
      }
    }
  }
  EXPECT_GT(unsolved, 0);
}

TEST(MultiLevelFill, RandomChains) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const Profile p = testing::RandomChain(2 + seed % 14, seed);
    for (int64_t budget : Budgets(p, 4)) {
      for (int64_t slots : {int64_t{40}, int64_t{300}, budget}) {
        ExpectSameTables(p, budget, slots, seed % 2 ? Rounding::kUp : Rounding::kDown);
      }
    }
  }
}

TEST(MultiLevelFill, LayersTakingNoTime) {
  // Forwards of 0 ms: a row's cap is then the cap itself (nothing to
  // subtract), and the float margin alone stands between a needed cell and
  // its row's cap.
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    Profile p = testing::RandomChain(6 + seed % 9, seed);
    for (size_t i = 0; i < p.layers.size(); i += 1 + seed % 3) {
      p.layers[i].forward_ms = 0;
      for (SelectiveOption& o : p.layers[i].selective) o.extra_recompute_ms = 0;
    }
    for (int64_t budget : Budgets(p, 3)) {
      ExpectSameTables(p, budget, 200, seed % 2 ? Rounding::kUp : Rounding::kDown);
    }
  }
}

TEST(MultiLevelFill, IdenticalAndNearlyIdenticalBlocks) {
  // Identical blocks share rows; times jittered by 1% or 10% (a measured
  // profile) make every interval distinct again.
  Profile same = testing::TransformerChain(18, 3);
  for (LayerProfile& l : same.layers) {
    if (l.kind == "block") l = same.layers[1], l.name = "block";
  }
  for (const Profile& p : {same, testing::JitterTimes(same, 0.01, 5),
                           testing::JitterTimes(same, 0.1, 6), testing::UniformChain(20)}) {
    for (int64_t budget : Budgets(p, 4)) {
      ExpectSameTables(p, budget, 400, Rounding::kDown);
      ExpectSameTables(p, budget, 90, Rounding::kUp);
    }
  }
}

TEST(MultiLevelFill, TilesOfRowsFilledAtOnce) {
  // Chains of several tiles of rows (the reference fill's threads each
  // take one, a column behind the tile above), no two layers alike.
  for (const Profile& p : {testing::RandomChain(100, 1), testing::TransformerChain(90, 2)}) {
    const std::vector<int64_t> budgets = Budgets(p, 4);
    ExpectSameTables(p, budgets[1], 120, Rounding::kDown);
    ExpectSameTables(p, budgets[3], 80, Rounding::kUp);
  }
}

TEST(MultiLevelFill, TransformerChains) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const Profile p = testing::TransformerChain(8 + 4 * seed, seed);
    for (int64_t budget : Budgets(p, 5)) {
      ExpectSameTables(p, budget, 500, Rounding::kDown);
      ExpectSameTables(p, budget, 150, Rounding::kUp);
    }
  }
}

// Classes the caller built (DpOptions::classes, as `--strategy optimal`
// shares them between its size check and both fills) give the tables and
// the schedule of classes the DP builds itself, and the same size bound.
TEST(MultiLevelFill, ClassesGivenEqualClassesBuilt) {
  Profile same = testing::TransformerChain(10, 4);
  for (LayerProfile& l : same.layers) {
    if (l.kind == "block") l = same.layers[1], l.name = "block";
  }
  for (const Profile& p : {testing::WithCreatedGradients(same, 2), same,
                           testing::RandomChain(9, 7)}) {
    for (GradientKey key : {GradientKey::kExact, GradientKey::kShifted}) {
      const auto classes = std::make_shared<const IntervalClasses>(p, key);
      for (Rounding rounding : {Rounding::kDown, Rounding::kUp}) {
        const ChainTerms terms(p, MemoryUnits(Budgets(p, 4)[2], 300, rounding));
        EXPECT_EQ(MultiLevelDp::TableBytesBound(terms, *classes),
                  MultiLevelDp::TableBytesBound(terms, key));
        DpOptions built;
        built.gradients = key;
        DpOptions given = built;
        given.classes = classes;
        MultiLevelDp a(terms, built), b(terms, given);
        const std::optional<DpSolution> x = a.Solve(nullptr), y = b.Solve(nullptr);
        ASSERT_EQ(x.has_value(), y.has_value()) << p.model;
        if (!x) continue;
        EXPECT_TRUE(SameOps(x->ops, y->ops)) << p.model;
        EXPECT_EQ(CompareTables(a, b, terms, kInf, p.model), 0);
      }
    }
  }
}

// Keep modes another mode dominates (no more slots, peaks or time) left
// out of the keeps give the same tables, cell for cell, and the same
// schedule: on chains whose layers have many selective options, some of
// them dominated, in slots rounded either way.
TEST(MultiLevelFill, DominatedModesLeftOutGiveTheSameTables) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    Profile p = testing::RandomChain(10, seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> pick(0, 3);
    for (LayerProfile& l : p.layers) {
      const int64_t dropped = l.activation_bytes - l.output_bytes;
      for (int i = 0; i < 5; ++i) {
        SelectiveOption o;
        o.name = "o" + std::to_string(i);
        o.activation_bytes = l.output_bytes + dropped * pick(rng) / 3;
        o.extra_recompute_ms = l.forward_ms * pick(rng) / 3;
        o.recompute_workspace_bytes = dropped * pick(rng) / 3;
        o.forward_workspace_bytes = pick(rng) == 0 ? -1 : l.forward_workspace_bytes + dropped * pick(rng) / 3;
        l.selective.push_back(o);
      }
    }
    const int L = p.num_layers();
    for (const auto& [slots, rounding] :
         {std::pair{500, Rounding::kDown}, std::pair{150, Rounding::kUp}}) {
      for (int64_t budget : Budgets(p, 3)) {
        const ChainTerms terms(p, MemoryUnits(budget, slots, rounding));
        DpOptions every;
        every.skip_dominated_modes = false;
        MultiLevelDp all(terms, every), some(terms);
        DpStats all_stats, some_stats;
        const std::optional<DpSolution> x = all.Solve(&all_stats), y = some.Solve(&some_stats);
        const std::string what = p.model + " budget " + std::to_string(budget);
        EXPECT_LT(some_stats.keep_modes, all_stats.keep_modes) << what;
        ASSERT_EQ(x.has_value(), y.has_value()) << what;
        if (!x) continue;
        EXPECT_TRUE(SameOps(x->ops, y->ops)) << what;
        EXPECT_EQ(DifferentCells(all, some, L, terms.slots(), what), 0) << what;
      }
    }
  }
}

// Bounds the caller built (DpOptions::bounds, as `--strategy optimal`
// builds the conservative fill's on another core) give the tables and the
// schedule of bounds the DP builds itself; and they are the ones the DP
// reads (bounds of other units give their floor).
TEST(MultiLevelFill, BoundsGivenEqualBoundsBuilt) {
  for (const Profile& p : {testing::TransformerChain(12, 3), testing::RandomChain(9, 7)}) {
    const auto classes = std::make_shared<const IntervalClasses>(p);
    const int64_t budget = Budgets(p, 4)[2];
    for (Rounding rounding : {Rounding::kDown, Rounding::kUp}) {
      const ChainTerms terms(p, MemoryUnits(budget, 300, rounding));
      DpOptions given;
      given.classes = classes;
      given.bounds = std::make_shared<const IntervalBounds>(terms, *classes, false);
      MultiLevelDp a(terms), b(terms, given);
      const std::optional<DpSolution> x = a.Solve(nullptr), y = b.Solve(nullptr);
      ASSERT_EQ(x.has_value(), y.has_value()) << p.model;
      ASSERT_TRUE(x.has_value()) << p.model;
      EXPECT_TRUE(SameOps(x->ops, y->ops)) << p.model;
      EXPECT_EQ(CompareTables(a, b, terms, kInf, p.model), 0);
    }
    const ChainTerms fine(p, MemoryUnits(budget, 300)), coarse(p, MemoryUnits(budget, 30));
    DpOptions other;
    other.bounds = std::make_shared<const IntervalBounds>(coarse, *classes, false);
    const MultiLevelDp dp(fine, other);
    const int L = p.num_layers();
    EXPECT_EQ(dp.floor(), other.bounds->floor(0, L)) << p.model;
    EXPECT_NE(dp.floor(), IntervalBounds(fine, *classes, false).floor(0, L)) << p.model;
  }
}

// One case of the rounding tests: a chain's terms rounding down and up in
// the same slots, and the options of an uncapped fill of its classes.
struct RoundingCase {
  std::string what;
  int L;
  const ChainTerms& down;
  const ChainTerms& up;
  const DpOptions& uncapped;
};

// Calls f on each rounding case: four chains (one whose gradients are
// created in backward, with layers alike), both gradient keys, four budgets,
// 60 and 400 slots.
template <typename F>
void ForEachRoundingCase(F f) {
  Profile same = testing::TransformerChain(10, 4);
  for (LayerProfile& l : same.layers) {
    if (l.kind == "block") l = same.layers[1], l.name = "block";
  }
  for (const Profile& p :
       {testing::WithCreatedGradients(same, 2), testing::TransformerChain(14, 3),
        testing::RandomChain(12, 5), testing::RandomChain(9, 8)}) {
    for (GradientKey key : {GradientKey::kExact, GradientKey::kShifted}) {
      const auto classes = std::make_shared<const IntervalClasses>(p, key);
      for (int64_t budget : Budgets(p, 4)) {
        for (int64_t slots : {int64_t{60}, int64_t{400}}) {
          const ChainTerms down(p, MemoryUnits(budget, slots, Rounding::kDown));
          const ChainTerms up(p, MemoryUnits(budget, slots, Rounding::kUp));
          DpOptions uncapped;
          uncapped.gradients = key;
          uncapped.classes = classes;
          f(RoundingCase{p.model + " budget " + std::to_string(budget) + " slots " +
                             std::to_string(slots) + " key " +
                             std::to_string(static_cast<int>(key)),
                         p.num_layers(), down, up, uncapped});
        }
      }
    }
  }
}

// A fill rounding up, its rows started where the relaxation's (rounding
// down, the same classes, slots and cap) fall within their caps
// (DpOptions::row_starts), gives the tables of the same fill started at its
// floors, cell for cell, and the same schedule, in fewer cells. That rests
// on every rounding-up cell costing at least the rounding-down one, checked
// here without caps.
TEST(MultiLevelFill, RelaxedRowStartsGiveTheConservativeTables) {
  int64_t cells_saved = 0;
  ForEachRoundingCase([&](const RoundingCase& c) {
    const int L = c.L;
    const DpOptions& uncapped = c.uncapped;
    MultiLevelDp low(c.down, uncapped), high(c.up, uncapped);
    const std::optional<DpSolution> low_root = low.Solve(nullptr);
    const std::optional<DpSolution> high_root = high.Solve(nullptr);
    // (Tables are read only after a Solve that found a schedule.)
    if (!low_root || !high_root) return;
    int below = 0;
    for (int s = 0; s < L; ++s) {
      for (int t = s + 1; t <= L; ++t) {
        for (int64_t m = 0; m <= c.up.slots(); ++m) {
          if (!(high.Cost(s, t, m) >= low.Cost(s, t, m)) && ++below <= 3) {
            ADD_FAILURE() << c.what << " (" << s << ", " << t << ") m " << m << ": "
                          << high.Cost(s, t, m) << " below " << low.Cost(s, t, m);
          }
        }
      }
    }
    EXPECT_EQ(below, 0) << c.what;
    const double high_ms = high_root->recompute_ms, low_ms = low_root->recompute_ms;
    for (double cap : {high_ms, high_ms * 0.97, (high_ms + low_ms) / 2}) {
      DpOptions capped = uncapped;
      capped.cost_cap_ms = cap;
      MultiLevelDp relaxed(c.down, capped);
      relaxed.Solve(nullptr);
      DpOptions started = capped;
      started.row_starts = std::make_shared<const std::vector<int>>(relaxed.RowStarts());
      MultiLevelDp a(c.up, capped), b(c.up, started);
      const std::optional<DpSolution> x = a.Solve(nullptr), y = b.Solve(nullptr);
      const std::string label = c.what + " cap " + std::to_string(cap);
      ASSERT_EQ(x.has_value(), y.has_value()) << label;
      EXPECT_EQ(a.floor(), b.floor()) << label;
      EXPECT_LE(b.table_bytes(), a.table_bytes()) << label;
      cells_saved += (a.table_bytes() - b.table_bytes()) / 4;
      if (!x) continue;
      EXPECT_TRUE(SameOps(x->ops, y->ops)) << label;
      EXPECT_EQ(DifferentCells(a, b, c.L, c.up.slots(), label), 0) << label;
    }
  });
  EXPECT_GT(cells_saved, 0);
}

// Suffix costs (a relaxation's, or the same rounding's) drop cells no
// schedule within the cap uses: the kept cells are the fill's without them,
// the root's row is the same at every slot count, and so is every schedule
// Reconstruct gives from it. The caps include the conservative optimum
// itself, where the schedule's rows are at their limit.
TEST(MultiLevelFill, SuffixCostsKeepTheRootAndItsSchedules) {
  int64_t cells_dropped = 0;
  ForEachRoundingCase([&](const RoundingCase& c) {
    const int L = c.L;
    const DpOptions& uncapped = c.uncapped;
    MultiLevelDp optimum(c.up, uncapped);
    const std::optional<DpSolution> best = optimum.Solve(nullptr);
    if (!best) return;
    const double ms = best->recompute_ms;
    for (double cap : {ms, ms * 1.02, ms * 0.99}) {
      DpOptions capped = uncapped;
      capped.cost_cap_ms = cap;
      MultiLevelDp relaxed(c.down, capped), same_rounding(c.up, capped);
      if (!relaxed.Solve(nullptr)) continue;
      const bool conservative = same_rounding.Solve(nullptr).has_value();
      for (const MultiLevelDp* source : {&relaxed, &same_rounding}) {
        if (source == &same_rounding && !conservative) continue;
        DpOptions bounded = capped;
        bounded.suffix_costs =
            std::make_shared<const std::vector<double>>(source->SuffixCosts());
        MultiLevelDp a(c.up, capped), b(c.up, bounded);
        const std::optional<DpSolution> x = a.Solve(nullptr), y = b.Solve(nullptr);
        const std::string label = c.what + " cap " + std::to_string(cap) +
                                  (source == &relaxed ? " relaxed" : " same rounding");
        ASSERT_EQ(x.has_value(), y.has_value()) << label;
        if (!x) continue;
        EXPECT_EQ(a.floor(), b.floor()) << label;
        int differ = 0;
        for (int s = 0; s < L; ++s) {
          for (int t = s + 1; t <= L; ++t) {
            for (int64_t m = 0; m <= c.up.slots(); ++m) {
              const float kept = a.Cost(s, t, m), bounded_cost = b.Cost(s, t, m);
              if (bounded_cost == kept) continue;
              // Dropped (the rest is over the cap) or not the same: a failure.
              if (std::isinf(bounded_cost) && t < L) {
                ++cells_dropped;
              } else if (++differ <= 3) {
                ADD_FAILURE() << label << " (" << s << ", " << t << ") m " << m << ": "
                              << kept << " vs " << bounded_cost;
              }
            }
          }
        }
        EXPECT_EQ(differ, 0) << label;
        for (int64_t m = a.floor(); m <= c.up.slots(); ++m) {
          EXPECT_TRUE(SameOps(a.Reconstruct(m).ops, b.Reconstruct(m).ops))
              << label << " m " << m;
        }
      }
    }
  });
  EXPECT_GT(cells_dropped, 0);
}

}  // namespace
}  // namespace remat::solver
