// Whether the optimal solver uses the dropout masks' options (dropout_mask,
// all four: a block's options 5 and 6) where they pay, against the same
// profile without them.
#ifndef REMAT_TESTS_TESTING_MASKS_PAY_H_
#define REMAT_TESTS_TESTING_MASKS_PAY_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>

#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/strategies/strategies.h"
#include "testing/gpt_chain.h"

namespace remat::testing {

// Optimal plans of `with` at budgets k * (a block's mask bytes) / `per`
// below its no-checkpoint peak, k = 1..`steps`, each against the optimal
// plan of `with` less the masks' two options at the same budget: expects
// (gtest) none slower, prints each, and returns at how many budgets a block
// is under one of the two and the plan is faster.
inline int BudgetsWhereTheMasksPay(const Profile& with, int steps, int per) {
  Profile without = with;
  for (LayerProfile& l : without.layers) {
    if (l.selective.size() == 7) l.selective.resize(5);
  }
  PlanOptions none;
  none.strategy = Strategy::kNone;
  Result<PlanSet> full = MakePlan(with, none);
  EXPECT_TRUE(full.ok()) << full.status().message();
  const LayerProfile& block = FirstBlock(with);
  const SelectiveOption* drop = Option(block, kDropoutMaskOption);
  EXPECT_NE(drop, nullptr);
  if (!full.ok() || drop == nullptr) return 0;
  const int64_t masks = block.activation_bytes - drop->activation_bytes;
  int pays = 0;
  for (int step = 1; step <= steps; ++step) {
    PlanOptions optimal;
    optimal.strategy = Strategy::kOptimal;
    optimal.budget_bytes = full->chosen.predicted.peak_bytes - masks * step / per;
    Result<PlanSet> w = MakePlan(with, optimal), wo = MakePlan(without, optimal);
    EXPECT_TRUE(w.ok() && wo.ok());
    if (!w.ok() || !wo.ok()) return pays;
    int under = 0;
    for (int o : w->chosen.selective_option) under += o == 5 || o == 6;
    std::cout << "budget peak - " << step << "/" << per << " masks: " << under
              << " blocks under the masks' options, " << w->chosen.predicted.step_ms
              << " ms, without them " << wo->chosen.predicted.step_ms << " ms\n";
    EXPECT_LE(w->chosen.predicted.step_ms, wo->chosen.predicted.step_ms + 1e-9) << step;
    if (under > 0 && w->chosen.predicted.step_ms < wo->chosen.predicted.step_ms) ++pays;
  }
  return pays;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_MASKS_PAY_H_
