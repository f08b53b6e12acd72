"""measure(fn, *args): one call's CPU memory (exact tensor bytes) and time."""
import dataclasses
import time
import warnings
from typing import Any, List

from . import meter as meter_module
from . import unmetered_memory as unmetered_module

DEFAULT_MAX_SAMPLES = 4096


@dataclasses.dataclass
class Measurement:
    """What one measured call did. Bytes are CPU tensor bytes as the
    allocator was asked for them (no allocator rounding, no Python objects).

    timeline: bytes in use above the baseline after every allocation and
    free during the call, in order, capped at max_samples samples by one
    rule: sample i covers events [i * stride, (i + 1) * stride) and holds
    the highest value after any of them. stride is 1 (every event exact)
    while the events fit; each time they would not, adjacent samples merge by
    their maximum and stride doubles. max(timeline) is always peak_bytes
    when the call allocated anything.
    """
    value: Any                # what fn returned (kept: counted in current_bytes)
    baseline_bytes: int       # in use when the call began (absolute)
    peak_bytes: int           # highest in use during the call, above the baseline
    current_bytes: int        # in use after the call, above the baseline
    wall_s: float             # time.perf_counter() seconds
    thread_s: float           # time.thread_time() seconds of the calling thread
    timeline: List[int] = dataclasses.field(default_factory=list)
    timeline_events: int = 0  # allocations and frees during the call
    timeline_stride: int = 1  # events per timeline sample (a power of two)
    # Tensors the call showed whose memory the meter cannot see (unmetered="warn").
    unmetered: List[unmetered_module.Unmetered] = dataclasses.field(default_factory=list)


_active = False


def measure(fn, *args, timeline=True, max_samples=DEFAULT_MAX_SAMPLES, meter=None,
            unmetered="raise", **kwargs):
    """Calls fn(*args, **kwargs) and measures it with the process's meter
    (remat_measure.load() unless loaded before). Resets the meter's peak;
    calls do not nest. timeline=False records none (the meter then costs one
    branch per allocation).

    First, the tensors the call shows (unmetered_memory.visible: fn, its
    bound object, what it reads from its closure and its module's globals,
    the arguments; modules and optimizers among them) are checked for
    memory the meter cannot see,
    such as weights memory-mapped from a safetensors file: with
    unmetered="raise" (default) that raises UnmeteredError naming them and
    the fix (remat_measure.copy_into_meter), with "warn" it warns and
    records them in Measurement.unmetered. remat_measure.check(model)
    checks what the call does not show."""
    global _active
    if _active:
        raise RuntimeError("remat_measure: measure() calls do not nest (one peak per process)")
    if unmetered not in ("raise", "warn"):
        raise ValueError(f"remat_measure: unmetered must be 'raise' or 'warn', got {unmetered!r}")
    m = meter or meter_module.load()
    objects, names = unmetered_module.visible(fn, args, kwargs)
    unseen = unmetered_module.unmetered(*objects, names=names, meter=m)
    if unseen:
        message = unmetered_module.describe(unseen, "remat_measure.measure")
        if unmetered == "raise":
            raise unmetered_module.UnmeteredError(message, unseen)
        warnings.warn(message, stacklevel=2)
    _active = True
    try:
        baseline = m.current_bytes()
        m.reset_peak()
        if timeline:
            m.start_timeline(max_samples)
        t_wall, t_thread = time.perf_counter(), time.thread_time()
        try:
            value = fn(*args, **kwargs)
        finally:
            wall_s, thread_s = time.perf_counter() - t_wall, time.thread_time() - t_thread
            samples, events, stride = m.stop_timeline() if timeline else ([], 0, 1)
        peak = m.peak_bytes() - baseline
        current = m.current_bytes() - baseline
    finally:
        _active = False
    return Measurement(value=value, baseline_bytes=baseline, peak_bytes=peak,
                       current_bytes=current, wall_s=wall_s, thread_s=thread_s,
                       timeline=[b - baseline for b in samples], timeline_events=events,
                       timeline_stride=stride, unmetered=unseen)
