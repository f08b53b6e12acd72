"""remat_measure: remat's CPU allocator meter in a Python process running
PyTorch, to measure any callable's exact tensor bytes (peak, timeline) and
time.

    import remat_measure                  # before the program allocates tensors
    remat_measure.load(build_dir="build")  # or set REMAT_METER_LIB=.../libremat_cpu_meter.so
    m = remat_measure.measure(train_step, batch)
    print(m.peak_bytes, m.current_bytes, m.thread_s, m.timeline[:10])

No dependency beyond torch and the meter library (a remat build with the
runtime: build/lib/libremat_cpu_meter.so).
"""
from .measurement import DEFAULT_MAX_SAMPLES, Measurement, measure
from .meter import ENV_VAR, LIBRARY_NAME, Meter, MeterError, find_library, load

__all__ = ["DEFAULT_MAX_SAMPLES", "ENV_VAR", "LIBRARY_NAME", "Measurement", "Meter",
           "MeterError", "find_library", "load", "measure"]
