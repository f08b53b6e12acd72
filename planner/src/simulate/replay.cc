// Replay's driver (Step) and its compute ops: forwards, recomputes,
// backwards, frees and the optimizer step, with the side outputs and the
// parameter gradients. The host link's ops are in replay_link.cc.
#include "simulate/replay.h"

#include <algorithm>
#include <numeric>

namespace remat::simulate_internal {
namespace {

// Bytes of tensor `t` as `writer` writes it: a[i] without the layer's
// output (x[i+1] counts that), under the writer's selective option if any.
int64_t TensorBytes(const Profile& p, TensorRef t, const Op& writer) {
  const int L = p.num_layers();
  switch (t.kind) {
    case TensorKind::kX:
      return t.index == 0 ? p.layers[0].input_bytes : p.layers[t.index - 1].output_bytes;
    case TensorKind::kG:
      return t.index < L ? p.layers[t.index].input_bytes : 0;
    case TensorKind::kA: {
      const LayerProfile& l = p.layers[t.index];
      const int64_t kept = writer.save == SaveMode::kSelective
                               ? l.selective[writer.option].activation_bytes
                               : l.activation_bytes;
      return kept - l.output_bytes;
    }
  }
  return 0;
}

}  // namespace

Replay::Replay(const Profile& p, const Schedule& s, const ChainGraph& g,
               const CachingAllocatorModel* allocator, bool gradients_at_start,
               std::vector<AllocEvent>* events, int64_t in_flight_bytes)
    : p_(p), s_(s), graph_(g), tally_(p.num_layers(), allocator, events) {
  const int L = p.num_layers();
  live_.resize(3 * (L + 1));
  out_end_ms_.assign(3 * (L + 1), 0);
  ready_ms_.assign(3 * (L + 1), 0);
  skip_.resize(L);
  skip_grad_.resize(L);
  released_.resize(L);
  // Only a layer i > 0 that does not keep its input releases it (empty:
  // none does).
  bool any_drops_input = false;
  for (int i = 1; i < L; ++i) any_drops_input = any_drops_input || !p.layers[i].keeps_input;
  if (any_drops_input) {
    std::vector<bool> keeps_input(L);
    for (int i = 0; i < L; ++i) keeps_input[i] = p.layers[i].keeps_input;
    releases_input_ = InputReleasingOps(s, keeps_input);
  }
  cat_[MemoryCategory::kModelState] = p.static_bytes();
  // The profile knows the model state as three sums: one request each.
  tally_.Add(tally_.ModelStateId(0),
             p.static_memory.parameter_bytes + p.static_memory.buffer_bytes);
  tally_.Add(tally_.ModelStateId(1), p.static_memory.gradient_bytes);
  tally_.Add(tally_.ModelStateId(2), p.static_memory.optimizer_bytes);
  // Gradients created in backward: one request per layer.
  grads_.assign(L, false);
  if (gradients_at_start) {
    for (int i = 0; i < L; ++i) CreateGradients(i);
  }
  LiveTensor& x0 = live_[Key({TensorKind::kX, 0}, L)];
  x0 = {true, p.layers[0].input_bytes, MemoryCategory::kActivations, -1};
  cat_[MemoryCategory::kActivations] += x0.bytes;
  tally_.Add(Key({TensorKind::kX, 0}, L), x0.bytes);
  cat_[MemoryCategory::kActivations] += in_flight_bytes;
  tally_.Add(tally_.InFlightId(), in_flight_bytes);
}

void Replay::Step(int i, TimelinePoint* pt, SimulationResult* r) {
  const Op& op = s_.ops[i];
  pt->op_index = i;
  // Over an overlapped link, only a prefetch still copying or a copy's
  // pending release can matter before the op.
  if (p_.host_link.overlapped && (h2d_free_ms_ > time_ms_ || !pending_.empty())) {
    WaitForLink(op, r);
  }
  pt->live_before = Total(cat_);
  pt->start_ms = time_ms_;
  const OpPeak at = StepToPeak(i, op, pt, r);
  // What the previous op released is forgotten, only for the layers it
  // released (a sweep of all layers per op would make a simulation
  // O(L^2)); a backward releases skips.
  for (int layer : released_layers_) released_[layer] = 0;
  released_layers_.clear();
  if (op.kind == OpKind::kBackward) ReleaseSkips(op);
  time_ms_ += at.ms;
  pt->end_ms = time_ms_;
  pt->at_peak = at.live;
  pt->peak = Total(at.live);
  if (op.kind != OpKind::kFree) {
    pt->reserved = tally_.ReservedWithWorkspace(at.workspace, at.released, workspace_tensors_,
                                                workspace_extra_);
  }
  workspace_tensors_ = nullptr;
  workspace_extra_ = 0;
  if (release_x_ >= 0 || release_a_ >= 0 || op.kind == OpKind::kOptimizerStep) {
    ReleaseAfterOp(op);
  }
  pt->live_after = Total(cat_);
}

Replay::OpPeak Replay::StepToPeak(int i, const Op& op, TimelinePoint* pt, SimulationResult* r) {
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kRecompute:
      return StepForward(i, op, r);
    case OpKind::kBackward:
      return StepBackward(op, r);
    case OpKind::kFree:
      return StepFree(op, pt);
    case OpKind::kOptimizerStep:
      return StepOptimizer(r);
    case OpKind::kOffload:
    case OpKind::kPrefetch:
      return StepCopy(op, r);
  }
  return OpPeak{cat_};
}

