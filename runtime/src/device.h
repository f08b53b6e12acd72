// The device a run uses: parsing its name, waiting for its queued work, and
// timing on it.
#ifndef REMAT_RUNTIME_SRC_DEVICE_H_
#define REMAT_RUNTIME_SRC_DEVICE_H_

#include <c10/core/Device.h>

#include <string>

#include "remat/status.h"

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

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_DEVICE_H_
