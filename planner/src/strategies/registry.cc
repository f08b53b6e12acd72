// The solver registry and MakePlan: one strategy, or auto over all of them.
#include <algorithm>

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
  return s != Strategy::kOffload || profile.host_link.present();
}

namespace {

// Re-solves with a smaller tensor budget while the caching allocator's
// reserved bytes (replayed, or rounded plus the user's fraction) push a plan
// that fits its tensor budget over the device budget.
constexpr int kRoundingRetries = 4;
// Then bisects between the last tensor budget that did not fit and the one
// that did, for a faster plan that still fits (the reserved bytes above the
// allocated ones differ from plan to plan: lowering the tensor budget by one
// plan's excess can overshoot).
constexpr int kRefineSteps = 3;

// Up to kRefineSteps solves between a setting whose plan (`*plan`) fits and
// one whose plan did not, halving the gap while `more(fits_at, over_at,
// *plan)`; keeps the better fitting plan (BetterPlan) in `*plan`.
template <typename More, typename Solve>
Status Bisect(int64_t fits_at, int64_t over_at, More more, Solve solve, Plan* plan) {
  for (int step = 0; step < kRefineSteps && more(fits_at, over_at, *plan); ++step) {
    const int64_t mid = fits_at + (over_at - fits_at) / 2;
    REMAT_ASSIGN_OR_RETURN(Plan between, solve(mid));
    if (between.fits) {
      fits_at = mid;
      if (BetterPlan(between, *plan)) *plan = std::move(between);
    } else {
      over_at = mid;
    }
  }
  return Status::Ok();
}

// `solver`'s plan under `options`: as the solver makes it without device
// memory terms; with terms, solved against the tensor budget and accounted
// against the device budget (AccountPlanMemory). The solvers screen their
// candidates by allocated bytes; only the plan each returns is replayed
// through the allocator model.
Result<Plan> SolveOnDevice(const StrategySolver& solver, const Profile& profile,
                           const PlanOptions& options) {
  const DeviceMemoryTerms& terms = options.device_memory;
  if (!terms.any()) return solver.Solve(profile, options);
  PlanOptions tensors = options;
  tensors.device_memory = DeviceMemoryTerms{};
  tensors.budget_bytes = TensorBudget(options.budget_bytes, terms);
  // The plan at tensor budget `t`, and whether it fit its tensor budget.
  auto solve = [&](int64_t t, bool* fits_tensors) -> Result<Plan> {
    tensors.budget_bytes = t;
    REMAT_ASSIGN_OR_RETURN(Plan plan, solver.Solve(profile, tensors));
    *fits_tensors = plan.fits;
    REMAT_RETURN_IF_ERROR(AccountPlanMemory(profile, terms, options.budget_bytes, &plan));
    return plan;
  };
  int64_t over_at = tensors.budget_bytes;  // a tensor budget whose plan did not fit
  Plan plan;
  for (int attempt = 0;; ++attempt) {
    bool fits_tensors = false;
    REMAT_ASSIGN_OR_RETURN(plan, solve(tensors.budget_bytes, &fits_tensors));
    if (plan.fits && attempt > 0) break;
    if (plan.fits || !fits_tensors || options.budget_bytes <= 0 || attempt == kRoundingRetries ||
        tensors.budget_bytes <= 1) {
      return plan;
    }
    over_at = tensors.budget_bytes;
    const int64_t over = plan.memory.total_bytes - options.budget_bytes;
    tensors.budget_bytes = std::max<int64_t>(1, tensors.budget_bytes - over);
  }
  int64_t fits_at = tensors.budget_bytes;
  // Not worth a solve: the plan fills the card to within 2%, or the tensor
  // budgets left to try are within 0.5% of the budget of each other.
  const int64_t budget = options.budget_bytes;
  REMAT_RETURN_IF_ERROR(Bisect(
      fits_at, over_at,
      [&](int64_t fits, int64_t over, const Plan& best) {
        return over - fits > budget / 200 && best.memory.total_bytes < budget - budget / 50;
      },
      [&](int64_t mid) {
        bool fits_tensors = false;
        return solve(mid, &fits_tensors);
      },
      &plan));
  return plan;
}

// A pipeline stage (layers with micro-batches in flight) holds, beside the
// micro-batch a plan runs, the others' share of what the plan keeps through
// its turn (Simulate's in_flight_bytes). The DP-based solvers account one
// micro-batch in their slots and simulate their plans on the stage, lowering
// the slots by a plan's overshoot (which lowers what every level keeps).
// Beside that, they solve the stage's profile without the others, its model
// state raised by a reserve for them, each plan simulated on the stage: the
// reserve starts at nothing and rises by each plan's overshoot until a plan
// fits (a plan that keeps less also holds less in flight), then is bisected
// for a faster plan that still fits. The better of the two plans wins.
constexpr int kReserveRetries = 6;

bool Pipelined(const Profile& profile) {
  for (const LayerProfile& l : profile.layers) {
    if (l.in_flight_microbatches > 1) return true;
  }
  return false;
}

Result<Plan> SolveStage(const StrategySolver& solver, const Profile& profile,
                        const PlanOptions& options) {
  const Strategy s = solver.strategy();
  const bool dp = s == Strategy::kOptimal || s == Strategy::kOptimalSingle ||
                  s == Strategy::kOffload;
  if (!dp || options.budget_bytes <= 0 || !Pipelined(profile)) {
    return SolveOnDevice(solver, profile, options);
  }
  Profile one = profile;
  for (LayerProfile& l : one.layers) l.in_flight_microbatches = 1;
  const DeviceMemoryTerms& terms = options.device_memory;
  const int64_t tensor_budget =
      terms.any() ? TensorBudget(options.budget_bytes, terms) : options.budget_bytes;
  // The plan solved with `reserve` bytes set aside, on the stage.
  auto at = [&](int64_t reserve) -> Result<Plan> {
    Profile reserved = one;
    reserved.static_memory.parameter_bytes += reserve;
    REMAT_ASSIGN_OR_RETURN(Plan solved, SolveOnDevice(solver, reserved, options));
    REMAT_ASSIGN_OR_RETURN(Plan plan, MakePlanFromSchedule(profile, s, solved.parameter,
                                                           solved.schedule, tensor_budget));
    if (terms.any()) {
      REMAT_RETURN_IF_ERROR(AccountPlanMemory(profile, terms, options.budget_bytes, &plan));
    }
    return plan;
  };
  auto over = [&](const Plan& plan) {
    const int64_t total = terms.any() ? plan.memory.total_bytes : plan.predicted.peak_bytes;
    return total - options.budget_bytes;
  };
  REMAT_ASSIGN_OR_RETURN(Plan direct, SolveOnDevice(solver, profile, options));
  auto better = [&](Plan plan) { return BetterPlan(direct, plan) ? direct : plan; };
  REMAT_ASSIGN_OR_RETURN(Plan plan, at(0));
  int64_t over_at = 0, reserve = 0;
  const int64_t most = options.budget_bytes - profile.static_bytes();
  for (int attempt = 0; !plan.fits; ++attempt) {
    if (attempt == kReserveRetries || most <= 0) return better(std::move(plan));
    over_at = reserve;
    reserve = std::min(most, reserve + std::max<int64_t>(over(plan), 1));
    REMAT_ASSIGN_OR_RETURN(Plan next, at(reserve));
    if (!next.fits && next.predicted.peak_bytes >= plan.predicted.peak_bytes && reserve == most) {
      return better(std::move(plan));  // nothing lower to find
    }
    plan = std::move(next);
  }
  // A faster plan may fit with less reserve.
  const int64_t budget = options.budget_bytes;
  REMAT_RETURN_IF_ERROR(Bisect(
      reserve, over_at,
      [&](int64_t fits, int64_t over, const Plan&) { return fits - over > budget / 200; }, at,
      &plan));
  return better(std::move(plan));
}

}  // namespace