bool Replay::RecomputesFollow(int i) const {
  for (size_t k = static_cast<size_t>(i) + 1; k < s_.ops.size(); ++k) {
    const OpKind kind = s_.ops[k].kind;
    if (kind == OpKind::kRecompute) return true;
    if (kind == OpKind::kForward || kind == OpKind::kBackward || kind == OpKind::kOptimizerStep) {
      return false;
    }
  }
  return false;
}

Replay::OpPeak Replay::StepForward(int i, const Op& op, SimulationResult* r) {
  const int L = p_.num_layers();
  const LayerProfile& l = p_.layers[op.layer];
  const MemoryCategory c =
      op.kind == OpKind::kForward ? MemoryCategory::kActivations : MemoryCategory::kRecomputed;
  for (const TensorRef& t : graph_.Writes(op)) {
    LiveTensor& lt = live_[Key(t, L)];
    lt = {true, TensorBytes(p_, t, op), c, op.save == SaveMode::kSelective ? op.option : -1,
          op.save != SaveMode::kNone};
    cat_[c] += lt.bytes;
    tally_.Add(Key(t, L), lt.bytes, SavedTensors(t, lt.option));
  }
  WriteSkips(op);
  if (!releases_input_.empty() && releases_input_[i] && op.layer > 0 && live_[Key({TensorKind::kA, op.layer - 1}, L)].live) {
    const LiveTensor& x = live_[Key({TensorKind::kX, op.layer}, L)];
    if (x.live && x.graph && !x.released) release_x_ = op.layer;
  }
  OpPeak at{cat_};
  at.workspace = op.save == SaveMode::kNone        ? l.nograd_workspace_bytes()
                 : op.save == SaveMode::kSelective ? l.forward_workspace_for(op.option)
                                                   : l.forward_workspace_bytes;
  workspace_tensors_ =
      op.save == SaveMode::kNone ? &l.tensors.nograd_workspace
      : op.save == SaveMode::kSelective && l.selective[op.option].forward_workspace_bytes >= 0
          ? &l.selective[op.option].forward_workspace_tensors
          : &l.tensors.forward_workspace;
  // A recompute makes the side output again, a transient (its
  // first forward's is what the loss read).
  if (op.kind == OpKind::kRecompute && l.skip_bytes > 0) {
    at.workspace += l.skip_bytes;
    workspace_extra_ = l.skip_bytes;
  }
  // A block recomputed in backward gathers its weights again
  // (LayerProfile::recompute_gather_bytes), unless it is the one whose
  // backward runs next (its weights are gathered for that backward).
  if (op.kind == OpKind::kRecompute && l.recompute_gather_bytes > 0 && RecomputesFollow(i)) {
    at.workspace += l.recompute_gather_bytes;
    workspace_extra_ += l.recompute_gather_bytes;
  }
  at.live[MemoryCategory::kWorkspace] += at.workspace;
  at.ms = l.forward_ms;
  if (op.kind == OpKind::kForward) {
    r->forward_ms += at.ms;
  } else {
    r->recompute_ms += at.ms;
    ++r->recompute_ops;
  }
  return at;
}

