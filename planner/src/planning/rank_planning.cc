// The distinct ranks of a distributed job planned one by one; the plan
// fits when every rank's does.
#include "remat/planning.h"

namespace remat {

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
    RankPlan r;
    r.memory = m;
    Result<PlanSet> plans = MakePlan(m.profile, options);
    if (!plans.ok()) {
      return plans.status().WithPrefix("rank " + std::to_string(m.rank) + " (pipeline stage " +
                                       std::to_string(m.stage) + ")");
    }
    r.plans = std::move(*plans);
    out.push_back(std::move(r));
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
