// Per-layer figures of a plan, read off its schedule: what each layer keeps
// from forward to backward, what it recomputes, and its times.
#ifndef REMAT_VISUALIZE_LAYER_ROWS_H_
#define REMAT_VISUALIZE_LAYER_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "remat/plan/plan.h"
#include "remat/profile/profile.h"

namespace remat::viz {

struct LayerRow {
  int index = 0;
  std::string name;
  LayerDecision decision = LayerDecision::kKeep;
  std::string option;  // selective option name, or empty
  // Bytes written by the layer's first forward that are still live when the
  // first backward starts (its activations, or its output as a checkpoint).
  int64_t kept_bytes = 0;
  // Bytes the layer writes again: by recompute ops, and for a selective
  // layer the part of its activations rebuilt inside its backward.
  int64_t recomputed_bytes = 0;
  int64_t at_peak_bytes = 0;  // live at the predicted peak (simulator)
  double forward_ms = 0;      // first forward
  double backward_ms = 0;     // backward, without selective recompute
  double recompute_ms = 0;    // recompute ops + selective extra_recompute_ms
};

// One row per profile layer. Requires a plan made for `profile` (decisions,
// selective_option and layer_bytes_at_peak of its size). The recompute_ms
// of all rows add up to plan.predicted.recompute_ms.
std::vector<LayerRow> LayerRows(const Plan& plan, const Profile& profile);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_LAYER_ROWS_H_
