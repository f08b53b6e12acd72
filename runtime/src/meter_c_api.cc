// The CPU meter behind a C interface, for processes that are not ours:
// python/remat_measure loads libremat_cpu_meter.so with ctypes into
// Python's PyTorch (the same libc10), so that a PyTorch program is metered
// exactly as remat's runtime is.
#include <algorithm>
#include <utility>

#include "memory_meter.h"

namespace {

// The timeline of the last remat_meter_timeline_stop(), until the next one.
remat::runtime::MeterTimeline& StoppedTimeline() {
  static auto* t = new remat::runtime::MeterTimeline();
  return *t;
}

}  // namespace

extern "C" {

// The torch version the library was built against ("2.11.0"): it is
// loaded into that torch's process only (remat_measure checks).
const char* remat_meter_torch_version() { return REMAT_METER_TORCH_VERSION; }

// Registers the metering CPU allocator; returns 1 if it is in place.
int remat_meter_install() { return remat::runtime::CpuMeter().SetLimit(0).ok() ? 1 : 0; }
long long remat_meter_current_bytes() { return remat::runtime::CpuMeter().current_bytes(); }
long long remat_meter_peak_bytes() { return remat::runtime::CpuMeter().peak_bytes(); }
void remat_meter_reset_peak() { remat::runtime::CpuMeter().ResetPeak(); }

// Starts recording the timeline (memory_meter.h: StartCpuTimeline) in at
// most `max_samples` samples; returns 1, or 0 when max_samples < 1 or the
// meter is not installed.
int remat_meter_timeline_start(long long max_samples) {
  return remat::runtime::StartCpuTimeline(max_samples).ok() ? 1 : 0;
}

// Stops recording; returns the number of samples, which the three below
// read until the next stop.
long long remat_meter_timeline_stop() {
  StoppedTimeline() = remat::runtime::StopCpuTimeline();
  return static_cast<long long>(StoppedTimeline().bytes.size());
}

// 1 when the meter allocated the memory of `storage_impl` (torch's
// UntypedStorage._cdata), so that its bytes are counted; 0 when it did not
// (memory_meter.h: CpuMeterAllocated).
int remat_meter_storage_is_metered(const void* storage_impl) {
  return remat::runtime::CpuMeterAllocated(storage_impl) ? 1 : 0;
}

// Allocations and frees the stopped timeline recorded.
long long remat_meter_timeline_events() { return StoppedTimeline().events; }

// Events per sample of the stopped timeline (a power of two).
long long remat_meter_timeline_stride() { return StoppedTimeline().stride; }

// Copies the first min(capacity, samples) samples (absolute bytes in use)
// into `out`; returns how many it copied.
long long remat_meter_timeline_copy(long long* out, long long capacity) {
  const auto& bytes = StoppedTimeline().bytes;
  const long long n = std::min<long long>(capacity, static_cast<long long>(bytes.size()));
  if (out == nullptr || n <= 0) return 0;
  std::copy(bytes.begin(), bytes.begin() + n, out);
  return n;
}

}  // extern "C"
