#include "analytic/chain.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "analytic/backward_workspace.h"

namespace remat::analytic {

TensorSizes FitTensors(const TensorSizes& tensors, int64_t total) {
  TensorSizes out;
  int64_t left = std::max<int64_t>(total, 0);
  for (int64_t bytes : tensors) {
    if (left == 0) break;
    const int64_t take = std::min(bytes, left);
    if (take > 0) out.push_back(take);
    left -= take;
  }
  if (left > 0) out.push_back(left);
  return out;
}

int64_t ReplayForward(const OpGraph& g, const std::vector<int>& ops, const std::set<int>& kept,
                      TensorSizes* at_peak) {
  std::set<int> in_group(ops.begin(), ops.end());
  std::map<int, int> holders;  // tensor -> ops of the group that hold it
  for (int o : ops) {
    for (int t : g.ops()[o].held) ++holders[t];
  }
  std::map<int, int> remaining;  // tensor -> consumers and holders not yet run
  int64_t live = 0, peak = 0;
  std::set<int> live_set;
  for (size_t k = 0; k < ops.size(); ++k) {
    const OpInfo& op = g.ops()[ops[k]];
    for (int t : op.outputs) {
      live += g.tensors()[t].bytes;
      live_set.insert(t);
      int n = holders.count(t) ? holders[t] : 0;
      bool escapes = false;
      for (int c : g.consumers(t)) {
        if (in_group.count(c))
          ++n;
        else
          escapes = true;
      }
      remaining[t] = escapes ? -1 : n;  // -1: needed after the group
    }
    if (live + op.forward_workspace > peak) {
      peak = live + op.forward_workspace;
      if (at_peak != nullptr) {
        at_peak->clear();
        for (int t : live_set) {
          if (!kept.count(t)) at_peak->push_back(g.tensors()[t].bytes);
        }
        if (op.forward_workspace > 0) at_peak->push_back(op.forward_workspace);
      }
    }
    // Free produced tensors whose last in-group consumer was this op.
    auto try_free = [&](int t) {
      auto it = remaining.find(t);
      if (it == remaining.end() || it->second != 0 || kept.count(t) || !live_set.count(t)) return;
      live -= g.tensors()[t].bytes;
      live_set.erase(t);
    };
    std::vector<int> read = op.inputs;
    read.insert(read.end(), op.held.begin(), op.held.end());
    for (int t : read) {
      auto it = remaining.find(t);
      if (it != remaining.end() && it->second > 0) --it->second;
      try_free(t);
    }
    for (int t : op.outputs) try_free(t);  // outputs nobody reads
  }
  return peak;
}

namespace {

using GroupGraph = boost::adjacency_list<boost::setS, boost::vecS, boost::directedS>;

// The op graph's layers ("groups": ops sharing a layer tag), in chain order.
struct Groups {
  std::vector<std::string> name;      // by group index
  std::vector<std::vector<int>> ops;  // op indices, in execution order
  std::vector<int> of_op;             // group index of each op
  std::vector<std::set<int>> inputs;  // the chain tensor each group reads (one)
  // Other tensors a group reads from outside it: the batch (graph inputs,
  // read by a later pass's embedding) and, for the last group, skips.
  std::vector<std::set<int>> side_inputs;
  std::vector<std::set<int>> skips;  // tensors each group hands to the last group past the chain
  std::vector<int> order;            // group indices in chain order
};

// Groups ops by their layer tag, in order of first appearance. Builders add
// ops in execution order; that it is a topological order is checked.
Status GroupOps(const OpGraph& g, Groups* out) {
  const auto& ops = g.ops();
  // Every input made by an op added before its reader: the order of the
  // ops is topological, and the graph has no cycle.
  for (size_t i = 0; i < ops.size(); ++i) {
    for (int t : ops[i].inputs) {
      if (g.tensors()[t].producer >= static_cast<int>(i)) {
        return Status::Internal("op '" + ops[i].name + "' runs before its input is produced");
      }
    }
  }
  std::map<std::string, int> index;
  out->of_op.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    auto [it, inserted] = index.emplace(ops[i].layer, static_cast<int>(out->name.size()));
    if (inserted) {
      out->name.push_back(ops[i].layer);
      out->ops.emplace_back();
    }
    out->of_op[i] = it->second;
    out->ops[it->second].push_back(static_cast<int>(i));
  }
  return Status::Ok();
}

// Contracts the op graph to a graph of groups (Boost.Graph), orders it
// topologically, and checks that it is a chain: each group reads exactly one
// tensor from outside, produced by the group right before it.
Status OrderAsChain(const OpGraph& g, Groups* gr) {
  const auto& tensors = g.tensors();
  const int n = static_cast<int>(gr->name.size());
  GroupGraph gg(n);
  gr->inputs.assign(n, {});
  for (size_t t = 0; t < tensors.size(); ++t) {
    const int p = tensors[t].producer;
    for (int c : g.consumers(static_cast<int>(t))) {
      if (p >= 0 && gr->of_op[p] == gr->of_op[c]) continue;
      if (p >= 0) boost::add_edge(gr->of_op[p], gr->of_op[c], gg);
      gr->inputs[gr->of_op[c]].insert(static_cast<int>(t));
    }
  }
  std::vector<int> reversed;
  try {
    boost::topological_sort(gg, std::back_inserter(reversed));
  } catch (const boost::not_a_dag&) {
    return Status::Internal("layers of the op graph depend on each other in a cycle");
  }
  gr->order.assign(reversed.rbegin(), reversed.rend());
  std::vector<int> position(n);
  for (int k = 0; k < n; ++k) position[gr->order[k]] = k;
  // Besides the chain tensor from the layer right before, a layer may read
  // the batch (a graph input: a later pass's embedding reads its ids), and
  // the last layer (the loss) may read tensors of any earlier layer: skips
  // (separate passes' sentence embeddings).
  gr->side_inputs.assign(n, {});
  gr->skips.assign(n, {});
  for (int gi = 0; gi < n; ++gi) {
    const int k = position[gi];
    for (auto it = gr->inputs[gi].begin(); it != gr->inputs[gi].end();) {
      const int p = tensors[*it].producer;
      const int from = p < 0 ? -1 : position[gr->of_op[p]];
      const bool batch = p < 0 && k > 0;
      // A skip is not also the chain tensor of its layer (a tensor read by
      // the next layer and again past it is a residual across layers).
      bool chained = false;
      for (int c : g.consumers(*it))
        chained = chained || (p >= 0 && position[gr->of_op[c]] == from + 1);
      const bool skip = p >= 0 && k == n - 1 && from < k - 1 && !chained;
      if (!batch && !skip) {
        ++it;
        continue;
      }
      if (skip) gr->skips[gr->of_op[p]].insert(*it);
      gr->side_inputs[gi].insert(*it);
      it = gr->inputs[gi].erase(it);
    }
  }
  for (int k = 0; k < n; ++k) {
    const int gi = gr->order[k];
    if (gr->inputs[gi].size() != 1) {
      return Status::Internal("layer '" + gr->name[gi] + "' receives " +
                              std::to_string(gr->inputs[gi].size()) +
                              " tensors from other layers; a chain boundary carries exactly one");
    }
    const int t = *gr->inputs[gi].begin();
    const int p = tensors[t].producer;
    const int expected = k == 0 ? -1 : gr->order[k - 1];
    if ((p < 0 ? -1 : gr->of_op[p]) != expected) {
      return Status::Internal("layer '" + gr->name[gi] + "' reads '" + tensors[t].name +
                              "', which does not come from the layer right before it");
    }
  }
  return Status::Ok();
}

// The one tensor group `gi` passes on (read outside it, or the graph's
// last tensor for the last layer).
Result<int> GroupOutput(const OpGraph& g, const Groups& gr, int gi, bool last) {
  int output = -1;
  for (int op : gr.ops[gi]) {
    for (int t : g.ops()[op].outputs) {
      bool leaves = g.consumers(t).empty() && last;
      for (int c : g.consumers(t)) leaves = leaves || gr.of_op[c] != gi;
      if (!leaves || gr.skips[gi].count(t)) continue;
      if (output >= 0 && output != t) {
        return Status::Internal("layer '" + gr.name[gi] + "' has two outputs");
      }
      output = t;
    }
  }
  if (output < 0) return Status::Internal("layer '" + gr.name[gi] + "' has no output");
  return output;
}

// The layer's backward workspace for a way of running it (BackwardWorkspace
// with the layer's input, output and side inputs).
using LayerBackward = std::function<int64_t(const BackwardRun&)>;

// A selective option: the tensors of `saved` that `parts` make (and only
// they read, for a part that holds its output) are dropped and recomputed in
// backward from the parts' kept inputs. Empty when a part drops nothing.
// `full`: how the layer's full backward runs (whether it creates gradients);
// `output`: the layer's output, kept but not one of saved_tensors.
std::optional<SelectiveOption> RecomputeOption(const OpGraph& g, const OpTimeModel& time,
                                               const std::vector<int>& ops,
                                               const std::set<int>& saved, int output,
                                               int64_t activation_bytes, const std::string& name,
                                               const std::vector<RecomputePart>& parts,
                                               const BackwardRun& full,
                                               const LayerBackward& backward) {
  const auto& tensors = g.tensors();
  const std::set<int> layer_ops(ops.begin(), ops.end());
  SelectiveOption opt;
  opt.name = name;
  std::set<int> all_dropped;
  std::vector<std::set<int>> dropped(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::set<int> part(parts[i].ops.begin(), parts[i].ops.end());
    for (int t : saved) {
      const int p = tensors[t].producer;
      bool internal = p >= 0 && part.count(p) > 0;
      if (parts[i].regenerates && internal) {
        const std::vector<int>& own = g.ops()[p].saved;
        internal = std::find(own.begin(), own.end(), t) != own.end();
      }
      if (parts[i].holds_output) {
        for (int c : g.consumers(t)) internal = internal && part.count(c) > 0;
      }
      if (internal) dropped[i].insert(t);
    }
    if (dropped[i].empty()) return std::nullopt;
    all_dropped.insert(dropped[i].begin(), dropped[i].end());
  }
  std::set<int> kept;
  std::set_difference(saved.begin(), saved.end(), all_dropped.begin(), all_dropped.end(),
                      std::inserter(kept, kept.end()));
  opt.activation_bytes = activation_bytes;
  for (int t : all_dropped) opt.activation_bytes -= tensors[t].bytes;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::set<int> part(parts[i].ops.begin(), parts[i].ops.end());
    // The part's inputs made by the layer's other ops are kept to recompute
    // it, also those no op saves in a full forward (k and v before a fused
    // kernel's repeat_kv, a tensor the core casts for its matmuls). A
    // regenerated mask needs none.
    for (int op : parts[i].ops) {
      if (parts[i].regenerates) break;
      for (int t : g.ops()[op].inputs) {
        const int p = tensors[t].producer;
        if (p < 0 || part.count(p) > 0 || layer_ops.count(p) == 0) continue;
        if (saved.count(t) == 0 && kept.insert(t).second) opt.activation_bytes += tensors[t].bytes;
      }
    }
    for (int op : parts[i].ops) {
      opt.extra_recompute_ms += time.ForwardMillis(g.ops()[op]);
    }
  }
  // What the recomputes add to the backward's peak: the backward replayed
  // with each part recomputed where it is reached, against the full one
  // (0 where a part fits under a peak the full backward reaches anyway: the
  // attention core of a post-LN block, recomputed once the MLP's gradients
  // are gone).
  BackwardRun run = full;
  run.parts = parts;
  run.dropped = dropped;
  opt.recompute_workspace_bytes = std::max<int64_t>(0, backward(run) - backward(full));
  // The forward under this option keeps everything but what is dropped:
  // those become transients of the forward (the parts run without grad).
  TensorSizes at_peak;
  opt.forward_workspace_bytes =
      std::max<int64_t>(0, ReplayForward(g, ops, kept, &at_peak) - opt.activation_bytes);
  opt.forward_workspace_tensors = FitTensors(at_peak, opt.forward_workspace_bytes);
  for (int t : kept) {
    if (t != output) opt.saved_tensors.push_back(tensors[t].bytes);
  }
  return opt;
}

