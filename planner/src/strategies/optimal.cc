// The optimal strategies: the multi-level schedule of least step time under
// the budget (solver/multilevel_dp.h) and the best single-level layer list
// (solver/single_level_dp.h). Both solve in memory slots, then simulate the
// schedule they found with exact bytes: every figure comes from Simulate,
// and a plan reported as fitting simulates within the budget. When nothing
// fits in slots, they return the exact lowest-peak schedule of their family
// (fits == false unless slot rounding was all that stood in the way).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>

#include "remat/plan/plan_memo.h"
#include "remat/simulate/simulator.h"
#include "remat/io/units.h"
#include "solver/interval_bounds.h"
#include "solver/multilevel_dp.h"
#include "solver/op_emitter.h"
#include "solver/single_level_dp.h"
#include "solver/time_classes.h"
#include "strategies/heuristic_search.h"
#include "strategies/solvers.h"

namespace remat::strategies {
namespace {

using solver::ChainTerms;
using solver::MemoryUnits;

// Past this the O(L^3) bounds take minutes.
constexpr int kMaxLayers = 2048;
// Cost tables beyond this are refused; the default slot count shrinks to fit.
constexpr int64_t kMaxTableBytes = int64_t{2} << 30;
// Exact byte arithmetic for the lowest-peak search (sums stay below 2^63).
constexpr int64_t kByteLimit = int64_t{1} << 60;

Status CheckOptions(const Profile& p, const PlanOptions& o, Strategy s) {
  if (o.slots < 0 || o.slots == 1) {
    return Status::Invalid("slots " + std::to_string(o.slots) +
                           ": the optimal solvers need at least 2 memory slots (0 = default, " +
                           std::to_string(kDefaultOptimalSlots) + ")");
  }
  if (p.num_layers() > kMaxLayers && o.strategy != Strategy::kAuto) {
    return Status::Invalid(std::string("strategy ") + ToString(s) + " handles chains of up to " +
                           std::to_string(kMaxLayers) + " layers; this one has " +
                           std::to_string(p.num_layers()) +
                           ": merge layers in the profile or use uniform/segment");
  }
  return Status::Ok();
}

Result<Plan> KeepEverything(const Profile& p, Strategy s, int64_t budget,
                            const std::string& parameter = "nothing recomputed") {
  return EvaluateDecisions(p, s, parameter, std::vector<LayerDecision>(p.num_layers()), {}, budget);
}

// For `auto` on a chain too long to solve: keeping everything, which is
// the optimum when it fits and never chosen by auto when it does not.
bool TooLongForAuto(const Profile& p) { return p.num_layers() > kMaxLayers; }
const std::string kNotSolved =
    "not solved: chain longer than " + std::to_string(kMaxLayers) + " layers";

// "3 segments, 2 selective" ("3 segments (1 offloaded)").
std::string DescribeDecisions(const std::vector<LayerDecision>& d) {
  const int offloaded = static_cast<int>(std::count(d.begin(), d.end(), LayerDecision::kOffload));
  const int segments =
      static_cast<int>(std::count(d.begin(), d.end(), LayerDecision::kCheckpoint)) + offloaded;
  const int selective = static_cast<int>(std::count(d.begin(), d.end(), LayerDecision::kSelective));
  if (segments == 0 && selective == 0) return "nothing recomputed";
  std::string out;
  if (segments > 0) out = std::to_string(segments) + (segments == 1 ? " segment" : " segments");
  if (offloaded > 0) out += " (" + std::to_string(offloaded) + " offloaded)";
  if (selective > 0) out += (out.empty() ? "" : ", ") + std::to_string(selective) + " selective";
  return out;
}

// Threads for the multi-level fill: the machine's, up to 16.
int SolverThreads() {
  return static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 16));
}

// Runs `f` on a thread of its own when the machine has another core, else
// when its result is asked for. The future's destructor waits for it.
template <typename F>
auto Concurrently(F f) {
  return std::async(SolverThreads() > 1 ? std::launch::async : std::launch::deferred,
                    std::move(f));
}

// The profile's sweeps (solver::ChainSweeps), made once while a memo is
// open for it: the same for the terms of every budget and rounding.
std::shared_ptr<const solver::ChainSweeps> SweepsOf(const Profile& p) {
  static const std::string kName = "chain sweeps";
  if (std::shared_ptr<const void> kept = plan_memo::Kept(p, kName)) {
    return std::static_pointer_cast<const solver::ChainSweeps>(kept);
  }
  auto made = std::make_shared<const solver::ChainSweeps>(p);
  plan_memo::Keep(p, kName, made);
  return made;
}

// One solver's DP over slots for a budget (multi-level or single-level):
// Solve(rounding) fills it, PlanAt(m) reconstructs and simulates its plan in
// m slots, for floor() <= m <= slots(). `cap_ms`: the recompute time of a
// plan already known to fit; the multi-level DP leaves out whatever costs
// more (a pass then fails when nothing in its slots beats the cap).
template <typename Dp>
class SlotPass {
 public:
  using ToPlan = std::function<Result<Plan>(const Dp&, int64_t)>;
  SlotPass(const Profile& p, int64_t activation_budget, int64_t slots, ToPlan to_plan,
           double cap_ms = std::numeric_limits<double>::infinity())
      : profile_(p),
        budget_(activation_budget),
        slots_(slots),
        to_plan_(std::move(to_plan)),
        cap_ms_(cap_ms) {}