Result<PlanSet> MakePlan(const Profile& profile, const PlanOptions& options) {
  REMAT_RETURN_IF_ERROR(
      ValidateProfile(profile, profile.model.empty() ? "profile" : profile.model));
  PlanSet set;
  REMAT_ASSIGN_OR_RETURN(set.baseline,
                         SolveOnDevice(*FindSolver(Strategy::kNone), profile, options));
  if (options.strategy != Strategy::kAuto) {
    const StrategySolver* solver = FindSolver(options.strategy);
    if (solver == nullptr) {
      return Status::Invalid(std::string("strategy '") + ToString(options.strategy) +
                             "' is not available in this build");
    }
    REMAT_ASSIGN_OR_RETURN(set.chosen, SolveStage(*solver, profile, options));
    set.candidates.push_back(set.chosen);
    return set;
  }
  set.auto_selected = true;
  for (Strategy s : SweepableStrategies()) {
    if (!AppliesTo(s, profile)) continue;
    REMAT_ASSIGN_OR_RETURN(Plan plan, SolveStage(*FindSolver(s), profile, options));
    if (set.candidates.empty() || BetterPlan(plan, set.chosen)) set.chosen = plan;
    set.candidates.push_back(std::move(plan));
  }
  return set;
}

}  // namespace remat
