// The CPU meter behind a C interface, for processes that are not ours:
// bench/overhead_vs_pytorch.py loads libremat_cpu_meter.so with ctypes into
// Python's PyTorch (the same libc10), so both sides are metered alike.
#include "memory_meter.h"

extern "C" {

// Registers the metering CPU allocator; returns 1 if it is in place.
int remat_meter_install() { return remat::runtime::CpuMeter().SetLimit(0).ok() ? 1 : 0; }
long long remat_meter_current_bytes() { return remat::runtime::CpuMeter().current_bytes(); }
long long remat_meter_peak_bytes() { return remat::runtime::CpuMeter().peak_bytes(); }
void remat_meter_reset_peak() { remat::runtime::CpuMeter().ResetPeak(); }

}  // extern "C"
