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

namespace planning_internal {

size_t WorstPlanIndex(const std::vector<const Plan*>& plans) {
  size_t worst = 0;
  for (size_t i = 1; i < plans.size(); ++i) {
    const Plan& a = *plans[i];
    const Plan& w = *plans[worst];
    if (a.fits != w.fits ? !a.fits : a.memory.total_bytes > w.memory.total_bytes) worst = i;
  }
  return worst;
}

Plan WorstPlanOf(const std::vector<const Plan*>& plans) {
  Plan worst = *plans[WorstPlanIndex(plans)];
  for (const Plan* p : plans) worst.fits = worst.fits && p->fits;
  return worst;
}

}  // namespace planning_internal

int WorstRank(const std::vector<RankPlan>& ranks) {
  std::vector<const Plan*> plans;
  for (const RankPlan& r : ranks) plans.push_back(&r.plans.chosen);
  return static_cast<int>(planning_internal::WorstPlanIndex(plans));
}

PlanSet WorstRankPlans(const std::vector<RankPlan>& ranks) {
  PlanSet set = ranks[WorstRank(ranks)].plans;
  for (const RankPlan& r : ranks) set.chosen.fits = set.chosen.fits && r.plans.chosen.fits;
  return set;
}

}  // namespace remat
