"""Loading remat's CPU allocator meter (libremat_cpu_meter.so) into Python.

The library registers an allocator with c10::SetCPUAllocator that counts the
exact bytes every CPU tensor asks for: the meter remat's runtime measures
its own training steps with. Loaded into a Python process with ctypes, it
meters the same LibTorch (libc10) that `import torch` uses, so a PyTorch
program's bytes and remat's are counted alike. Tensors allocated before the
meter is installed are not counted (their frees are not either): load it
before the program allocates the tensors to be measured.

Where the library is found (find_library): a path or build dir given to
load(), else $REMAT_METER_LIB, else the one beside this package:
`pip install .` builds it into the installed remat_measure/ (against the
torch of the environment it installs into), and the build tree links it
into build/python/remat_measure/.
"""
import ctypes
import os

LIBRARY_NAME = "libremat_cpu_meter.so"
ENV_VAR = "REMAT_METER_LIB"


class MeterError(RuntimeError):
    """The meter library is missing, does not load, or cannot install."""


def find_library(path=None, build_dir=None):
    """Returns the meter library's path: `path`, else <build_dir>/lib/,
    else $REMAT_METER_LIB, else the one beside this package. Raises
    MeterError naming what was looked for when there is no such file."""
    if path:
        where = f"{path} (given path)"
    elif build_dir:
        path = os.path.join(build_dir, "lib", LIBRARY_NAME)
        where = f"{path} (in build dir {build_dir})"
    elif os.environ.get(ENV_VAR):
        path = os.environ[ENV_VAR]
        where = f"{path} (from {ENV_VAR})"
    else:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
        if os.path.isfile(path):
            return path
        raise MeterError(
            f"remat_measure: no meter library beside the package ({path}): `pip install .` "
            f"builds one where the installing Python has torch (install torch, then remat), and "
            f"a remat build has build/lib/{LIBRARY_NAME} (target remat_cpu_meter); or set "
            f"{ENV_VAR}, or pass build_dir=")
    if not os.path.isfile(path):
        raise MeterError(
            f"remat_measure: meter library not found: {where}; build it with "
            f"`ninja -C build remat_cpu_meter` (needs -DREMAT_RUNTIME=ON)")
    return path


def _same_release(built, running):
    """Whether torch `running` ("2.11.0+cu130") is of the release the meter
    was `built` against ("2.11.0"): the same major and minor version (c10's
    allocator interface holds within one)."""
    return built.split("+")[0].split(".")[:2] == running.split("+")[0].split(".")[:2]


class Meter:
    """The process's CPU meter: counters in bytes, and the timeline recorder
    (runtime/src/memory_meter.h: StartCpuTimeline). One per process."""

    def __init__(self, path):
        # The process's torch first, so that the meter binds to its libc10
        # (a library of the same name loaded from elsewhere would be
        # bound instead, and differ).
        import torch

        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise MeterError(f"remat_measure: {path} does not load: {e}") from None
        lib.remat_meter_torch_version.restype = ctypes.c_char_p
        built = lib.remat_meter_torch_version().decode()
        if not _same_release(built, torch.__version__):
            raise MeterError(
                f"remat_measure: {path} was built against torch {built}, this process runs "
                f"torch {torch.__version__} ({os.path.dirname(torch.__file__)}): build the meter "
                f"against this torch (pip install --force-reinstall --no-deps . from its "
                f"environment, or a remat build with -DREMAT_PYTHON=its python)")
        for name in ("remat_meter_current_bytes", "remat_meter_peak_bytes",
                     "remat_meter_timeline_stop", "remat_meter_timeline_events",
                     "remat_meter_timeline_stride", "remat_meter_timeline_copy"):
            getattr(lib, name).restype = ctypes.c_longlong
        lib.remat_meter_timeline_start.argtypes = [ctypes.c_longlong]
        lib.remat_meter_timeline_copy.argtypes = [ctypes.POINTER(ctypes.c_longlong),
                                                  ctypes.c_longlong]
        lib.remat_meter_storage_is_metered.argtypes = [ctypes.c_void_p]
        if lib.remat_meter_install() != 1:
            raise MeterError(f"remat_measure: {path}: the metering CPU allocator could not be "
                             f"registered")
        self.path = path
        self._lib = lib

    def allocated(self, tensor):
        """Whether the meter allocated `tensor`'s memory (a CPU tensor), so
        that its bytes are counted: False for memory mapped from a file,
        tensors made before load(), and borrowed memory (torch.from_numpy)."""
        return self._lib.remat_meter_storage_is_metered(tensor.untyped_storage()._cdata) == 1

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
