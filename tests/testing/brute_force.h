// Oracles for the optimal solvers: every single-level plan of a small chain,
// simulated.
#ifndef REMAT_TESTS_TESTING_BRUTE_FORCE_H_
#define REMAT_TESTS_TESTING_BRUTE_FORCE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "remat/plan/plan.h"
#include "strategies/solvers.h"

namespace remat::testing {

struct SimulatedDecisions {
  std::vector<LayerDecision> decisions;
  std::vector<int> selective_option;
  int64_t peak_bytes = 0;
  double step_ms = 0;
  int64_t host_peak_bytes = 0;
};

// Every decision vector BuildSingleLevelSchedule accepts: per layer keep,
// checkpoint, recompute (after a checkpointed or recomputed layer) or each
// selective option. Grows like ~3.4^L with one selective option per layer.
// `with_offload` (and a host link): kOffload too, after a layer run without grad.
inline std::vector<SimulatedDecisions> AllSingleLevelPlans(const Profile& p,
                                                           bool with_offload = false) {
  const int L = p.num_layers();
  std::vector<SimulatedDecisions> out;
  std::vector<LayerDecision> d(L);
  std::vector<int> opt(L, -1);
  std::function<void(int)> walk = [&](int i) {
    if (i == L) {
      Result<Plan> plan = strategies::EvaluateDecisions(p, Strategy::kManual, "", d, opt, 0);
      if (plan.ok()) {
        out.push_back({d, opt, plan->predicted.peak_bytes, plan->predicted.step_ms,
                       plan->predicted.host_peak_bytes});
      }
      return;
    }
    opt[i] = -1;
    const bool after_segment = i > 0 && RunsWithoutGrad(d[i - 1]);
    for (LayerDecision c : {LayerDecision::kKeep, LayerDecision::kCheckpoint,
                            LayerDecision::kRecompute, LayerDecision::kOffload}) {
      if (c == LayerDecision::kRecompute && !after_segment) continue;
      if (c == LayerDecision::kOffload &&
          (!with_offload || !p.host_link.present() || !after_segment)) {
        continue;
      }
      d[i] = c;
      walk(i + 1);
    }
    for (int k = 0; k < static_cast<int>(p.layers[i].selective.size()); ++k) {
      d[i] = LayerDecision::kSelective;
      opt[i] = k;
      walk(i + 1);
    }
    opt[i] = -1;
  };
  walk(0);
  return out;
}

// The least step time among `plans` within `budget` bytes; < 0 if none fits.
inline double BestStepMs(const std::vector<SimulatedDecisions>& plans, int64_t budget) {
  double best = -1;
  for (const SimulatedDecisions& s : plans) {
    if (s.peak_bytes <= budget && (best < 0 || s.step_ms < best)) best = s.step_ms;
  }
  return best;
}

// The plan `strategy` chooses at `budget` (one-byte slots by default: the
// solvers exact); a failed MakePlan fails the test and returns Plan{}.
inline Plan SolveAt(const Profile& p, Strategy strategy, int64_t budget, int slots = 1 << 22) {
  PlanOptions o;
  o.strategy = strategy;
  o.budget_bytes = budget;
  o.slots = slots;
  Result<PlanSet> set = MakePlan(p, o);
  EXPECT_TRUE(set.ok()) << set.status().message();
  return set.ok() ? set->chosen : Plan{};
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_BRUTE_FORCE_H_
