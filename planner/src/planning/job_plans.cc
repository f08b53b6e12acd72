// A distributed job planned strategy by strategy: each strategy alone on
// every distinct rank (under --fsdp-units segment, with the FSDP2 units its
// own plan's segments need; the default, a unit per block, never grows), so
// that a row of the strategies table is what that strategy run alone
// returns, and auto's plan of each rank the fastest of them that fits.
#include "planning/job_plans.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "planning/in_order.h"
#include "remat/plan/plan_memo.h"
#include "remat/strategies/fit_search.h"

namespace remat::planning_internal {
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

// One strategy's plan of one rank, and the rank's memory with the FSDP2
// units that plan needs.
struct RankStrategyPlan {
  const RankMemory* memory = nullptr;
  Plan plan;
};

// The rank as planned: its model state on the host (state offload) takes
// the host budget (--host-budget) first; its activations may offload into
// what is left (none where nothing is: a byte, which no offload fits in).
RankMemory WithStateOnHost(RankMemory m) {
  const int64_t host_budget = m.profile.host_link.budget_bytes;
  const int64_t state_on_host = m.state.host_bytes();
  if (host_budget > 0 && state_on_host > 0) {
    m.profile.host_link.budget_bytes = std::max<int64_t>(1, host_budget - state_on_host);
  }
  return m;
}

// The searches of one rank, one per FSDP2 unit size tried; each strategy
// planned from the rank as given, with units as large as its plan's
// segments where units follow segments (--fsdp-units segment): the rank is planned again with that unit until the plan's
// segments fit in the unit assumed (the unit only grows, at most to every
// block). The strategies share each unit size's search.
class RankSearches {
 public:
  // `memory`: the rank as the job gives it; `planned`: that rank as planned
  // (WithStateOnHost), kept by the caller while the searches live, so that
  // searches of the same rank on other threads share its memo.
  RankSearches(const RankMemory& memory, const RankMemory& planned, const PlanOptions& options)
      : options_(options),
        host_budget_(memory.profile.host_link.budget_bytes),
        state_on_host_(memory.state.host_bytes()) {
    levels_.push_back(std::make_unique<Level>(planned, nullptr, options_));
  }
  RankSearches(const RankSearches&) = delete;
  RankSearches& operator=(const RankSearches&) = delete;

  // `s` planned alone on the rank. optimal and optimal-single, where their
  // own plan does not fit, take the better plan of a strategy they contain
  // (ContainedStrategies), as FitSearch does on one profile: their own
  // search may follow its segments to units where nothing fits.
  Result<RankStrategyPlan> Of(Strategy s) {
    if (auto it = plans_.find(s); it != plans_.end()) return it->second;
    REMAT_ASSIGN_OR_RETURN(RankStrategyPlan p, Follow(s));
    // The host budget holds the offloaded state besides what the plan
    // offloads (WithStateOnHost).
    if (host_budget_ > 0 && state_on_host_ + p.plan.predicted.host_peak_bytes > host_budget_) {
      p.plan.fits = false;
    }
    const bool own_fits = p.plan.fits;
    for (Strategy c : ContainedStrategies(s)) {
      if (own_fits || options_.budget_bytes <= 0) break;
      REMAT_ASSIGN_OR_RETURN(const RankStrategyPlan q, Of(c));
      if (BetterPlan(q.plan, p.plan)) p = RankStrategyPlan{q.memory, AsStrategyPlan(q.plan, s)};
    }
    plans_.emplace(s, p);
    return p;
  }

 private:
  // `s`'s plan from the rank as given, the units grown to its segments.
  Result<RankStrategyPlan> Follow(Strategy s) {
    Level* level = levels_.front().get();
    for (;;) {
      REMAT_RETURN_IF_ERROR(level->Validate());
      REMAT_ASSIGN_OR_RETURN(Plan plan, level->search.Of(s));
      const RankMemory& m = level->memory;
      const int64_t blocks = LargestSegmentBlocks(m.profile, plan);
      if (blocks <= m.state.gather_blocks || !RegathersBlocks(m, blocks)) {
        return RankStrategyPlan{&m, std::move(plan)};
      }
      RankMemory grown = WithGatherBlocks(m, blocks);
      if (grown.state.gather_blocks == m.state.gather_blocks) {
        return RankStrategyPlan{&m, std::move(plan)};
      }
      level = Find(std::move(grown));  // its host budget m's (WithStateOnHost)
    }
  }

  // One unit size's search, on the rank as planned (`owned`, or the
  // caller's).
  struct Level {
    Level(const RankMemory& m, std::unique_ptr<const RankMemory> owned, const PlanOptions& options)
        : owned(std::move(owned)), memory(m), search(memory.profile, options) {}
    Status Validate() {
      if (!validated) {
        REMAT_RETURN_IF_ERROR(ValidateProfile(
            memory.profile, memory.profile.model.empty() ? "profile" : memory.profile.model));
        validated = true;
      }
      return Status::Ok();
    }
    std::unique_ptr<const RankMemory> owned;
    const RankMemory& memory;
    FitSearch search;  // holds memory.profile
    bool validated = false;
  };

