// The caching allocator replayed over a plan's training steps, until its
// reserved state repeats (remat/plan/plan.h).
#include "remat/plan/plan.h"

namespace remat {

Result<TrainingStepReplay> ReplayTrainingSteps(const Profile& profile, const Schedule& schedule,
                                               const AllocatorOptions& options,
                                               const AllocatorLimit& limit, int max_micro_steps,
                                               ReplayTrace* trace) {
  // Micro-batch 1 of an update creates the parameter gradients; 2..K start
  // with them (Simulate does the same).
  const int64_t k = profile.grad_accumulation;
  const bool accumulates =
      k > 1 && profile.total_gradient_bytes() > profile.static_memory.gradient_bytes;
  REMAT_ASSIGN_OR_RETURN(const std::vector<AllocEvent> first,
                         AllocationEvents(profile, schedule, false));
  std::vector<AllocEvent> later;
  if (accumulates) {
    REMAT_ASSIGN_OR_RETURN(later, AllocationEvents(profile, schedule, true));
  }

  TrainingStepReplay out;
  CudaAllocatorModel model(options, limit);
  // Whether a micro-step of each kind ran from the present allocator state
  // without a device allocation or release: then the state after it is the
  // state before it (every micro-step ends with the same blocks live, the
  // model state, and the free blocks of a segment merged), and once both
  // kinds have, every later micro-step repeats it.
  bool quiet_first = false, quiet_later = !accumulates;
  for (int m = 0; m < max_micro_steps; ++m) {
    const bool is_first = !accumulates || m % k == 0;
    const std::vector<AllocEvent>& events = is_first ? first : later;
    const int64_t allocs = model.stats().device_allocs, frees = model.stats().device_frees;
    for (size_t i = 0; i < events.size(); ++i) {
      const AllocEvent& e = events[i];
      if (e.kind == AllocEvent::Kind::kAlloc) {
        // The model state lives on from the step before: not allocated again.
        if (model.LiveRequestBytes(e.id) == e.size_bytes) continue;
        const Status s = model.Malloc(e.id, e.size_bytes);
        if (s.code() == StatusCode::kOutOfMemory) {
          out.oom_micro_step = m;
          out.oom_event = static_cast<int64_t>(i);
          break;
        }
        REMAT_RETURN_IF_ERROR(s);
      } else {
        REMAT_RETURN_IF_ERROR(model.Free(e.id));
      }
      if (trace != nullptr) {
        trace->events.push_back(e);
        trace->reserved_timeline_bytes.push_back(model.stats().reserved_bytes);
        trace->allocated_timeline_bytes.push_back(model.stats().allocated_bytes);
      }
    }
    out.summary.micro_steps = m + 1;
    if (out.oom_micro_step >= 0) break;
    const bool quiet = model.stats().device_allocs == allocs && model.stats().device_frees == frees;
    if (!quiet) {
      quiet_first = false;
      quiet_later = !accumulates;
    } else if (is_first) {
      quiet_first = true;
    } else {
      quiet_later = true;
    }
    if (quiet_first && quiet_later) {
      out.summary.steady = true;
      break;
    }
  }
  if (trace != nullptr) trace->segments = model.Snapshot();
  const AllocatorStats& st = model.stats();
  out.reserved_peak_bytes = st.peak_reserved_bytes;
  out.allocated_peak_bytes = st.peak_allocated_bytes;
  out.summary.alloc_retries = st.alloc_retries;
  out.driver_refusals = st.driver_refusals;
  out.summary.device_allocs = st.device_allocs;
  out.summary.out_of_memory = out.oom_micro_step >= 0;
  return out;
}

}  // namespace remat
