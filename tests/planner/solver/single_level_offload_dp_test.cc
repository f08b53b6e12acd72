// SingleLevelOffloadDp's fill (cells no choice can improve left out; without
// a link, A folded into N) against its full fill
// (SingleLevelOffloadOptions::full_fill): the same floor, and at every slot
// count the same schedule and value, on random chains with layers that do
// not keep their input, with and without links, rounding down and up.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "remat/profile/profile.h"
#include "solver/chain_terms.h"
#include "solver/memory_units.h"
#include "solver/single_level_dp.h"
#include "testing/cancel.h"
#include "testing/chains.h"
#include "testing/dp_cases.h"

namespace remat {
namespace {

using solver::ChainTerms;
using solver::MemoryUnits;
using solver::Rounding;
using solver::SingleLevelOffloadDp;
using solver::SingleLevelOffloadOptions;
using solver::SingleLevelSolution;

HostLink Link(bool overlapped) {
  HostLink link;
  link.name = overlapped ? "test-overlapped" : "test-inline";
  link.gb_per_s = 50.0 / 1e6;  // 50 bytes (the random chains' tensors) per ms
  link.overlapped = overlapped;
  return link;
}

// Counts the slot counts compared; every difference fails the test.
int Compare(const Profile& p, const SingleLevelOffloadOptions& options, int percent,
            int64_t slots, Rounding rounding) {
  const ChainTerms terms(
      p, MemoryUnits(testing::BudgetAt(p, percent), slots, rounding,
                     solver::RecurringKeepBytes(p)));
  SingleLevelOffloadOptions full = options;
  full.full_fill = true;
  SingleLevelOffloadDp dp(terms, options), reference(terms, full);
  const bool solved = dp.Solve(nullptr).has_value();
  const std::string where = p.model + " at " + std::to_string(percent) + "%, " +
                            std::to_string(slots) + " slots, link " + options.link.name +
                            (rounding == Rounding::kDown ? ", down" : ", up");
  EXPECT_EQ(solved, reference.Solve(nullptr).has_value()) << where;
  EXPECT_EQ(dp.floor(), reference.floor()) << where;
  if (!solved || dp.floor() != reference.floor()) return 0;
  int compared = 0;
  for (int64_t m = dp.floor(); m <= terms.slots(); ++m, ++compared) {
    const SingleLevelSolution a = dp.Reconstruct(m), b = reference.Reconstruct(m);
    EXPECT_EQ(a.decisions, b.decisions) << where << ", m " << m;
    EXPECT_EQ(a.selective_option, b.selective_option) << where << ", m " << m;
    EXPECT_EQ(a.recompute_ms, b.recompute_ms) << where << ", m " << m;
  }
  return compared;
}

// Compare over no link, an in-line and an overlapped one (with and without
// a host penalty), budgets of 10, 40 and 70%, and both roundings.
int CompareOverLinks(const Profile& p, int64_t few_slots, int64_t many_slots) {
  int compared = 0;
  for (const HostLink& link : {HostLink{}, Link(false), Link(true)}) {
    for (const double penalty : {0.0, 0.01}) {
      if (!link.present() && penalty > 0) continue;
      for (const int percent : {10, 40, 70}) {
        for (const int64_t slots : {few_slots, many_slots}) {
          for (const Rounding r : {Rounding::kDown, Rounding::kUp}) {
            compared += Compare(p, {link, penalty}, percent, slots, r);
          }
        }
      }
    }
  }
  return compared;
}

TEST(OffloadDpFill, EqualsTheFullFillOnRandomChains) {
  int compared = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Profile p = testing::RandomChain(2 + seed % 11, seed);
    for (int i = 0; i < p.num_layers(); ++i) p.layers[i].keeps_input = (i + seed) % 3 != 0;
    if (seed % 2 == 0) p = testing::WithCreatedGradients(std::move(p), seed);
    compared += CompareOverLinks(p, 20, 300);
  }
  EXPECT_GT(compared, 10000);
}

// The chain optimal-single weighs the offload DP on for want of a link: a
// transformer whose loss does not keep the logits; and with links, where
// rows offloading checkpoints of one size share their offloads' least
// terms.
TEST(OffloadDpFill, EqualsTheFullFillOnTransformerChains) {
  int compared = 0;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    Profile p = testing::TransformerChain(4 + seed, seed);
    p.layers.back().keeps_input = false;
    if (seed % 2 == 0) p = testing::WithCreatedGradients(std::move(p), seed);
    compared += CompareOverLinks(p, 250, 1000);
  }
  EXPECT_GT(compared, 5000);
}

// optimal-single fills the conservative tables beside the relaxed ones and
// cancels them when the relaxed plan is final (strategies/optimal.cc).
TEST(OffloadDpFill, CancelledSolveStopsAndAnUncancelledOneIsUnchanged) {
  Profile p = testing::TransformerChain(24, 3);
  p.layers.back().keeps_input = false;
  const ChainTerms terms(p, MemoryUnits(testing::BudgetAt(p, 40), 1000));
  testing::ExpectCancelStopsTheSolve<SingleLevelOffloadDp>(terms, SingleLevelOffloadOptions{});
}

}  // namespace
}  // namespace remat
