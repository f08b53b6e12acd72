// Simulator: replays a schedule against a profile and predicts the memory
// timeline, the peak (and the op that reaches it) and the step time.
//
// Memory model, per op (bytes):
//   live          = static (parameters + gradients + optimizer state) + live tensors
//   forward(i)    peak = live + |x[i+1]| (+ |a[i]| with grad) + forward workspace
//   backward(i)   peak = live + |g[i]| + backward workspace (+ selective recompute workspace)
//   free(t)       live -= |t|
//   skips         a layer's skip_bytes (side output to the loss) are written
//                 by its first forward and freed after the loss's backward,
//                 which writes their gradients; a skip's gradient is freed
//                 after its layer's backward; a recompute makes the side
//                 output again as a transient (workspace)
// Parameter gradients created in backward (LayerProfile::gradient_bytes) are
// allocated at a layer's first backward, before its peak, and freed by the
// optimizer step, after its peak. A forward with grad of a layer that does
// not keep its input (keeps_input false) releases x[i] after its peak when
// x[i] still carries the previous layer's graph (a[i-1] is live and x[i] was
// written with grad) and no later forward of the layer reads it; the
// schedule's own free of x[i] then releases nothing.
// With profile.grad_accumulation K > 1 the step is simulated twice:
// micro-batch 1 starts without gradients, micro-batches 2..K with all of
// them; the result is the micro-step with the higher peak (micro-batch K on
// a tie, the one whose optimizer step runs).
// With a caching-allocator model each tensor, workspace and model-state
// part is one request, and the reserved bytes at each op's peak moment are
// tallied as the allocator rounds them (ReservedTally, device_memory.h).
// Time: forward/recompute add forward_ms, backward adds backward_ms (plus the
// selective option's extra_recompute_ms), the optimizer step optimizer_ms.
// Offload: a kOffload releases the checkpoint's device bytes after its copy
// and holds them in host memory (host_peak_bytes) until a kPrefetch brings
// them back (allocated before its copy) or a kFree; each copy takes
// host_link.CopyMs, on the compute clock (transfer_ms), when the link is in
// line. Over an overlapped link (HostLink::overlapped, a copy stream) each
// direction is a serial queue beside the compute clock: a copy starts when
// its op is issued or when its queue frees, whichever is later (a prefetch
// also not before the tensor's copy out ended); an offload's device bytes
// stay allocated until its copy ends (released before the first op that
// starts at or after that end, or at the end of the step), its host bytes
// from its issue; a prefetch allocates its device bytes when issued, frees
// the host bytes when its copy ends, and the first compute op reading the
// tensor starts no earlier than that end. Only those stalls are transfer_ms;
// link_busy_ms is all copy time.
// Pipeline stages: where layers have in_flight_microbatches k > 1, the step
// holds beside the one micro-batch it runs (k - 1) times what that
// micro-batch keeps of each such layer at its turn from forward to backward
// under the schedule (its inputs and saved tensors; not the stage's
// output, which is sent on and freed), from the first op to the last.
// Every figure the planner reports comes from here.
#ifndef REMAT_SIMULATOR_H_
#define REMAT_SIMULATOR_H_

#include <array>
#include <cstdint>
#include <vector>

#include "remat/device/caching_allocator.h"
#include "remat/device/device_memory.h"
#include "remat/profile/profile.h"
#include "remat/schedule/schedule.h"
#include "remat/io/status.h"

