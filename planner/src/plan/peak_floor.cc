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
  return std::max(bytes, BackwardPeakFloor(profile));
}

int64_t BackwardPeakFloor(const Profile& profile) {
  const int L = profile.num_layers();
  int64_t floor = 0;
  int64_t later_gradients = 0;  // of the layers after i, whose backwards ran before
  for (int i = L - 1; i >= 0; --i) {
    const LayerProfile& l = profile.layers[static_cast<size_t>(i)];
    // What backward i keeps of its layer: a[i] under the save mode that
    // keeps least (the full save or a selective option; a recompute
    // writes the full one).
    int64_t kept = l.activation_bytes;
    int64_t extra_workspace = 0;  // a selective option's recompute workspace, if negative
    for (const SelectiveOption& o : l.selective) {
      kept = std::min(kept, o.activation_bytes);
      extra_workspace = std::min(extra_workspace, o.recompute_workspace_bytes);
    }
    const int64_t saved = std::max<int64_t>(0, kept - l.output_bytes);
    // Its workspace, the least of the backward's variants (after a
    // recompute, adding into existing gradients).
    int64_t workspace = l.backward_workspace_bytes;
    if (l.recompute_backward_workspace_bytes) {
      workspace = std::min(workspace, *l.recompute_backward_workspace_bytes);
    }
    workspace = std::min(workspace, l.accumulating_workspace_bytes());
    workspace = std::clamp(workspace, -kMaxBytes, kMaxBytes) +
                std::clamp<int64_t>(extra_workspace, -kMaxBytes, 0);
    int64_t bytes = AddBytes(profile.static_bytes(), AddBytes(later_gradients, l.gradient_bytes));
    if (i > 0) bytes = AddBytes(bytes, l.input_bytes);       // g[i], written
    if (i < L - 1) {  // g[i+1], read
      bytes = AddBytes(bytes, profile.layers[static_cast<size_t>(i) + 1].input_bytes);
    }
    // a[i] with the workspace: Replay::StepBackward's peak holds a[i] less
    // what autograd released before it, plus max(workspace + released, 0):
    // at least max(a[i] + workspace, 0), and a[i] is at least `saved`.
    const int64_t held = std::max<int64_t>(0, std::min(saved, kMaxBytes) + workspace);
    bytes = AddBytes(bytes, held);
    floor = std::max(floor, bytes);
    later_gradients = AddBytes(later_gradients, l.gradient_bytes);
  }
  return floor;
}

int64_t DeviceTotalFloor(const Profile& profile, int64_t allocated_peak,
                         const DeviceMemoryTerms& terms) {
  int64_t reserved = allocated_peak;
  if (terms.replays_allocator() && plan_internal::KnowsItsTensors(profile)) {
    // AccountReplayedDeviceMemory: the margin on a reserved peak of at
    // least `allocated_peak`.
    const double extra = std::ceil(kTensorReplayMargin * static_cast<double>(allocated_peak));
    reserved = AddBytes(
        reserved, extra >= static_cast<double>(kMaxBytes) ? kMaxBytes : static_cast<int64_t>(extra));
  }
  return AddBytes(reserved, terms.fixed_bytes());
}

int64_t DevicePeakFloor(const Profile& profile, const DeviceMemoryTerms& terms) {
  return DeviceTotalFloor(profile, AllocatedPeakFloor(profile), terms);
}

}  // namespace remat
