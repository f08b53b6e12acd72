"""Loading remat's CPU allocator meter (libremat_cpu_meter.so) into Python.

The library registers an allocator with c10::SetCPUAllocator that counts the
exact bytes every CPU tensor asks for: the meter remat's runtime measures
its own training steps with. Loaded into a Python process with ctypes, it
meters the same LibTorch (libc10) that `import torch` uses, so a PyTorch
program's bytes and remat's are counted alike. Tensors allocated before the
meter is installed are not counted (their frees are not either): load it
before the program allocates the tensors to be measured.
"""
import ctypes
import os

LIBRARY_NAME = "libremat_cpu_meter.so"
ENV_VAR = "REMAT_METER_LIB"


class MeterError(RuntimeError):
    """The meter library is missing, does not load, or cannot install."""


def find_library(path=None, build_dir=None):
    """Returns the meter library's path: `path`, else <build_dir>/lib/,
    else $REMAT_METER_LIB. Raises MeterError naming what was looked for
    when there is no such file."""
    if path:
        where = f"{path} (given path)"
    elif build_dir:
        path = os.path.join(build_dir, "lib", LIBRARY_NAME)
        where = f"{path} (in build dir {build_dir})"
    elif os.environ.get(ENV_VAR):
        path = os.environ[ENV_VAR]
        where = f"{path} (from {ENV_VAR})"
    else:
        raise MeterError(
            f"remat_measure: no meter library: set {ENV_VAR} to {LIBRARY_NAME} or pass "
            f"build_dir= (a remat build with the runtime: ninja -C build remat_cpu_meter)")
    if not os.path.isfile(path):
        raise MeterError(
            f"remat_measure: meter library not found: {where}; build it with "
            f"`ninja -C build remat_cpu_meter` (needs -DREMAT_RUNTIME=ON)")
    return path


class Meter:
    """The process's CPU meter: counters in bytes, and the timeline recorder
    (runtime/src/memory_meter.h: StartCpuTimeline). One per process."""

    def __init__(self, path):
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise MeterError(f"remat_measure: {path} does not load: {e}") from None
        for name in ("remat_meter_current_bytes", "remat_meter_peak_bytes",
                     "remat_meter_timeline_stop", "remat_meter_timeline_events",
                     "remat_meter_timeline_stride", "remat_meter_timeline_copy"):
            getattr(lib, name).restype = ctypes.c_longlong
        lib.remat_meter_timeline_start.argtypes = [ctypes.c_longlong]
        lib.remat_meter_timeline_copy.argtypes = [ctypes.POINTER(ctypes.c_longlong),
                                                  ctypes.c_longlong]
        import torch  # noqa: F401  (LibTorch's libraries, after the meter's c10 is loaded)
        if lib.remat_meter_install() != 1:
            raise MeterError(f"remat_measure: {path}: the metering CPU allocator could not be "
                             f"registered")
        self.path = path
        self._lib = lib

    def current_bytes(self):
        """Bytes of CPU tensor memory in use now (counted since install)."""
        return self._lib.remat_meter_current_bytes()

    def peak_bytes(self):
        """Highest current_bytes() since the last reset_peak()."""
        return self._lib.remat_meter_peak_bytes()

    def reset_peak(self):
        """Starts a new peak window at the current value."""
        self._lib.remat_meter_reset_peak()

    def start_timeline(self, max_samples):
        """Records bytes in use after every allocation and free, in at most
        max_samples samples (see Measurement.timeline for the rule)."""
        if self._lib.remat_meter_timeline_start(int(max_samples)) != 1:
            raise ValueError(f"remat_measure: timeline max_samples must be >= 1, got "
                             f"{max_samples}")

    def stop_timeline(self):
        """Stops recording; returns (samples in absolute bytes, events, stride)."""
        n = self._lib.remat_meter_timeline_stop()
        buf = (ctypes.c_longlong * max(n, 1))()
        got = self._lib.remat_meter_timeline_copy(buf, n)
        return (list(buf[:got]), self._lib.remat_meter_timeline_events(),
                self._lib.remat_meter_timeline_stride())


_meter = None


def load(path=None, build_dir=None):
    """Loads and installs the meter once per process and returns it; later
    calls return the same meter (a different library is refused). Import
    torch's tensors after this call to have them counted."""
    global _meter
    if _meter is not None:
        if path or build_dir:
            wanted = os.path.realpath(find_library(path, build_dir))
            if wanted != os.path.realpath(_meter.path):
                raise MeterError(f"remat_measure: the meter is already loaded from {_meter.path}; "
                                 f"one process has one CPU allocator, not {wanted}")
        return _meter
    _meter = Meter(find_library(path, build_dir))
    return _meter
