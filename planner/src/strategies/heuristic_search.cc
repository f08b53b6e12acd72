#include "strategies/heuristic_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "remat/plan/plan_memo.h"
#include "strategies/offload_floor.h"

namespace remat::strategies {
namespace {

// The default order of selective: blocks with an option, the most bytes
// saved per millisecond of extra recompute first.
std::vector<int> SelectiveOrder(const Profile& p, const std::vector<int>& blocks) {
  std::vector<int> order;
  for (int c : blocks) {
    if (!p.layers[c].selective.empty()) order.push_back(c);
  }
  auto saved_per_ms = [&](int c) {
    const LayerProfile& l = p.layers[c];
    const double saved = static_cast<double>(l.activation_bytes - l.selective[0].activation_bytes);
    return saved / std::max(1e-9, l.selective[0].extra_recompute_ms);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return saved_per_ms(a) > saved_per_ms(b); });
  return order;
}

// Layer i's selective option (BuildSingleLevelSchedule: 0 when not given).
int OptionOf(const std::vector<int>& selective_option, int i) {
  return i < static_cast<int>(selective_option.size()) && selective_option[i] >= 0
             ? selective_option[i]
             : 0;
}

// SingleLevelStepMs differs from the simulated step by rounding only; a
// candidate more than this (relative) above the bound cannot be faster.
constexpr double kStepSlack = 1e-7;

// What the search reads of one candidate, none of it depending on the
// budget: its step time and peak lower bound (made when a search with
// limits first asks), and of its plan without a budget (made when a search
// first simulates it) whether it fits (its host peak; no replay) and what
// BetterPlan compares. At a budget it fits when it fits without one and
// its device total is within the budget (Fits).
struct KeptCandidate {
  bool bounded = false;
  double bound_step_ms = 0;
  int64_t least_bytes = 0;
  int64_t segment_floor_bytes = 0;  // SegmentFloorBytes
  bool made = false;
  bool fits = false;
  double step_ms = 0;
  int64_t total_bytes = 0;
};

// A family's candidates, first_parameter() first, shared by the searches
// at every budget while a memo is open for the profile (plan_memo::Keep).
struct KeptFamily {
  std::mutex mu;  // held while an entry is read or written
  std::vector<KeptCandidate> candidates;
};

// The family's kept candidates while a memo is open for `p` (a selective
// family in another order than its default is kept by none), else new ones.
std::shared_ptr<KeptFamily> KeptCandidates(const Profile& p, const HeuristicFamily& family) {
  const int count = family.last_parameter() - family.first_parameter() + 1;
  auto made = std::make_shared<KeptFamily>();
  made->candidates.resize(static_cast<size_t>(std::max(0, count)));
  if (!family.default_order()) return made;
  const std::string name = std::string("heuristic candidates: ") + ToString(family.strategy());
  if (std::shared_ptr<const void> kept = plan_memo::Kept(p, name)) {
    return std::const_pointer_cast<KeptFamily>(std::static_pointer_cast<const KeptFamily>(kept));
  }
  plan_memo::Keep(p, name, made);
  return made;
}

// A floor under a bounded candidate's plan without a budget (what the
// search compares): its step time less the rounding SingleLevelStepMs may
// differ by, and its device total at least its peak lower bound and its
// SegmentFloorBytes where the floors' arguments hold (`bytes`), else 0.
OffloadFloor FamilyFloor(const KeptCandidate& e, bool bytes) {
  return OffloadFloor{e.bound_step_ms * (1 - kStepSlack),
                      bytes ? std::max(e.least_bytes, e.segment_floor_bytes) : 0};
}

}  // namespace

HeuristicFamily::HeuristicFamily(const Profile& profile, Strategy strategy,
                                 std::vector<int> selective_order)
    : profile_(profile),
      strategy_(strategy),
      blocks_(BlockLayers(profile)),
      selective_(std::move(selective_order)),
      default_order_(selective_.empty()) {
  if (strategy_ == Strategy::kSelective && selective_.empty()) {
    selective_ = SelectiveOrder(profile_, blocks_);
  }
}

int HeuristicFamily::last_parameter() const {
  return strategy_ == Strategy::kSelective ? static_cast<int>(selective_.size())
                                           : static_cast<int>(blocks_.size());
}

