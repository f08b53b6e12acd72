"""Op times for a traced profile: the planner's roofline (the analytic
model's OpTimeModel, planner/src/analytic/chain.h) over the op costs the
tracer's meter records, with the planner's device presets
(planner/src/device/devices.cc; remat_trace_test checks a traced Llama's
times against the analytic ones).

An op takes max(flops / (peak * efficiency), bytes / (bandwidth *
efficiency)), the peak being the 16-bit one for an op in bf16/fp16 and the
fp32 one otherwise, plus its random elements at the device's draw rate
(where it has one).
"""
from ._planner import EXIT_BAD_INPUT, InputError

# name: (16-bit TFLOP/s, fp32 TFLOP/s, GB/s, efficiency, random elements/s)
DEVICES = {
    "h200": (989.0, 67.0, 4800.0, 0.5, 0.0),
    "a100": (312.0, 19.5, 2039.0, 0.5, 0.0),
    "rtx4090": (165.2, 82.6, 1008.0, 0.5, 0.0),
    "cpu": (0.05, 0.1, 20.0, 0.5, 1.1e8),
}


class Roofline:
    """Milliseconds of op calls (OpCost lists) on one device preset."""

    def __init__(self, device):
        if device not in DEVICES:
            raise InputError(f"remat.trace: device {device!r} is not a preset; accepted: "
                             f"{', '.join(DEVICES)}", EXIT_BAD_INPUT)
        self.name = device
        tf16, tf32, gbps, eff, rand = DEVICES[device]
        self.flops16_per_ms = tf16 * 1e12 * eff / 1e3
        self.flops32_per_ms = tf32 * 1e12 * eff / 1e3
        self.bytes_per_ms = gbps * 1e9 * eff / 1e3
        self.random_per_ms = rand / 1e3

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