  Level* Find(RankMemory memory) {
    for (const std::unique_ptr<Level>& l : levels_) {
      if (l->memory.state.gather_blocks == memory.state.gather_blocks) return l.get();
    }
    auto owned = std::make_unique<const RankMemory>(std::move(memory));
    const RankMemory& m = *owned;
    levels_.push_back(std::make_unique<Level>(m, std::move(owned), options_));
    return levels_.back().get();
  }

  const PlanOptions options_;
  const int64_t host_budget_;    // --host-budget; 0: no limit
  const int64_t state_on_host_;  // the rank's offloaded model state
  std::vector<std::unique_ptr<Level>> levels_;
  std::map<Strategy, RankStrategyPlan> plans_;
};

RankPlan RankPlanOf(const RankStrategyPlan& p, const Plan& baseline) {
  RankPlan r;
  r.memory = *p.memory;
  r.plans.chosen = p.plan;
  r.plans.candidates = {p.plan};
  r.plans.baseline = baseline;
  return r;
}

// One task's plans: of the strategies it was given, in their order, each
// with the memory of the rank it was planned on (the FSDP2 units its plan
// needs), held by the task's searches.
struct TaskPlans {
  std::shared_ptr<RankSearches> searches;
  std::vector<Result<RankStrategyPlan>> plans;
};


}  // namespace

Result<JobPlans> PlanJobStrategies(const Job& job, const PlanOptions& options) {
  JobPlans out;
  // The strategies' searches at the same time where the machine has cores
  // to spare (not inside another pool's task): groups of strategies
  // (SearchGroup), each rank's groups sharing the rank's memo. Else one
  // search a rank, in line.
  const bool concurrent = MachineThreads() > 1 && !InRunInOrderTask();
  if (job.ranks.empty()) {
    RunTasks run;
    if (concurrent) {
      run = [](const std::vector<std::function<void()>>& tasks) {
        std::vector<std::function<int()>> each;
        for (const std::function<void()>& t : tasks) each.push_back([&t] { return t(), 0; });
        RunInOrder(each, MachineThreads());
      };
    }
    REMAT_ASSIGN_OR_RETURN(out.plans, MakePlan(job.profile, options, run));
    return out;
  }
  const bool is_auto = options.strategy == Strategy::kAuto;
  if (!is_auto && FindSolver(options.strategy) == nullptr) {
    return Status::Invalid(std::string("strategy '") + ToString(options.strategy) +
                           "' is not available in this build");
  }
  // The strategies planned: auto's, those that apply to every rank.
  std::vector<Strategy> strategies;
  if (is_auto) {
    for (Strategy s : SweepableStrategies()) {
      const bool applies = std::all_of(job.ranks.begin(), job.ranks.end(),
                                       [&](const RankMemory& m) { return AppliesTo(s, m.profile); });
      if (applies) strategies.push_back(s);
    }
  } else {
    strategies.push_back(options.strategy);
  }
  // Each rank's tasks: a group each; `planned` lists none and the
  // strategies in their order.
  std::vector<Strategy> planned = {Strategy::kNone};
  planned.insert(planned.end(), strategies.begin(), strategies.end());
  const std::vector<std::vector<size_t>> groups = SearchGroups(planned, concurrent);
  // Each rank as planned, with a memo its tasks share.
  std::vector<RankMemory> as_planned;
  std::vector<std::unique_ptr<PlanMemo>> memos;
  for (const RankMemory& m : job.ranks) as_planned.push_back(WithStateOnHost(m));
  for (const RankMemory& m : as_planned) memos.push_back(std::make_unique<PlanMemo>(m.profile));
  std::vector<std::function<TaskPlans()>> tasks;
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    for (const std::vector<size_t>& group : groups) {
      tasks.push_back([&m = job.ranks[r], &a = as_planned[r], &group, &planned, &options] {
        TaskPlans t;
        t.searches = std::make_shared<RankSearches>(m, a, options);
        for (size_t i : group) t.plans.push_back(t.searches->Of(planned[i]));
        return t;
      });
    }
  }
  const std::vector<TaskPlans> done = RunInOrder(tasks, MachineThreads());
  // Each strategy's plan of each rank, planned alone; none's for the
  // baseline. Errors in the order a rank's strategies are listed, ranks in
  // order.
  std::vector<std::vector<const Plan*>> alone(planned.size());  // [strategy][rank]
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    const RankMemory& m = job.ranks[r];
    std::vector<const Result<RankStrategyPlan>*> of(planned.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      const TaskPlans& t = done[r * groups.size() + g];
      for (size_t k = 0; k < groups[g].size(); ++k) of[groups[g][k]] = &t.plans[k];
    }
    for (const auto* p : of) {
      if (!p->ok()) {
        return p->status().WithPrefix("rank " + std::to_string(m.rank) + " (pipeline stage " +
                                      std::to_string(m.stage) + ")");
      }
    }
    for (size_t i = 0; i < planned.size(); ++i) alone[i].push_back(&(*of[i])->plan);
    const Plan& base = (*of[0])->plan;
    if (!is_auto) {
      out.ranks.push_back(RankPlanOf(**of[1], base));
      continue;
    }
    const RankStrategyPlan* best = nullptr;
    RankPlan rank;
    rank.plans.auto_selected = true;
    rank.plans.baseline = base;
    for (size_t i = 0; i < strategies.size(); ++i) {
      const RankStrategyPlan& p = **of[i + 1];
      if (i == 0 || BetterPlan(p.plan, best->plan)) best = &p;
      rank.plans.candidates.push_back(p.plan);
    }
    rank.memory = *best->memory;
    rank.plans.chosen = best->plan;
    out.ranks.push_back(std::move(rank));
  }
  out.worst_rank = WorstRank(out.ranks);
  out.plans = WorstRankPlans(out.ranks);
  // The table: each strategy's plan as the job planned with it alone gives
  // it (WorstRankPlans of its ranks' plans, WorstPlanOf).
  out.plans.candidates.clear();
  if (is_auto) {
    for (size_t i = 1; i < planned.size(); ++i) {
      out.plans.candidates.push_back(WorstPlanOf(alone[i]));
    }
  } else {
    out.plans.candidates.push_back(out.plans.chosen);
  }
  out.plans.baseline = WorstPlanOf(alone[0]);
  return out;
}

