// MakePlan: the requested strategy's plan from the fit search, or auto:
// every strategy that applies, the fastest plan that fits chosen. Both take
// each strategy's plan from a FitSearch, so auto's candidates are the
// strategies' plans run alone.
#include <map>
#include <memory>
#include <optional>

#include "remat/plan/plan_memo.h"
#include "remat/strategies/fit_search.h"
#include "strategies/solvers.h"

namespace remat {

int SearchGroup(Strategy s) {
  switch (s) {
    case Strategy::kOptimal:
    case Strategy::kOptimalSingle:
      return 1;
    case Strategy::kOffload:
      return 2;
    default:
      return 0;
  }
}

std::vector<std::vector<size_t>> SearchGroups(const std::vector<Strategy>& strategies,
                                              bool at_once) {
  std::vector<std::vector<size_t>> groups;
  std::map<int, size_t> group_at;
  for (size_t i = 0; i < strategies.size(); ++i) {
    auto [it, added] = group_at.emplace(at_once ? SearchGroup(strategies[i]) : 0, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

namespace {

// ValidateProfile(profile) as MakePlan reports it, checked once per memo
// open for the profile: the check reads the profile alone, which does not
// change while a memo is open for it, so a sweep planning one profile many
// times checks it once (a profile that fails is checked, and fails, each
// time).
Status ValidOnce(const Profile& profile) {
  static const std::string kName = "make_plan: profile valid";
  if (plan_memo::Kept(profile, kName) != nullptr) return Status::Ok();
  REMAT_RETURN_IF_ERROR(
      ValidateProfile(profile, profile.model.empty() ? "profile" : profile.model));
  plan_memo::Keep(profile, kName, std::make_shared<const bool>(true));
  return Status::Ok();
}

}  // namespace

Result<PlanSet> MakePlan(const Profile& profile, const PlanOptions& options, const RunTasks& run) {
  const PlanMemo memo(profile, PlanMemo::Open::kJoin);
  REMAT_RETURN_IF_ERROR(ValidOnce(profile));
  if (options.strategy != Strategy::kAuto && FindSolver(options.strategy) == nullptr) {
    return Status::Invalid(std::string("strategy '") + ToString(options.strategy) +
                           "' is not available in this build");
  }
  // none (for the baseline), then the strategies planned.
  std::vector<Strategy> planned = {Strategy::kNone};
  if (options.strategy != Strategy::kAuto) {
    planned.push_back(options.strategy);
  } else {
    for (Strategy s : SweepableStrategies()) {
      if (AppliesTo(s, profile)) planned.push_back(s);
    }
  }
  // Without a runner, one search for all, in line.
  const std::vector<std::vector<size_t>> groups = SearchGroups(planned, static_cast<bool>(run));
  std::vector<std::optional<Result<Plan>>> plans(planned.size());
  std::vector<std::function<void()>> tasks;
  for (const std::vector<size_t>& group : groups) {
    tasks.push_back([&profile, &options, &group, &planned, &plans] {
      FitSearch search(profile, options);
      for (size_t i : group) plans[i] = search.Of(planned[i]);
    });
  }
  if (run) {
    run(tasks);
  } else {
    for (const std::function<void()>& task : tasks) task();
  }
  // Errors in the order MakePlan plans the strategies.
  for (const std::optional<Result<Plan>>& p : plans) {
    if (!p->ok()) return p->status();
  }
  PlanSet set;
  set.baseline = **plans[0];
  if (options.strategy != Strategy::kAuto) {
    set.chosen = **plans[1];
    set.candidates.push_back(set.chosen);
    return set;
  }
  set.auto_selected = true;
  for (size_t i = 1; i < plans.size(); ++i) {
    const Plan& plan = **plans[i];
    if (set.candidates.empty() || BetterPlan(plan, set.chosen)) set.chosen = plan;
    set.candidates.push_back(plan);
  }
  return set;
}

Result<PlanSet> MakePlan(const Profile& profile, const PlanOptions& options) {
  return MakePlan(profile, options, RunTasks{});
}

}  // namespace remat
