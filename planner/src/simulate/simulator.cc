#include "remat/simulate/simulator.h"

#include <algorithm>
#include <numeric>

namespace remat {
namespace {

struct LiveTensor {
  bool live = false;
  int64_t bytes = 0;
  MemoryCategory category = MemoryCategory::kActivations;
  int option = -1;        // for a[i]: the selective option it was saved under
  bool graph = false;     // for x[i+1]: written by a forward with grad (carries its graph)
  bool released = false;  // x[i] released by a forward of a layer that does not keep it,
                          // a[i] by its backward (autograd lets its saved tensors go)
  bool on_host = false;   // offloaded: its bytes are host memory until a prefetch
  bool leaving = false;   // overlapped offload: device bytes held until its copy ends
};

// An overlapped copy's effect that waits for the copy's end: the offload's
// device bytes released, or the prefetch's host bytes.
struct PendingRelease {
  double end_ms = 0;
  int key = 0;
  bool device = true;  // device bytes (an offload) or host bytes (a prefetch)
  int64_t bytes = 0;
};

int Key(TensorRef t, int L) { return static_cast<int>(t.kind) * (L + 1) + t.index; }

// Whether `tensors` (may be null) and then `extra` bytes (0: none) are the
// allocations behind `bytes` (TensorSizes): more than one, adding up to it.
bool SplitsInto(const TensorSizes* tensors, int64_t extra, int64_t bytes) {
  return tensors != nullptr && tensors->size() + (extra > 0 ? 1 : 0) > 1 &&
         std::accumulate(tensors->begin(), tensors->end(), extra) == bytes;
}

// The allocator requests of a replay, each under an id: the tensors by Key,
// then per layer its side output, the side output's gradient and its
// parameter gradients, then the three model-state parts, then the one
// workspace of the op running. Tallies the reserved bytes and, when asked,
// records the requests as allocation events (empty requests allocate
// nothing: none is recorded). A request the profile knows as tensors
// (TensorSizes) is recorded as one allocation each, the j-th under its id
// plus j times the count of ids, and freed tensor by tensor, last made
// first; the tally sees the whole request, as without them.
class Requests {
 public:
  Requests(int num_layers, const CachingAllocatorModel* allocator, std::vector<AllocEvent>* events)
      : tally_(allocator),
        models_allocator_(allocator != nullptr),
        events_(events),
        tensors_(3 * (num_layers + 1)),
        layers_(num_layers),
        ids_(tensors_ + 3 * layers_ + 4),
        split_(events != nullptr ? ids_ : 0, nullptr) {}

  int64_t SkipId(int layer) const { return tensors_ + layer; }
  int64_t SkipGradId(int layer) const { return tensors_ + layers_ + layer; }
  int64_t GradientsId(int layer) const { return tensors_ + 2 * layers_ + layer; }
  int64_t ModelStateId(int part) const { return tensors_ + 3 * layers_ + part; }
  int64_t WorkspaceId() const { return tensors_ + 3 * layers_ + 3; }
  // The other micro-batches a pipeline stage holds in flight.
  int64_t InFlightId() const { return tensors_ + 3 * layers_ + 4; }

  // `tensors` (may be null): the allocations behind `bytes`.
  void Add(int64_t id, int64_t bytes, const TensorSizes* tensors = nullptr) {
    tally_.Add(bytes);
    if (events_ == nullptr || bytes <= 0) return;
    if (!SplitsInto(tensors, 0, bytes)) {
      events_->push_back(AllocEvent::Alloc(id, bytes));
      return;
    }
    AllocPieces(id, *tensors, 0);
    split_[id] = tensors;
  }
  void Remove(int64_t id, int64_t bytes) {
    tally_.Remove(bytes);
    if (events_ == nullptr || bytes <= 0) return;
    if (split_[id] == nullptr) {
      events_->push_back(AllocEvent::Free(id));
      return;
    }
    FreePieces(id, *split_[id], 0);
    split_[id] = nullptr;
  }
  // Reserved with the op's workspace live on top, which is freed again, and
  // less `released`: bytes autograd let go before the op's peak, which a
  // caching allocator keeps reserved (`models_allocator`) and no allocator
  // model does.
  // `tensors` (may be null) and then `extra` bytes (0: none): the
  // allocations behind the workspace.
  int64_t ReservedWithWorkspace(int64_t bytes, int64_t released, const TensorSizes* tensors,
                                int64_t extra) {
    ReservedTally with = tally_;
    with.Add(bytes);
    if (!models_allocator_) with.Remove(released);
    if (events_ != nullptr && bytes > 0) {
      if (SplitsInto(tensors, extra, bytes)) {
        AllocPieces(WorkspaceId(), *tensors, extra);
        FreePieces(WorkspaceId(), *tensors, extra);
      } else {
        events_->push_back(AllocEvent::Alloc(WorkspaceId(), bytes));
        events_->push_back(AllocEvent::Free(WorkspaceId()));
      }
    }
    return with.reserved();
  }
  int64_t reserved() const { return tally_.reserved(); }