namespace remat {

// Where live bytes come from. A tensor's category is set by the op that wrote it.
enum class MemoryCategory {
  kModelState = 0,  // parameters + gradients + optimizer state
  kActivations,     // x / a written by a first forward
  kRecomputed,      // x / a written by a recompute
  kGradients,       // activation gradients g[i]
  kWorkspace,       // transient bytes inside an op
  kParameterGrads,  // parameter gradients created in backward
  kCount,
};
const char* ToString(MemoryCategory c);

struct MemoryByCategory {
  std::array<int64_t, static_cast<int>(MemoryCategory::kCount)> bytes{};
  int64_t& operator[](MemoryCategory c) { return bytes[static_cast<int>(c)]; }
  int64_t operator[](MemoryCategory c) const { return bytes[static_cast<int>(c)]; }
  int64_t total() const {
    int64_t t = 0;
    for (int64_t b : bytes) t += b;
    return t;
  }
};

// One entry per schedule op, frees included.
struct TimelinePoint {
  int op_index = 0;
  double start_ms = 0;
  double end_ms = 0;
  int64_t live_before = 0;   // bytes live when the op starts
  int64_t peak = 0;          // highest bytes live during the op
  int64_t live_after = 0;    // bytes live when it ends
  MemoryByCategory at_peak;  // composition of `peak`
  // Bytes the allocator reserves for what is live at the op's peak moment
  // (== peak without an allocator model).
  int64_t reserved = 0;
};

struct SimulationResult {
  std::vector<TimelinePoint> timeline;
  int64_t peak_bytes = 0;             // max over timeline of peak
  int peak_op = -1;                   // op index reaching peak_bytes (first one)
  int64_t static_bytes = 0;           // model state, live throughout
  int64_t activation_peak_bytes = 0;  // peak_bytes - static_bytes
  // A pipeline stage's other micro-batches in flight: what they hold
  // (LayerProfile::in_flight_microbatches), live through the whole step and
  // counted as activations in every figure. 0 on a single rank.
  int64_t in_flight_bytes = 0;
  MemoryByCategory at_peak;           // composition of the peak
  // Max over timeline of reserved: the allocator-rounded peak (== peak_bytes
  // without an allocator model; never below it).
  int64_t reserved_peak_bytes = 0;
  // Bytes attributed to each layer at the peak (x[i+1], a[i] and g[i] are
  // layer i's); x[0] is attributed to layer 0.
  std::vector<int64_t> layer_bytes_at_peak;
  double step_ms = 0;       // sum of all op times
  double forward_ms = 0;    // first forwards
  double backward_ms = 0;   // backwards, without selective recompute
  double recompute_ms = 0;  // recompute ops + selective extra_recompute_ms
  double optimizer_ms = 0;
  int recompute_ops = 0;  // number of kRecompute ops
  // Activation offload (kOffload / kPrefetch over profile.host_link).
  double transfer_ms = 0;       // what the copies add to the step (in line: all of
                                // them; overlapped: the readers' stalls)
  double link_busy_ms = 0;      // the link's busy time, both directions
  int64_t offloaded_bytes = 0;  // bytes copied to the host
  int64_t host_peak_bytes = 0;  // most offloaded bytes in host memory at once
};

// What a simulation records besides its totals (peaks, their composition,
// times, transfers).
enum class SimulationDetail {
  kFull,    // the timeline and layer_bytes_at_peak too
  kTotals,  // neither (both left empty): for searches that simulate many
            // schedules and keep one
};

// Replays `schedule` on `profile`, with `allocator` (may be null: reserved
// equals allocated) rounding the requests. Fails (kInvalidInput) if the
// schedule is not executable (see ValidateSchedule). The totals do not
// depend on `detail`.
Result<SimulationResult> Simulate(const Profile& profile, const Schedule& schedule,
                                  const CachingAllocatorModel* allocator = nullptr,
                                  SimulationDetail detail = SimulationDetail::kFull);

// The allocator requests of one micro-step of `schedule` on `profile`, in
// the order the simulator makes them, for CudaAllocatorModel
// (caching_allocator.h): the model-state parts and x[0] first, then per op
// its writes, its workspace (allocated at the op's peak and freed at once),
// and what it frees; the overlapped copies' releases at the end. An id names
// one tensor (or side output, its gradient, a layer's parameter gradients, a
// model-state part, the running op's workspace) from its write to its free,
// and is reused when the tensor is written again. Empty requests are left
// out. `gradients_at_start`: the parameter gradients exist before the first
// op (micro-batches 2..K of an update). Fails as Simulate does.
Result<std::vector<AllocEvent>> AllocationEvents(const Profile& profile, const Schedule& schedule,
                                                 bool gradients_at_start = false);

// For each schedule op: true for the forwards (with grad) and recomputes
// (with grad) of a layer i > 0 with keeps_input[i] false that are the
// layer's last forward in the schedule, so nothing reads x[i] after them
// but the backwards that do not need it. Such an op releases x[i] if it
// still carries layer i-1's graph (the executors check that themselves).
// `keeps_input` has one entry per layer.
std::vector<bool> InputReleasingOps(const Schedule& schedule, const std::vector<bool>& keeps_input);

}  // namespace remat

#endif  // REMAT_SIMULATOR_H_