// The norms a layer's "norm_output" option recomputes, one part each (each
// is released at its own point of the backward): a norm-tagged op and the
// tagged ops reading its outputs (its autocast cast). Like the MLP
// activation, a norm's output is dropped, made again when the backward
// starts, and freed with the backward of the projections that saved it.
std::vector<RecomputePart> NormParts(const OpGraph& g, const std::vector<int>& ops) {
  std::vector<RecomputePart> parts;
  for (int op : ops) {
    if (!g.ops()[op].norm_output) continue;
    bool joins = false;
    for (int t : g.ops()[op].inputs) {
      const int p = g.tensors()[t].producer;
      joins = joins ||
              (!parts.empty() && std::find(parts.back().ops.begin(), parts.back().ops.end(), p) !=
                                     parts.back().ops.end());
    }
    if (!joins) parts.push_back(RecomputePart{{}, false});
    parts.back().ops.push_back(op);
  }
  return parts;
}

// The dropouts a layer's "dropout_mask" option runs without their masks,
// one part each (each mask is drawn again in its own op's backward),
// leaving out those of `except` (the attention core's, when the core is
// recomputed: its recompute draws that mask, the core's own).
std::vector<RecomputePart> DropoutParts(const OpGraph& g, const std::vector<int>& ops,
                                        const RecomputePart& except) {
  std::vector<RecomputePart> parts;
  for (int op : ops) {
    if (!g.ops()[op].dropout_mask ||
        std::find(except.ops.begin(), except.ops.end(), op) != except.ops.end())
      continue;
    RecomputePart part{{op}, false};
    part.regenerates = true;
    parts.push_back(std::move(part));
  }
  return parts;
}

