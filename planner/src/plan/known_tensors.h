// Whether a profile's replay is tensor by tensor (internal to the plan
// layer: plan.cc and peak_floor.cc price the replay's margin by it).
#ifndef REMAT_SRC_PLAN_KNOWN_TENSORS_H_
#define REMAT_SRC_PLAN_KNOWN_TENSORS_H_

#include "remat/profile/profile.h"

namespace remat::plan_internal {

// Whether the profile's layers know their tensors (LayerTensors: an
// analytic profile), so that its replay is tensor by tensor.
inline bool KnowsItsTensors(const Profile& profile) {
  for (const LayerProfile& l : profile.layers) {
    if (!l.tensors.saved.empty() || !l.tensors.gradients.empty()) return true;
  }
  return false;
}

}  // namespace remat::plan_internal

#endif  // REMAT_SRC_PLAN_KNOWN_TENSORS_H_
