#include <algorithm>
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

// "14 recomputes, up to 3 per layer, 5 selective".
std::string DescribeRecompute(const Plan& plan) {
  std::vector<int> per_layer(plan.schedule.num_layers, 0);
  int total = 0;
  for (const Op& op : plan.schedule.ops) {
    if (op.kind == OpKind::kRecompute) ++per_layer[op.layer], ++total;
  }
  const int selective = static_cast<int>(
      std::count(plan.decisions.begin(), plan.decisions.end(), LayerDecision::kSelective));
  std::string out;
  if (total > 0) {
    const int most = *std::max_element(per_layer.begin(), per_layer.end());
    out = std::to_string(total) + (total == 1 ? " recompute" : " recomputes") +
          (most > 1 ? ", up to " + std::to_string(most) + " per layer" : "");
  }
  if (selective > 0) out += (out.empty() ? "" : ", ") + std::to_string(selective) + " selective";
  return out.empty() ? "nothing recomputed" : out;
}

int RoundSqrt(int n) { return std::max(1, static_cast<int>(std::lround(std::sqrt(n)))); }

}  // namespace remat::strategies
