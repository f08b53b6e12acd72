// Gradient accumulation: one optimizer step (an update) over K micro-batches.
//
// The gradients live through all K micro-batches, in the accumulation dtype
// of the precision convention. Persistent buffers (the profile's static
// gradient bytes) exist from the start of every micro-batch. Gradients
// created in backward (LayerProfile::gradient_bytes) do not exist when
// micro-batch 1 starts and exist, all of them, when micro-batches 2..K
// start: Simulate replays both micro-steps of a profile with
// grad_accumulation > 1 and reports the one with the higher peak. Time per
// update, from the simulated micro-step:
//
//   update_ms = K x micro_step_ms + (K - 1) x accumulate_ms + optimizer_step_ms
//
// micro_step_ms is the schedule's forward, backward and recompute time (the
// simulated step without its optimizer op). accumulate_ms is the overhead
// of accumulation per micro-batch: every backward adds its parameter
// gradients into the kept ones (persistent buffers zeroed after the step,
// or the gradients micro-batch 1 created), a bandwidth-bound
// pass over the gradients (GradientAccumulateMs). One batch of K*b pays that
// pass once, K micro-batches K times: K - 1 extra. It does not shrink with
// the micro-batch, so b = 1 is not free.
#ifndef REMAT_ACCUMULATION_H_
#define REMAT_ACCUMULATION_H_

#include <cstdint>

#include "remat/profile/profile.h"
#include "remat/simulate/simulator.h"

namespace remat {

// Above this many micro-batches per update the planner warns: an update
// takes long, the learning-rate schedule gets coarse, 16-bit sums drift.
inline constexpr int64_t kManyMicroBatches = 128;

struct UpdatePrediction {
  int64_t micro_batch = 0;        // examples per micro-batch (profile.micro_batch; 0 unknown)
  int64_t grad_accumulation = 1;  // K, micro-batches per update
  double micro_step_ms = 0;       // one micro-batch: forward, backward, recompute
  double accumulate_ms = 0;       // adding one micro-batch's gradients into the kept ones
  double optimizer_step_ms = 0;   // the optimizer step, once per update
  double update_ms = 0;           // the formula above
  double tokens_per_s = 0;        // micro_batch x seq_len x K / update_ms; 0 if unknown
};

// The update of `k` >= 1 micro-batches, each running the schedule that
// `predicted` simulated on `profile`.
UpdatePrediction PredictUpdate(const Profile& profile, const SimulationResult& predicted,
                               int64_t k);

}  // namespace remat

#endif  // REMAT_ACCUMULATION_H_
