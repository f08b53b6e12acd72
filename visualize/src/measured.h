// Reading a measured run (TrainResult) against the prediction.
#ifndef REMAT_VISUALIZE_MEASURED_H_
#define REMAT_VISUALIZE_MEASURED_H_

#include <cstdint>
#include <string>

#include "remat/schedule/runtime_api.h"

namespace remat::viz {

// The run's peak: the larger of TrainResult::peak_bytes (over steps) and the
// highest per-op peak of the recorded step.
int64_t MeasuredPeakBytes(const TrainResult& run);

// Index into run.ops of the sample with the highest peak; -1 when none.
int MeasuredPeakSample(const TrainResult& run);

// (measured - predicted) / predicted as a signed percentage: "+3.1%",
// "-0.4%"; "n/a" when predicted is 0.
std::string RelativeError(double measured, double predicted);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_MEASURED_H_
