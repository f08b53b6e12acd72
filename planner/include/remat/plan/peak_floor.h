// A floor under the device peak of every plan of a profile: what any
// schedule the planner makes holds at its last backward and its optimizer
// step, whichever the schedule's checkpoints, offloads and save modes.
#ifndef REMAT_PLAN_PEAK_FLOOR_H_
#define REMAT_PLAN_PEAK_FLOOR_H_

#include <cstdint>

#include "remat/device/device_memory.h"
#include "remat/profile/profile.h"

namespace remat {

// The least allocated peak (SimulationResult::peak_bytes) any schedule of
// `profile` with an optimizer step reaches: a valid schedule runs every
// layer's backward once, in reverse order, before the optimizer step, and
// nothing frees a parameter gradient before that step; so at the step the
// static memory (model state, persistent gradients, buffers) and every
// layer's gradients are live beside the step's temporaries
// (Profile::optimizer_workspace_bytes). The schedules the planner makes
// (schedule/decisions.cc, the solvers' op emitter) all end with the step.
// Also at least BackwardPeakFloor.
int64_t AllocatedPeakFloor(const Profile& profile);

// The least allocated peak any valid schedule of `profile` reaches at a
// layer's backward, the highest over the layers: ValidateSchedule has
// backward i run once, with its saved a[i] and the gradient g[i+1] it reads
// live on the device, and Replay::StepBackward holds at its peak the static
// memory, the parameter gradients of layer i and of every later layer
// (their backwards ran before; only the optimizer step frees them), the
// g[i] it writes, and a[i] with the backward's workspace (the engines'
// gathered weights and unsharded gradients among it, ranks/model_state.cc),
// each taken at the least any save mode or backward variant gives.
int64_t BackwardPeakFloor(const Profile& profile);

// The least device peak (DeviceMemoryUse::total_bytes) any plan of
// `profile` accounted with `terms` (AccountPlanMemory) has: the allocated
// floor, the replay margin on it where the allocator is replayed tensor by
// tensor (a reserved peak is never below the allocated one), and the fixed
// terms. A plan whose total is above the budget does not fit, so a floor
// above the budget means no plan of the profile fits.
int64_t DevicePeakFloor(const Profile& profile, const DeviceMemoryTerms& terms);

// The least device total (DeviceMemoryUse::total_bytes) AccountPlanMemory
// gives a plan of `profile` whose allocated peak is `allocated_peak`, where
// accounting leaves the allocated peak as it is (no terms, or the allocator
// replayed: terms.replays_allocator()): the allocated peak, the replay
// margin on it where the profile's tensors are replayed, and the fixed terms.
int64_t DeviceTotalFloor(const Profile& profile, int64_t allocated_peak,
                         const DeviceMemoryTerms& terms);

}  // namespace remat

#endif  // REMAT_PLAN_PEAK_FLOOR_H_