// The selective options of a layer, from its ops' recompute tags: the
// attention core (option 0 where the layer has one), the MLP activation,
// both, the norms' outputs, all three, the dropout masks and all four, in
// the runtime's order (PartsOf). Of the combinations with the norms only
// all three is offered: a norm's recompute costs about what the MLP activation's does per byte
// it saves (both memory-bound pointwise ops), so the norms refine the
// ladder core < core+mlp at its cheap end (norm_output alone) and extend it
// past core+mlp (all three) without doubling the solvers' keep modes. A
// mixture-of-experts block has the attention core, the experts and both.
std::vector<SelectiveOption> SelectiveOptions(const OpGraph& g, const OpTimeModel& time,
                                              const std::vector<int>& ops,
                                              const std::set<int>& saved, int output,
                                              int64_t activation_bytes, const BackwardRun& full,
                                              const LayerBackward& backward) {
  RecomputePart core{{}, true}, mlp{{}, false}, experts{{}, false};
  mlp.fused = true;
  for (int op : ops) {
    if (g.ops()[op].attention_core) core.ops.push_back(op);
    if (g.ops()[op].mlp_activation) mlp.ops.push_back(op);
    if (g.ops()[op].experts) experts.ops.push_back(op);
  }
  const std::vector<RecomputePart> norms = NormParts(g, ops);
  std::vector<SelectiveOption> out;
  auto add = [&](const std::string& name, const std::vector<RecomputePart>& parts) {
    if (parts.empty()) return;
    for (const RecomputePart& p : parts) {
      if (p.ops.empty()) return;
    }
    if (auto o = RecomputeOption(g, time, ops, saved, output, activation_bytes, name, parts, full,
                                 backward)) {
      out.push_back(std::move(*o));
    }
  };
  add(kAttentionCoreOption, {core});
  add(kMlpActivationOption, {mlp});
  add(kAttentionCoreMlpOption, {core, mlp});
  // A mixture of experts (no MLP activation option): the experts, recomputed
  // as one function whose backward makes them again (moe_block.cc), alone
  // and with the attention core.
  if (!experts.ops.empty() && out.size() == 1) {
    add(kExpertsOption, {experts});
    add(kAttentionCoreExpertsOption, {core, experts});
    return out;
  }
  // The runtime numbers the norms' options 3 and 4: offered only after the
  // other three.
  if (out.size() != 3) return out;
  std::vector<RecomputePart> all = {core, mlp};
  all.insert(all.end(), norms.begin(), norms.end());
  add(kNormOutputOption, norms);
  if (out.size() == 4) add(kAllSelectiveOption, all);
  // The dropout masks, 5 and 6: alone (the masks without any other
  // recompute: one draw and multiply per element, a short step with eager
  // attention's s x s mask) and on top of all three (the least a block
  // keeps); the other combinations would lie between points the solvers
  // have and add keep modes to every block, as the norms' would.
  if (out.size() != 5) return out;
  add(kDropoutMaskOption, DropoutParts(g, ops, RecomputePart{}));
  const std::vector<RecomputePart> dropouts = DropoutParts(g, ops, core);
  all.insert(all.end(), dropouts.begin(), dropouts.end());
  if (out.size() == 6 && !dropouts.empty()) add(kAllWithDropoutOption, all);
  return out;
}