 private:
  // The j-th of `tensors` under id + j * ids_, then `extra` (if any).
  void AllocPieces(int64_t id, const TensorSizes& tensors, int64_t extra) {
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (tensors[j] > 0) events_->push_back(AllocEvent::Alloc(id + j * ids_, tensors[j]));
    }
    if (extra > 0) events_->push_back(AllocEvent::Alloc(id + tensors.size() * ids_, extra));
  }
  void FreePieces(int64_t id, const TensorSizes& tensors, int64_t extra) {
    if (extra > 0) events_->push_back(AllocEvent::Free(id + tensors.size() * ids_));
    for (size_t j = tensors.size(); j-- > 0;) {
      if (tensors[j] > 0) events_->push_back(AllocEvent::Free(id + j * ids_));
    }
  }

  ReservedTally tally_;
  bool models_allocator_;
  std::vector<AllocEvent>* events_;
  int64_t tensors_;
  int64_t layers_;
  int64_t ids_;  // ids of whole requests; a request's j-th tensor is id + j * ids_
  // By id, the profile's list a live request was recorded as (it outlives
  // the replay); null: one allocation. Sized only when recording.
  std::vector<const TensorSizes*> split_;
};

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

int LayerOf(TensorRef t) {
  if (t.kind == TensorKind::kX) return std::max(0, t.index - 1);
  return t.index;
}

// Replays the schedule; calls `on_op(index, point)` after each op, with the
// live table as it is at the op's peak moment available through `live`.
class Replay {
 public:
  // `gradients_at_start`: the parameter gradients created in backward exist
  // before the first op (micro-batches 2..K of an update).
  // `events` (may be null) receives the allocator requests (Requests).
  // `in_flight_bytes`: what the other micro-batches of a pipeline stage
  // hold (InFlightBytes), live from the start to the end.
  Replay(const Profile& p, const Schedule& s, const ChainGraph& g,
         const CachingAllocatorModel* allocator, bool gradients_at_start,
         std::vector<AllocEvent>* events = nullptr, int64_t in_flight_bytes = 0)
      : p_(p), s_(s), graph_(g), tally_(p.num_layers(), allocator, events) {
    const int L = p.num_layers();
    live_.resize(3 * (L + 1));
    out_end_ms_.assign(3 * (L + 1), 0);
    ready_ms_.assign(3 * (L + 1), 0);
    skip_.resize(L);
    skip_grad_.resize(L);
    released_.resize(L);
    std::vector<bool> keeps_input(L);
    for (int i = 0; i < L; ++i) keeps_input[i] = p.layers[i].keeps_input;
    releases_input_ = InputReleasingOps(s, keeps_input);
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

  // Executes op `i`; fills the point. `pending_` holds the op's writes and
  // workspace at its peak moment.
  void Step(int i, TimelinePoint* pt, SimulationResult* r) {
    const Op& op = s_.ops[i];
    const int L = p_.num_layers();
    pt->op_index = i;
    if (p_.host_link.overlapped) WaitForLink(op, r);
    pt->live_before = cat_.total();
    pt->start_ms = time_ms_;
    MemoryByCategory peak = cat_;
    int64_t workspace = 0;  // the op's transient request at its peak moment
    int64_t released = 0;   // bytes of a[i] its backward released before its peak
    double ms = 0;
    switch (op.kind) {
      case OpKind::kForward:
      case OpKind::kRecompute: {
        const LayerProfile& l = p_.layers[op.layer];
        const MemoryCategory c = op.kind == OpKind::kForward ? MemoryCategory::kActivations
                                                             : MemoryCategory::kRecomputed;
        for (const TensorRef& t : graph_.Writes(op)) {
          LiveTensor& lt = live_[Key(t, L)];
          lt = {true, TensorBytes(p_, t, op), c, op.save == SaveMode::kSelective ? op.option : -1,
                op.save != SaveMode::kNone};
          cat_[c] += lt.bytes;
          tally_.Add(Key(t, L), lt.bytes, SavedTensors(t, lt.option));
        }
        WriteSkips(op);
        if (releases_input_[i] && op.layer > 0 &&
            live_[Key({TensorKind::kA, op.layer - 1}, L)].live) {
          const LiveTensor& x = live_[Key({TensorKind::kX, op.layer}, L)];
          if (x.live && x.graph && !x.released) release_x_ = op.layer;
        }
        peak = cat_;
        workspace = op.save == SaveMode::kNone        ? l.nograd_workspace_bytes()
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
          workspace += l.skip_bytes;
          workspace_extra_ = l.skip_bytes;
        }
        peak[MemoryCategory::kWorkspace] += workspace;
        ms = l.forward_ms;
        if (op.kind == OpKind::kForward) {
          r->forward_ms += ms;
        } else {
          r->recompute_ms += ms;
          ++r->recompute_ops;
        }
        break;
      }
      case OpKind::kBackward: {
        const LayerProfile& l = p_.layers[op.layer];
        const LiveTensor& a = live_[Key({TensorKind::kA, op.layer}, L)];
        // Gradients that exist already (micro-batches 2..K of an update):
        // the backward adds the new ones into them through transients.
        int64_t ws =
            grads_[op.layer] ? l.accumulating_workspace_bytes() : l.backward_workspace_bytes;
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
        peak = cat_;
        // A negative workspace: autograd released that much of a[i] before
        // the backward's peak (LayerProfile::backward_workspace_bytes); the
        // simulator still holds a[i] until its free.
        workspace = std::max<int64_t>(ws, 0);
        released = std::max<int64_t>(-ws, 0);
        peak[MemoryCategory::kWorkspace] += workspace;
        peak[a.category] -= released;
        // And by the op's end autograd has let go of all of it (below).
        release_a_ = op.layer;
        release_a_at_peak_ = a.bytes + std::min<int64_t>(ws, 0);
        ms = l.backward_ms + extra;
        r->backward_ms += l.backward_ms;
        r->recompute_ms += extra;
        break;
      }
      case OpKind::kFree: {
        LiveTensor& lt = live_[Key(op.tensor, L)];
        // The op's peak is the moment before the free.
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
        break;
      }
      case OpKind::kOptimizerStep:
        // Its temporaries, over the gradients it reads and frees after.
        workspace = p_.optimizer_workspace_bytes;
        workspace_tensors_ = &p_.optimizer_workspace_tensors;
        peak[MemoryCategory::kWorkspace] += workspace;
        ms = p_.optimizer_ms;
        r->optimizer_ms += ms;
        break;
      case OpKind::kOffload:
      case OpKind::kPrefetch: {
        if (p_.host_link.overlapped) {
          IssueCopy(op, r);
          peak = cat_;
          break;
        }
        // In line (the link is not overlapped): the copy runs on the compute
        // clock; the device bytes are live during it.
        LiveTensor& lt = live_[Key(op.tensor, L)];
        const bool out = op.kind == OpKind::kOffload;
        if (!out) {
          cat_[lt.category] += lt.bytes;
          tally_.Add(Key(op.tensor, L), lt.bytes, SavedTensors(op.tensor, lt.option));
        }
        peak = cat_;
        ms = p_.host_link.CopyMs(lt.bytes);
        r->transfer_ms += ms;
        r->link_busy_ms += ms;
        if (out) {
          cat_[lt.category] -= lt.bytes;
          tally_.Remove(Key(op.tensor, L), lt.bytes);
          host_bytes_ += lt.bytes;
          r->offloaded_bytes += lt.bytes;
        } else {
          host_bytes_ -= lt.bytes;
        }
        lt.on_host = out;
        r->host_peak_bytes = std::max(r->host_peak_bytes, host_bytes_);
        break;
      }
    }
    ReleaseSkips(op);
    time_ms_ += ms;
    pt->end_ms = time_ms_;
    pt->at_peak = peak;
    pt->peak = peak.total();
    if (op.kind != OpKind::kFree) {
      pt->reserved =
          tally_.ReservedWithWorkspace(workspace, released, workspace_tensors_, workspace_extra_);
    }
    workspace_tensors_ = nullptr;
    workspace_extra_ = 0;
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
    pt->live_after = cat_.total();
  }

