// The distinct ranks of a distributed job, each planned as
// PlanJobStrategies plans it (planning/job_plans.cc); the plan fits when
// every rank's does.
#include <algorithm>

#include "planning/job_plans.h"
#include "remat/plan/peak_floor.h"
#include "remat/planning/planning.h"

namespace remat {

Result<std::vector<RankPlan>> PlanRanks(const Job& job, const PlanOptions& options) {
  REMAT_ASSIGN_OR_RETURN(planning_internal::JobPlans plans,
                         planning_internal::PlanJobStrategies(job, options));
  if (!plans.ranks.empty()) return std::move(plans.ranks);
  RankPlan r;
  r.memory.profile = job.profile;
  r.plans = std::move(plans.plans);
  return std::vector<RankPlan>{std::move(r)};
}

int64_t JobPeakFloor(const Job& job, const PlanOptions& options) {
  if (job.ranks.empty()) return DevicePeakFloor(job.profile, options.device_memory);
  int64_t floor = 0;
  for (const RankMemory& m : job.ranks) {
    const bool units_follow_segments =
        m.parallel.fsdp_units == FsdpUnits::kSegment &&
        (m.parallel.data == DataParallel::kFsdp2 || m.parallel.data == DataParallel::kHsdp);
    if (units_follow_segments) return 0;
    floor = std::max(floor, DevicePeakFloor(m.profile, options.device_memory));
  }
  return floor;
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
