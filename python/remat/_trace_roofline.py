"""Op times for a traced profile: the planner's roofline (the analytic
model's OpTimeModel, planner/src/analytic/chain.h) over the op costs the
tracer's meter records, with the planner's own device presets,
read from its library (remat._core.device; every preset `planner
--device` accepts).

An op takes max(flops / (peak * efficiency), bytes / (bandwidth *
efficiency)), the peak being the 16-bit one for an op in bf16/fp16 and the
fp32 one otherwise, plus its random elements at the device's draw rate
(where it has one).
"""
from ._planner import EXIT_BAD_INPUT, InputError


def device_spec(name):
    """The planner's preset `name` (remat._core.device: planner/src/device/
    devices.cc, docs/devices.md) as a dict of its roofline numbers."""
    from . import _core

    try:
        return _core.device(name)
    except ValueError as e:  # the planner's line; the tracer takes no --tflops
        message = str(e).replace(" (or give an achieved TFLOP/s)", "")
        raise InputError(f"remat.trace: {message}", EXIT_BAD_INPUT) from None


class Roofline:
    """Milliseconds of op calls (OpCost lists) on one device preset."""

    def __init__(self, device):
        spec = device_spec(device)
        self.name = spec["name"]
        eff = spec["efficiency"]
        self.flops16_per_ms = spec["tflops_16bit"] * 1e12 * eff / 1e3
        self.flops32_per_ms = spec["tflops_fp32"] * 1e12 * eff / 1e3
        self.bytes_per_ms = spec["bandwidth_gbps"] * 1e9 * eff / 1e3
        self.random_per_ms = spec["random_elements_per_s"] / 1e3

    def op_ms(self, cost):
        rate = self.flops16_per_ms if cost.half else self.flops32_per_ms
        ms = max(cost.flops / rate, cost.bytes / self.bytes_per_ms)
        if self.random_per_ms > 0:
            ms += cost.random / self.random_per_ms
        return ms

    def ms(self, costs):
        return sum(self.op_ms(c) for c in costs)

    @staticmethod
    def flops(costs):
        return sum(c.flops for c in costs)
