#include "measured.h"

#include <algorithm>
#include <cstdio>

namespace remat::viz {

int64_t MeasuredPeakBytes(const TrainResult& run) {
  int64_t peak = run.peak_bytes;
  for (const OpSample& s : run.ops) peak = std::max(peak, s.peak);
  return peak;
}

int MeasuredPeakSample(const TrainResult& run) {
  int best = -1;
  for (size_t i = 0; i < run.ops.size(); ++i) {
    if (best < 0 || run.ops[i].peak > run.ops[best].peak) best = static_cast<int>(i);
  }
  return best;
}

std::string RelativeError(double measured, double predicted) {
  if (predicted == 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * (measured - predicted) / predicted);
  return buf;
}

}  // namespace remat::viz
