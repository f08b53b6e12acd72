#include "analytic/backward_workspace.h"

#include <algorithm>

#include "analytic/chain.h"

namespace remat::analytic {

BackwardWorkspace::BackwardWorkspace(const OpGraph& g, const std::vector<int>& ops, int input,
                                     int output, const std::set<int>& side_inputs,
                                     const BackwardRun& run)
    : g_(g),
      ops_(ops),
      input_(input),
      output_(output),
      side_inputs_(side_inputs),
      run_(run),
      recomputed_(run.parts.size(), false) {
  for (int op : ops) {
    for (int t : g.ops()[op].saved) {
      if (t != input && t != output && !side_inputs.count(t)) ++savers_[t];
    }
  }
  OrderBackward();
}

void BackwardWorkspace::OrderBackward() {
  order_.assign(ops_.rbegin(), ops_.rend());
  for (size_t i = 0; i < run_.parts.size(); ++i) {
    const RecomputePart& part = run_.parts[i];
    if (!part.fused || part.ops.empty()) continue;
    auto host = std::find_if(order_.begin(), order_.end(), [&](int o) {
      for (int t : g_.ops()[o].saved) {
        if (run_.dropped[i].count(t)) return true;
      }
      return std::find(part.ops.begin(), part.ops.end(), o) != part.ops.end();
    });
    auto front = std::find(order_.begin(), order_.end(), part.ops.front());
    if (host == order_.end() || front == order_.end() || host > front) continue;
    fused_host_[*host] = part.ops.front();
    std::stable_partition(host + 1, front + 1, [&](int o) {
      return std::find(part.ops.begin(), part.ops.end(), o) != part.ops.end();
    });
  }
}

void BackwardWorkspace::NotePeak(int64_t now, const TensorSizes& transients) {
  if (now <= peak_) return;
  peak_ = now;
  if (at_peak_ == nullptr) return;
  at_peak_->clear();
  for (int t : grads_) {
    if (t != input_ && !side_inputs_.count(t)) at_peak_->push_back(g_.tensors()[t].bytes);
  }
  for (int64_t b : transients) {
    if (b > 0) at_peak_->push_back(b);
  }
}

bool BackwardWorkspace::SavedBy(const RecomputePart& part, int t) const {
  for (int p : part.ops) {
    const std::vector<int>& s = g_.ops()[p].saved;
    if (std::find(s.begin(), s.end(), t) != s.end()) return true;
  }
  return false;
}

void BackwardWorkspace::Recompute(size_t i) {
  const auto& tensors = g_.tensors();
  const RecomputePart& part = run_.parts[i];
  const std::set<int>& dropped = run_.dropped[i];
  recomputed_[i] = true;
  const int64_t remade = ReplayForward(g_, part.ops, dropped);
  NotePeak(live_ + created_ + remade, {remade});
  for (int t : dropped) {
    live_ += tensors[t].bytes;
    if (part.holds_output) continue;
    // What the part's own ops save goes with their backward (autograd
    // frees it there); what its host saves, once the part is done.
    if (part.fused && SavedBy(part, t)) continue;
    savers_.erase(t);
    released_after_[part.ops.front()] += tensors[t].bytes;
  }
  if (part.holds_output) HoldOutputs(part);
}

void BackwardWorkspace::HoldOutputs(const RecomputePart& part) {
  const auto& tensors = g_.tensors();
  const std::set<int> members(part.ops.begin(), part.ops.end());
  for (int p : part.ops) {
    for (int t : g_.ops()[p].outputs) {
      bool outside = false;
      for (int c : g_.consumers(t)) outside = outside || members.count(c) == 0;
      if (!outside) continue;
      // Its gradient, which the runtime backpropagates through the
      // recomputed part (layer_execution.cc Backward), is held until
      // the part's backward is done.
      held_grads_[t] = part.ops.front();
      // The output itself lives on only where an op of the part saves
      // it (a fused attention kernel); the runtime keeps its place in
      // the graph, not the tensor.
      if (!SavedBy(part, t)) continue;
      live_ += tensors[t].bytes;
      released_after_[part.ops.front()] += tensors[t].bytes;
    }
  }
}

void BackwardWorkspace::RecomputeAtStart() {
  std::vector<size_t> at_start;
  for (size_t i = 0; i < run_.parts.size(); ++i) {
    if (!run_.parts[i].regenerates && !run_.parts[i].ops.empty()) at_start.push_back(i);
  }
  auto position = [&](size_t i) {
    return std::find(ops_.begin(), ops_.end(), run_.parts[i].ops.front()) - ops_.begin();
  };
  std::stable_sort(at_start.begin(), at_start.end(),
                   [&](size_t a, size_t b) { return position(a) < position(b); });
  for (size_t i : at_start) Recompute(i);
}

void BackwardWorkspace::RecomputeReachedBy(int o) {
  const OpInfo& op = g_.ops()[o];
  for (size_t i = 0; i < run_.parts.size(); ++i) {
    if (recomputed_[i]) continue;
    const std::vector<int>& part_ops = run_.parts[i].ops;
    const bool in_part = std::find(part_ops.begin(), part_ops.end(), o) != part_ops.end();
    bool saves_dropped = false;
    for (int t : op.saved) saves_dropped = saves_dropped || run_.dropped[i].count(t) > 0;
    if (in_part || saves_dropped) Recompute(i);
  }
}

void BackwardWorkspace::BackwardOf(int o) {
  const auto& tensors = g_.tensors();
  const OpInfo& op = g_.ops()[o];
  for (int t : op.inputs) {
    if (tensors[t].requires_grad && grads_.insert(t).second) live_ += tensors[t].bytes;
  }
  int64_t transient = op.backward_workspace;
  if (run_.creates_gradients) {
    created_ += op.gradient_bytes;
  } else {
    transient += op.gradient_bytes;
  }
  NotePeak(live_ + created_ + transient,
           {op.backward_workspace, run_.creates_gradients ? 0 : op.gradient_bytes});
  const auto host = fused_host_.find(o);
  for (int t : op.outputs) {
    if (!grads_.erase(t)) continue;
    const auto held = held_grads_.find(t);
    if (host != fused_host_.end()) {
      released_after_[host->second] += tensors[t].bytes;
    } else if (held != held_grads_.end()) {
      released_after_[held->second] += tensors[t].bytes;
    } else {
      live_ -= tensors[t].bytes;
    }
  }
  if (host != fused_host_.end()) {
    // The function holds its output gradient (above), the host's input
    // gradient (the part's output's: freed after the part, not by the
    // part's op) and the host's parameter gradients until it returns.
    for (int t : op.inputs) {
      if (grads_.count(t)) held_grads_[t] = host->second;
    }
    if (!run_.creates_gradients) {
      live_ += op.gradient_bytes;
      released_after_[host->second] += op.gradient_bytes;
    }
  }
  for (int t : op.saved) {
    auto s = savers_.find(t);
    if (s != savers_.end() && --s->second == 0) live_ -= tensors[t].bytes;
  }
  live_ -= released_after_[o];
}

int64_t BackwardWorkspace::Run(TensorSizes* at_peak) {
  at_peak_ = at_peak;
  RecomputeAtStart();
  for (int o : order_) {
    RecomputeReachedBy(o);
    BackwardOf(o);
  }
  const auto& tensors = g_.tensors();
  int64_t g_in = tensors[input_].requires_grad ? tensors[input_].bytes : 0;
  for (int t : side_inputs_) g_in += tensors[t].requires_grad ? tensors[t].bytes : 0;
  return peak_ - g_in - created_;  // below zero: see chain.cc's backward_workspace_bytes
}

}  // namespace remat::analytic