// Why that is exact. A plan that does not fit never replaces one that
// fits, and the first that fits replaces any that does not, so the choice
// is the fold of BetterPlan over the fitting plans alone. Let F be the
// least floor of the strategies left out, M = 1e-6 |F| + 1e-6; "fast" a
// step time at most F - M, "high" one at least F - M/2. A fast plan is
// always BetterPlan than a high one and never the reverse (their times
// differ by more than SameStepTime's tolerance), and every plan left out
// that fits is high. Folding with and without them, the two choices are
// at every point the same plan, or both high (or none): a left-out plan can
// only replace a high choice (or none), a fast plan replaces any high one
// in both folds, and a high one keeps both high. So where every fitting
// plan planned is fast or high, and the choice without the left-out ones
// is fast, it is the choice with them. Otherwise every strategy is planned.
Result<std::optional<size_t>> FastestFitting(
    const std::vector<double>& floors, const std::vector<bool>& cannot_fit,
    const std::function<Result<const Plan*>(size_t)>& plan_of) {
  std::vector<bool> deferred(floors.size(), false);
  double least_floor = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < floors.size(); ++i) {
    if (std::isfinite(floors[i])) {
      deferred[i] = true;
      least_floor = std::min(least_floor, floors[i]);
    }
  }
  // The fold over the fitting plans, with or without the deferred ones.
  auto fold = [&](bool all, bool* separated) -> Result<std::optional<size_t>> {
    const double margin = 1e-6 * std::fabs(least_floor) + 1e-6;
    std::optional<size_t> best;
    const Plan* best_plan = nullptr;
    for (size_t i = 0; i < floors.size(); ++i) {
      if ((deferred[i] && !all) || cannot_fit[i]) continue;
      REMAT_ASSIGN_OR_RETURN(const Plan* p, plan_of(i));
      if (!p->fits) continue;
      const double t = p->predicted.step_ms;
      if (!(t <= least_floor - margin || t >= least_floor - margin / 2)) *separated = false;
      if (!best || BetterPlan(*p, *best_plan)) {
        best = i;
        best_plan = p;
      }
    }
    if (best && !(best_plan->predicted.step_ms <= least_floor - margin)) *separated = false;
    return best;
  };
  bool separated = true;
  if (std::isfinite(least_floor)) {
    REMAT_ASSIGN_OR_RETURN(const std::optional<size_t> without, fold(false, &separated));
    if (without && separated) return without;
  }
  return fold(true, &separated);
}

namespace {

// Each strategy's FittingStepFloor on `profile` (-infinity without
// `floors`).
std::vector<double> StepFloors(const std::vector<Strategy>& strategies, const Profile& profile,
                               bool floors) {
  std::vector<double> out;
  for (Strategy s : strategies) {
    out.push_back(floors ? FittingStepFloor(profile, s)
                         : -std::numeric_limits<double>::infinity());
  }
  return out;
}

// Whether each strategy's FittingBytesFloor on `profile` is above the
// budget (none without `floors`).
std::vector<bool> CannotFit(const std::vector<Strategy>& strategies, const Profile& profile,
                            const PlanOptions& options, bool floors) {
  std::vector<bool> out;
  for (Strategy s : strategies) {
    out.push_back(floors && options.budget_bytes > 0 &&
                  FittingBytesFloor(profile, s, options) > options.budget_bytes);
  }
  return out;
}

}  // namespace