// Sizes, workspaces, times and options of group `gi` at chain position `k`.
Result<LayerProfile> LayerFigures(const OpGraph& g, const OpTimeModel& time, const Groups& gr,
                                  int k, const std::set<std::string>& creating) {
  const auto& tensors = g.tensors();
  const int gi = gr.order[k];
  const std::vector<int>& ops = gr.ops[gi];
  const int input = *gr.inputs[gi].begin();
  const bool last = k + 1 == static_cast<int>(gr.order.size());
  REMAT_ASSIGN_OR_RETURN(const int output, GroupOutput(g, gr, gi, last));
  LayerProfile l;
  l.name = gr.name[gi];
  l.input_bytes = tensors[input].bytes;
  l.output_bytes = tensors[output].bytes;
  std::set<int> saved = {output};
  for (int op : ops) saved.insert(g.ops()[op].saved.begin(), g.ops()[op].saved.end());
  saved.erase(input);
  for (int t : gr.side_inputs[gi]) saved.erase(t);  // the batch, skips: counted elsewhere
  const std::set<int>& skips = gr.skips[gi];
  for (int t : skips) {
    saved.erase(t);
    l.skip_bytes += tensors[t].bytes;
  }
  for (int t : saved) l.activation_bytes += tensors[t].bytes;
  // The skips stay live past the forward, as what is kept; the simulator
  // counts them apart from the workspace.
  std::set<int> kept = saved, kept_nograd = {output};
  kept.insert(skips.begin(), skips.end());
  kept_nograd.insert(skips.begin(), skips.end());
  for (int t : saved) {
    if (t != output) l.tensors.saved.push_back(tensors[t].bytes);
  }
  TensorSizes at_peak;
  l.forward_workspace_bytes = std::max<int64_t>(
      0, ReplayForward(g, ops, kept, &at_peak) - l.activation_bytes - l.skip_bytes);
  l.tensors.forward_workspace = FitTensors(at_peak, l.forward_workspace_bytes);
  l.forward_nograd_workspace_bytes = std::max<int64_t>(
      0, ReplayForward(g, ops, kept_nograd, &at_peak) - l.output_bytes - l.skip_bytes);
  l.tensors.nograd_workspace = FitTensors(at_peak, l.forward_nograd_workspace_bytes);
  const LayerBackward backward = [&](const BackwardRun& run) {
    return BackwardWorkspace(g, ops, input, output, gr.side_inputs[gi], run).Run();
  };
  BackwardRun full;
  full.creates_gradients = creating.count(l.name) > 0;
  at_peak.clear();
  // Below zero where autograd frees saved tensors before the layer's
  // gradients are all made (the simulator adds the input's and the
  // parameters' gradients whole): at most what the layer saved besides
  // its output.
  l.backward_workspace_bytes =
      std::max(l.output_bytes - l.activation_bytes,
               BackwardWorkspace(g, ops, input, output, gr.side_inputs[gi], full).Run(&at_peak));
  l.tensors.backward_workspace = FitTensors(at_peak, l.backward_workspace_bytes);
  if (full.creates_gradients) {
    // Micro-batches 2..K add into the gradients the first one created: at
    // least 0, as profiles hold it (the runtime's profiler clamps it too).
    BackwardRun accumulating;
    at_peak.clear();
    const int64_t accumulate =
        BackwardWorkspace(g, ops, input, output, gr.side_inputs[gi], accumulating).Run(&at_peak);
    l.accumulate_workspace_bytes = std::max<int64_t>(0, accumulate);
    l.tensors.accumulate_workspace = FitTensors(at_peak, l.accumulate_workspace_bytes);
  }
  for (int op : ops) {
    l.forward_ms += time.ForwardMillis(g.ops()[op]);
    l.backward_ms += time.Millis(g.ops()[op].backward_flops, g.ops()[op].backward_bytes);
  }
  l.selective = SelectiveOptions(g, time, ops, saved, output, l.activation_bytes, full, backward);
  return l;
}