  bool Solve(solver::Rounding rounding) {
    dp_.reset();
    terms_ = std::make_unique<ChainTerms>(profile_, Units(rounding), SweepsOf(profile_));
    if constexpr (std::is_same_v<Dp, solver::MultiLevelDp>) {
      solver::DpOptions options;
      options.cost_cap_ms = cap_ms_;
      options.threads = SolverThreads();
      options.gradients = gradients;
      options.classes = classes;
      options.cancel = cancel_;
      // After the relaxation in the same slots under the same cap: its rows
      // show where each conservative row can fall within its cap.
      if (rounding == solver::Rounding::kUp) {
        options.row_starts = relaxed_starts_;
        options.suffix_costs = relaxed_suffix_;
      }
      relaxed_starts_.reset();
      relaxed_suffix_.reset();
      dp_ = std::make_unique<Dp>(*terms_, options);
    } else if constexpr (std::is_same_v<Dp, solver::SingleLevelOffloadDp>) {
      solver::SingleLevelOffloadOptions options = offload_options;
      options.cancel = cancel_;
      dp_ = std::make_unique<Dp>(*terms_, options);
    } else {
      dp_ = std::make_unique<Dp>(*terms_);
    }
    const bool solved = dp_->Solve(nullptr).has_value();
    if constexpr (std::is_same_v<Dp, solver::MultiLevelDp>) {
      if (rounding == solver::Rounding::kDown) {
        relaxed_ms_ = solved ? std::optional<double>(dp_->Cost(0, profile_.num_layers(), slots()))
                             : std::nullopt;
        if (solved) {
          relaxed_starts_ = std::make_shared<const std::vector<int>>(dp_->RowStarts());
          relaxed_suffix_ = std::make_shared<const std::vector<double>>(dp_->SuffixCosts());
        }
      }
    }
    return solved;
  }
  // After a Solve rounding down (MultiLevelDp): the relaxed optimum in
  // slots(), a lower bound on every schedule of the family that fits in
  // bytes; nullopt when none costs at most the cap.
  std::optional<double> relaxed_ms() const { return relaxed_ms_; }
  int64_t slots() const { return terms_->slots(); }
  int64_t floor() const { return dp_->floor(); }
  double slot_bytes() const { return terms_->units().slot_bytes(); }
  Result<Plan> PlanAt(int64_t m) const { return to_plan_(*dp_, m); }
  // A pass like this one, for solving on another thread at the same time
  // (its own tables), stopping early once `cancel` is set (MultiLevelDp,
  // SingleLevelOffloadDp); null when this pass is not to be solved
  // concurrently, or where the machine has no core to spare for it: the
  // strategies' groups are searched at once (SearchGroup) and a relaxed
  // fill takes its threads, so on a machine of few cores the conservative
  // fill, whose result is not used where the relaxed plans are final, only
  // takes their time (on 2 cores, `plan 70b fsdp64` 100 -> 93 CPU ms and
  // 69 -> 65 ms wall without it; bench/speed/README.md). (Nor are the
  // conservative terms' interval bounds built ahead beside the relaxed
  // ones: the relaxed plan is final in most solves, every one of the 180
  // optimal solves of `plan 405b fsdp128` in bench/speed/grid.py, which
  // then took 3% more instructions.)
  std::unique_ptr<SlotPass> Concurrent(const std::atomic<bool>* cancel) const {
    if (!concurrent || SolverThreads() <= kSearchGroups + 1) return nullptr;
    auto copy = std::make_unique<SlotPass>(profile_, budget_, slots_, to_plan_, cap_ms_);
    copy->offload_options = offload_options;
    copy->gradients = gradients;
    copy->classes = classes;
    copy->cancel_ = cancel;
    return copy;
  }
  // Whether BestFittingPlan fills the relaxed and the conservative tables
  // at once (two tables in memory: MultiLevelDp when they are small, and
  // SingleLevelOffloadDp).
  bool concurrent = false;
  solver::SingleLevelOffloadOptions offload_options;  // SingleLevelOffloadDp only
  solver::GradientKey gradients = solver::GradientKey::kExact;  // MultiLevelDp only
  // MultiLevelDp only: the profile's classes under `gradients` (null: built per fill).
  std::shared_ptr<const solver::IntervalClasses> classes;

 private:
  const Profile& profile_;
  int64_t budget_, slots_;
  ToPlan to_plan_;
  double cap_ms_;
  std::unique_ptr<ChainTerms> terms_;
  std::unique_ptr<Dp> dp_;
  std::optional<double> relaxed_ms_;
  // MultiLevelDp: the row starts of the last fill rounding down, for the
  // next rounding up (DpOptions::row_starts); null when there is none.
  std::shared_ptr<const std::vector<int>> relaxed_starts_;
  // MultiLevelDp: the suffix costs of that fill (DpOptions::suffix_costs).
  std::shared_ptr<const std::vector<double>> relaxed_suffix_;
  const std::atomic<bool>* cancel_ = nullptr;

