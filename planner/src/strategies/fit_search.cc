// The fit search over one strategy's solver: the retries and bisections
// that turn a solver's plan at a tensor budget into the fastest plan that
// fits the device budget (the caching allocator's reserved bytes, the
// memory beside tensors, a pipeline stage's micro-batches in flight).
#include "strategies/fit_search.h"

#include <algorithm>

#include "remat/device/device_memory.h"

namespace remat::strategies {

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
// Where the retries found no fitting plan but the strategy's least-memory
// plan fits, the bisection starts from that plan, over a wider range.
constexpr int kSearchSteps = 8;

// Whether two schedules run the same ops.
bool SameOps(const Schedule& a, const Schedule& b) {
  return std::equal(a.ops.begin(), a.ops.end(), b.ops.begin(), b.ops.end(),
                    [](const Op& x, const Op& y) {
                      return x.kind == y.kind && x.layer == y.layer && x.save == y.save &&
                             x.option == y.option && x.tensor == y.tensor;
                    });
}

// Up to `steps` solves between a setting whose plan (`*plan`) fits and
// one whose plan did not, halving the gap while `more(fits_at, over_at,
// *plan)`; keeps the better fitting plan (BetterPlan) in `*plan`.
template <typename More, typename Solve>
Status Bisect(int steps, int64_t fits_at, int64_t over_at, More more, Solve solve, Plan* plan) {
  for (int step = 0; step < steps && more(fits_at, over_at, *plan); ++step) {
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

}  // namespace

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
  int steps = kRefineSteps;
  const bool has_least_plan =
      solver.strategy() != Strategy::kNone && solver.strategy() != Strategy::kManual;
  for (int attempt = 0;; ++attempt) {
    bool fits_tensors = false;
    REMAT_ASSIGN_OR_RETURN(plan, solve(tensors.budget_bytes, &fits_tensors));
    if (plan.fits && attempt > 0) break;
    if (plan.fits || options.budget_bytes <= 0) return plan;
    if (!fits_tensors || attempt == kRoundingRetries || tensors.budget_bytes <= 1) {
      // A strategy with one plan (none, manual) has nothing less to offer.
      if (!has_least_plan) return plan;
      // Most solvers return their least-memory plan when nothing fits
      // their tensor budget: that one was replayed already.
      tensors.budget_bytes = 1;
      REMAT_ASSIGN_OR_RETURN(Plan least, solver.Solve(profile, tensors));
      if (SameOps(least.schedule, plan.schedule)) return plan;
      REMAT_RETURN_IF_ERROR(AccountPlanMemory(profile, terms, options.budget_bytes, &least));
      if (!least.fits) return plan;
      plan = std::move(least);
      tensors.budget_bytes = plan.predicted.peak_bytes;
      steps = kSearchSteps;
      break;
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
      steps, fits_at, over_at,
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

namespace {

// The stage search of SearchFit (fit_search.h): the reserve for the other
// micro-batches in flight is retried at most this many times.
constexpr int kReserveRetries = 6;

bool Pipelined(const Profile& profile) {
  for (const LayerProfile& l : profile.layers) {
    if (l.in_flight_microbatches > 1) return true;
  }
  return false;
}

}  // namespace

Result<Plan> SearchFit(const StrategySolver& solver, const Profile& profile,
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
      kRefineSteps,       reserve, over_at,
      [&](int64_t fits, int64_t over, const Plan&) { return fits - over > budget / 200; }, at,
      &plan));
  return better(std::move(plan));
}

}  // namespace remat::strategies