// Everything LayerFigures reads of group `gi` at chain position `k`, its
// tensors numbered by the rank of their ids among those the group names and
// its ops by their place in the group (the orders the figures follow): two
// layers with equal keys have equal figures but for their names. Doubles
// enter by their bits.
std::vector<int64_t> LayerKey(const OpGraph& g, const Groups& gr, int k,
                              const std::set<std::string>& creating) {
  const int gi = gr.order[k];
  const std::vector<int>& ops = gr.ops[gi];
  const int input = *gr.inputs[gi].begin();
  std::vector<int> named = {input};
  named.insert(named.end(), gr.side_inputs[gi].begin(), gr.side_inputs[gi].end());
  named.insert(named.end(), gr.skips[gi].begin(), gr.skips[gi].end());
  for (int o : ops) {
    const OpInfo& op = g.ops()[o];
    for (const std::vector<int>* ts : {&op.inputs, &op.outputs, &op.saved, &op.held})
      named.insert(named.end(), ts->begin(), ts->end());
  }
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  auto tensor = [&](int t) {
    return static_cast<int64_t>(std::lower_bound(named.begin(), named.end(), t) - named.begin());
  };
  auto op_place = [&](int o) -> int64_t {  // -1: outside the group
    if (o < 0 || gr.of_op[o] != gi) return -1;
    return std::lower_bound(ops.begin(), ops.end(), o) - ops.begin();
  };
  std::vector<int64_t> key;
  auto real = [&](double x) {
    int64_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    key.push_back(bits);
  };
  auto list = [&](const std::vector<int>& ts) {
    key.push_back(static_cast<int64_t>(ts.size()));
    for (int t : ts) key.push_back(tensor(t));
  };
  key.push_back(k + 1 == static_cast<int>(gr.order.size()));
  key.push_back(creating.count(gr.name[gi]) > 0);
  key.push_back(static_cast<int64_t>(ops.size()));
  for (int o : ops) {
    const OpInfo& op = g.ops()[o];
    for (double x : {op.forward_flops, op.forward_bytes, op.random_elements, op.backward_flops,
                     op.backward_bytes})
      real(x);
    key.insert(key.end(), {op.backward_workspace, op.gradient_elems, op.gradient_bytes,
                           op.parameters, op.forward_workspace, op.trainable, op.attention_core,
                           op.mlp_activation, op.norm_output, op.dropout_mask, op.experts});
    for (const std::vector<int>* ts : {&op.inputs, &op.outputs, &op.saved, &op.held}) list(*ts);
  }
  key.push_back(static_cast<int64_t>(named.size()));
  for (int t : named) {
    const TensorInfo& info = g.tensors()[t];
    const int p = info.producer;
    key.insert(key.end(), {info.bytes, info.requires_grad, p < 0 ? -2 : op_place(p), t == input,
                           static_cast<int64_t>(gr.side_inputs[gi].count(t)),
                           static_cast<int64_t>(gr.skips[gi].count(t))});
    int64_t outside = 0;
    for (int c : g.consumers(t)) {
      const int64_t place = op_place(c);
      if (place < 0)
        ++outside;
      else
        key.push_back(place);
    }
    key.push_back(-1 - outside);  // ends the list of consumers inside
  }
  return key;
}

}  // namespace