  MemoryUnits Units(solver::Rounding rounding) const {
    return MemoryUnits(budget_, slots_, rounding, solver::RecurringKeepBytes(profile_));
  }
};

// Slot rounding, relaxed first: the relaxed (round-down) optimum is a lower
// bound on every plan that fits in bytes, so when its schedule simulates
// within the budget it is the optimum in bytes, ties with any other plan's
// exact peak included. When it overshoots, the same tables give the relaxed
// optimum for every smaller slot count: up to kProbes of them are tried
// (lowered by the overshoot until a plan fits, then bisected between the
// most slots that fitted and the fewest that overshot). The conservative
// (round-up) optimum, which always fits, is solved too, and the fastest
// fitting plan wins. nullopt: no plan of the family fits at all.
constexpr int kProbes = 8;
// Bisection steps of the host-memory penalty (BestOffloadPlan).
constexpr int kHostPenaltySteps = 12;

// The relaxed plans of BestFittingPlan: the fastest that fits, and whether
// it is final (the relaxed optimum itself fits, or nothing of the family
// does: the conservative optimum can do no better).
struct RelaxedPlans {
  std::optional<Plan> best;
  bool final = false;
};

template <typename Dp>
Result<RelaxedPlans> BestRelaxedPlans(SlotPass<Dp>& pass) {
  if (!pass.Solve(solver::Rounding::kDown)) return RelaxedPlans{std::nullopt, true};
  REMAT_ASSIGN_OR_RETURN(Plan plan, pass.PlanAt(pass.slots()));
  if (plan.fits) return RelaxedPlans{std::move(plan), true};
  auto lowered = [&](int64_t m, const Plan& p) {
    const double over = static_cast<double>(p.predicted.peak_bytes - p.budget_bytes);
    return m - std::max<int64_t>(1, static_cast<int64_t>(std::ceil(over / pass.slot_bytes())));
  };
  RelaxedPlans out;
  int64_t over = pass.slots(), under = -1, next = lowered(over, plan);
  for (int probe = 0; probe < kProbes && next >= pass.floor() && next > under && next < over;
       ++probe) {
    REMAT_ASSIGN_OR_RETURN(plan, pass.PlanAt(next));
    if (plan.fits) {
      under = next;
      if (!out.best || BetterPlan(plan, *out.best)) out.best = plan;
    } else {
      over = next;
    }
    next = under >= 0 ? under + (over - under) / 2 : lowered(next, plan);
  }
  return out;
}

// The conservative optimum's plan, when it fits.
template <typename Dp>
Result<std::optional<Plan>> ConservativePlan(SlotPass<Dp>& pass) {
  if (!pass.Solve(solver::Rounding::kUp)) return std::optional<Plan>();
  REMAT_ASSIGN_OR_RETURN(Plan safe, pass.PlanAt(pass.slots()));
  if (!safe.fits) return std::optional<Plan>();
  return std::optional<Plan>(std::move(safe));
}

template <typename Dp>
Result<std::optional<Plan>> BestFittingPlan(SlotPass<Dp>& pass) {
  // With pass.concurrent the conservative tables are filled on another core
  // while the relaxed ones are filled and probed; the result is the same as
  // filling them one after the other. (Declared in this order, the future
  // is waited for before the pass it solves is destroyed.)
  std::atomic<bool> cancel{false};
  const std::unique_ptr<SlotPass<Dp>> conservative = pass.Concurrent(&cancel);
  std::future<Result<std::optional<Plan>>> safe;
  if (conservative) safe = Concurrently([&] { return ConservativePlan(*conservative); });
  Result<RelaxedPlans> relaxed = BestRelaxedPlans(pass);
  if (!relaxed.ok() || relaxed->final) {
    cancel = true;
    if (!relaxed.ok()) return relaxed.status();
    return std::move(relaxed->best);
  }
  REMAT_ASSIGN_OR_RETURN(std::optional<Plan> safe_plan,
                         safe.valid() ? safe.get() : ConservativePlan(pass));
  std::optional<Plan> best = std::move(relaxed->best);
  if (safe_plan && (!best || BetterPlan(*safe_plan, *best))) best = std::move(safe_plan);
  return best;
}

// The single-level DP with offload (SingleLevelOffloadDp) takes O(L^2 M):
// past this many layers optimal-single does not weigh offload.
constexpr int kMaxOffloadLayers = 256;

// Whether some layer after the first does not keep its input. The plain
// SingleLevelDp counts such a layer as the multi-level terms do (its input
// released after any forward, its producer's output held at its backward);
// the simulator releases it after a forward with grad only.
// SingleLevelOffloadDp models that exactly (with or without a link).
bool HasLayerNotKeepingInput(const Profile& p) {
  for (int i = 1; i < p.num_layers(); ++i) {
    if (!p.layers[i].keeps_input) return true;
  }
  return false;
}

