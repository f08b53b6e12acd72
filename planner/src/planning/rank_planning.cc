// The distinct ranks of a distributed job planned one by one; the plan
// fits when every rank's does.
#include <algorithm>
#include <optional>

#include "remat/planning/planning.h"

namespace remat {
namespace {

// The blocks of the plan's largest recompute segment: a checkpoint or
// offload and the recompute layers after it, blocks counted (a segment
// starting at the embedding holds the blocks after it); 1 where none spans
// several blocks. FSDP2 gathers such a segment as one fully_shard unit.
int64_t LargestSegmentBlocks(const Profile& profile, const Plan& plan) {
  int64_t largest = 1, blocks = 0;
  bool in_segment = false;
  for (size_t i = 0; i < plan.decisions.size() && i < profile.layers.size(); ++i) {
    const LayerDecision d = plan.decisions[i];
    if (d == LayerDecision::kCheckpoint || d == LayerDecision::kOffload) {
      in_segment = true;
      blocks = 0;
    } else if (d != LayerDecision::kRecompute) {
      in_segment = false;
    }
    if (in_segment && profile.layers[i].kind == kBlockKind) {
      largest = std::max(largest, ++blocks);
    }
  }
  return largest;
}

// The rank planned with FSDP2 units as large as its plan's segments: each
// plan's largest segment is gathered as one unit, so the rank is planned
// again with that unit until the plan's segments fit in the unit assumed
// (the unit only grows, at most to every block). The plan without
// checkpointing has no segments: its units are single blocks, as planned
// first (--strategy none alone).
Result<RankPlan> PlanRank(const RankMemory& memory, const PlanOptions& options) {
  RankPlan r;
  r.memory = memory;
  std::optional<Plan> baseline;
  for (;;) {
    REMAT_ASSIGN_OR_RETURN(r.plans, MakePlan(r.memory.profile, options));
    if (!baseline) baseline = r.plans.baseline;
    r.plans.baseline = *baseline;
    const int64_t blocks = LargestSegmentBlocks(r.memory.profile, r.plans.chosen);
    if (blocks <= r.memory.state.gather_blocks) return r;
    const RankMemory grown = WithGatherBlocks(r.memory, blocks);
    if (grown.state.gather_blocks == r.memory.state.gather_blocks) return r;
    r.memory = grown;
  }
}

}  // namespace

Result<std::vector<RankPlan>> PlanRanks(const Job& job, const PlanOptions& options) {
  std::vector<RankPlan> out;
  if (job.ranks.empty()) {
    RankPlan r;
    r.memory.profile = job.profile;
    REMAT_ASSIGN_OR_RETURN(r.plans, MakePlan(job.profile, options));
    out.push_back(std::move(r));
    return out;
  }
  for (const RankMemory& m : job.ranks) {
    Result<RankPlan> r = PlanRank(m, options);
    if (!r.ok()) {
      return r.status().WithPrefix("rank " + std::to_string(m.rank) + " (pipeline stage " +
                                   std::to_string(m.stage) + ")");
    }
    out.push_back(std::move(*r));
  }
  return out;
}

int WorstRank(const std::vector<RankPlan>& ranks) {
  int worst = 0;
  for (int i = 1; i < static_cast<int>(ranks.size()); ++i) {
    const Plan& a = ranks[i].plans.chosen;
    const Plan& w = ranks[worst].plans.chosen;
    if (a.fits != w.fits ? !a.fits : a.memory.total_bytes > w.memory.total_bytes) worst = i;
  }
  return worst;
}

PlanSet WorstRankPlans(const std::vector<RankPlan>& ranks) {
  PlanSet set = ranks[WorstRank(ranks)].plans;
  for (const RankPlan& r : ranks) set.chosen.fits = set.chosen.fits && r.plans.chosen.fits;
  return set;
}

}  // namespace remat