Result<std::vector<LayerProfile>> DeriveChain(
    const OpGraph& g, const OpTimeModel& time,
    const std::vector<std::pair<std::string, std::string>>& kinds,
    const std::set<std::string>& creating, LayerReuse reuse) {
  Groups groups;
  REMAT_RETURN_IF_ERROR(GroupOps(g, &groups));
  REMAT_RETURN_IF_ERROR(OrderAsChain(g, &groups));
  std::vector<LayerProfile> chain;
  std::map<std::vector<int64_t>, size_t> derived;  // LayerKey -> the first layer with it
  for (size_t k = 0; k < groups.order.size(); ++k) {
    LayerProfile l;
    std::vector<int64_t> key;
    if (reuse == LayerReuse::kIdentical) key = LayerKey(g, groups, static_cast<int>(k), creating);
    auto same = key.empty() ? derived.end() : derived.find(key);
    if (same != derived.end()) {
      l = chain[same->second];
      l.name = groups.name[groups.order[k]];
      l.kind.clear();
    } else {
      REMAT_ASSIGN_OR_RETURN(l, LayerFigures(g, time, groups, static_cast<int>(k), creating));
      if (!key.empty()) derived.emplace(std::move(key), k);
    }
    for (const auto& [tag, kind] : kinds) {
      if (tag == l.name) l.kind = kind;
    }
    chain.push_back(std::move(l));
  }
  return chain;
}

}  // namespace remat::analytic