Replay::OpPeak Replay::StepBackward(const Op& op, SimulationResult* r) {
  const int L = p_.num_layers();
  const LayerProfile& l = p_.layers[op.layer];
  const LiveTensor& a = live_[Key({TensorKind::kA, op.layer}, L)];
  // Gradients that exist already (micro-batches 2..K of an update):
  // the backward adds the new ones into them through transients.
  // After a recompute (a[i] recomputed, not a selective option's) the
  // layer's workspace for that backward.
  const bool recomputed = a.category == MemoryCategory::kRecomputed && a.option < 0;
  int64_t ws =
      grads_[op.layer] ? l.accumulating_workspace_bytes() : l.backward_workspace_for(recomputed);
  workspace_tensors_ = grads_[op.layer] && l.accumulate_workspace_bytes >= 0
                           ? &l.tensors.accumulate_workspace
                           : &l.tensors.backward_workspace;
  double extra = 0;
  if (a.option >= 0) {
    ws += l.selective[a.option].recompute_workspace_bytes;
    workspace_extra_ = l.selective[a.option].recompute_workspace_bytes;
    extra = l.selective[a.option].extra_recompute_ms;
  }
  CreateGradients(op.layer);
  for (const TensorRef& t : graph_.Writes(op)) {
    LiveTensor& lt = live_[Key(t, L)];
    lt = {true, TensorBytes(p_, t, op), MemoryCategory::kGradients, -1};
    cat_[MemoryCategory::kGradients] += lt.bytes;
    tally_.Add(Key(t, L), lt.bytes);
  }
  WriteSkips(op);
  OpPeak at{cat_};
  // A negative workspace: autograd released that much of a[i] before
  // the backward's peak (LayerProfile::backward_workspace_bytes); the
  // simulator still holds a[i] until its free. Where the workspace lists
  // its tensors (an engine's buffers beside the layer's own negative
  // workspace, ranks/model_state.cc), they are requested as themselves and
  // a[i] is released by the rest. Never more than a[i] holds: the peak is
  // the live bytes plus max(ws, -|a[i]|).
  const int64_t listed = std::accumulate(workspace_tensors_->begin(), workspace_tensors_->end(),
                                         int64_t{0});
  const int64_t itemized = listed > 0 ? listed + std::max<int64_t>(workspace_extra_, 0) : 0;
  at.released = std::clamp<int64_t>(itemized - ws, 0, a.bytes);
  at.workspace = std::max<int64_t>(ws + at.released, 0);
  at.live[MemoryCategory::kWorkspace] += at.workspace;
  at.live[a.category] -= at.released;
  // And by the op's end autograd has let go of all of it (ReleaseAfterOp).
  release_a_ = op.layer;
  release_a_at_peak_ = a.bytes - at.released;
  at.ms = l.backward_ms + extra;
  r->backward_ms += l.backward_ms;
  r->recompute_ms += extra;
  return at;
}

Replay::OpPeak Replay::StepFree(const Op& op, TimelinePoint* pt) {
  const int L = p_.num_layers();
  LiveTensor& lt = live_[Key(op.tensor, L)];
  // The op's peak is the moment before the free.
  const OpPeak at{cat_};
  pt->reserved = tally_.reserved();
  if (lt.on_host) {
    host_bytes_ -= lt.bytes;
    if (lt.leaving) {  // its copy out is still running: drop the device bytes too
      cat_[lt.category] -= lt.bytes;
      tally_.Remove(Key(op.tensor, L), lt.bytes);
      DropPending(Key(op.tensor, L), true);
    }
  } else {
    cat_[lt.category] -= lt.bytes;
    if (!lt.released) tally_.Remove(Key(op.tensor, L), lt.bytes);
  }
  lt = LiveTensor{};
  return at;
}

Replay::OpPeak Replay::StepOptimizer(SimulationResult* r) {
  OpPeak at{cat_};
  // Its temporaries, over the gradients it reads and frees after.
  at.workspace = p_.optimizer_workspace_bytes;
  workspace_tensors_ = &p_.optimizer_workspace_tensors;
  at.live[MemoryCategory::kWorkspace] += at.workspace;
  at.ms = OptimizerStepMs(p_);
  r->optimizer_ms += at.ms;
  return at;
}

