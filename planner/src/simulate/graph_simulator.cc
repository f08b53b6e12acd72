// A graph's training step from its chains' own simulations (see
// graph_simulator.h).
#include "remat/simulate/graph_simulator.h"

#include <algorithm>

namespace remat {
namespace {

// A chain's schedule cut into the graph's two passes.
struct ChainRun {
  int64_t static_bytes = 0;
  int split = 0;                  // first backward or recompute: where the backward part starts
  std::vector<int> backward_ops;  // split.. without the optimizer step
  int optimizer_op = -1;
};

// What crosses from one source chain: its output and that output's
// gradient. The chain's own simulation holds its x[L] as a chain alone does
// (freed after a forward without grad, made again by a recompute, read by
// its last backward); the graph holds it from its first forward until its
// last reader's backward. extra() is the graph's bytes less the chain's.
struct Crossing {
  int64_t bytes = 0;
  int readers_left = 0;  // reader backwards still to run
  bool graph_live = false;
  bool chain_live = false;
  bool gradient_held = false;
  int64_t extra() const {
    return (gradient_held ? bytes : 0) + (graph_live ? bytes : 0) - (chain_live ? bytes : 0);
  }
};

}  // namespace

Result<GraphSimulationResult> SimulateGraph(const GraphProfile& graph,
                                            const std::vector<Schedule>& schedules,
                                            SimulationDetail detail) {
  const int n = graph.num_chains();
  if (static_cast<int>(schedules.size()) != n) {
    return Status::Invalid("graph schedule: " + std::to_string(schedules.size()) +
                           " chain schedules for " + std::to_string(n) + " chains");
  }
  if (static_cast<int>(graph.order.size()) != n) {
    return Status::Invalid("graph schedule: the graph profile was not validated (no chain order)");
  }
  GraphSimulationResult result;
  std::vector<ChainRun> runs(n);
  for (int c = 0; c < n; ++c) {
    const Profile& profile = graph.chains[c].profile;
    Result<SimulationResult> sim = Simulate(profile, schedules[c]);
    if (!sim.ok()) return sim.status().WithPrefix("chain '" + graph.chains[c].name + "'");
    const std::vector<Op>& ops = schedules[c].ops;
    ChainRun& run = runs[c];
    run.static_bytes = sim->static_bytes;
    run.split = static_cast<int>(ops.size());
    for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
      if (ops[k].kind == OpKind::kBackward || ops[k].kind == OpKind::kRecompute) {
        run.split = k;
        break;
      }
    }
    for (int k = run.split; k < static_cast<int>(ops.size()); ++k) {
      const Op& op = ops[k];
      if (op.kind == OpKind::kForward) {
        return Status::Invalid("chain '" + graph.chains[c].name +
                               "': its schedule runs a first "
                               "forward after a backward or recompute; a graph runs every "
                               "chain's forward before the backwards");
      }
      if (op.kind == OpKind::kOptimizerStep) {
        run.optimizer_op = k;
        continue;
      }
      run.backward_ops.push_back(k);
    }
    result.step_ms += sim->step_ms;
    result.recompute_ms += sim->recompute_ms;
    result.static_bytes += run.static_bytes;
    result.chains.push_back(std::move(*sim));
  }

  // reads[c][layer]: the chains whose output that layer reads.
  std::vector<std::vector<std::vector<int>>> reads(n);
  for (int c = 0; c < n; ++c) reads[c].resize(graph.chains[c].profile.num_layers());
  std::vector<Crossing> crossings(n);
  for (const GraphEdge& e : graph.edges) {
    crossings[e.from].bytes = graph.output_bytes(e.from);
    crossings[e.from].readers_left += static_cast<int>(e.readers.size());
    for (int r : e.readers) reads[e.to][r].push_back(e.from);
  }

  const int64_t S = result.static_bytes;
  std::vector<int64_t> level(n);  // each chain's bytes between its ops, model state aside
  int64_t level_sum = 0;
  for (int c = 0; c < n; ++c) {
    const SimulationResult& sim = result.chains[c];
    level[c] = sim.timeline.empty() ? 0 : sim.timeline[0].live_before - runs[c].static_bytes;
    level_sum += level[c];
  }
  auto crossing_extra = [&crossings]() {
    int64_t extra = 0;
    for (const Crossing& x : crossings) extra += x.extra();
    return extra;
  };
  bool recorded = false;
  auto record = [&](const GraphPoint& p) {
    if (!recorded || p.peak > result.peak_bytes) {
      result.peak_bytes = p.peak;
      result.peak_chain = p.chain;
      result.peak_op = p.op;
      recorded = true;
    }
    if (detail == SimulationDetail::kFull) result.timeline.push_back(p);
  };
  auto run_op = [&](int c, int k) {
    const TimelinePoint& t = result.chains[c].timeline[k];
    const Op& op = schedules[c].ops[k];
    const int64_t s = runs[c].static_bytes;
    const int64_t others = S + level_sum - level[c];
    const int last = graph.chains[c].profile.num_layers() - 1;
    Crossing& own = crossings[c];
    // A forward or recompute of the last layer writes the output: both the
    // chain and the graph count it at the op's peak.
    const bool writes_output = own.bytes > 0 && op.layer == last &&
                               (op.kind == OpKind::kForward || op.kind == OpKind::kRecompute);
    GraphPoint p;
    p.chain = c;
    p.op = k;
    p.live_before = others + (t.live_before - s) + crossing_extra();
    int64_t extra_at_peak = crossing_extra();
    if (writes_output) {
      extra_at_peak += (own.graph_live ? 0 : own.bytes) - (own.chain_live ? 0 : own.bytes);
    }
    if (op.kind == OpKind::kBackward) {
      // A reader's backward makes the source output's gradient (the first
      // reader) or its part of it, a transient added in place (the others).
      for (int u : reads[c][op.layer]) extra_at_peak += crossings[u].bytes;
    }
    p.peak = others + (t.peak - s) + extra_at_peak;
    if (writes_output) {
      own.chain_live = true;
      if (own.readers_left > 0) own.graph_live = true;
    }
    if (op.kind == OpKind::kFree && op.tensor == TensorRef{TensorKind::kX, last + 1}) {
      own.chain_live = false;
    }
    if (op.kind == OpKind::kBackward) {
      for (int u : reads[c][op.layer]) {
        Crossing& x = crossings[u];
        x.gradient_held = true;
        if (--x.readers_left == 0) x.graph_live = false;
      }
      if (op.layer == last) own.gradient_held = false;
    }
    level_sum += (t.live_after - s) - level[c];
    level[c] = t.live_after - s;
    p.live_after = S + level_sum + crossing_extra();
    record(p);
  };

  result.start_bytes = level;
  for (int c : graph.order) {
    for (int k = 0; k < runs[c].split; ++k) run_op(c, k);
  }
  result.forward_kept_bytes = level;
  for (auto it = graph.order.rbegin(); it != graph.order.rend(); ++it) {
    for (int k : runs[*it].backward_ops) run_op(*it, k);
  }
  result.end_bytes = level;
  GraphPoint step;
  step.live_before = S + level_sum + crossing_extra();
  step.peak = step.live_before;
  step.live_after = step.live_before;
  for (int c = 0; c < n; ++c) {
    if (runs[c].optimizer_op < 0) continue;
    const TimelinePoint& t = result.chains[c].timeline[runs[c].optimizer_op];
    step.peak += t.peak - t.live_before;
    step.live_after += t.live_after - t.live_before;
  }
  record(step);
  result.activation_peak_bytes = result.peak_bytes - S;
  return result;
}

}  // namespace remat
