// What the CLI needs from an executor of schedules on real hardware. The
// LibTorch runtime (runtime/) implements it; the planner library only
// declares it, so the planner never links LibTorch.
#ifndef REMAT_RUNTIME_API_H_
#define REMAT_RUNTIME_API_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "remat/model/model_config.h"
#include "remat/profile/profile.h"
#include "remat/io/progress.h"
#include "remat/profile/provenance.h"
#include "remat/schedule/schedule.h"
#include "remat/io/status.h"

namespace remat {

struct MeasureOptions {
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  int warmup = 2;              // untimed repetitions per layer
  int repeats = 5;             // timed repetitions per layer
  // What a layer's time is over its repetitions: "median" (the default), or
  // "min": the fastest, for a shared machine, where noise only ever slows.
  std::string statistic = "median";
  uint64_t seed = 0;           // weights, batch and dropout
  // "wall" (elapsed, device synchronized) or "thread" (CPU time of the
  // calling thread: CPU runs with one thread, robust to a busy machine).
  std::string clock = "wall";
  // Told of each layer measured: what "profiling", one item per layer and
  // repetition (warmup included) plus one for the optimizer step, item the
  // layer's name ("block3"); may be empty.
  ProgressCallback progress;
};

// Checks what a caller can get wrong before a runtime starts: repeats >= 1,
// warmup >= 0, a known statistic. (Devices and clocks are the runtime's.)
inline Status ValidateMeasureOptions(const MeasureOptions& m) {
  if (m.repeats < 1 || m.warmup < 0) {
    return Status::Invalid("profiling needs repeats >= 1 and warmup >= 0");
  }
  if (m.statistic != "median" && m.statistic != "min") {
    return Status::Invalid("unknown timing statistic '" + m.statistic + "'; accepted: median, min");
  }
  return Status::Ok();
}

struct StepRecord;

struct TrainOptions {
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  int steps = 5;
  int64_t memory_limit_bytes = 0;  // 0: no cap; else allocations past it fail like an OOM
  uint64_t seed = 0;               // weights, batches and dropout
  std::string clock = "wall";      // as MeasureOptions::clock
  // Called after each step (e.g. to print progress); may be empty.
  std::function<void(const StepRecord&)> on_step;
  // Told of each step: what "training", total `steps`, item "step N"; called
  // after on_step; may be empty.
  ProgressCallback progress;
};

// One schedule op as executed: time and memory (tensor bytes in use, model
// state included, as the simulator's timeline counts them).
struct OpSample {
  int op_index = 0;
  double ms = 0;
  int64_t live_before = 0;
  int64_t peak = 0;
  int64_t live_after = 0;
};

struct StepRecord {
  int step = 0;             // 1-based
  double loss = 0;
  int64_t peak_bytes = 0;
  double step_ms = 0;
  double recompute_ms = 0;  // recompute ops + attention cores recomputed in backward
};

struct TrainResult {
  std::string device;           // "cpu" or the GPU's name
  std::vector<StepRecord> steps;
  std::vector<OpSample> ops;    // per op of the last step
  int64_t peak_bytes = 0;       // max over steps
  int64_t reserved_peak_bytes = 0;  // CUDA caching allocator reserve (0 on CPU)
  int64_t host_peak_bytes = 0;      // activation offload: most bytes on the host, max over steps
  int64_t model_state_bytes = 0;    // measured parameters + gradients + optimizer state
  double step_ms = 0;           // median over steps after the first (the only one if 1)
  double recompute_ms = 0;      // median recompute time, same steps
  Provenance provenance;        // LibTorch, device, kernels, threads, allocator of the run
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual std::string name() const = 0;
  // Measures a per-layer profile of the model (times, activation bytes, workspaces).
  virtual Result<Profile> Measure(const ModelConfig& config, const MeasureOptions& options) = 0;
  // Runs training steps executing `schedule`, which must be for `config`'s
  // chain (selective ops use option 0, the attention core). A step is one
  // optimizer step over config.grad_accumulation micro-batches, each running
  // the schedule (loss / K, gradients summed in place). Hitting
  // options.memory_limit_bytes returns kOutOfMemory naming the op, the bytes
  // asked for, the bytes in use and the limit.
  virtual Result<TrainResult> Train(const ModelConfig& config, const Schedule& schedule,
                                    const TrainOptions& options) = 0;
};

}  // namespace remat

#endif  // REMAT_RUNTIME_API_H_
