// The fit search over the strategies' solvers: the retries and bisections
// that turn a solver's plan at a tensor budget into the fastest plan that
// fits the device budget (the caching allocator's reserved bytes, the
// memory beside tensors, a pipeline stage's micro-batches in flight), and
// each strategy's least-memory plan where nothing fits.
#include "strategies/fit_search.h"

#include "remat/strategies/fit_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "remat/device/device_memory.h"
#include "remat/plan/peak_floor.h"
#include "strategies/heuristic_search.h"
#include "strategies/solvers.h"

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
// Where the search found no fitting plan but the strategy's least-memory
// plan fits, the bisection starts from that plan, over a wider range.
constexpr int kSearchSteps = 8;

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

// Whether a strategy has plans other than one (none and manual do not).
bool HasLeastPlan(Strategy s) { return s != Strategy::kNone && s != Strategy::kManual; }

bool Pipelined(const Profile& profile) {
  for (const LayerProfile& l : profile.layers) {
    if (l.in_flight_microbatches > 1) return true;
  }
  return false;
}

// The stage search (FitSearch): the reserve for the other micro-batches in
// flight is retried at most this many times.
constexpr int kReserveRetries = 6;

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
  for (int attempt = 0;; ++attempt) {
    bool fits_tensors = false;
    REMAT_ASSIGN_OR_RETURN(plan, solve(tensors.budget_bytes, &fits_tensors));
    if (plan.fits && attempt > 0) break;
    if (plan.fits || options.budget_bytes <= 0) return plan;
    if (!fits_tensors || attempt == kRoundingRetries || tensors.budget_bytes <= 1) return plan;
    over_at = tensors.budget_bytes;
    const int64_t over = plan.memory.total_bytes - options.budget_bytes;
    tensors.budget_bytes = std::max<int64_t>(1, tensors.budget_bytes - over);
  }
  // Not worth a solve: the plan fills the card to within 2%, or the tensor
  // budgets left to try are within 0.5% of the budget of each other.
  const int64_t budget = options.budget_bytes;
  REMAT_RETURN_IF_ERROR(Bisect(
      kRefineSteps, tensors.budget_bytes, over_at,
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

}  // namespace remat::strategies

namespace remat {

using strategies::Bisect;
using strategies::HasLeastPlan;
using strategies::kRefineSteps;
using strategies::kReserveRetries;
using strategies::kSearchSteps;
using strategies::Pipelined;
using strategies::SolveOnDevice;

std::vector<Strategy> ContainedStrategies(Strategy s) {
  if (s == Strategy::kOptimal) {
    return {Strategy::kOptimalSingle, Strategy::kUniform, Strategy::kSegment,
            Strategy::kSelective};
  }
  if (s == Strategy::kOptimalSingle) {
    return {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective};
  }
  return {};
}

double FittingStepFloor(const Profile& profile, Strategy s) {
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  if (s != Strategy::kUniform && s != Strategy::kSegment && s != Strategy::kOffload) return kNone;
  if (BlockLayers(profile).empty()) return kNone;
  const strategies::HeuristicFamily family(
      profile, s == Strategy::kOffload ? Strategy::kUniform : s);
  double least = std::numeric_limits<double>::infinity();
  for (int k = family.first_parameter(); k <= family.last_parameter(); ++k) {
    const strategies::HeuristicCandidate c = family.Candidate(k);
    least = std::min(least, strategies::SingleLevelStepMs(profile, c.decisions, c.selective_option));
  }
  if (!std::isfinite(least)) return kNone;
  return least - 1e-9 * std::max(1.0, std::fabs(least));
}

int64_t FittingBytesFloor(const Profile& profile, Strategy s, const PlanOptions& options) {
  if (s != Strategy::kNone && s != Strategy::kSelective) return 0;
  if (s == Strategy::kSelective && !options.selective_layers.empty()) return 0;
  int64_t least = strategies::SingleLevelPeakLowerBound(
      profile, std::vector<LayerDecision>(profile.num_layers(), LayerDecision::kKeep), {});
  if (s == Strategy::kSelective) {
    const strategies::HeuristicFamily family(profile, Strategy::kSelective);
    for (int m = family.first_parameter(); m <= family.last_parameter(); ++m) {
      const strategies::HeuristicCandidate c = family.Candidate(m);
      least = std::min(least, strategies::SingleLevelPeakLowerBound(profile, c.decisions,
                                                                    c.selective_option));
    }
  }
  return DeviceTotalFloor(profile, least, options.device_memory);
}

Plan AsStrategyPlan(Plan plan, Strategy s) {
  plan.strategy = s;
  plan.parameter = (plan.fits ? "" : "lowest peak, ") + strategies::DescribeRecompute(plan);
  return plan;
}

PlanOptions FitSearch::OptionsFor(Strategy s) const {
  PlanOptions o = options_;
  // Under auto the solvers know they were not asked for by name (optimal
  // then declines a chain too long for it instead of failing).
  if (o.strategy != Strategy::kAuto) o.strategy = s;
  return o;
}

Result<Plan> FitSearch::Of(Strategy s) {
  if (auto it = plans_.find(s); it != plans_.end()) return it->second;
  const StrategySolver* solver = FindSolver(s);
  if (solver == nullptr || s == Strategy::kAuto) {
    return Status::Invalid(std::string("strategy '") + ToString(s) +
                           "' is not available in this build");
  }
  const PlanOptions options = OptionsFor(s);
  REMAT_ASSIGN_OR_RETURN(Plan plan, Search(*solver, options));
  if (!plan.fits && options.budget_bytes > 0 && HasLeastPlan(s)) {
    REMAT_ASSIGN_OR_RETURN(Plan least, LeastMemory(s));
    if (least.fits) {
      REMAT_ASSIGN_OR_RETURN(plan, FasterThanLeast(*solver, options, std::move(least)));
    } else {
      plan = std::move(least);
    }
    for (Strategy c : ContainedStrategies(s)) {
      REMAT_ASSIGN_OR_RETURN(const Plan contained, Of(c));
      if (contained.fits && BetterPlan(contained, plan)) plan = AsStrategyPlan(contained, s);
    }
  }
  plans_.emplace(s, plan);
  return plan;
}

Result<Plan> FitSearch::LeastMemory(Strategy s) {
  if (auto it = least_.find(s); it != least_.end()) return it->second;
  const StrategySolver* solver = FindSolver(s);
  if (solver == nullptr || s == Strategy::kAuto) {
    return Status::Invalid(std::string("strategy '") + ToString(s) +
                           "' is not available in this build");
  }
  const PlanOptions options = OptionsFor(s);
  Plan least;
  if (!HasLeastPlan(s)) {
    REMAT_ASSIGN_OR_RETURN(least, Search(*solver, options));
  } else {
    REMAT_ASSIGN_OR_RETURN(least, SolverLeast(*solver, options));
    for (Strategy c : ContainedStrategies(s)) {
      REMAT_ASSIGN_OR_RETURN(const Plan contained, LeastMemory(c));
      if (contained.memory.total_bytes < least.memory.total_bytes) {
        least = AsStrategyPlan(contained, s);
      }
    }
  }
  least_.emplace(s, least);
  return least;
}

Result<Plan> FitSearch::SolverLeast(const StrategySolver& solver,
                                    const PlanOptions& options) const {
  PlanOptions tensors = options;
  tensors.device_memory = DeviceMemoryTerms{};
  tensors.budget_bytes = 1;
  REMAT_ASSIGN_OR_RETURN(Plan least, solver.Solve(profile_, tensors));
  REMAT_RETURN_IF_ERROR(
      AccountPlanMemory(profile_, options.device_memory, options.budget_bytes, &least));
  return least;
}

Result<Plan> FitSearch::FasterThanLeast(const StrategySolver& solver, const PlanOptions& options,
                                        Plan least) const {
  const DeviceMemoryTerms& terms = options.device_memory;
  const int64_t budget = options.budget_bytes;
  PlanOptions tensors = options;
  tensors.device_memory = DeviceMemoryTerms{};
  // The tensor budget of the search that found nothing: a setting over it.
  const int64_t over_at = terms.any() ? TensorBudget(budget, terms) : budget;
  const int64_t fits_at = std::min(least.predicted.peak_bytes, over_at);
  Plan plan = std::move(least);
  REMAT_RETURN_IF_ERROR(Bisect(
      kSearchSteps, fits_at, over_at,
      [&](int64_t fits, int64_t over, const Plan& best) {
        return over - fits > budget / 200 && best.memory.total_bytes < budget - budget / 50;
      },
      [&](int64_t mid) -> Result<Plan> {
        tensors.budget_bytes = mid;
        REMAT_ASSIGN_OR_RETURN(Plan between, solver.Solve(profile_, tensors));
        REMAT_RETURN_IF_ERROR(AccountPlanMemory(profile_, terms, budget, &between));
        return between;
      },
      &plan));
  return plan;
}

struct FitSearch::ReservedStage {
  explicit ReservedStage(Profile p) : profile(std::move(p)), memo(profile) {}
  Profile profile;
  PlanMemo memo;  // (closed before the profile is destroyed)
};

FitSearch::FitSearch(const Profile& profile, const PlanOptions& options)
    : profile_(profile), options_(options), memo_(profile, PlanMemo::Open::kJoin) {}

FitSearch::~FitSearch() = default;

const Profile& FitSearch::Reserved(int64_t reserve) const {
  std::unique_ptr<ReservedStage>& kept = reserved_[reserve];
  if (kept == nullptr) {
    Profile stage = profile_;
    for (LayerProfile& l : stage.layers) l.in_flight_microbatches = 1;
    stage.static_memory.parameter_bytes += reserve;
    kept = std::make_unique<ReservedStage>(std::move(stage));
  }
  return kept->profile;
}

Result<Plan> FitSearch::Search(const StrategySolver& solver, const PlanOptions& options) const {
  const Strategy s = solver.strategy();
  const Profile& profile = profile_;
  const bool dp = s == Strategy::kOptimal || s == Strategy::kOptimalSingle ||
                  s == Strategy::kOffload;
  if (!dp || options.budget_bytes <= 0 || !Pipelined(profile)) {
    return SolveOnDevice(solver, profile, options);
  }
  const DeviceMemoryTerms& terms = options.device_memory;
  const int64_t tensor_budget =
      terms.any() ? TensorBudget(options.budget_bytes, terms) : options.budget_bytes;
  // The plan solved with `reserve` bytes set aside, on the stage.
  auto at = [&](int64_t reserve) -> Result<Plan> {
    const Profile& reserved = Reserved(reserve);
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
      kRefineSteps, reserve, over_at,
      [&](int64_t fits, int64_t over, const Plan&) { return fits - over > budget / 200; }, at,
      &plan));
  return better(std::move(plan));
}

}  // namespace remat
