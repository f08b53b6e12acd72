// The offload strategy: checkpoints moved to host memory over the profile's
// link (HostLink) instead of staying on the device. Its layer lists are the
// uniform strategy's (a checkpoint every k blocks), with the first j of their
// offloadable checkpoints offloaded: the earliest ones stay on the host the
// longest, so they free the most device memory per byte of host memory.
// Without a budget: every block checkpointed and every checkpoint offloaded,
// the lowest device peak offload reaches (as far as the host budget allows).
// With one: the fastest (k, j) that fits, every candidate simulated (its
// totals; the one kept again in full) once for a profile, the solves at
// the fit search's other tensor budgets choosing among the same candidates.
#include <memory>
#include <string>
#include <vector>

#include "remat/io/units.h"
#include "remat/plan/plan_memo.h"
#include "remat/schedule/decisions.h"
#include "strategies/solvers.h"

namespace remat::strategies {
namespace {

// The layers of `d` whose checkpoint x[i] can move (kCheckpoint with a
// layer before it that runs without grad), in chain order.
std::vector<int> Offloadable(const std::vector<LayerDecision>& d) {
  std::vector<int> out;
  for (size_t i = 1; i < d.size(); ++i) {
    if (d[i] == LayerDecision::kCheckpoint && RunsWithoutGrad(d[i - 1])) {
      out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

// Uniform's layer list of a checkpoint every `k` blocks, its movable
// checkpoints, and how many of those the host budget holds (all resident at
// once at the start of backward).
struct EveryK {
  std::vector<LayerDecision> decisions;
  std::vector<int> movable;
  int most = 0;
};

EveryK LayerList(const Profile& p, const std::vector<int>& blocks, int k) {
  const int n = static_cast<int>(blocks.size());
  std::vector<char> start(n);
  for (int b = 0; b < n; ++b) start[b] = b % k == 0;
  EveryK e;
  e.decisions = SegmentDecisions(p.num_layers(), blocks, start);
  e.movable = Offloadable(e.decisions);
  const int64_t host_budget = p.host_link.budget_bytes;
  for (int64_t host = 0; e.most < static_cast<int>(e.movable.size()); ++e.most) {
    host += p.layers[e.movable[e.most] - 1].output_bytes;
    if (host_budget > 0 && host > host_budget) break;
  }
  return e;
}

// The layer list's schedule (BuildSingleLevelSchedule) and where its
// movable checkpoints' copies go (PlaceOffloads): the schedule with the
// first j offloaded is WithOffloads of the first j, BuildSingleLevelSchedule's
// InsertOffloads of them (kOffload decisions on those layers), the
// placement made once for every j.
struct Kept {
  Schedule schedule;
  std::vector<OffloadPlace> places;
};

Result<Kept> KeptSchedule(const Profile& p, const EveryK& e) {
  Kept kept;
  REMAT_ASSIGN_OR_RETURN(kept.schedule, BuildSingleLevelSchedule(p, e.decisions, {}));
  const std::vector<int> movable(e.movable.begin(), e.movable.begin() + e.most);
  REMAT_ASSIGN_OR_RETURN(kept.places,
                         PlaceOffloads(kept.schedule, movable, kOffloadPrefetchLead));
  return kept;
}

// The kept schedule with its first `j` movable checkpoints offloaded.
Schedule Offloaded(const Kept& kept, int j) {
  return WithOffloads(kept.schedule, kept.places, static_cast<size_t>(j));
}

std::string Parameter(int k, int j) {
  return "every " + std::to_string(k) + ", " + std::to_string(j) + " offloaded";
}

// One (k, j) of the search under a budget: its plan without a budget,
// simulated for its totals, its schedule left out (made again for the one
// kept).
struct Candidate {
  int k = 0;
  int j = 0;
  Plan plan;
};

// Every (k, j) with k from 1 to the blocks and j from 1 to the movable
// checkpoints the host holds, in that order. None depends on the budget:
// the searches at every tensor budget of one profile share them
// (plan_memo::Keep).
Result<std::vector<Candidate>> Candidates(const Profile& p, const std::vector<int>& blocks) {
  std::vector<Candidate> out;
  const int n = static_cast<int>(blocks.size());
  for (int k = 1; k <= n; ++k) {
    const EveryK e = LayerList(p, blocks, k);
    if (e.most < 1) continue;
    REMAT_ASSIGN_OR_RETURN(const Kept kept, KeptSchedule(p, e));
    for (int j = 1; j <= e.most; ++j) {
      REMAT_ASSIGN_OR_RETURN(
          Plan plan, MakePlanFromSchedule(p, Strategy::kOffload, Parameter(k, j),
                                          Offloaded(kept, j), 0, SimulationDetail::kTotals));
      plan.schedule = Schedule{};
      out.push_back(Candidate{k, j, std::move(plan)});
    }
  }
  return out;
}

// Candidates(p, blocks), kept while a memo is open for `p`.
Result<std::shared_ptr<const std::vector<Candidate>>> KeptCandidates(
    const Profile& p, const std::vector<int>& blocks) {
  static const std::string kName = "offload candidates";
  if (std::shared_ptr<const void> kept = plan_memo::Kept(p, kName)) {
    return std::static_pointer_cast<const std::vector<Candidate>>(kept);
  }
  REMAT_ASSIGN_OR_RETURN(std::vector<Candidate> made, Candidates(p, blocks));
  auto shared = std::make_shared<const std::vector<Candidate>>(std::move(made));
  plan_memo::Keep(p, kName, shared);
  return shared;
}

// Whether a candidate's plan (made without a budget) fits `budget_bytes`:
// MakePlanFromSchedule's Fits at that budget (no replay: only the device
// total and the host's peak count, and the host's does not change).
bool FitsAt(const Plan& unbudgeted, int64_t budget_bytes) {
  return unbudgeted.fits && (budget_bytes <= 0 || unbudgeted.memory.total_bytes <= budget_bytes);
}

class OffloadSolver : public StrategySolver {
 public:
  Strategy strategy() const override { return Strategy::kOffload; }
  Result<Plan> Solve(const Profile& p, const PlanOptions& o) const override {
    if (!p.host_link.present()) {
      return Status::Invalid(
          "offload: the profile has no host link; give --host-link pcie4|pcie5|nvlink-c2c|cpu|"
          "<N>GB/s");
    }
    const std::vector<int> blocks = BlockLayers(p);
    const int n = static_cast<int>(blocks.size());
    if (o.every < 0 || o.every > n) {
      return Status::Invalid("offload: every " + std::to_string(o.every) + " blocks: expected 1.." +
                             std::to_string(n) + " (the model has " + std::to_string(n) +
                             " blocks)");
    }
    const int64_t host_budget = p.host_link.budget_bytes;
    Plan best;
    bool have = false;
    if (o.every > 0 || o.budget_bytes <= 0) {
      // One k: every j from 1 (or only the most the host holds).
      const int k = o.every > 0 ? o.every : 1;
      const EveryK e = LayerList(p, blocks, k);
      const int first = o.budget_bytes <= 0 ? e.most : 1;
      if (first <= e.most) {
        REMAT_ASSIGN_OR_RETURN(const Kept kept, KeptSchedule(p, e));
        for (int j = first; j <= e.most; ++j) {
          REMAT_ASSIGN_OR_RETURN(
              Plan plan, MakePlanFromSchedule(p, strategy(), Parameter(k, j), Offloaded(kept, j),
                                              o.budget_bytes, SimulationDetail::kTotals));
          KeepBetter(std::move(plan), &best, &have);
        }
      }
    } else {
      // Every (k, j): the fastest that fits (BetterPlan), each candidate's
      // plan at this budget compared through a probe of what BetterPlan reads.
      REMAT_ASSIGN_OR_RETURN(const std::shared_ptr<const std::vector<Candidate>> candidates,
                             KeptCandidates(p, blocks));
      const std::vector<Candidate>& c = *candidates;
      Plan probe, kept_probe;
      size_t pick = 0;
      for (size_t i = 0; i < c.size(); ++i) {
        probe.fits = FitsAt(c[i].plan, o.budget_bytes);
        probe.predicted.step_ms = c[i].plan.predicted.step_ms;
        probe.memory.total_bytes = c[i].plan.memory.total_bytes;
        if (i == 0 || BetterPlan(probe, kept_probe)) {
          pick = i;
          kept_probe.fits = probe.fits;
          kept_probe.predicted.step_ms = probe.predicted.step_ms;
          kept_probe.memory.total_bytes = probe.memory.total_bytes;
        }
      }
      if (!c.empty()) {
        best = c[pick].plan;
        best.budget_bytes = o.budget_bytes;
        best.fits = kept_probe.fits;
        const EveryK e = LayerList(p, blocks, c[pick].k);
        REMAT_ASSIGN_OR_RETURN(const Kept kept, KeptSchedule(p, e));
        best.schedule = Offloaded(kept, c[pick].j);
        have = true;
      }
    }
    if (!have) {
      return Status::Invalid("offload: no checkpoint can move (the host budget of " +
                             FormatBytes(host_budget) + " holds none)");
    }
    // The candidates were simulated for their totals (the same in full);
    // the one kept, with its timeline.
    REMAT_ASSIGN_OR_RETURN(best.predicted,
                           plan_memo::Simulated(p, best.schedule, SimulationDetail::kFull));
    return best;
  }
};

}  // namespace

const StrategySolver* OffloadStrategySolver() {
  static const OffloadSolver solver;
  return &solver;
}

}  // namespace remat::strategies
