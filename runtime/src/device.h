// The device a run uses: parsing its name, waiting for its queued work, and
// timing on it.
#ifndef REMAT_RUNTIME_SRC_DEVICE_H_
#define REMAT_RUNTIME_SRC_DEVICE_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "remat/model/model_config.h"
#include "remat/io/status.h"

namespace remat::runtime {

// "cpu", "cuda" or "cuda:N". CUDA must be built in and visible.
Result<c10::Device> ParseDevice(const std::string& name);

// Waits for the device's queued kernels (no-op on CPU).
void Synchronize(const c10::Device& device);

// What the profile's "device" field says: "cpu" or the GPU's name.
std::string DeviceDescription(const c10::Device& device);

enum class ClockKind {
  kWall,       // elapsed time, device synchronized
  kThreadCpu,  // CPU time of the calling thread: on a CPU run with one
               // intra-op thread (OMP_NUM_THREADS=1) all the work is on this
               // thread, and time other processes take is not counted
};

// "wall" or "thread". "thread" requires a CPU device and one intra-op
// thread, and says so otherwise.
Result<ClockKind> ParseClock(const std::string& name, const c10::Device& device);

// How a run times its ops.
struct Timing {
  c10::Device device{c10::DeviceType::CPU};
  ClockKind clock = ClockKind::kWall;
};

// Milliseconds since construction on `timing`'s clock.
class DeviceClock {
 public:
  explicit DeviceClock(const Timing& timing);
  double ElapsedMs() const;

 private:
  double Now() const;
  Timing timing_;
  double start_ms_ = 0;
};

// OK if `device` runs `config.precision`'s kernels: a probe of LayerNorm,
// matmul, softmax and their backward in the precision's compute dtype (under
// autocast for amp_*), run before anything starts. Otherwise why, naming what
// would run (bf16, or the precision on cuda).
Status DeviceRuns(const ModelConfig& config, const c10::Device& device);

// torch.autocast(device, dtype) for amp_* (fp32 weights; matmuls and the
// ops autocast's policy lowers run in 16 bits), nothing otherwise. As
// torch.autocast's exit, leaving the outermost scope clears autocast's cache
// of 16-bit weight copies (the copies a matmul saves for backward stay with
// its graph). The executor and the profiler open one around each layer's
// forward and each recompute, so a layer's weight copies live no longer
// than what keeps them.
class AutocastScope {
 public:
  AutocastScope(const ModelConfig& config, const c10::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType type_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Float;
};

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_DEVICE_H_
