// What the CLI needs from an executor of schedules on real hardware. The
// LibTorch runtime (runtime/) implements it; the planner library only
// declares it, so the planner never links LibTorch.
#ifndef REMAT_RUNTIME_API_H_
#define REMAT_RUNTIME_API_H_

#include <cstdint>
#include <string>
#include <vector>

#include "remat/model_config.h"
#include "remat/profile.h"
#include "remat/schedule.h"
#include "remat/status.h"

namespace remat {

struct MeasureOptions {
  std::string device = "cpu";  // "cpu" or "cuda"
  int warmup = 2;              // untimed repetitions per layer
  int repeats = 5;             // timed repetitions (median taken)
  uint64_t seed = 0;
};

struct TrainOptions {
  std::string device = "cpu";
  int steps = 5;
  int64_t memory_limit_bytes = 0;  // 0: no cap; else allocations past it fail like an OOM
  uint64_t seed = 0;
};

// One schedule op as executed: time and memory (tensor bytes in use).
struct OpSample {
  int op_index = 0;
  double ms = 0;
  int64_t live_before = 0;
  int64_t peak = 0;
  int64_t live_after = 0;
};

struct StepRecord {
  int step = 0;
  double loss = 0;
  int64_t peak_bytes = 0;
  double step_ms = 0;
  double recompute_ms = 0;
};

struct TrainResult {
  std::string device;
  std::vector<StepRecord> steps;
  std::vector<OpSample> ops;    // per op of the last step
  int64_t peak_bytes = 0;       // max over steps
  int64_t reserved_peak_bytes = 0;  // CUDA caching allocator reserve (0 on CPU)
  double step_ms = 0;           // median over steps after the first
  double recompute_ms = 0;      // median recompute time
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual std::string name() const = 0;
  // Measures a per-layer profile of the model (times, activation bytes, workspaces).
  virtual Result<Profile> Measure(const ModelConfig& config, const MeasureOptions& options) = 0;
  // Runs training steps executing `schedule`, which must be for `config`'s chain.
  virtual Result<TrainResult> Train(const ModelConfig& config, const Schedule& schedule,
                                    const TrainOptions& options) = 0;
};

}  // namespace remat

#endif  // REMAT_RUNTIME_API_H_
