// The floor under every plan's device peak (remat/plan/peak_floor.h).
#include "remat/plan/peak_floor.h"

#include <algorithm>
#include <cmath>

#include "plan/known_tensors.h"
#include "remat/io/checked_math.h"

namespace remat {
namespace {

// a + b for byte counts, at most kMaxBytes (a profile ValidateProfile has
// not seen yet may hold any sizes).
int64_t AddBytes(int64_t a, int64_t b) {
  a = std::max<int64_t>(0, std::min(a, kMaxBytes));
  b = std::max<int64_t>(0, std::min(b, kMaxBytes));
  return a > kMaxBytes - b ? kMaxBytes : a + b;
}

}  // namespace

int64_t AllocatedPeakFloor(const Profile& profile) {
  int64_t bytes = AddBytes(profile.static_bytes(), profile.optimizer_workspace_bytes);
  for (const LayerProfile& l : profile.layers) bytes = AddBytes(bytes, l.gradient_bytes);
  return bytes;
}

int64_t DevicePeakFloor(const Profile& profile, const DeviceMemoryTerms& terms) {
  const int64_t allocated = AllocatedPeakFloor(profile);
  int64_t reserved = allocated;
  if (terms.replays_allocator() && plan_internal::KnowsItsTensors(profile)) {
    // AccountReplayedDeviceMemory: the margin on a reserved peak of at
    // least `allocated`.
    const double extra = std::ceil(kTensorReplayMargin * static_cast<double>(allocated));
    reserved = AddBytes(
        reserved, extra >= static_cast<double>(kMaxBytes) ? kMaxBytes : static_cast<int64_t>(extra));
  }
  return AddBytes(reserved, terms.fixed_bytes());
}

}  // namespace remat