// The fastest fitting layer list with checkpoints offloaded over `link`
// (nullopt: none fits; a link not present: no offload, the exact layer list
// on chains with layers that do not keep their input). Without
// link.budget_bytes (--host-budget), one BestFittingPlan of
// SingleLevelOffloadDp. With one, a Lagrangian search:
// offloaded bytes cost `penalty` ms each in the DP; the penalty is bisected
// between 0 and one that makes any offload cost more than the whole step,
// raised whenever a plan the DP returned puts more on the host than the
// budget, lowered otherwise. Every plan is simulated; the fastest that fits
// (host budget included, Plan::fits) wins.
Result<std::optional<Plan>> BestOffloadPlan(
    const Profile& p, const PlanOptions& o, int64_t activation_budget, const HostLink& link,
    const std::function<Result<Plan>(const solver::SingleLevelSolution&)>& evaluate) {
  const int64_t host_budget = link.present() ? link.budget_bytes : 0;
  std::atomic<bool> over_host{false};
  auto solve = [&](double penalty) -> Result<std::optional<Plan>> {
    SlotPass<solver::SingleLevelOffloadDp> pass(
        p, activation_budget, OptimalSlots(o),
        [&](const solver::SingleLevelOffloadDp& dp, int64_t m) -> Result<Plan> {
          REMAT_ASSIGN_OR_RETURN(Plan plan, evaluate(dp.Reconstruct(m)));
          if (host_budget > 0 && plan.predicted.host_peak_bytes > host_budget) over_host = true;
          return plan;
        });
    pass.offload_options = {link, penalty};
    // Its conservative tables on another core while the relaxed ones are
    // filled and probed (cancelled when the relaxed plan is final).
    pass.concurrent = true;
    return BestFittingPlan(pass);
  };
  REMAT_ASSIGN_OR_RETURN(std::optional<Plan> best, solve(0));
  if (host_budget <= 0 || !over_host) return best;
  double step_ms = OptimizerStepMs(p);
  int64_t least_x = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < p.num_layers(); ++i) {
    step_ms += p.layers[i].forward_ms + p.layers[i].backward_ms;
    if (i > 0) least_x = std::min(least_x, std::max<int64_t>(1, p.layers[i - 1].output_bytes));
  }
  double lo = 0, hi = 2 * step_ms / static_cast<double>(least_x);
  for (int iteration = 0; iteration < kHostPenaltySteps; ++iteration) {
    const double penalty = (lo + hi) / 2;
    over_host = false;
    REMAT_ASSIGN_OR_RETURN(std::optional<Plan> plan, solve(penalty));
    if (plan && (!best || BetterPlan(*plan, *best))) best = std::move(plan);
    (over_host ? lo : hi) = penalty;
  }
  return best;
}

// The offload DP's least-memory layer list (its floor of slots, rounding
// up), solved within the activations of `lowest` (the least-memory plan
// without offload, which the offload family contains); nullopt when the
// DP finds none there, or when it puts more on the host than the link's
// budget (--host-budget).
Result<std::optional<Plan>> LeastOffloadPlan(
    const Profile& p, const PlanOptions& o, const Plan& lowest,
    const std::function<Result<Plan>(const solver::SingleLevelSolution&)>& evaluate) {
  const int64_t activation_budget = lowest.predicted.peak_bytes - p.static_bytes();
  if (activation_budget <= 0) return std::optional<Plan>();
  SlotPass<solver::SingleLevelOffloadDp> pass(
      p, activation_budget, OptimalSlots(o),
      [&](const solver::SingleLevelOffloadDp& dp, int64_t m) {
        return evaluate(dp.Reconstruct(m));
      });
  pass.offload_options = {p.host_link, 0};
  if (!pass.Solve(solver::Rounding::kUp)) return std::optional<Plan>();
  REMAT_ASSIGN_OR_RETURN(Plan plan, pass.PlanAt(pass.floor()));
  const int64_t host_budget = p.host_link.budget_bytes;
  if (host_budget > 0 && plan.predicted.host_peak_bytes > host_budget) return std::optional<Plan>();
  return std::optional<Plan>(std::move(plan));
}

// The single-level DP's least-memory layer list in exact bytes: the same at
// every budget, so made once while a memo is open for `p`.
std::shared_ptr<const solver::SingleLevelSolution> LowestPeakLayerList(const Profile& p) {
  static const std::string kName = "optimal-single lowest-peak layer list";
  if (std::shared_ptr<const void> kept = plan_memo::Kept(p, kName)) {
    return std::static_pointer_cast<const solver::SingleLevelSolution>(kept);
  }
  const ChainTerms exact(p, MemoryUnits::Bytes(kByteLimit), SweepsOf(p));
  auto made = std::make_shared<const solver::SingleLevelSolution>(
      solver::SingleLevelDp(exact).LowestPeak());
  plan_memo::Keep(p, kName, made);
  return made;
}

// The name optimal-single's plan for `o` is kept under (plan_memo::Keep):
// every option a solver reads (none reads the device memory terms, which
// only the fit search weighs; of the strategy, only whether it is auto,
// which CheckOptions reads: optimal's plan asks for optimal-single's at
// the same budgets). Empty where terms are given: not kept.
std::string OptimalSingleKey(const PlanOptions& o) {
  if (o.device_memory.any() || !o.device_memory.source.empty()) return "";
  std::string key = "optimal-single plan: budget " + std::to_string(o.budget_bytes) +
                    (o.strategy == Strategy::kAuto ? ", auto" : ", named") + ", every " +
                    std::to_string(o.every) + ", segments " + std::to_string(o.segments) +
                    ", slots " + std::to_string(o.slots) + ", exact times " +
                    std::to_string(o.exact_times) + ", checkpoint";
  for (int l : o.checkpoint_layers) key += " " + std::to_string(l);
  key += ", selective";
  for (int l : o.selective_layers) key += " " + std::to_string(l);
  return key;
}

