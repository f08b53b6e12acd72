// Replay's host link: the offload and prefetch ops, in line on the compute
// clock or overlapped on a copy queue per direction, and what an overlapped
// copy holds until it ends.
#include <algorithm>

#include "simulate/replay.h"

namespace remat::simulate_internal {

Replay::OpPeak Replay::StepCopy(const Op& op, SimulationResult* r) {
  if (p_.host_link.overlapped) {
    IssueCopy(op, r);
    return OpPeak{cat_};
  }
  // In line (the link is not overlapped): the copy runs on the compute
  // clock; the device bytes are live during it.
  const int L = p_.num_layers();
  LiveTensor& lt = live_[Key(op.tensor, L)];
  const bool out = op.kind == OpKind::kOffload;
  if (!out) {
    cat_[lt.category] += lt.bytes;
    tally_.Add(Key(op.tensor, L), lt.bytes, SavedTensors(op.tensor, lt.option));
  }
  OpPeak at{cat_};
  at.ms = p_.host_link.CopyMs(lt.bytes);
  r->transfer_ms += at.ms;
  r->link_busy_ms += at.ms;
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
  return at;
}

void Replay::WaitForLink(const Op& op, SimulationResult* r) {
  // A tensor is ready when its prefetch ends, and no prefetch ends after the
  // host-to-device queue frees: with that queue idle nothing waits.
  if ((op.kind == OpKind::kForward || op.kind == OpKind::kRecompute ||
       op.kind == OpKind::kBackward) &&
      h2d_free_ms_ > time_ms_) {
    double ready = time_ms_;
    for (const TensorRef& t : graph_.Reads(op)) {
      ready = std::max(ready, ready_ms_[Key(t, p_.num_layers())]);
    }
    r->transfer_ms += ready - time_ms_;
    time_ms_ = ready;
  }
  if (!pending_.empty()) ReleasePending(time_ms_);
}

void Replay::IssueCopy(const Op& op, SimulationResult* r) {
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

void Replay::ReleasePending(double now_ms) {
  // The copies still running keep their order, in place.
  size_t kept = 0;
  for (size_t k = 0; k < pending_.size(); ++k) {
    const PendingRelease& e = pending_[k];
    if (e.end_ms > now_ms) {
      pending_[kept++] = e;
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
  pending_.resize(kept);
}

void Replay::DropPending(int key, bool device) {
  pending_.erase(
      std::remove_if(pending_.begin(), pending_.end(),
                     [&](const PendingRelease& e) { return e.key == key && e.device == device; }),
      pending_.end());
}

}  // namespace remat::simulate_internal
