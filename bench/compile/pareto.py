"""remat's plans against torch.compile's own memory knob, side by side, on CPU.

The tiny Hugging Face Llama with GQA of bench/compile/tiny_models.py (4
blocks, hidden 64, fp32, sdpa), micro-batch 2 x 128 tokens, inductor on
CPU, one intra-op thread:

  compile  the plain model (no remat) compiled whole at each
           torch._functorch.config.activation_memory_budget of --budgets;
  remat    remat's plans of the same model (none, uniform every 1 and 2
           blocks, selective at its lowest peak, optimal at budgets spread
           from its lowest peak to none's), each applied with remat.apply,
           then compiled whole at the default budget (docs/compile.md).

Each point runs in its own child process (the meter loads before torch
allocates; a fresh dynamo): the first step compiles (its wall time is the
compile time, reported apart), one more warms up, then --steps metered
steps: the peak is the highest of remat's CPU meter over them (weights,
batch and gradients included, as bench/compile/kept.py meters), the step
time their median wall time. The children run one after the other,
compile's and remat's interleaved, so that both series see the same load.

Prints the points and the table (for each compile budget's peak, remat's
fastest plan at or below it and the time ratio remat / compile), and writes
OUT/pareto.json (every point) and OUT/pareto.html (step time against peak,
both series, in the style of the planner's HTML reports).

usage: REMAT_METER_LIB=build/lib/libremat_cpu_meter.so PYTHONPATH=build/python:python \\
         .venv/bin/python bench/compile/pareto.py [--out DIR] [--budgets 0,0.1,...,1] [--steps N]
  env: TORCHINDUCTOR_CACHE_DIR (default: a fresh one per run, so that each
       compile time is a cold compile's), TORCHINDUCTOR_COMPILE_THREADS (default 1)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import pareto_chart
import pareto_table
from tiny_models import build, lowest_plan, plan_options, training_step, write_config

MODEL = "llama"
MICRO_BATCH, SEQ_LEN = 2, 128
OPTIMAL_SPREAD = (0.2, 0.4, 0.6, 0.8)  # optimal's budgets, from its lowest peak (0) to none's (1)


def remat_plans(directory):
    """remat's plans of the model: [(name, plan)], one per distinct set of
    per-layer decisions."""
    import remat

    path = write_config(MODEL, directory)
    options = plan_options(MICRO_BATCH, SEQ_LEN)
    plans = [("none", remat.plan(path, budget="1GB", strategy="none", **options))]
    for every in (1, 2):
        plans.append((f"uniform every {every}",
                      remat.plan(path, budget="1GB", strategy="uniform", every=every, **options)))
    plans.append(("selective (lowest peak)", lowest_plan(path, "selective", **options)))
    lowest = lowest_plan(path, "optimal", **options)
    top = plans[0][1].predicted_peak_bytes
    low = lowest.predicted_peak_bytes
    plans.append((f"optimal at {low:,} B", lowest))
    for f in OPTIMAL_SPREAD:
        budget = int(low + f * (top - low))
        plans.append((f"optimal at {budget:,} B",
                      remat.plan(path, budget=f"{budget}B", strategy="optimal", **options)))
    seen, distinct = set(), []
    for name, plan in plans:
        key = json.dumps([(l.get("decision"), l.get("option")) for l in plan.layers])
        if key not in seen:
            seen.add(key)
            distinct.append((name, plan))
    return distinct


def cell(spec_path, steps):
    """One point in this process; prints its JSON."""
    import remat_measure

    meter = remat_measure.load()
    import torch

    import remat

    torch.set_num_threads(1)
    with open(spec_path) as f:
        spec = json.load(f)
    model = build(MODEL)
    if spec["series"] == "remat":
        remat.apply(model, remat.Plan(spec["plan"]))
    else:
        torch._functorch.config.activation_memory_budget = spec["budget"]
    step = training_step(MODEL, model, torch.compile(model), MICRO_BATCH, SEQ_LEN)
    start = time.perf_counter()
    step()
    compile_s = time.perf_counter() - start
    step()
    measured = [remat_measure.measure(step, timeline=False, meter=meter) for _ in range(steps)]
    peaks = [m.baseline_bytes + m.peak_bytes for m in measured]
    times = [m.wall_s for m in measured]
    point = {k: v for k, v in spec.items() if k != "plan"}
    point.update(peak_bytes=max(peaks), peak_spread_bytes=max(peaks) - min(peaks),
                 step_s=statistics.median(times), step_times_s=times,
                 first_step_s=compile_s)
    print(json.dumps(point))


def run_cell(spec, directory, steps, env):
    path = os.path.join(directory, f"cell{os.getpid()}-{time.monotonic_ns()}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    done = subprocess.run([sys.executable, __file__, "--cell", path, "--steps", str(steps)],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"pareto.py: the point {spec['name']} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def write(points, out, command, steps):
    """OUT/pareto.json (every point and the table's rows) and OUT/pareto.html."""
    setup = dict(model=MODEL, micro_batch=MICRO_BATCH, seq_len=SEQ_LEN, steps=steps,
                 threads=1, torch_compile="whole model, inductor, CPU")
    with open(os.path.join(out, "pareto.json"), "w") as f:
        json.dump(dict(setup=setup, command=command.strip(), points=points,
                       rows=pareto_table.rows(points)), f, indent=1)
    with open(os.path.join(out, "pareto.html"), "w") as f:
        f.write(pareto_chart.html_page(points, setup, command.strip()))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="pareto-out")
    parser.add_argument("--budgets", default="0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1")
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        cell(args.cell, args.steps)
        return 0
    try:
        budgets = sorted({float(b) for b in args.budgets.split(",")}, reverse=True)
    except ValueError:
        sys.exit(f"pareto.py: --budgets: {args.budgets!r} is not a comma-separated list of numbers")
    if not budgets or any(not 0.0 <= b <= 1.0 for b in budgets) or args.steps < 1:
        sys.exit("pareto.py: --budgets takes fractions in [0, 1], --steps a count >= 1")
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    with tempfile.TemporaryDirectory() as directory:
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(directory, "inductor-cache"))
        specs_c = [dict(series="compile", name=f"compile budget {b:.1f}", budget=b)
                   for b in budgets]
        specs_r = [dict(series="remat", name=name, plan=plan.json,
                        predicted_peak_bytes=plan.predicted_peak_bytes)
                   for name, plan in remat_plans(directory)]
        order = [s for pair in zip(specs_c, specs_r) for s in pair]
        order += specs_c[len(specs_r):] + specs_r[len(specs_c):]
        points = []
        for spec in order:
            p = run_cell(spec, directory, args.steps, env)
            points.append(p)
            print(f"{p['name']:32} peak {p['peak_bytes']:>11,} B   step {p['step_s'] * 1e3:8.2f} ms"
                  f"   first step (compile) {p['first_step_s']:7.1f} s", flush=True)
    print()
    print(pareto_table.markdown(points))
    write(points, args.out, "bench/compile/pareto.py " + " ".join(argv), args.steps)
    print(f"\nwrote {args.out}/pareto.json and {args.out}/pareto.html")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
