// The tiled fill and the cost cap give the reference fill's tables, cell by
// cell.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "solver/multilevel_dp.h"
#include "testing/chains.h"

namespace remat::solver {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every cell of `dp` against `reference` (uncapped): equal to float rounding
// where the reference costs at most `cap`, +inf where it costs more.
int CompareTables(const MultiLevelDp& reference, const MultiLevelDp& dp, const ChainTerms& terms,
                  double cap, const std::string& what) {
  const int L = terms.num_layers();
  int bad = 0;
  for (int s = 0; s < L; ++s) {
    for (int t = s + 1; t <= L; ++t) {
      for (int64_t m = 0; m <= terms.slots(); ++m) {
        const double x = reference.Cost(s, t, m), y = dp.Cost(s, t, m);
        const double tol = 1e-5 * (1 + std::abs(x));
        bool ok;
        if (x > cap + tol) {
          ok = std::isinf(y);
        } else if (x < cap - tol) {
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

void ExpectSameTables(const Profile& p, int64_t budget, int64_t slots, Rounding rounding) {
  const ChainTerms terms(p, MemoryUnits(budget, slots, rounding));
  MultiLevelDp reference(terms, {DpFill::kReference});
  const std::optional<DpSolution> root = reference.Solve(nullptr);
  const std::string what =
      p.model + " budget " + std::to_string(budget) + " slots " + std::to_string(slots);
  for (double cap :
       {kInf, root ? root->recompute_ms : kInf, root ? root->recompute_ms * 0.7 : kInf}) {
    for (DpFill fill : {DpFill::kReference, DpFill::kTiled}) {
      if (fill == DpFill::kReference && std::isinf(cap)) continue;
      MultiLevelDp dp(terms, {fill, cap});
      const std::optional<DpSolution> sol = dp.Solve(nullptr);
      const std::string label =
          what + (fill == DpFill::kTiled ? " tiled" : " reference") + " cap " + std::to_string(cap);
      EXPECT_EQ(sol.has_value(), root.has_value() && root->recompute_ms <= cap) << label;
      if (!root) continue;
      EXPECT_EQ(CompareTables(reference, dp, terms, cap, label), 0) << label;
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

TEST(MultiLevelFill, TransformerChains) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const Profile p = testing::TransformerChain(8 + 4 * seed, seed);
    for (int64_t budget : Budgets(p, 5)) {
      ExpectSameTables(p, budget, 500, Rounding::kDown);
      ExpectSameTables(p, budget, 150, Rounding::kUp);
    }
  }
}

}  // namespace
}  // namespace remat::solver
