#include "remat/simulate/accumulation.h"

#include <algorithm>

namespace remat {

UpdatePrediction PredictUpdate(const Profile& profile, const SimulationResult& predicted,
                               int64_t k) {
  UpdatePrediction u;
  u.micro_batch = profile.micro_batch;
  u.grad_accumulation = std::max<int64_t>(k, 1);
  const double updates = static_cast<double>(u.grad_accumulation);
  u.micro_step_ms = std::max(0.0, predicted.step_ms - predicted.optimizer_ms);
  u.accumulate_ms = GradientAccumulateMs(profile);
  u.optimizer_step_ms = predicted.optimizer_ms;
  u.update_ms = updates * u.micro_step_ms + (updates - 1) * u.accumulate_ms + u.optimizer_step_ms;
  const double tokens =
      static_cast<double>(profile.micro_batch) * static_cast<double>(profile.seq_len) * updates;
  if (tokens > 0 && u.update_ms > 0) u.tokens_per_s = tokens / (u.update_ms / 1e3);
  return u;
}

}  // namespace remat
