#!/usr/bin/env python3
"""What SDPA's math path (torch.nn.functional.scaled_dot_product_attention on
CPU with dropout) allocates and frees, in order, and what it keeps, metered by
remat's CPU meter: q, k and v are transposed views of (b, s, heads, d)
projections, as transformers and the runtime pass them. Each allocation and
free is printed in units of n h (b s a d elements) and of the scores (b a s s
elements); docs/analytic-model.md ("SDPA's math path") quotes its output and
planner/src/analytic/sdpa_math.cc models it.

usage: OPENBLAS_NUM_THREADS=1 bench/fidelity/sdpa_math_meter.py [--build build]
           [--dtype bfloat16|float32] [--shape b,a,kv,s,d] [--no-grad]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
import remat_measure  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--build", default="build", help="a remat build with the runtime")
ap.add_argument("--dtype", default="bfloat16")
ap.add_argument("--shape", default="4,4,4,128,32", help="b,a,kv,s,d (kv < a: GQA)")
ap.add_argument("--no-grad", action="store_true")
args = ap.parse_args()
meter = remat_measure.load(build_dir=args.build)
import torch  # noqa: E402

torch.set_num_threads(1)
dtype = getattr(torch, args.dtype)
b, a, kv, s, d = (int(x) for x in args.shape.split(","))
grad = not args.no_grad
q = torch.randn(b, s, a, d, dtype=dtype, requires_grad=grad).transpose(1, 2)
kvp = torch.randn(b, s, 2, kv, d, dtype=dtype, requires_grad=grad)
k, v = kvp[:, :, 0].transpose(1, 2), kvp[:, :, 1].transpose(1, 2)
nh, scores = b * s * a * d, b * a * s * s
base = meter.current_bytes()
meter.start_timeline(1 << 16)
out = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.1,
                                                       enable_gqa=kv != a)
samples, _, _ = meter.stop_timeline()
print(f"torch {torch.__version__}, {args.dtype}, b {b} a {a} kv {kv} s {s} d {d}, grad {grad}: "
      f"n h = {nh}, scores = {scores} elements")
prev, peak = base, 0
for x in samples:
    delta, prev, peak = x - prev, x, max(peak, x - base)
    if delta:
        print(f"{delta:+12,d} B  ({delta / nh:+6.2f} n h, {delta / scores:+6.3f} scores)"
              f"  in use {x - base:12,d}")
print(f"peak above the inputs {peak:,d} B; held after the call (kept + output) {prev - base:,d} B")