void Replay::ReleaseAfterOp(const Op& op) {
  const int L = p_.num_layers();
  // After the op's peak: the input it does not keep, and the gradients the
  // optimizer step frees (zero_grad sets them to None).
  if (release_x_ >= 0) {
    ReleaseAfterPeak(Key({TensorKind::kX, release_x_}, L));
    release_x_ = -1;
  }
  // After a backward's peak: what its layer saved, which autograd released
  // as the backward ran; 'free a<i>' then frees nothing. (Held to that
  // free, a[i] made the moment before it the step's peak whenever the
  // backward had released saved bytes before its own peak.)
  if (release_a_ >= 0) {
    ReleaseAfterPeak(Key({TensorKind::kA, release_a_}, L));
    if (released_[release_a_] == 0) released_layers_.push_back(release_a_);
    released_[release_a_] += std::max<int64_t>(0, release_a_at_peak_);
    release_a_ = -1;
  }
  if (op.kind == OpKind::kOptimizerStep) {
    for (int layer = 0; layer < L; ++layer) FreeGradients(layer);
  }
}

void Replay::WriteSkips(const Op& op) {
  const int L = p_.num_layers();
  auto add = [&](LiveTensor& t, int64_t id, int64_t bytes, MemoryCategory c) {
    t = {true, bytes, c, -1};
    cat_[c] += bytes;
    tally_.Add(id, bytes);
  };
  const LayerProfile& l = p_.layers[op.layer];
  if (op.kind == OpKind::kForward && l.skip_bytes > 0 && !skip_[op.layer].live) {
    add(skip_[op.layer], tally_.SkipId(op.layer), l.skip_bytes, MemoryCategory::kActivations);
  }
  if (op.kind == OpKind::kBackward && op.layer == L - 1) {
    for (int j = 0; j < L; ++j) {
      if (skip_[j].live && !skip_grad_[j].live) {
        add(skip_grad_[j], tally_.SkipGradId(j), skip_[j].bytes, MemoryCategory::kGradients);
      }
    }
  }
}

void Replay::ReleaseSkips(const Op& op) {
  auto drop = [&](LiveTensor& t, int64_t id, int layer) {
    if (!t.live) return;
    if (released_[layer] == 0) released_layers_.push_back(layer);
    released_[layer] += t.bytes;
    cat_[t.category] -= t.bytes;
    tally_.Remove(id, t.bytes);
    t = LiveTensor{};
  };
  if (op.layer == p_.num_layers() - 1) {
    for (int j = 0; j < p_.num_layers(); ++j) drop(skip_[j], tally_.SkipId(j), j);
  }
  drop(skip_grad_[op.layer], tally_.SkipGradId(op.layer), op.layer);
}

const TensorSizes* Replay::SavedTensors(TensorRef t, int option) const {
  if (t.kind != TensorKind::kA) return nullptr;
  const LayerProfile& l = p_.layers[t.index];
  return option >= 0 ? &l.selective[option].saved_tensors : &l.tensors.saved;
}

void Replay::CreateGradients(int layer) {
  const int64_t bytes = p_.layers[layer].gradient_bytes;
  if (grads_[layer] || bytes == 0) return;
  grads_[layer] = true;
  cat_[MemoryCategory::kParameterGrads] += bytes;
  tally_.Add(tally_.GradientsId(layer), bytes, &p_.layers[layer].tensors.gradients);
}

void Replay::ReleaseAfterPeak(int key) {
  LiveTensor& t = live_[key];
  cat_[t.category] -= t.bytes;
  tally_.Remove(key, t.bytes);
  t.bytes = 0;
  t.released = true;
}

void Replay::FreeGradients(int layer) {
  if (!grads_[layer]) return;
  grads_[layer] = false;
  cat_[MemoryCategory::kParameterGrads] -= p_.layers[layer].gradient_bytes;
  tally_.Remove(tally_.GradientsId(layer), p_.layers[layer].gradient_bytes);
}

}  // namespace remat::simulate_internal
