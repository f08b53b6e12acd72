// Memory meters: how many bytes of tensor memory are in use, the highest
// value since a reset, and an optional cap that makes allocations past it
// fail like a GPU out-of-memory error.
//
// On CPU the meter is an allocator registered with c10::SetCPUAllocator: it
// counts the exact bytes every CPU tensor asks for. On CUDA it reads the
// caching allocator's device statistics (the counters behind
// torch.cuda.memory_allocated / max_memory_allocated). Internal to runtime/;
// no torch types appear here.
#ifndef REMAT_RUNTIME_SRC_MEMORY_METER_H_
#define REMAT_RUNTIME_SRC_MEMORY_METER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "remat/io/status.h"

namespace remat::runtime {

// An allocation the cap refused.
struct OomEvent {
  int64_t requested_bytes = 0;  // the allocation that did not fit (-1: unknown)
  int64_t in_use_bytes = 0;     // bytes in use when it was asked for
  int64_t limit_bytes = 0;      // the cap
};

class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;
  virtual std::string name() const = 0;
  // Bytes of tensor memory in use now.
  virtual int64_t current_bytes() const = 0;
  // Highest current_bytes() since the last ResetPeak().
  virtual int64_t peak_bytes() const = 0;
  // Starts a new peak window at the current value.
  virtual void ResetPeak() = 0;
  // What a tensor of `nbytes` bytes adds to current_bytes(): nbytes on CPU,
  // rounded up to the caching allocator's 512-byte blocks on CUDA.
  virtual int64_t AllocationBytes(int64_t nbytes) const { return nbytes; }
  // CUDA caching allocator reserve (current and peak); 0 on CPU.
  virtual int64_t reserved_bytes() const { return 0; }
  virtual int64_t reserved_peak_bytes() const { return 0; }
  // Caps memory at `bytes` (0: no cap). An allocation past the cap throws
  // c10::OutOfMemoryError and is recorded for TakeOom().
  virtual Status SetLimit(int64_t bytes) = 0;
  virtual int64_t limit_bytes() const = 0;  // 0: no cap
  // The last refused allocation since the previous call, if any.
  virtual std::optional<OomEvent> TakeOom() = 0;
};

// The process-wide CPU meter. The first call registers the metering
// allocator; tensors allocated before that are not counted (and their frees
// are not either).
MemoryMeter& CpuMeter();

// The CPU meter's timeline: the bytes in use after every allocation and
// free recorded between StartCpuTimeline() and StopCpuTimeline(), in event
// order, held in at most `max_samples` samples. Sample i covers events
// [i * stride, (i + 1) * stride) and holds the highest bytes in use after
// any of them; stride is 1 (every event exact) until the events outnumber
// max_samples, and doubles each time they would not fit, adjacent samples
// merging by their maximum. The highest sample is therefore the peak of
// the recording, whatever its length. Events of concurrent threads are
// ordered as they take the recorder's lock.
struct MeterTimeline {
  std::vector<int64_t> bytes;  // absolute bytes in use, one per sample
  int64_t events = 0;          // allocations and frees recorded
  int64_t stride = 1;          // events per sample, a power of two
};

// Starts recording the CPU meter's timeline, dropping any earlier one.
// Requires max_samples >= 1 and the metering allocator in place (CpuMeter()
// registers it); recording costs a lock per allocation and free, and
// nothing but one branch when off.
Status StartCpuTimeline(int64_t max_samples);

// Stops recording and returns the timeline (empty if none was started).
MeterTimeline StopCpuTimeline();

// Whether the CPU meter allocated the memory of `storage_impl` (a
// c10::StorageImpl*, the address torch's UntypedStorage._cdata holds), so
// that its bytes are counted. False for memory it never saw: a file mapped
// into memory (safetensors' weights), tensors made before CpuMeter() was
// first called, memory borrowed from elsewhere (torch.from_numpy). The
// caller keeps the storage alive for the call.
bool CpuMeterAllocated(const void* storage_impl);

// The CUDA meter for `device`, or an error when this build has no CUDA
// LibTorch or the device does not exist.
Result<std::unique_ptr<MemoryMeter>> MakeCudaMeter(int device);

// The GPU's name ("NVIDIA H200"), or an error as for MakeCudaMeter.
Result<std::string> CudaDeviceName(int device);

// The GPU's compute capability ("9.0"), or an error as for MakeCudaMeter.
Result<std::string> CudaComputeCapability(int device);

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_MEMORY_METER_H_
