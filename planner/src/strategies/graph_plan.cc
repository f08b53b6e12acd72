// Planning a graph profile: each chain solved at its share of the budget,
// the combinations simulated on the graph (see graph_plan.h).
#include "remat/strategies/graph_plan.h"

#include <algorithm>
#include <utility>

#include "remat/schedule/decisions.h"
#include "remat/strategies/strategies.h"

namespace remat {
namespace {

Result<Schedule> KeepAll(const Profile& p) {
  return BuildSingleLevelSchedule(
      p, std::vector<LayerDecision>(p.num_layers(), LayerDecision::kKeep), {});
}

Result<Plan> SolveOptimal(const Profile& p, int64_t budget, int slots) {
  PlanOptions o;
  o.strategy = Strategy::kOptimal;
  o.budget_bytes = std::max<int64_t>(budget, 1);
  o.slots = slots;
  return FindSolver(Strategy::kOptimal)->Solve(p, o);
}

// Chain z's profile with its share of the tensors crossing into it: each
// source's output held from z's batch input on, its gradient made by the
// last reader (the first to run backward) and kept, the other readers'
// parts transients of their backwards.
Profile WithCrossings(const GraphProfile& g, int z) {
  Profile p = g.chains[z].profile;
  for (const GraphEdge& e : g.edges) {
    if (e.to != z) continue;
    const int64_t b = g.output_bytes(e.from);
    p.layers[0].input_bytes += b;
    p.layers[e.readers.back()].gradient_bytes += b;
    for (size_t r = 0; r + 1 < e.readers.size(); ++r) {
      LayerProfile& l = p.layers[e.readers[r]];
      l.backward_workspace_bytes += b;
      if (l.accumulate_workspace_bytes >= 0) l.accumulate_workspace_bytes += b;
    }
  }
  return p;
}

// Schedules of `p` along its time/memory front, fastest first.
Result<std::vector<Schedule>> Front(const Profile& p, int slots, int points) {
  REMAT_ASSIGN_OR_RETURN(const Plan least, SolveOptimal(p, 1, slots));
  REMAT_ASSIGN_OR_RETURN(const Schedule keep, KeepAll(p));
  REMAT_ASSIGN_OR_RETURN(const SimulationResult none,
                         Simulate(p, keep, nullptr, SimulationDetail::kTotals));
  const int64_t least_peak = least.predicted.peak_bytes;
  std::vector<Schedule> front;
  int64_t budget = none.peak_bytes;
  for (int i = 0; i < 2 * points && budget >= least_peak; ++i) {
    REMAT_ASSIGN_OR_RETURN(const Plan plan, SolveOptimal(p, budget, slots));
    if (!plan.fits) break;
    front.push_back(plan.schedule);
    const int64_t peak = plan.predicted.peak_bytes;
    const int64_t step =
        i + 1 < points
            ? 1
            : std::max<int64_t>(1, (peak - least_peak) / std::max(1, 2 * points - i - 1));
    budget = peak - step;
  }
  front.push_back(least.schedule);
  return front;
}

// Chain c's schedule from the solver's schedule of c with the later chains
// appended as layer L: its ops on layers below L, the frees placed again.
Schedule WithoutLaterChains(const Schedule& extended, int L) {
  std::vector<Op> compute;
  for (const Op& op : extended.ops) {
    const bool on_layer = op.kind == OpKind::kForward || op.kind == OpKind::kRecompute ||
                          op.kind == OpKind::kBackward;
    if (op.kind == OpKind::kOptimizerStep || (on_layer && op.layer < L)) compute.push_back(op);
  }
  return AddFrees(compute, L);
}

bool BetterGraphPlan(const GraphPlan& a, const GraphPlan& b) {
  if (a.fits != b.fits) return a.fits;
  if (a.fits && a.predicted.step_ms != b.predicted.step_ms) {
    return a.predicted.step_ms < b.predicted.step_ms;
  }
  return a.predicted.peak_bytes < b.predicted.peak_bytes;
}

}  // namespace

Result<GraphPlan> MakeGraphPlan(const GraphProfile& graph, std::vector<Schedule> schedules,
                                int64_t budget_bytes, Strategy strategy) {
  GraphPlan plan;
  REMAT_ASSIGN_OR_RETURN(plan.predicted, SimulateGraph(graph, schedules));
  for (int c = 0; c < graph.num_chains(); ++c) {
    REMAT_ASSIGN_OR_RETURN(Plan p, MakePlanFromSchedule(graph.chains[c].profile, strategy, "",
                                                        std::move(schedules[c]), 0));
    plan.chains.push_back(std::move(p));
  }
  plan.budget_bytes = budget_bytes;
  plan.fits = budget_bytes <= 0 || plan.predicted.peak_bytes <= budget_bytes;
  return plan;
}

Result<GraphPlanSet> PlanGraph(const GraphProfile& graph, const GraphPlanOptions& options) {
  const int n = graph.num_chains();
  if (static_cast<int>(graph.order.size()) != n) {
    return Status::Invalid("graph plan: the graph profile was not validated (no chain order)");
  }
  const int64_t budget = options.budget_bytes;
  GraphPlanSet set;
  std::vector<Schedule> keep(n);
  for (int c = 0; c < n; ++c) {
    REMAT_ASSIGN_OR_RETURN(keep[c], KeepAll(graph.chains[c].profile));
  }
  REMAT_ASSIGN_OR_RETURN(set.baseline, MakeGraphPlan(graph, keep, budget, Strategy::kNone));
  set.combinations = 1;
  const GraphSimulationResult& at_rest = set.baseline.predicted;
  const int64_t S = at_rest.static_bytes;
  int64_t inputs = 0;  // every chain's batch input
  for (int c = 0; c < n; ++c) inputs += at_rest.start_bytes[c];

  // Each chain on its own at the budget less the others' model state and inputs.
  std::vector<Schedule> independent(n);
  for (int c = 0; c < n; ++c) {
    const Profile& p = graph.chains[c].profile;
    PlanOptions o;
    o.budget_bytes = budget > 0 ? std::max<int64_t>(1, budget - (S - p.static_bytes()) -
                                                           (inputs - at_rest.start_bytes[c]))
                                : 0;
    o.slots = options.slots;
    REMAT_ASSIGN_OR_RETURN(const PlanSet planned, MakePlan(p, o));
    independent[c] = planned.chosen.schedule;
  }
  REMAT_ASSIGN_OR_RETURN(set.independent,
                         MakeGraphPlan(graph, independent, budget, Strategy::kAuto));
  ++set.combinations;
  set.chosen = BetterGraphPlan(set.independent, set.baseline) ? set.independent : set.baseline;
  if (budget <= 0 || set.baseline.fits) {
    set.chosen = set.baseline;
    return set;
  }

  // The last chain along its front, then each earlier one for every plan of
  // the chains after it.
  const int last = graph.order.back();
  REMAT_ASSIGN_OR_RETURN(const std::vector<Schedule> front,
                         Front(WithCrossings(graph, last), options.slots, options.front_points));
  std::vector<std::vector<Schedule>> candidates;
  for (const Schedule& s : front) {
    std::vector<Schedule> all = keep;
    all[last] = s;
    candidates.push_back(std::move(all));
  }
  for (int k = n - 2; k >= 0; --k) {
    const int c = graph.order[k];
    const Profile& p = graph.chains[c].profile;
    for (std::vector<Schedule>& all : candidates) {
      // The later chains' window, every earlier chain (and c) keeping all.
      for (int j = 0; j <= k; ++j) all[graph.order[j]] = keep[graph.order[j]];
      REMAT_ASSIGN_OR_RETURN(const GraphSimulationResult sim, SimulateGraph(graph, all));
      int64_t rest = S, held = 0, window = 0;
      double later_ms = 0;
      for (int j = 0; j < n; ++j) {
        const int d = graph.order[j];
        if (j <= k) {
          rest += sim.forward_kept_bytes[d];
        } else {
          rest += sim.start_bytes[d];
          held += sim.end_bytes[d] - sim.start_bytes[d];
          later_ms += sim.chains[d].step_ms;
        }
      }
      for (const GraphPoint& point : sim.timeline) {
        for (int j = k + 1; j < n; ++j) {
          if (point.chain == graph.order[j]) window = std::max(window, point.peak - rest);
        }
      }
      Profile extended = p;
      LayerProfile later;
      later.name = "later chains";
      later.input_bytes = p.layers.back().output_bytes;
      later.forward_ms = later_ms;
      later.forward_workspace_bytes = window;
      later.gradient_bytes = std::max<int64_t>(0, held);
      later.backward_workspace_bytes =
          std::max<int64_t>(0, window - later.input_bytes - later.gradient_bytes);
      extended.layers.push_back(later);
      int64_t share = budget - (S - p.static_bytes());
      for (int j = 0; j < n; ++j) {
        const int d = graph.order[j];
        if (j < k) share -= sim.forward_kept_bytes[d];
        if (j > k) share -= sim.start_bytes[d];
      }
      REMAT_ASSIGN_OR_RETURN(const Plan solved, SolveOptimal(extended, share, options.slots));
      all[c] = WithoutLaterChains(solved.schedule, p.num_layers());
    }
  }
  for (std::vector<Schedule>& all : candidates) {
    Result<GraphPlan> plan = MakeGraphPlan(graph, std::move(all), budget);
    if (!plan.ok()) return plan.status().WithPrefix("graph plan");
    ++set.combinations;
    if (BetterGraphPlan(*plan, set.chosen)) set.chosen = std::move(*plan);
  }
  return set;
}

}  // namespace remat