// A plan kept under a name while it is being solved: the first thread to
// keep it solves, the others that ask for it meanwhile wait for its result
// (the strategies of a sweep at one budget are planned at once).
struct KeptPlan {
  std::promise<Result<Plan>> solving;
  std::shared_future<Result<Plan>> plan = solving.get_future().share();
};

class OptimalSingleSolver : public StrategySolver {
 public:
  Strategy strategy() const override { return Strategy::kOptimalSingle; }
  // Its plan for a profile and options is kept while a memo is open for
  // the profile: the fit search solves it, and optimal again for its layer
  // list at the same budgets, at the same time in a sweep.
  Result<Plan> Solve(const Profile& p, const PlanOptions& o) const override {
    const std::string key = OptimalSingleKey(o);
    if (key.empty()) return SolveAnew(p, o);
    if (std::shared_ptr<const void> kept = plan_memo::Kept(p, key)) {
      return std::static_pointer_cast<const KeptPlan>(kept)->plan.get();
    }
    auto mine = std::make_shared<KeptPlan>();
    plan_memo::Keep(p, key, mine);
    const std::shared_ptr<const void> kept = plan_memo::Kept(p, key);
    // Another thread kept its own first (it solves), or no memo is open.
    if (kept != nullptr && kept != mine) {
      return std::static_pointer_cast<const KeptPlan>(kept)->plan.get();
    }
    try {
      Result<Plan> plan = SolveAnew(p, o);
      mine->solving.set_value(plan);
      return plan;
    } catch (...) {
      mine->solving.set_exception(std::current_exception());
      throw;
    }
  }

 private:
  Result<Plan> SolveAnew(const Profile& p, const PlanOptions& o) const {
    REMAT_RETURN_IF_ERROR(CheckOptions(p, o, strategy()));
    if (TooLongForAuto(p)) return KeepEverything(p, strategy(), o.budget_bytes, kNotSolved);
    if (o.budget_bytes <= 0) return KeepEverything(p, strategy(), o.budget_bytes);
    auto evaluate = [&](const solver::SingleLevelSolution& sol) {
      return EvaluateDecisions(p, strategy(), DescribeDecisions(sol.decisions), sol.decisions,
                               sol.selective_option, o.budget_bytes);
    };
    const int64_t activation_budget = o.budget_bytes - p.static_bytes();
    if (activation_budget > 0) {
      // With a link, or with a layer not keeping its input (then without
      // offload): the offload DP too, on another core at the same time.
      const bool offload = p.host_link.present();
      std::future<Result<std::optional<Plan>>> offloaded;
      if ((offload || HasLayerNotKeepingInput(p)) && p.num_layers() <= kMaxOffloadLayers) {
        offloaded = Concurrently([&] {
          return BestOffloadPlan(p, o, activation_budget, offload ? p.host_link : HostLink{},
                                 evaluate);
        });
      }
      SlotPass<solver::SingleLevelDp> pass(
          p, activation_budget, OptimalSlots(o),
          [&](const solver::SingleLevelDp& dp, int64_t m) { return evaluate(dp.Reconstruct(m)); });
      REMAT_ASSIGN_OR_RETURN(std::optional<Plan> plan, BestFittingPlan(pass));
      if (offloaded.valid()) {
        REMAT_ASSIGN_OR_RETURN(std::optional<Plan> best_offloaded, offloaded.get());
        if (best_offloaded && (!plan || BetterPlan(*best_offloaded, *plan))) {
          plan = std::move(best_offloaded);
        }
      }
      // The heuristics' layer lists are single-level schedules too: the DP
      // rounds memory into slots, and a heuristic that fits its budget to
      // the byte can be lost to that rounding, so the strategy is never
      // slower than one that fits. Only a plan faster than the DP's can
      // change the result, so slower candidates are not simulated.
      const std::optional<Plan> heuristic = BestHeuristicPlan(
          p, o, plan ? plan->predicted.step_ms : std::numeric_limits<double>::infinity());
      if (heuristic && (!plan || heuristic->predicted.step_ms < plan->predicted.step_ms)) {
        REMAT_ASSIGN_OR_RETURN(
            plan, MakePlanFromSchedule(p, strategy(), "", heuristic->schedule, o.budget_bytes));
        plan->parameter = DescribeRecompute(*plan);
      }
      if (plan) return *std::move(plan);
    }
    // Nothing fits: the least-memory plan of the DP's terms, of the
    // offload DP where a link makes that hold less, and of the heuristics'
    // layer lists (each simulated: the DP's terms can rank them otherwise).
    REMAT_ASSIGN_OR_RETURN(Plan lowest, evaluate(*LowestPeakLayerList(p)));
    if (p.host_link.present() && p.num_layers() <= kMaxOffloadLayers) {
      REMAT_ASSIGN_OR_RETURN(std::optional<Plan> offloaded,
                             LeastOffloadPlan(p, o, lowest, evaluate));
      if (offloaded && offloaded->predicted.peak_bytes < lowest.predicted.peak_bytes) {
        lowest = *std::move(offloaded);
      }
    }
    for (Strategy family : {Strategy::kUniform, Strategy::kSegment}) {
      REMAT_ASSIGN_OR_RETURN(std::optional<Plan> least,
                             SearchFamily(p, HeuristicFamily(p, family), o.budget_bytes));
      if (!least || least->predicted.peak_bytes >= lowest.predicted.peak_bytes) continue;
      REMAT_ASSIGN_OR_RETURN(
          lowest, MakePlanFromSchedule(p, strategy(), "", least->schedule, o.budget_bytes));
      lowest.parameter = DescribeRecompute(lowest);
    }
    return lowest;
  }
};

