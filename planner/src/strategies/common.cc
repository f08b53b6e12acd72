#include <cmath>

#include "strategies/solvers.h"

namespace remat::strategies {

Result<Plan> EvaluateDecisions(const Profile& profile, Strategy strategy, std::string parameter,
                               const std::vector<LayerDecision>& decisions,
                               const std::vector<int>& selective_option, int64_t budget_bytes,
                               SimulationDetail detail) {
  REMAT_ASSIGN_OR_RETURN(Schedule schedule,
                         BuildSingleLevelSchedule(profile, decisions, selective_option));
  return MakePlanFromSchedule(profile, strategy, std::move(parameter), std::move(schedule),
                              budget_bytes, detail);
}

void KeepBetter(Plan candidate, Plan* best, bool* have) {
  if (!*have || BetterPlan(candidate, *best)) {
    *best = std::move(candidate);
    *have = true;
  }
}

std::vector<LayerDecision> SegmentDecisions(int num_layers, const std::vector<int>& blocks,
                                            const std::vector<char>& is_start) {
  std::vector<LayerDecision> d(num_layers, LayerDecision::kKeep);
  for (size_t j = 0; j < blocks.size(); ++j) {
    const int c = blocks[j];
    const bool after_segment_layer =
        c > 0 && (d[c - 1] == LayerDecision::kCheckpoint || d[c - 1] == LayerDecision::kRecompute);
    d[c] = (is_start[j] || !after_segment_layer) ? LayerDecision::kCheckpoint
                                                 : LayerDecision::kRecompute;
  }
  return d;
}

int RoundSqrt(int n) { return std::max(1, static_cast<int>(std::lround(std::sqrt(n)))); }

}  // namespace remat::strategies
