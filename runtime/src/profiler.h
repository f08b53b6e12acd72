// The profiler: measures the per-layer cost chain the planner consumes.
//
// For each chain layer, on a real input (the batch run forward through the
// layers before it), after warm-up repetitions:
//   forward_ms, backward_ms      median wall time of a forward with grad and
//                                its backward (device synchronized);
//   time_spread                  the larger of their relative interquartile
//                                ranges over the repetitions (median.h
//                                RelativeSpread);
//   activation_bytes             meter delta across the forward with grad:
//                                everything it keeps, its output included;
//   forward_workspace_bytes      peak during that forward above what it keeps;
//   forward_nograd_workspace     the same for a forward without grad, above
//                                its output;
//   backward_workspace_bytes     peak during the backward above what was live
//                                before it and the input gradient it returns;
//   selective options            (blocks) the same forward/backward under
//                                each option the model runs (PartsOf:
//                                attention_core, mlp_activation, both): what
//                                it keeps, the recomputes' time, the extra
//                                backward peak.
// Static memory: meter deltas across building the weights (and buffers),
// allocating gradients and allocating the optimizer state. These are the
// simulator's quantities measured in the simulator's terms, so a plan's
// predicted peak is what the executor reaches.
#ifndef REMAT_RUNTIME_SRC_PROFILER_H_
#define REMAT_RUNTIME_SRC_PROFILER_H_

#include "device.h"
#include "memory_meter.h"
#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "remat/schedule/runtime_api.h"

namespace remat::runtime {

// Requires ModelSupports(config). Torch errors are returned as Status.
Result<Profile> MeasureProfile(const ModelConfig& config, const MeasureOptions& options,
                               const Timing& timing, MemoryMeter& meter);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_PROFILER_H_
