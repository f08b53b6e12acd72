// The offload strategy: checkpoints moved to host memory over the profile's
// link (HostLink) instead of staying on the device. Its layer lists are the
// uniform strategy's (a checkpoint every k blocks), with the first j of their
// offloadable checkpoints offloaded: the earliest ones stay on the host the
// longest, so they free the most device memory per byte of host memory.
// Without a budget: every block checkpointed and every checkpoint offloaded,
// the lowest device peak offload reaches (as far as the host budget allows).
// With one: the fastest (k, j) that fits, the candidates simulated (their
// totals; the one kept again in full) once for a profile, the solves at
// the fit search's other tensor budgets choosing among the same candidates;
// a layer list whose floor (offload_floor.h) cannot beat the plan kept so
// far is skipped, unsimulated until a budget needs it.
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "remat/io/units.h"
#include "remat/plan/plan_memo.h"
#include "remat/schedule/decisions.h"
#include "strategies/offload_floor.h"
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

// The candidates of one layer list (every k): (k, j) for j from 1 to the
// movable checkpoints the host holds, made when a budget's search first
// needs them, and their floor (offload_floor.h), made when a search first
// asks whether it can skip them.
struct Group {
  EveryK list;
  int k = 0;
  bool placed = false;  // `kept` made
  Kept kept;
  int64_t least = 0;     // SegmentFloorBytes of its layer list
  bool bounded = false;  // `floor` made
  OffloadFloor floor;
  bool made = false;
  std::vector<Candidate> candidates;
};

// Every (k, j) with k from 1 to the blocks, in that order, by group. None
// depends on the budget: the searches at every tensor budget of one profile
// share them (plan_memo::Keep), each making the groups it cannot skip.
struct Search {
  Search(const Profile& p, const std::vector<int>& blocks)
      : floors(FloorHolds(p)), free_link(floors ? WithFreeLink(p) : Profile{}) {
    const int n = static_cast<int>(blocks.size());
    for (int k = 1; k <= n; ++k) {
      EveryK e = LayerList(p, blocks, k);
      if (e.most < 1) continue;
      Group g;
      if (floors) g.least = SegmentFloorBytes(p, e.decisions);
      g.list = std::move(e);
      g.k = k;
      groups.push_back(std::move(g));
    }
  }
  std::mutex mu;  // held by a search while it reads and makes groups
  const bool floors;        // whether the floors hold for the profile
  const Profile free_link;  // the profile with a free host link (floors only)
  std::vector<Group> groups;
};

// The group's kept schedule and places, made once.
Result<const Kept*> GroupKept(const Profile& p, Group* g) {
  if (!g->placed) {
    REMAT_ASSIGN_OR_RETURN(g->kept, KeptSchedule(p, g->list));
    g->placed = true;
  }
  return &g->kept;
}

Status MakeGroup(const Profile& p, Group* g) {
  REMAT_ASSIGN_OR_RETURN(const Kept* kept, GroupKept(p, g));
  std::vector<Candidate> made;
  for (int j = 1; j <= g->list.most; ++j) {
    REMAT_ASSIGN_OR_RETURN(
        Plan plan, MakePlanFromSchedule(p, Strategy::kOffload, Parameter(g->k, j),
                                        Offloaded(*kept, j), 0, SimulationDetail::kTotals));
    plan.schedule = Schedule{};
    made.push_back(Candidate{g->k, j, std::move(plan)});
  }
  g->candidates = std::move(made);
  g->made = true;
  g->kept = Kept{};  // not needed again (the pick's schedule is made again)
  g->placed = false;
  return Status::Ok();
}

// Whether the search may skip group `g` against `kept` at `budget_bytes`:
// its memory floor without a time (SegmentFloorBytes), or else its floor
// (made here once), cannot beat `kept`. A group of one candidate is made
// rather than floored: its floor costs a simulation as well.
Result<bool> Skips(const Profile& p, const Search& search, Group* g, const Plan& kept,
                   int64_t budget_bytes) {
  if (!search.floors) return false;
  const OffloadFloor least{-std::numeric_limits<double>::infinity(), g->least};
  if (CannotBeat(least, kept, budget_bytes)) return true;
  if (g->list.most < 2) return false;
  if (!g->bounded) {
    REMAT_ASSIGN_OR_RETURN(const Kept* kept, GroupKept(p, g));
    REMAT_ASSIGN_OR_RETURN(g->floor, FloorOf(search.free_link, Offloaded(*kept, g->list.most)));
    g->bounded = true;
  }
  return CannotBeat(g->floor, kept, budget_bytes);
}

// The search kept while a memo is open for `p`, else a new one.
std::shared_ptr<Search> KeptSearch(const Profile& p, const std::vector<int>& blocks) {
  static const std::string kName = "offload candidates";
  if (std::shared_ptr<const void> kept = plan_memo::Kept(p, kName)) {
    return std::const_pointer_cast<Search>(std::static_pointer_cast<const Search>(kept));
  }
  auto made = std::make_shared<Search>(p, blocks);
  plan_memo::Keep(p, kName, made);
  return made;
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
      // plan at this budget compared through a probe of what BetterPlan
      // reads; a group whose floor cannot beat the probe kept is skipped
      // (none of its candidates would be kept).
      const std::shared_ptr<Search> search = KeptSearch(p, blocks);
      std::lock_guard<std::mutex> lock(search->mu);
      Plan probe, kept_probe;
      const Candidate* pick = nullptr;
      for (Group& g : search->groups) {
        if (!g.made) {
          if (pick != nullptr) {
            REMAT_ASSIGN_OR_RETURN(const bool skips,
                                   Skips(p, *search, &g, kept_probe, o.budget_bytes));
            if (skips) continue;
          }
          REMAT_RETURN_IF_ERROR(MakeGroup(p, &g));
        }
        for (const Candidate& c : g.candidates) {
          probe.fits = FitsAt(c.plan, o.budget_bytes);
          probe.predicted.step_ms = c.plan.predicted.step_ms;
          probe.memory.total_bytes = c.plan.memory.total_bytes;
          if (pick == nullptr || BetterPlan(probe, kept_probe)) {
            pick = &c;
            kept_probe.fits = probe.fits;
            kept_probe.predicted.step_ms = probe.predicted.step_ms;
            kept_probe.memory.total_bytes = probe.memory.total_bytes;
          }
        }
      }
      if (pick != nullptr) {
        best = pick->plan;
        best.budget_bytes = o.budget_bytes;
        best.fits = kept_probe.fits;
        const EveryK e = LayerList(p, blocks, pick->k);
        REMAT_ASSIGN_OR_RETURN(const Kept kept, KeptSchedule(p, e));
        best.schedule = Offloaded(kept, pick->j);
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