  // After the last op: what the overlapped copies still hold is released.
  void Finish() { ReleasePending(1e300); }

  const std::vector<LiveTensor>& live() const { return live_; }
  // Whether layer i's parameter gradients exist now.
  bool has_gradients(int layer) const { return grads_[layer]; }
  int64_t reserved_now() const { return tally_.reserved(); }
  // Bytes of layer `layer` that were live at the last op's peak and that
  // live() does not show: side outputs (LayerProfile::skip_bytes) and their
  // gradients, and what the op released after its peak (skips, a backward's
  // a[i]).
  int64_t side_live(int layer) const {
    return skip_[layer].bytes + skip_grad_[layer].bytes + released_[layer];
  }

 private:
  // Side outputs to the loss. A layer's first forward writes its skip; the
  // loss's (last layer's) backward writes every skip's gradient at its peak
  // and frees the skips after it; a layer's backward frees its skip's
  // gradient after it.
  void WriteSkips(const Op& op) {
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
  void ReleaseSkips(const Op& op) {
    // Only the layers the previous op released are cleared: a sweep of all
    // of them per op made every simulation O(L^2).
    for (int layer : released_layers_) released_[layer] = 0;
    released_layers_.clear();
    if (op.kind != OpKind::kBackward) return;
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

  // Overlapped link, before op `op` starts: a compute op reading a tensor
  // whose prefetch is still copying waits for the copy's end (the stall is
  // transfer_ms); then the copies that ended by the op's start release what
  // they held.
  void WaitForLink(const Op& op, SimulationResult* r) {
    if (op.kind == OpKind::kForward || op.kind == OpKind::kRecompute ||
        op.kind == OpKind::kBackward) {
      double ready = time_ms_;
      for (const TensorRef& t : graph_.Reads(op)) {
        ready = std::max(ready, ready_ms_[Key(t, p_.num_layers())]);
      }
      r->transfer_ms += ready - time_ms_;
      time_ms_ = ready;
    }
    ReleasePending(time_ms_);
  }
  // Overlapped link: queues the copy on its direction's queue. An offload
  // keeps the device bytes until its copy ends; a prefetch allocates them
  // now and its readers wait for its end (ready_ms_).
  void IssueCopy(const Op& op, SimulationResult* r) {
    const int key = Key(op.tensor, p_.num_layers());
    LiveTensor& lt = live_[key];
    const double copy_ms = p_.host_link.CopyMs(lt.bytes);
    r->link_busy_ms += copy_ms;
    if (op.kind == OpKind::kOffload) {
      const double start = std::max(time_ms_, d2h_free_ms_);
      d2h_free_ms_ = start + copy_ms;
      out_end_ms_[key] = d2h_free_ms_;
      host_bytes_ += lt.bytes;
      r->offloaded_bytes += lt.bytes;
      r->host_peak_bytes = std::max(r->host_peak_bytes, host_bytes_);
      lt.on_host = true;
      lt.leaving = true;
      pending_.push_back({d2h_free_ms_, key, true, lt.bytes});
      return;
    }
    // The bytes must have reached the host before they can come back.
    const double start = std::max({time_ms_, h2d_free_ms_, out_end_ms_[key]});
    h2d_free_ms_ = start + copy_ms;
    ready_ms_[key] = h2d_free_ms_;
    if (lt.leaving) {
      DropPending(key, true);  // its device bytes were never released
    } else {
      cat_[lt.category] += lt.bytes;
      tally_.Add(key, lt.bytes, SavedTensors(op.tensor, lt.option));
    }
    lt.on_host = false;
    lt.leaving = false;
    pending_.push_back({h2d_free_ms_, key, false, lt.bytes});
  }
  void ReleasePending(double now_ms) {
    std::vector<PendingRelease> still;
    for (const PendingRelease& e : pending_) {
      if (e.end_ms > now_ms) {
        still.push_back(e);
        continue;
      }
      if (e.device) {
        LiveTensor& lt = live_[e.key];
        cat_[lt.category] -= e.bytes;
        tally_.Remove(e.key, e.bytes);
        lt.leaving = false;
      } else {
        host_bytes_ -= e.bytes;
      }
    }
    pending_ = std::move(still);
  }
  void DropPending(int key, bool device) {
    pending_.erase(
        std::remove_if(pending_.begin(), pending_.end(),
                       [&](const PendingRelease& e) { return e.key == key && e.device == device; }),
        pending_.end());
  }

  const Profile& p_;
  const Schedule& s_;
  const ChainGraph& graph_;
  // The tensors of a[i] saved under `option` (-1: the full save); null for
  // other tensors, one allocation each.
  const TensorSizes* SavedTensors(TensorRef t, int option) const {
    if (t.kind != TensorKind::kA) return nullptr;
    const LayerProfile& l = p_.layers[t.index];
    return option >= 0 ? &l.selective[option].saved_tensors : &l.tensors.saved;
  }
  void CreateGradients(int layer) {
    const int64_t bytes = p_.layers[layer].gradient_bytes;
    if (grads_[layer] || bytes == 0) return;
    grads_[layer] = true;
    cat_[MemoryCategory::kParameterGrads] += bytes;
    tally_.Add(tally_.GradientsId(layer), bytes, &p_.layers[layer].tensors.gradients);
  }
  // A tensor released after the op's peak: its bytes leave, its entry stays
  // live (its free frees nothing).
  void ReleaseAfterPeak(int key) {
    LiveTensor& t = live_[key];
    cat_[t.category] -= t.bytes;
    tally_.Remove(key, t.bytes);
    t.bytes = 0;
    t.released = true;
  }
  void FreeGradients(int layer) {
    if (!grads_[layer]) return;
    grads_[layer] = false;
    cat_[MemoryCategory::kParameterGrads] -= p_.layers[layer].gradient_bytes;
    tally_.Remove(tally_.GradientsId(layer), p_.layers[layer].gradient_bytes);
  }

  std::vector<LiveTensor> live_;
  std::vector<LiveTensor> skip_, skip_grad_;  // by layer
  std::vector<int64_t> released_;             // by layer, in the last op
  std::vector<int> released_layers_;          // the layers with released_ != 0
  std::vector<bool> grads_;                   // layer -> its parameter gradients exist
  std::vector<bool> releases_input_;  // op -> releases its layer's input (InputReleasingOps)
  int release_x_ = -1;                // x index the current op releases after its peak
  int release_a_ = -1;                // a index the current backward releases after its peak
  int64_t release_a_at_peak_ = 0;     // its bytes at that peak
  MemoryByCategory cat_;
  Requests tally_;
  // The running op's workspace as tensors: a list of the profile's (may be
  // null), then one more (a recompute's side output, a selective backward's
  // recompute workspace; 0: none).
  const TensorSizes* workspace_tensors_ = nullptr;
  int64_t workspace_extra_ = 0;
  int64_t host_bytes_ = 0;  // offloaded tensors in host memory
  double time_ms_ = 0;
  // Overlapped link: when each direction's queue frees, when each tensor's
  // copy out ends and its copy back is ready (by Key), and what the copies
  // in flight still hold.
  double d2h_free_ms_ = 0, h2d_free_ms_ = 0;
  std::vector<double> out_end_ms_, ready_ms_;
  std::vector<PendingRelease> pending_;
};

}  // namespace

const char* ToString(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::kModelState:
      return "model_state";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kRecomputed:
      return "recomputed";
    case MemoryCategory::kGradients:
      return "activation_grads";
    case MemoryCategory::kWorkspace:
      return "workspace";
    case MemoryCategory::kParameterGrads:
      return "parameter_grads";
    case MemoryCategory::kCount:
      break;
  }
  return "?";
}

int64_t MemoryByCategory::total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

std::vector<bool> InputReleasingOps(const Schedule& schedule,
                                    const std::vector<bool>& keeps_input) {
  const int n = static_cast<int>(schedule.ops.size());
  std::vector<bool> out(n, false);
  std::vector<bool> seen(keeps_input.size(), false);  // a later forward of the layer runs
  for (int k = n - 1; k >= 0; --k) {
    const Op& op = schedule.ops[k];
    if (op.kind != OpKind::kForward && op.kind != OpKind::kRecompute) continue;
    if (op.layer < 0 || op.layer >= static_cast<int>(keeps_input.size())) continue;
    if (!seen[op.layer] && op.layer > 0 && !keeps_input[op.layer] && op.save != SaveMode::kNone) {
      out[k] = true;
    }
    seen[op.layer] = true;
  }
  return out;
}

namespace {

// What the other micro-batches a pipeline stage has in flight hold
// (LayerProfile::in_flight_microbatches): for each layer, (in flight - 1)
// times what one micro-batch holds of it at its forward-to-backward turn
// (before the schedule's first backward) under the schedule: the layer's
// input x[i] and saved a[i], where on the device. The stage's output
// x[L] is not held: the stage sends it on and frees it (Megatron's
// deallocate_output_tensor); the one micro-batch's stands for the buffer
// its gradient is received into. 0 without in-flight micro-batches.
int64_t InFlightBytes(const Profile& profile, const Schedule& schedule, const ChainGraph& graph) {
  const int L = profile.num_layers();
  bool pipelined = false;
  for (const LayerProfile& l : profile.layers) pipelined = pipelined || l.in_flight_microbatches > 1;
  if (!pipelined) return 0;
  Replay replay(profile, schedule, graph, nullptr, false);
  SimulationResult scratch;
  TimelinePoint pt;
  for (size_t i = 0; i < schedule.ops.size(); ++i) {
    if (schedule.ops[i].kind == OpKind::kBackward) break;
    replay.Step(static_cast<int>(i), &pt, &scratch);
  }
  int64_t bytes = 0;
  for (int i = 0; i < L; ++i) {
    const int64_t others = profile.layers[i].in_flight_microbatches - 1;
    for (TensorKind kind : {TensorKind::kX, TensorKind::kA}) {
      const LiveTensor& lt = replay.live()[Key({kind, i}, L)];
      if (lt.live && (!lt.on_host || lt.leaving)) bytes += others * lt.bytes;
    }
  }
  return bytes;
}

// One micro-step: replays the schedule, with the parameter gradients created
// in backward existing from the start or not.
SimulationResult SimulateMicroStep(const Profile& profile, const Schedule& schedule,
                                   const ChainGraph& graph, const CachingAllocatorModel* allocator,
                                   bool gradients_at_start, SimulationDetail detail,
                                   int64_t in_flight_bytes) {
  const bool full = detail == SimulationDetail::kFull;
  SimulationResult r;
  r.static_bytes = profile.static_bytes();
  r.in_flight_bytes = in_flight_bytes;
  if (full) r.timeline.resize(schedule.ops.size());
  {
    Replay replay(profile, schedule, graph, allocator, gradients_at_start, nullptr,
                  in_flight_bytes);
    TimelinePoint point;  // without a timeline
    for (size_t i = 0; i < schedule.ops.size(); ++i) {
      TimelinePoint& pt = full ? r.timeline[i] : point;
      replay.Step(static_cast<int>(i), &pt, &r);
      if (pt.peak > r.peak_bytes || r.peak_op < 0) {
        r.peak_bytes = pt.peak;
        r.peak_op = static_cast<int>(i);
        r.at_peak = pt.at_peak;
      }
      r.reserved_peak_bytes = std::max(r.reserved_peak_bytes, pt.reserved);
    }
    replay.Finish();
    if (schedule.ops.empty()) {
      r.peak_bytes = profile.static_bytes() + profile.layers[0].input_bytes + in_flight_bytes;
      if (gradients_at_start) {
        r.peak_bytes += profile.total_gradient_bytes() - profile.static_memory.gradient_bytes;
      }
      r.reserved_peak_bytes = replay.reserved_now();
    }
  }
  r.activation_peak_bytes = r.peak_bytes - r.static_bytes;
  r.step_ms = r.forward_ms + r.backward_ms + r.recompute_ms + r.optimizer_ms + r.transfer_ms;
  if (!full) return r;
  // Attribute the live tensors at the peak to layers: replay up to the peak op.
  r.layer_bytes_at_peak.assign(profile.num_layers(), 0);
  if (r.peak_op >= 0) {
    Replay replay(profile, schedule, graph, allocator, gradients_at_start, nullptr,
                  in_flight_bytes);
    SimulationResult scratch;
    TimelinePoint pt;
    for (int i = 0; i <= r.peak_op; ++i) replay.Step(i, &pt, &scratch);
    const int L = profile.num_layers();
    for (int kind = 0; kind < 3; ++kind) {
      for (int idx = 0; idx <= L; ++idx) {
        const TensorRef t{static_cast<TensorKind>(kind), idx};
        const LiveTensor& lt = replay.live()[Key(t, L)];
        if (lt.live && (!lt.on_host || lt.leaving))
          r.layer_bytes_at_peak[std::min(LayerOf(t), L - 1)] += lt.bytes;
      }
    }
    for (int i = 0; i < L; ++i) r.layer_bytes_at_peak[i] += replay.side_live(i);
    for (int i = 0; i < L; ++i) {
      if (replay.has_gradients(i)) r.layer_bytes_at_peak[i] += profile.layers[i].gradient_bytes;
    }
  }
  return r;
}

}  // namespace

namespace {

Result<const ChainGraph*> ValidatedGraph(const Profile& profile, const Schedule& schedule) {
  if (schedule.num_layers != profile.num_layers()) {
    return Status::Invalid("the schedule is for " + std::to_string(schedule.num_layers) +
                           " layers but the profile has " + std::to_string(profile.num_layers()));
  }
  const ChainGraph& graph = ChainGraph::For(profile.num_layers());
  REMAT_RETURN_IF_ERROR(ValidateSchedule(schedule, profile, graph));
  return &graph;
}

}  // namespace

Result<std::vector<AllocEvent>> AllocationEvents(const Profile& profile, const Schedule& schedule,
                                                 bool gradients_at_start) {
  REMAT_ASSIGN_OR_RETURN(const ChainGraph* graph, ValidatedGraph(profile, schedule));
  std::vector<AllocEvent> events;
  events.reserve(8 * schedule.ops.size());
  Replay replay(profile, schedule, *graph, nullptr, gradients_at_start, &events,
                InFlightBytes(profile, schedule, *graph));
  SimulationResult scratch;
  TimelinePoint pt;
  for (size_t i = 0; i < schedule.ops.size(); ++i) {
    replay.Step(static_cast<int>(i), &pt, &scratch);
  }
  replay.Finish();
  return events;
}

Result<SimulationResult> Simulate(const Profile& profile, const Schedule& schedule,
                                  const CachingAllocatorModel* allocator, SimulationDetail detail) {
  REMAT_ASSIGN_OR_RETURN(const ChainGraph* graph_ptr, ValidatedGraph(profile, schedule));
  const ChainGraph& graph = *graph_ptr;
  const bool created = profile.total_gradient_bytes() > profile.static_memory.gradient_bytes;
  const int64_t in_flight = InFlightBytes(profile, schedule, graph);
  if (profile.grad_accumulation <= 1 || !created) {
    return SimulateMicroStep(profile, schedule, graph, allocator, false, detail, in_flight);
  }
  // Micro-batch 1 creates the gradients; 2..K start with them.
  SimulationResult first =
      SimulateMicroStep(profile, schedule, graph, allocator, false, detail, in_flight);
  SimulationResult later =
      SimulateMicroStep(profile, schedule, graph, allocator, true, detail, in_flight);
  SimulationResult& chosen = first.peak_bytes > later.peak_bytes ? first : later;
  chosen.reserved_peak_bytes = std::max(first.reserved_peak_bytes, later.reserved_peak_bytes);
  return std::move(chosen);
}

}  // namespace remat