Result<std::vector<RankPlan>> PlanRanksFastestFitting(const Job& job, const PlanOptions& options,
                                                      bool stop_at_no_fit) {
  if (job.ranks.empty()) {
    const Profile& profile = job.profile;
    REMAT_RETURN_IF_ERROR(
        ValidateProfile(profile, profile.model.empty() ? "profile" : profile.model));
    std::vector<Strategy> strategies;
    for (Strategy s : SweepableStrategies()) {
      if (AppliesTo(s, profile)) strategies.push_back(s);
    }
    FitSearch search(profile, options);
    std::vector<std::optional<Plan>> plans(strategies.size());
    auto plan_of = [&](size_t i) -> Result<const Plan*> {
      if (!plans[i]) {
        REMAT_ASSIGN_OR_RETURN(Plan p, search.Of(strategies[i]));
        plans[i] = std::move(p);
      }
      return &*plans[i];
    };
    REMAT_ASSIGN_OR_RETURN(const std::optional<size_t> chosen,
                           FastestFitting(StepFloors(strategies, profile, true),
                                          CannotFit(strategies, profile, options, true), plan_of));
    RankPlan r;
    r.memory.profile = profile;
    r.plans.auto_selected = true;
    if (chosen) r.plans.chosen = *plans[*chosen];
    r.plans.chosen.fits = chosen.has_value();
    return std::vector<RankPlan>{std::move(r)};
  }
  std::vector<Strategy> strategies;
  for (Strategy s : SweepableStrategies()) {
    const bool applies = std::all_of(job.ranks.begin(), job.ranks.end(),
                                     [&](const RankMemory& m) { return AppliesTo(s, m.profile); });
    if (applies) strategies.push_back(s);
  }
  auto plan_rank = [&strategies, &options](const RankMemory& m) -> Result<RankPlan> {
      const RankMemory planned = WithStateOnHost(m);
      const PlanMemo memo(planned.profile);
      RankSearches searches(m, planned, options);
      std::vector<std::optional<RankStrategyPlan>> plans(strategies.size());
      auto plan_of = [&](size_t i) -> Result<const Plan*> {
        if (!plans[i]) {
          REMAT_ASSIGN_OR_RETURN(RankStrategyPlan p, searches.Of(strategies[i]));
          plans[i] = std::move(p);
        }
        return &plans[i]->plan;
      };
      // Units that follow segments plan a strategy on other profiles than
      // the rank's (RankSearches::Follow): no floor is taken there.
      const bool units_follow_segments =
          m.parallel.fsdp_units == FsdpUnits::kSegment &&
          (m.parallel.data == DataParallel::kFsdp2 || m.parallel.data == DataParallel::kHsdp);
      REMAT_ASSIGN_OR_RETURN(
          const std::optional<size_t> chosen,
          FastestFitting(StepFloors(strategies, planned.profile, !units_follow_segments),
                         CannotFit(strategies, planned.profile, options, !units_follow_segments),
                         plan_of));
      RankPlan r;
      r.plans.auto_selected = true;
      if (chosen) {
        r.memory = *plans[*chosen]->memory;
        r.plans.chosen = plans[*chosen]->plan;
      } else {
        r.memory = m;
        r.plans.chosen.fits = false;
      }
      return r;
  };
  // With stop_at_no_fit, a rank after one found not to fit is not planned
  // (nullopt): the ranks are read in order below, and each skipped one lies
  // after a rank that does not fit (or fails), where the reading stops.
  std::atomic<size_t> first_no_fit{job.ranks.size()};
  std::vector<std::function<std::optional<Result<RankPlan>>()>> tasks;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    tasks.push_back([&, i]() -> std::optional<Result<RankPlan>> {
      if (stop_at_no_fit && i > first_no_fit.load()) return std::nullopt;
      Result<RankPlan> r = plan_rank(job.ranks[i]);
      if (stop_at_no_fit && r.ok() && !r->plans.chosen.fits) {
        size_t now = first_no_fit.load();
        while (i < now && !first_no_fit.compare_exchange_weak(now, i)) {
        }
      }
      return r;
    });
  }
  std::vector<RankPlan> out;
  for (std::optional<Result<RankPlan>>& r : RunInOrder(tasks, MachineThreads())) {
    if (!r->ok()) return r->status();
    out.push_back(**std::move(r));
    if (stop_at_no_fit && !out.back().plans.chosen.fits) break;
  }
  return out;
}

}  // namespace remat::planning_internal