class OptimalSolver : public StrategySolver {
 public:
  Strategy strategy() const override { return Strategy::kOptimal; }
  Result<Plan> Solve(const Profile& p, const PlanOptions& o) const override {
    REMAT_RETURN_IF_ERROR(CheckOptions(p, o, strategy()));
    if (TooLongForAuto(p)) return KeepEverything(p, strategy(), o.budget_bytes, kNotSolved);
    if (o.budget_bytes <= 0) return KeepEverything(p, strategy(), o.budget_bytes);
    const int64_t activation_budget = o.budget_bytes - p.static_bytes();
    std::optional<Plan> layer_list;  // optimal-single's plan, solved once
    if (activation_budget > 0) {
      // Layers that agree within their measured time spread are one class
      // for the DP (solver/time_classes.h); plans are simulated on `p`.
      // Pooled (an approximation already): rows shared across gradient
      // positions where that shares more (gradients created in backward).
      // The classes, built once for the size check and both fills, on
      // another core while the layer list is solved.
      std::future<std::shared_ptr<const Pooling>> pooling =
          Concurrently([&] { return PoolingOf(p, o.exact_times); });
      // The best layer list is a multi-level schedule too: when it fits, no
      // multi-level plan costing more is of any use, which caps the DP.
      REMAT_ASSIGN_OR_RETURN(layer_list, OptimalSingleStrategySolver()->Solve(p, o));
      const Plan& single = *layer_list;
      const std::shared_ptr<const Pooling> pooled_classes = pooling.get();
      const solver::TimeClasses& pooled = pooled_classes->times;
      const Classes& classes = pooled_classes->classes;
      // Unpooled, the pooled profile is a copy of `p`: `p` is solved, whose
      // sweeps are kept while its memo is open (SweepsOf).
      const Profile& solved = pooled.pooled() ? pooled.profile : p;
      REMAT_ASSIGN_OR_RETURN(const double cap, CostCap(single, pooled));
      const bool shifted = classes.key == solver::GradientKey::kShifted;
      REMAT_ASSIGN_OR_RETURN(const TableSize size,
                             SlotsWithinTableLimit(solved, o, activation_budget, *classes.classes));
      const int64_t slots = size.slots;
      SlotPass<solver::MultiLevelDp> pass(
          solved, activation_budget, slots,
          [&](const solver::MultiLevelDp& dp, int64_t m) {
            return MakePlanFromSchedule(
                p, strategy(), "", AddFrees(dp.Reconstruct(m).ops, p.num_layers()), o.budget_bytes);
          },
          cap);
      pass.gradients = classes.key;
      pass.classes = classes.classes;
      // Both fills at once where two tables fit easily.
      pass.concurrent = size.table_bytes <= kMaxTableBytes / 4;
      REMAT_ASSIGN_OR_RETURN(std::optional<Plan> plan, BestFittingPlan(pass));
      if (single.fits && (!plan || BetterPlan(single, *plan))) {
        // Nothing multi-level is faster (or it did not fit in bytes): the
        // layer list's schedule, as this strategy's plan.
        REMAT_ASSIGN_OR_RETURN(
            plan, MakePlanFromSchedule(p, strategy(), "", single.schedule, o.budget_bytes));
      }
      if (plan) {
        plan->parameter =
            DescribeRecompute(*plan) + VersusSingleLevel(single, *plan) + PoolingNote(pooled);
        if (shifted) {
          REMAT_ASSIGN_OR_RETURN(const std::string note, ShiftNote(*plan, pooled, pass, cap));
          plan->parameter += note;
        }
        return *std::move(plan);
      }
    }
    // Nothing fits: the lowest peak of the multi-level terms, or the layer
    // list's least-memory plan where that holds less (simulated both).
    if (!layer_list) {
      REMAT_ASSIGN_OR_RETURN(layer_list, OptimalSingleStrategySolver()->Solve(p, o));
    }
    REMAT_ASSIGN_OR_RETURN(Plan lowest, LowestPeak(p, o.budget_bytes));
    if (layer_list->predicted.peak_bytes < lowest.predicted.peak_bytes) {
      REMAT_ASSIGN_OR_RETURN(
          lowest, MakePlanFromSchedule(p, strategy(), "", layer_list->schedule, o.budget_bytes));
      lowest.parameter = "lowest peak, " + DescribeRecompute(lowest);
    }
    return lowest;
  }

