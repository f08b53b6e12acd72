#include "analytic/chain.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

namespace remat {
namespace {

using GroupGraph = boost::adjacency_list<boost::setS, boost::vecS, boost::directedS>;

// Replays `ops` (indices into graph.ops(), in order) and returns the highest
// sum of live bytes among tensors the group produces. Tensors in `kept` stay
// live; others are freed once every consumer has run (and none is outside
// `ops`).
int64_t ReplayForward(const OpGraph& g, const std::vector<int>& ops, const std::set<int>& kept) {
  std::set<int> in_group(ops.begin(), ops.end());
  std::map<int, int> remaining;  // tensor -> consumers not yet run
  int64_t live = 0, peak = 0;
  std::set<int> live_set;
  for (size_t k = 0; k < ops.size(); ++k) {
    const OpInfo& op = g.ops()[ops[k]];
    for (int t : op.outputs) {
      live += g.tensors()[t].bytes;
      live_set.insert(t);
      int n = 0;
      bool escapes = false;
      for (int c : g.consumers(t)) {
        if (in_group.count(c)) ++n;
        else escapes = true;
      }
      remaining[t] = escapes ? -1 : n;  // -1: needed after the group
    }
    peak = std::max(peak, live);
    // Free produced tensors whose last in-group consumer was this op.
    auto try_free = [&](int t) {
      auto it = remaining.find(t);
      if (it == remaining.end() || it->second != 0 || kept.count(t) || !live_set.count(t)) return;
      live -= g.tensors()[t].bytes;
      live_set.erase(t);
    };
    for (int t : op.inputs) {
      auto it = remaining.find(t);
      if (it != remaining.end() && it->second > 0) --it->second;
      try_free(t);
    }
    for (int t : op.outputs) try_free(t);  // outputs nobody reads
  }
  return peak;
}

}  // namespace

Result<std::vector<LayerProfile>> DeriveChain(
    const OpGraph& g, const OpTimeModel& time,
    const std::vector<std::pair<std::string, std::string>>& kinds) {
  const auto& ops = g.ops();
  const auto& tensors = g.tensors();
  // 1. Groups by tag, in order of first appearance.
  std::map<std::string, int> group_index;
  std::vector<std::string> group_name;
  std::vector<int> group_of(ops.size());
  std::vector<std::vector<int>> group_ops;
  {
    std::vector<int> topo;
    if (!g.TopologicalOrder(&topo)) return Status::Internal("the op graph has a cycle");
    // Builders add ops in execution order; check it is a topological order.
    for (size_t i = 0; i < ops.size(); ++i) {
      for (int t : ops[i].inputs) {
        if (tensors[t].producer >= static_cast<int>(i)) {
          return Status::Internal("op '" + ops[i].name + "' runs before its input is produced");
        }
      }
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    auto [it, inserted] = group_index.emplace(ops[i].layer, static_cast<int>(group_name.size()));
    if (inserted) {
      group_name.push_back(ops[i].layer);
      group_ops.emplace_back();
    }
    group_of[i] = it->second;
    group_ops[it->second].push_back(static_cast<int>(i));
  }
  const int n = static_cast<int>(group_name.size());
  // 2. Contract to a group graph; order groups topologically; check it is a chain.
  GroupGraph gg(n);
  std::vector<std::set<int>> crossing_in(n);
  std::vector<int> graph_inputs;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int p = tensors[t].producer;
    for (int c : g.consumers(static_cast<int>(t))) {
      if (p < 0) {
        crossing_in[group_of[c]].insert(static_cast<int>(t));
        continue;
      }
      if (group_of[p] != group_of[c]) {
        boost::add_edge(group_of[p], group_of[c], gg);
        crossing_in[group_of[c]].insert(static_cast<int>(t));
      }
    }
  }
  std::vector<int> reversed;
  try {
    boost::topological_sort(gg, std::back_inserter(reversed));
  } catch (const boost::not_a_dag&) {
    return Status::Internal("layers of the op graph depend on each other in a cycle");
  }
  std::vector<int> order(reversed.rbegin(), reversed.rend());
  std::vector<int> position(n);
  for (int k = 0; k < n; ++k) position[order[k]] = k;
  for (int k = 0; k < n; ++k) {
    const int gi = order[k];
    if (crossing_in[gi].size() != 1) {
      return Status::Internal("layer '" + group_name[gi] + "' receives " +
                              std::to_string(crossing_in[gi].size()) +
                              " tensors from other layers; a chain boundary carries exactly one");
    }
    const int t = *crossing_in[gi].begin();
    const int p = tensors[t].producer;
    const int expected = k == 0 ? -1 : order[k - 1];
    if ((p < 0 ? -1 : group_of[p]) != expected) {
      return Status::Internal("layer '" + group_name[gi] + "' reads '" + tensors[t].name +
                              "', which does not come from the layer right before it");
    }
  }
  // 3. Per-layer figures.
  std::vector<LayerProfile> chain;
  for (int k = 0; k < n; ++k) {
    const int gi = order[k];
    const std::vector<int>& gops = group_ops[gi];
    const int input = *crossing_in[gi].begin();
    int output = -1;
    for (int op : gops) {
      for (int t : ops[op].outputs) {
        bool leaves = g.consumers(t).empty() && k == n - 1;
        for (int c : g.consumers(t)) leaves = leaves || group_of[c] != gi;
        if (leaves) {
          if (output >= 0 && output != t) {
            return Status::Internal("layer '" + group_name[gi] + "' has two outputs");
          }
          output = t;
        }
      }
    }
    if (output < 0) return Status::Internal("layer '" + group_name[gi] + "' has no output");
    LayerProfile l;
    l.name = group_name[gi];
    for (const auto& [tag, kind] : kinds) {
      if (tag == l.name) l.kind = kind;
    }
    l.input_bytes = tensors[input].bytes;
    l.output_bytes = tensors[output].bytes;
    std::set<int> saved = {output};
    for (int op : gops) saved.insert(ops[op].saved.begin(), ops[op].saved.end());
    saved.erase(input);
    for (int t : saved) l.activation_bytes += tensors[t].bytes;
    l.forward_workspace_bytes =
        std::max<int64_t>(0, ReplayForward(g, gops, saved) - l.activation_bytes);
    l.forward_nograd_workspace_bytes =
        std::max<int64_t>(0, ReplayForward(g, gops, {output}) - l.output_bytes);
    // Backward: walk ops in reverse, allocating input gradients and freeing
    // each output's gradient once its producer has run.
    {
      std::set<int> grads;
      int64_t live = 0, peak = 0;
      for (auto it = gops.rbegin(); it != gops.rend(); ++it) {
        const OpInfo& op = ops[*it];
        for (int t : op.inputs) {
          if (tensors[t].requires_grad && grads.insert(t).second) live += tensors[t].bytes;
        }
        peak = std::max(peak, live + op.backward_workspace);
        for (int t : op.outputs) {
          if (grads.erase(t)) live -= tensors[t].bytes;
        }
      }
      const int64_t g_in = tensors[input].requires_grad ? tensors[input].bytes : 0;
      l.backward_workspace_bytes = std::max<int64_t>(0, peak - g_in);
    }
    for (int op : gops) {
      l.forward_ms += time.Millis(ops[op].forward_flops, ops[op].forward_bytes);
      l.backward_ms += time.Millis(ops[op].backward_flops, ops[op].backward_bytes);
    }
    // Selective option: recompute the attention core in backward.
    std::vector<int> core;
    for (int op : gops) {
      if (ops[op].attention_core) core.push_back(op);
    }
    if (!core.empty()) {
      const std::set<int> core_set(core.begin(), core.end());
      std::set<int> dropped;
      for (int t : saved) {
        const int p = tensors[t].producer;
        if (p < 0 || !core_set.count(p)) continue;
        bool internal = true;
        for (int c : g.consumers(t)) internal = internal && core_set.count(c) > 0;
        if (internal) dropped.insert(t);
      }
      SelectiveOption opt;
      opt.name = "attention_core";
      opt.activation_bytes = l.activation_bytes;
      for (int t : dropped) opt.activation_bytes -= tensors[t].bytes;
      for (int op : core) opt.extra_recompute_ms += time.Millis(ops[op].forward_flops, ops[op].forward_bytes);
      opt.recompute_workspace_bytes = ReplayForward(g, core, dropped);
      // The forward under this option keeps everything but `dropped`: those
      // become transients of the forward (the core runs without grad).
      std::set<int> kept_selectively;
      for (int t : saved) {
        if (!dropped.count(t)) kept_selectively.insert(t);
      }
      opt.forward_workspace_bytes = std::max<int64_t>(
          0, ReplayForward(g, gops, kept_selectively) - opt.activation_bytes);
      if (!dropped.empty()) l.selective.push_back(opt);
    }
    chain.push_back(std::move(l));
  }
  return chain;
}

}  // namespace remat
