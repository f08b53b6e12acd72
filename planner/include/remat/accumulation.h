// Gradient accumulation: one optimizer step (an update) over K micro-batches.
//
// The gradient buffers live through all K micro-batches (the profile's
// static gradient bytes, in the accumulation dtype of the precision
// convention), so a micro-step's memory timeline is the simulated one for
// every K. Time per update, from the simulated micro-step:
//
//   update_ms = K x micro_step_ms + (K - 1) x accumulate_ms + optimizer_step_ms
//
// micro_step_ms is the schedule's forward, backward and recompute time (the
// simulated step without its optimizer op). accumulate_ms is the overhead
// of accumulation per micro-batch: every backward adds its parameter
// gradients into the kept buffers (allocated once and zeroed after the
// step, zero_grad(set_to_none=False), as the runtime does), a bandwidth-bound
// pass over the gradients (GradientAccumulateMs). One batch of K*b pays that
// pass once, K micro-batches K times: K - 1 extra. It does not shrink with
// the micro-batch, so b = 1 is not free.
#ifndef REMAT_ACCUMULATION_H_
#define REMAT_ACCUMULATION_H_

#include <cstdint>

#include "remat/profile.h"
#include "remat/simulator.h"

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