 private:
  // The slots of the multi-level DP and an upper bound on its table's bytes.
  struct TableSize {
    int64_t slots;
    int64_t table_bytes;
  };
  // The requested slots, or for the default, as many as keep the cost
  // tables within kMaxTableBytes. Sized from an upper bound on the tables
  // (MultiLevelDp::TableBytesBound), without building the DP.
  static Result<TableSize> SlotsWithinTableLimit(const Profile& p, const PlanOptions& o,
                                                 int64_t activation_budget,
                                                 const solver::IntervalClasses& classes) {
    const int64_t slots = OptimalSlots(o);
    const ChainTerms terms(p, MemoryUnits(activation_budget, slots), SweepsOf(p));
    const int64_t table = solver::MultiLevelDp::TableBytesBound(terms, classes);
    if (table <= kMaxTableBytes) return TableSize{slots, table};
    if (o.slots > 0) {
      return Status::Invalid(std::to_string(o.slots) + " memory slots would need " +
                             FormatBytes(table) + " of solver tables for this " +
                             std::to_string(p.num_layers()) + "-layer chain (limit " +
                             FormatBytes(kMaxTableBytes) + "); use fewer slots");
    }
    // (The table's rows shrink with the slots: about half the limit.)
    return TableSize{std::max<int64_t>(2, slots * (kMaxTableBytes / 2) / table),
                     kMaxTableBytes / 2};
  }

  // The profile the multi-level DP solves: `p` with its times pooled within
  // their spreads (solver/time_classes.h) where that lets intervals share
  // rows, else `p` itself (pooling only costs plan quality then: with
  // gradients created in backward, equal intervals differ in the gradients
  // after them, interval_classes.h).
  // `shifted`: the pooled chain's classes keyed by GradientKey::kShifted
  // when they were built here (else left null).
  static solver::TimeClasses PoolWhereItShares(
      const Profile& p, bool exact_times, std::shared_ptr<const solver::IntervalClasses>* shifted) {
    if (exact_times) return solver::TimeClasses{p};
    solver::TimeClasses pooled = solver::PoolTimesBySpread(p);
    // (Counted with rows shared across gradient positions, as the DP will
    // solve the pooled chain.)
    const auto key = solver::GradientKey::kShifted;
    if (pooled.pooled() && !PoolingJoinsTwoLayers(p, pooled.profile)) {
      auto classes = std::make_shared<const solver::IntervalClasses>(pooled.profile, key);
      if (classes->count() >= solver::IntervalClasses(p, key).count()) {
        return solver::TimeClasses{p};
      }
      *shifted = std::move(classes);
    }
    return pooled;
  }

  // The interval classes the multi-level DP solves `p` with, and their key.
  struct Classes {
    std::shared_ptr<const solver::IntervalClasses> classes;
    solver::GradientKey key;
  };
  // The times the multi-level DP solves and their interval classes.
  struct Pooling {
    solver::TimeClasses times;
    Classes classes;
  };
  // PoolWhereItShares and SharedRowClasses of `p`, made once while a memo
  // is open for it: they read neither the budget nor any option but
  // exact_times, and the fit search solves one profile at many budgets.
  static std::shared_ptr<const Pooling> PoolingOf(const Profile& p, bool exact_times) {
    const std::string name = std::string("optimal pooling, exact times ") +
                             (exact_times ? "1" : "0");
    if (std::shared_ptr<const void> kept = plan_memo::Kept(p, name)) {
      return std::static_pointer_cast<const Pooling>(kept);
    }
    std::shared_ptr<const solver::IntervalClasses> shifted;
    solver::TimeClasses times = PoolWhereItShares(p, exact_times, &shifted);
    Classes classes = SharedRowClasses(times.profile, times.pooled(), std::move(shifted));
    auto made = std::make_shared<const Pooling>(Pooling{std::move(times), std::move(classes)});
    plan_memo::Keep(p, name, made);
    return made;
  }
  // On pooled times, rows read shifted by the gradients between equal
  // intervals (GradientKey::kShifted) where that shares rows the exact
  // classes do not; else the exact classes.
  // `shifted`: those classes if built already, else null.
  static Classes SharedRowClasses(const Profile& p, bool pooled,
                                  std::shared_ptr<const solver::IntervalClasses> shifted) {
    auto exact = std::make_shared<const solver::IntervalClasses>(p);
    if (!pooled) return {exact, solver::GradientKey::kExact};
    if (shifted == nullptr) {
      shifted = std::make_shared<const solver::IntervalClasses>(p, solver::GradientKey::kShifted);
    }
    if (shifted->count() < exact->count()) return {shifted, solver::GradientKey::kShifted};
    return {exact, solver::GradientKey::kExact};
  }

  // "; gradient rows shifted: within 2.1% of the relaxed bound": the plan's
  // recompute time on the pooled times against the shifted DP's relaxed
  // optimum (rounding down: a lower bound on every fitting schedule of the
  // family on those times), or the cap when nothing under it was found
  // (then the layer list is optimal there).
  static Result<std::string> ShiftNote(const Plan& plan, const solver::TimeClasses& pooled,
                                       const SlotPass<solver::MultiLevelDp>& pass, double cap) {
    const double bound = pass.relaxed_ms().value_or(cap);
    if (!(bound < std::numeric_limits<double>::infinity())) return std::string();
    REMAT_ASSIGN_OR_RETURN(SimulationResult sim, Simulate(pooled.profile, plan.schedule));
    const double ms = sim.recompute_ms + sim.transfer_ms;
    char gap[32];
    std::snprintf(gap, sizeof gap, "%.1f%%",
                  bound > 0 ? 100 * std::max(0.0, ms / bound - 1) : (ms > 0 ? 100.0 : 0.0));
    return "; gradient rows shifted: within " + std::string(gap) + " of the relaxed bound";
  }