HeuristicCandidate HeuristicFamily::Candidate(int parameter) const {
  const int n = static_cast<int>(blocks_.size());
  const int L = profile_.num_layers();
  HeuristicCandidate c;
  std::vector<char> start(n, 0);
  switch (strategy_) {
    case Strategy::kUniform:
      for (int j = 0; j < n; ++j) start[j] = j % parameter == 0;
      c.parameter = "every " + std::to_string(parameter);
      c.decisions = SegmentDecisions(L, blocks_, start);
      break;
    case Strategy::kSegment: {
      int pos = 0;
      for (int s = 0; s < parameter; ++s) {
        start[pos] = 1;
        pos += n / parameter + (s < n % parameter ? 1 : 0);
      }
      c.parameter = std::to_string(parameter) + " segments";
      c.decisions = SegmentDecisions(L, blocks_, start);
      break;
    }
    default:  // selective
      c.parameter = std::to_string(parameter) + "/" + std::to_string(n) + " blocks";
      c.decisions.assign(L, LayerDecision::kKeep);
      c.selective_option.assign(L, -1);
      for (int j = 0; j < parameter; ++j) {
        c.decisions[selective_[j]] = LayerDecision::kSelective;
        c.selective_option[selective_[j]] = 0;
      }
      break;
  }
  return c;
}

double SingleLevelStepMs(const Profile& p, const std::vector<LayerDecision>& decisions,
                         const std::vector<int>& selective_option) {
  double ms = OptimizerStepMs(p);
  for (int i = 0; i < p.num_layers(); ++i) {
    const LayerProfile& l = p.layers[i];
    ms += l.forward_ms + l.backward_ms;
    if (RunsWithoutGrad(decisions[i])) ms += l.forward_ms;
    if (decisions[i] == LayerDecision::kSelective) {
      ms += l.selective[OptionOf(selective_option, i)].extra_recompute_ms;
    }
  }
  return ms;
}

int64_t SingleLevelPeakLowerBound(const Profile& p, const std::vector<LayerDecision>& decisions,
                                  const std::vector<int>& selective_option) {
  int64_t bytes = p.static_bytes();
  for (int i = 0; i < p.num_layers(); ++i) {
    const LayerProfile& l = p.layers[i];
    if (decisions[i] == LayerDecision::kKeep) bytes += l.activation_bytes - l.output_bytes;
    if (decisions[i] == LayerDecision::kSelective) {
      bytes += l.selective[OptionOf(selective_option, i)].activation_bytes - l.output_bytes;
    }
  }
  return bytes;
}

