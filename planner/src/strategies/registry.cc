// The solver registry: every strategy solver, found by its strategy.
#include "strategies/solvers.h"

namespace remat {

using strategies::RegisteredSolvers;

const std::vector<const StrategySolver*>& AllSolvers() { return RegisteredSolvers(); }

const StrategySolver* FindSolver(Strategy strategy) {
  for (const StrategySolver* s : AllSolvers()) {
    if (s->strategy() == strategy) return s;
  }
  return nullptr;
}

bool Sweepable(Strategy s) {
  return s != Strategy::kAuto && s != Strategy::kManual && FindSolver(s) != nullptr;
}

std::vector<Strategy> SweepableStrategies() {
  std::vector<Strategy> out;
  for (const StrategySolver* solver : AllSolvers()) {
    if (Sweepable(solver->strategy())) out.push_back(solver->strategy());
  }
  return out;
}

bool AppliesTo(Strategy s, const Profile& profile) {
  if (s != Strategy::kOffload) return true;
  if (!profile.host_link.present()) return false;
  // The host budget holds one checkpoint at least: a block's input.
  const int64_t host = profile.host_link.budget_bytes;
  if (host <= 0) return true;
  for (int b : BlockLayers(profile)) {
    if (b > 0 && profile.layers[b - 1].output_bytes <= host) return true;
  }
  return false;
}

}  // namespace remat