  // Whether two layers at places alike for the DP (the same ends of the
  // chain; rows are shared across gradient positions, GradientKey::kShifted)
  // are one layer in `pooled` but two in `p`: then their one-layer
  // intervals share a row in the pooled chain only, which has fewer
  // interval classes. O(L log L), where
  // counting the classes of both chains takes O(L^2) (0.2 s at 1024
  // distinct layers); when it finds no such pair, they are counted.
  static bool PoolingJoinsTwoLayers(const Profile& p, const Profile& pooled) {
    using Key = std::tuple<solver::LayerSizes, std::vector<double>, int>;
    const int L = p.num_layers();
    std::map<Key, int> first;  // pooled layer and place -> its first layer
    for (int i = 0; i < L; ++i) {
      const LayerProfile& l = pooled.layers[i];
      const int ends = (i == 0 ? 1 : 0) + (i + 1 == L ? 2 : 0);
      const auto [it, added] =
          first.emplace(Key(solver::SizesOf(l), solver::TimesOf(l), ends), i);
      if (!added && solver::TimesOf(p.layers[it->second]) != solver::TimesOf(p.layers[i])) {
        return true;
      }
    }
    return false;
  }

  // The layer list's recompute time on the times the DP solves (its cap:
  // the list is a multi-level schedule too), +inf when it does not fit.
  static Result<double> CostCap(const Plan& single, const solver::TimeClasses& pooled) {
    if (!single.fits) return std::numeric_limits<double>::infinity();
    // (Its copies' stalls count: the multi-level DP has no offload.)
    if (!pooled.pooled()) return single.predicted.recompute_ms + single.predicted.transfer_ms;
    REMAT_ASSIGN_OR_RETURN(SimulationResult sim, Simulate(pooled.profile, single.schedule));
    return sim.recompute_ms + sim.transfer_ms;
  }

  // "; times pooled: 256 layers solved as 5 classes, within 4.1% of their
  // means" when the DP ran on pooled times.
  static std::string PoolingNote(const solver::TimeClasses& pooled) {
    if (!pooled.pooled()) return "";
    char deviation[32];
    std::snprintf(deviation, sizeof deviation, "%.1f%%", 100 * pooled.deviation);
    return "; times pooled: " + std::to_string(pooled.layers) + " layers solved as " +
           std::to_string(pooled.classes) + " classes, within " + deviation + " of their means";
  }

  // What multi-level buys over the best layer list: " (single-level: +12 ms)".
  static std::string VersusSingleLevel(const Plan& single, const Plan& plan) {
    if (!single.fits || single.predicted.step_ms <= plan.predicted.step_ms * (1 + 1e-9)) {
      return "";
    }
    return " (single-level: +" + FormatMillis(single.predicted.step_ms - plan.predicted.step_ms) +
           ")";
  }

  // The lowest-peak schedule of the multi-level terms in exact bytes: the
  // same at every budget, so made once while a memo is open for `p`.
  static std::shared_ptr<const Schedule> LowestPeakSchedule(const Profile& p) {
    static const std::string kName = "optimal lowest-peak schedule";
    if (std::shared_ptr<const void> kept = plan_memo::Kept(p, kName)) {
      return std::static_pointer_cast<const Schedule>(kept);
    }
    const ChainTerms exact(p, MemoryUnits::Bytes(kByteLimit), SweepsOf(p));
    const solver::IntervalBounds bounds(exact, solver::IntervalClasses(p), /*track_choices=*/true);
    solver::OpEmitter emitter(p.num_layers());
    solver::EmitInterval(
        exact, 0, p.num_layers(), bounds.floor(0, p.num_layers()),
        [&](int s, int t, int64_t) { return bounds.LowestPeakChoice(s, t); }, &emitter);
    auto made = std::make_shared<const Schedule>(AddFrees(emitter.Finish(), p.num_layers()));
    plan_memo::Keep(p, kName, made);
    return made;
  }

  Result<Plan> LowestPeak(const Profile& p, int64_t budget) const {
    REMAT_ASSIGN_OR_RETURN(Plan plan, MakePlanFromSchedule(p, strategy(), "",
                                                           *LowestPeakSchedule(p), budget));
    plan.parameter = "lowest peak, " + DescribeRecompute(plan);
    return plan;
  }
};

}  // namespace

int OptimalSlots(const PlanOptions& options) {
  return options.slots > 0 ? options.slots : kDefaultOptimalSlots;
}

const StrategySolver* OptimalSingleStrategySolver() {
  static const OptimalSingleSolver solver;
  return &solver;
}

const StrategySolver* OptimalStrategySolver() {
  static const OptimalSolver solver;
  return &solver;
}

}  // namespace remat::strategies