Result<std::optional<Plan>> SearchFamily(const Profile& p, const HeuristicFamily& family,
                                         int64_t budget_bytes, const FamilySearchLimits& limits) {
  const bool by_step = limits.step_ms < std::numeric_limits<double>::infinity();
  const bool by_peak = limits.only_fitting && budget_bytes > 0;
  // With a budget, a candidate whose floor (FamilyFloor) cannot beat the
  // pick so far is not simulated: it would not have become the pick.
  const bool floored = budget_bytes > 0;
  const bool bytes_floored = floored && FloorHolds(p);
  const std::shared_ptr<KeptFamily> kept = KeptCandidates(p, family);
  // Candidate k's kept entry, bounded where a limit or a floor needs it
  // and simulated (its plan without a budget) unless `skip` says, given
  // its floor (FamilyFloor), to leave it out; nullopt where left out.
  auto visit = [&](int k, const auto& skip) -> Result<std::optional<KeptCandidate>> {
    KeptCandidate e;
    {
      std::lock_guard<std::mutex> lock(kept->mu);
      e = kept->candidates[k - family.first_parameter()];
    }
    const bool was_bounded = e.bounded, was_made = e.made;
    std::optional<HeuristicCandidate> c;
    if ((by_step || by_peak || floored) && !e.bounded) {
      c = family.Candidate(k);
      e.bound_step_ms = SingleLevelStepMs(p, c->decisions, c->selective_option);
      e.least_bytes = SingleLevelPeakLowerBound(p, c->decisions, c->selective_option);
      e.segment_floor_bytes = SegmentFloorBytes(p, c->decisions);
      e.bounded = true;
    }
    const bool skipped = (by_step && e.bound_step_ms > limits.step_ms) ||
                         (by_peak && e.least_bytes > budget_bytes) ||
                         skip(FamilyFloor(e, bytes_floored));
    if (!skipped && !e.made) {
      if (!c) c = family.Candidate(k);
      REMAT_ASSIGN_OR_RETURN(
          const Plan plan, EvaluateDecisions(p, family.strategy(), std::move(c->parameter),
                                             c->decisions, c->selective_option, 0,
                                             SimulationDetail::kTotals));
      e.fits = plan.fits;
      e.step_ms = plan.predicted.step_ms;
      e.total_bytes = plan.memory.total_bytes;
      e.made = true;
    }
    if (e.bounded != was_bounded || e.made != was_made) {
      std::lock_guard<std::mutex> lock(kept->mu);
      kept->candidates[k - family.first_parameter()] = e;
    }
    if (skipped) return std::optional<KeptCandidate>();
    return std::optional<KeptCandidate>(e);
  };
  // Each candidate's plan at this budget compared through a probe of what
  // BetterPlan reads (KeepBetter over the plans themselves picks the same).
  Plan probe, best_probe;
  int pick = -1;
  auto fits = [&](const KeptCandidate& e) {
    return e.fits && (budget_bytes <= 0 || e.total_bytes <= budget_bytes);
  };
  auto take = [&](int k, const KeptCandidate& e) {
    pick = k;
    best_probe.fits = fits(e);
    best_probe.predicted.step_ms = e.step_ms;
    best_probe.memory.total_bytes = e.total_bytes;
  };
  // Without a budget, every candidate in order, as KeepBetter keeps them.
  // With one, first the fitting candidates alone: once a candidate fits,
  // every later pick fits (BetterPlan prefers a fitting plan, and a
  // fitting pick only to another fitting plan), so the pick is the one of
  // the fitting candidates, and a candidate whose floor is above the
  // budget, or cannot beat the pick so far, would not have become it.
  for (int k = family.first_parameter(); k <= family.last_parameter(); ++k) {
    REMAT_ASSIGN_OR_RETURN(const std::optional<KeptCandidate> e,
                           visit(k, [&](const OffloadFloor& floor) {
                             return floored && (floor.total_bytes > budget_bytes ||
                                                (pick >= 0 && CannotBeat(floor, best_probe,
                                                                         budget_bytes)));
                           }));
    if (!e || (floored && !fits(*e))) continue;
    probe.fits = fits(*e);
    probe.predicted.step_ms = e->step_ms;
    probe.memory.total_bytes = e->total_bytes;
    if (pick < 0 || BetterPlan(probe, best_probe)) take(k, *e);
  }
  if (floored && pick < 0) {
    // None fits: KeepBetter keeps the least device total, then the least
    // step time, then the first (BetterPlan on plans that do not fit), an
    // order of its own. So the candidates are weighed by their floors'
    // totals (every candidate was bounded above), the least first, and
    // one whose floor is above the pick's total is left out.
    std::vector<std::pair<int64_t, int>> order;
    {
      std::lock_guard<std::mutex> lock(kept->mu);
      for (int k = family.first_parameter(); k <= family.last_parameter(); ++k) {
        const KeptCandidate& e = kept->candidates[k - family.first_parameter()];
        order.emplace_back(FamilyFloor(e, bytes_floored).total_bytes, k);
      }
    }
    std::sort(order.begin(), order.end());
    for (const auto& [floor_bytes, k] : order) {
      if (pick >= 0 && floor_bytes > best_probe.memory.total_bytes) break;
      REMAT_ASSIGN_OR_RETURN(const std::optional<KeptCandidate> e,
                             visit(k, [](const OffloadFloor&) { return false; }));
      if (!e) continue;
      const int64_t total = best_probe.memory.total_bytes;
      const double step = best_probe.predicted.step_ms;
      if (pick < 0 || e->total_bytes < total ||
          (e->total_bytes == total && (e->step_ms < step || (e->step_ms == step && k < pick)))) {
        take(k, *e);
      }
    }
  }
  if (pick < 0) return std::optional<Plan>();
  // The pick's plan at this budget (its totals from the memo where one is
  // open), then with its timeline.
  HeuristicCandidate c = family.Candidate(pick);
  REMAT_ASSIGN_OR_RETURN(
      Plan best, EvaluateDecisions(p, family.strategy(), std::move(c.parameter), c.decisions,
                                   c.selective_option, budget_bytes, SimulationDetail::kTotals));
  REMAT_ASSIGN_OR_RETURN(best.predicted,
                         plan_memo::Simulated(p, best.schedule, SimulationDetail::kFull));
  return std::optional<Plan>(std::move(best));
}

std::optional<Plan> BestHeuristicPlan(const Profile& p, const PlanOptions& o,
                                      double below_step_ms) {
  // Above the limit a candidate cannot be faster than the bound; a
  // family's plan that is not, whatever it is, is not used.
  FamilySearchLimits limits;
  limits.step_ms = below_step_ms * (1 + kStepSlack);
  limits.only_fitting = true;  // a family's plan is used only when it fits
  std::optional<Plan> best;
  for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
    // A candidate that fails to simulate fails its strategy: no plan from it.
    Result<std::optional<Plan>> plan =
        SearchFamily(p, HeuristicFamily(p, s), o.budget_bytes, limits);
    if (!plan.ok() || !*plan || !(*plan)->fits) continue;
    if (!best || (*plan)->predicted.step_ms < best->predicted.step_ms) best = **std::move(plan);
  }
  return best;
}

}  // namespace remat::strategies
