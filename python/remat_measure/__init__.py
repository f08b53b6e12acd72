"""remat_measure: remat's CPU allocator meter in a Python process running
PyTorch, to measure any callable's exact tensor bytes (peak, timeline) and
time.

    import remat_measure                  # before the program allocates tensors
    remat_measure.load()                  # the meter beside the package, or $REMAT_METER_LIB
    m = remat_measure.measure(train_step, batch)
    print(m.peak_bytes, m.current_bytes, m.thread_s, m.timeline[:10])

No dependency beyond torch and the meter library, libremat_cpu_meter.so:
`pip install .` puts one beside the package (built against the installing
environment's torch), a remat build with the runtime has build/lib/'s.
The meter does not see memory it did not allocate, such as weights
memory-mapped from a safetensors file: measure() refuses them
(UnmeteredError), copy_into_meter(model) copies them into memory it counts.
"""
from .measurement import DEFAULT_MAX_SAMPLES, Measurement, measure
from .meter import ENV_VAR, LIBRARY_NAME, Meter, MeterError, find_library, load
from .unmetered_memory import Unmetered, UnmeteredError, check, copy_into_meter, unmetered

__all__ = ["DEFAULT_MAX_SAMPLES", "ENV_VAR", "LIBRARY_NAME", "Measurement", "Meter",
           "MeterError", "Unmetered", "UnmeteredError", "check", "copy_into_meter",
           "find_library", "load", "measure", "unmetered"]
